"""Probe environments for debugging PPO, as pure, jittable gymnax 1.0 environments.

Source: Andy Jones, "Debugging RL, Without the Agonizing Pain"
(andyljones.com/posts/rl-debugging.html). Each probe isolates one part of an RL agent
(value learning, reward discounting, policy learning, observation dependence, memory), so
a failure points at the broken component.

Common conventions:

* Observations are float32 arrays of shape ``(1,)``; rewards are float32 scalars and
  ``terminated`` is a bool scalar.
* Every probe terminates naturally after a fixed number of steps. ``EnvParams`` carries
  gymnax's ``max_steps_in_episode`` (truncation when ``state.time >= max_steps_in_episode``)
  and defaults it to 100, so natural termination always comes first unless it is lowered.
* ``step_env`` returns gymnax 1.0's 5-tuple ``(obs, state, reward, terminated, info)``; the
  public ``Environment.step`` adds ``truncated`` and ``info["final_observation"]`` and
  auto-resets. The observation ``step_env`` returns after the terminal step is a
  placeholder (it is never bootstrapped from, since the episode terminated).
* ``info`` holds ``"discount"``: 0.0 after the terminal step, else 1.0.

The environments are not registered with gymnax here; ``purejaxppo.envs.registry`` does
that from :data:`PROBE_ENVS`.
"""

from __future__ import annotations

from purejaxppo.envs.probes.base import EnvParams, EnvState, _ProbeEnv
from purejaxppo.envs.probes.classic import (
    Probe1,
    Probe2,
    Probe3,
    Probe4,
    Probe5,
    Probe6,
    Probe6Params,
    Probe7,
    Probe7Params,
)
from purejaxppo.envs.probes.parts import (
    BatteryParams,
    ProbeBattery,
    ProbeContinuousBound,
    ProbeEqualReward,
    ProbeLambda,
    ProbeLambdaTimeLimit,
    ProbeScaledObs,
    ProbeTruncation,
    ProbeTrustRegion,
    ProbeTrustRegionNoOffset,
    TruncationParams,
)
from purejaxppo.envs.probes.variants import (
    MaskedEnvState,
    ProbeDiscreteObs,
    ProbeMaskedAction,
    ProbeMultiBinary,
    ProbeMultiDiscrete,
)

__all__ = [
    "PROBE_ENVS",
    "PROBE_PART_ENVS",
    "PROBE_VARIANT_ENVS",
    "EnvParams",
    "EnvState",
    "Probe1",
    "Probe2",
    "Probe3",
    "Probe4",
    "Probe5",
    "Probe6",
    "Probe6Params",
    "Probe7",
    "Probe7Params",
    "MaskedEnvState",
    "ProbeDiscreteObs",
    "ProbeMaskedAction",
    "ProbeMultiBinary",
    "ProbeMultiDiscrete",
    "BatteryParams",
    "ProbeBattery",
    "ProbeContinuousBound",
    "ProbeEqualReward",
    "ProbeScaledObs",
    "ProbeTruncation",
    "ProbeLambda",
    "ProbeLambdaTimeLimit",
    "ProbeTrustRegion",
    "ProbeTrustRegionNoOffset",
    "TruncationParams",
]

PROBE_ENVS: dict[str, type[_ProbeEnv]] = {
    "Probe1-v0": Probe1,
    "Probe2-v0": Probe2,
    "Probe3-v0": Probe3,
    "Probe4-v0": Probe4,
    "Probe5-v0": Probe5,
    "Probe6-v0": Probe6,
    "Probe7-v0": Probe7,
}
"""Probe id -> environment class (registered with gymnax by ``purejaxppo.envs.registry``)."""

PROBE_VARIANT_ENVS: dict[str, type[_ProbeEnv]] = {
    "ProbeMultiDiscrete-v0": ProbeMultiDiscrete,
    "ProbeMultiBinary-v0": ProbeMultiBinary,
    "ProbeMaskedAction-v0": ProbeMaskedAction,
    "ProbeDiscreteObs-v0": ProbeDiscreteObs,
}
"""Probes for the other action spaces (MultiDiscrete, MultiBinary) and for action masks;
registered likewise."""

PROBE_PART_ENVS: dict[str, type[_ProbeEnv]] = {
    "ProbeTruncation-v0": ProbeTruncation,
    "ProbeEqualReward-v0": ProbeEqualReward,
    "ProbeScaledObs-v0": ProbeScaledObs,
    "ProbeContinuousBound-v0": ProbeContinuousBound,
    "ProbeTrustRegion-v0": ProbeTrustRegion,
    "ProbeTrustRegionNoOffset-v0": ProbeTrustRegionNoOffset,
    "ProbeLambda-v0": ProbeLambda,
    "ProbeLambdaTimeLimit-v0": ProbeLambdaTimeLimit,
    "ProbeBattery-v0": ProbeBattery,
}
"""Probes of the parts probes 1-7 leave out (truncation, entropy, normalisation, the
continuous log-prob at a bound, the clip's trust region, GAE's lambda, within an episode and at a time limit) and the battery that plays
several probes as the lanes of one program (`purejaxppo.check` runs them); registered
likewise."""
