"""Environments: `make_env` for gymnax and probe ids, the probe environments, and the
MultiDiscrete / MultiBinary action spaces gymnax lacks."""

from purejaxppo.envs.pomdp import POMDP_ENVS, PendulumNoVel
from purejaxppo.envs.probes import (
    PROBE_ENVS,
    PROBE_VARIANT_ENVS,
    Probe1,
    Probe2,
    Probe3,
    Probe4,
    Probe5,
    Probe6,
    Probe7,
    ProbeMaskedAction,
    ProbeMultiBinary,
    ProbeMultiDiscrete,
)
from purejaxppo.envs.registry import make_env, registered_env_ids
from purejaxppo.envs.spaces import MultiBinary, MultiDiscrete

__all__ = [
    "POMDP_ENVS",
    "PROBE_ENVS",
    "PROBE_VARIANT_ENVS",
    "MultiBinary",
    "MultiDiscrete",
    "PendulumNoVel",
    "Probe1",
    "Probe2",
    "Probe3",
    "Probe4",
    "Probe5",
    "Probe6",
    "Probe7",
    "ProbeMaskedAction",
    "ProbeMultiBinary",
    "ProbeMultiDiscrete",
    "make_env",
    "registered_env_ids",
]
