"""`make_env`: one entry point for gymnax ids and the purejaxppo probe ids."""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Mapping
from typing import Any

import gymnax

from purejaxppo.envs.pomdp import POMDP_ENVS
from purejaxppo.envs.probes import PROBE_ENVS, PROBE_VARIANT_ENVS

# The probe (and POMDP) envs join gymnax's registry, so `gymnax.make("Probe1-v0")` works.
for _env_id, _cls in {**PROBE_ENVS, **PROBE_VARIANT_ENVS, **POMDP_ENVS}.items():
    if _env_id not in gymnax.registered_envs:
        gymnax.register(_env_id, _cls)


def registered_env_ids() -> list[str]:
    """All ids `make_env` accepts (gymnax's registry, which includes the probe ids)."""
    return list(gymnax.registered_envs)


def make_env(env_id: str, env_kwargs: Mapping[str, Any] | None = None) -> tuple[Any, Any]:
    """Builds a gymnax 1.0 environment and its params.

    Args:
      env_id: a gymnax id ("CartPole-v1", "Breakout-MinAtar", ...) or a probe id
        ("Probe1-v0" ... "Probe7-v0", "ProbeMultiDiscrete-v0", "ProbeMultiBinary-v0",
        "ProbeMaskedAction-v0"), or
        "PendulumNoVel-v1" (Pendulum without the angular velocity, `envs/pomdp.py`).
      env_kwargs: keys that name a field of the env's `EnvParams` (for example
        `max_steps_in_episode`) replace that parameter; all other keys are passed to the
        environment's constructor (for example `num_bits` of "MemoryChain-bsuite").

    Returns:
      `(env, env_params)`: the environment object (gymnax `Environment` API, whose `step`
      returns `obs, state, reward, terminated, truncated, info`) and its `EnvParams`.

    Raises:
      ValueError: for an unknown id (the message lists close matches) or an env_kwargs
        key that is neither an `EnvParams` field nor a constructor argument.
    """
    env_kwargs = dict(env_kwargs or {})
    if env_id not in gymnax.registered_envs:
        ids = registered_env_ids()
        close = difflib.get_close_matches(env_id, ids, n=5, cutoff=0.5)
        hint = f" Close matches: {', '.join(close)}." if close else f" Known ids: {', '.join(ids)}."
        raise ValueError(f"env_name={env_id!r} is not a known environment id.{hint}")

    # Split env_kwargs into EnvParams overrides and constructor arguments.
    default_env, _ = gymnax.make(env_id)
    param_fields = {f.name for f in dataclasses.fields(default_env.default_params)}
    param_overrides = {k: v for k, v in env_kwargs.items() if k in param_fields}
    ctor_kwargs = {k: v for k, v in env_kwargs.items() if k not in param_fields}

    if ctor_kwargs:
        try:
            env, _ = gymnax.make(env_id, **ctor_kwargs)
        except TypeError as err:
            raise ValueError(
                f"env_kwargs={env_kwargs!r} for {env_id}: {sorted(ctor_kwargs)} are neither "
                f"EnvParams fields ({sorted(param_fields)}) nor constructor arguments ({err})"
            ) from None
    else:
        env = default_env
    env_params = env.default_params
    if param_overrides:
        env_params = env_params.replace(**param_overrides)
    return env, env_params
