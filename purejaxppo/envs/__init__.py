"""Environments: `make_env` for gymnax and probe ids, and the probe environments."""

from purejaxppo.envs.probes import (
    PROBE_ENVS,
    Probe1,
    Probe2,
    Probe3,
    Probe4,
    Probe5,
    Probe6,
    Probe7,
)
from purejaxppo.envs.registry import make_env, registered_env_ids

__all__ = [
    "PROBE_ENVS",
    "Probe1",
    "Probe2",
    "Probe3",
    "Probe4",
    "Probe5",
    "Probe6",
    "Probe7",
    "make_env",
    "registered_env_ids",
]
