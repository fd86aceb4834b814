"""The probes as gymnasium envs: `gymnasium.make("purejaxppo/Probe1-v0")`.

Importing this module registers every probe of `PROBE_ENVS`, `PROBE_VARIANT_ENVS` and
`PROBE_PART_ENVS` with gymnasium under the namespace "purejaxppo" (`GYMNASIUM_IDS`), so a
PyTorch agent, Stable-Baselines3 or any gymnasium code can run the same probes that
`purejaxppo check` trains. `make_env("gymnasium:purejaxppo/Probe1-v0")` imports it itself,
and gymnasium's "module:id" form imports it too:
`gymnasium.make("purejaxppo.envs.probes.gymnasium_probes:purejaxppo/Probe1-v0")`.

Each env is `ProbeGymEnv`: one gymnax probe (`make_env(probe_id, kwargs)`, so the keyword
arguments of `gymnasium.make` are the probe's `env_kwargs`, e.g. `max_steps_in_episode`)
stepped by jitted `reset_env` / `step_env`, with numpy in and out. An episode ends as the
probe says (`terminated`) or at its `max_steps_in_episode` (`truncated`); there is no
auto-reset: call `reset` after either, as gymnasium envs expect. `reset(seed=s)` makes the
episodes reproducible (the probe's key comes from gymnasium's `np_random`).
"""

from __future__ import annotations

from typing import Any

import gymnasium
import jax
import jax.numpy as jnp
import numpy as np
from gymnax.environments import spaces as gx

from purejaxppo.envs.probes import PROBE_ENVS, PROBE_PART_ENVS, PROBE_VARIANT_ENVS
from purejaxppo.envs.registry import make_env
from purejaxppo.envs.spaces import MultiBinary, MultiDiscrete

__all__ = ["GYMNASIUM_IDS", "NAMESPACE", "ProbeGymEnv", "gymnasium_space", "register_probes"]

#: The gymnasium namespace of the probes.
NAMESPACE = "purejaxppo"
#: gymnasium id -> probe id, e.g. "purejaxppo/Probe1-v0" -> "Probe1-v0".
GYMNASIUM_IDS = {
    f"{NAMESPACE}/{probe_id}": probe_id
    for probe_id in (*PROBE_ENVS, *PROBE_VARIANT_ENVS, *PROBE_PART_ENVS)
}


def gymnasium_space(space: Any) -> gymnasium.spaces.Space:
    """The gymnasium space equivalent to a gymnax one (the reverse of
    `envs.suites.gymnasium.convert_space`): Box (its dtype kept, bool included), Discrete,
    purejaxppo's MultiDiscrete / MultiBinary, Dict, Tuple.

    Raises:
      ValueError: any other space, naming it.
    """
    s = gymnasium.spaces
    if isinstance(space, gx.Box):
        dtype, shape = np.dtype(space.dtype), tuple(space.shape)
        low = np.broadcast_to(np.asarray(space.low), shape).astype(dtype)
        high = np.broadcast_to(np.asarray(space.high), shape).astype(dtype)
        return s.Box(low, high, shape, dtype)
    if isinstance(space, gx.Discrete):
        return s.Discrete(int(space.n))
    if isinstance(space, MultiDiscrete):
        return s.MultiDiscrete(list(space.nvec))
    if isinstance(space, MultiBinary):
        return s.MultiBinary(space.n)
    if isinstance(space, gx.Dict):
        return s.Dict({k: gymnasium_space(v) for k, v in space.spaces.items()})
    if isinstance(space, gx.Tuple):
        return s.Tuple([gymnasium_space(v) for v in space.spaces])
    raise ValueError(f"{space!r}: no gymnasium equivalent")


class ProbeGymEnv(gymnasium.Env):
    """One probe as a `gymnasium.Env` (module docstring).

    Args:
      probe_id: a probe id ("Probe1-v0", ..., "ProbeBattery-v0").
      render_mode: None (probes do not render).
      **env_kwargs: the probe's `env_kwargs` (`make_env`), e.g. `max_steps_in_episode`.

    Raises:
      ValueError: an unknown probe id (naming the known ones); env_kwargs `make_env`
        refuses; a `render_mode`.
    """

    metadata = {"render_modes": []}

    def __init__(self, probe_id: str, render_mode: str | None = None, **env_kwargs: Any):
        if probe_id not in GYMNASIUM_IDS.values():
            raise ValueError(f"probe_id={probe_id!r}: not one of {sorted(GYMNASIUM_IDS.values())}")
        if render_mode is not None:
            raise ValueError(f"render_mode={render_mode!r}: the probes do not render")
        self.probe_id = probe_id
        self.probe, self.params = make_env(probe_id, env_kwargs)
        self.observation_space = gymnasium_space(self.probe.observation_space(self.params))
        self.action_space = gymnasium_space(self.probe.action_space(self.params))
        self._reset = jax.jit(self.probe.reset_env)
        self._step = jax.jit(self._step_fn)
        self._state: Any = None
        self._key = jax.random.key(0)

    def _step_fn(self, key: jax.Array, state: Any, action: jax.Array, params: Any) -> tuple:
        obs, state, reward, terminated, info = self.probe.step_env(key, state, action, params)
        truncated = jnp.logical_and(~terminated, self.probe.is_truncated(state, params))
        return obs, state, reward, terminated, truncated, info

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        """`(obs, {})` of a new episode; `seed` reseeds gymnasium's `np_random`, from
        which the probe's PRNG key is drawn."""
        super().reset(seed=seed)
        self._key = jax.random.key(int(self.np_random.integers(2**31)))
        self._key, reset_key = jax.random.split(self._key)
        obs, self._state = self._reset(reset_key, self.params)
        return _numpy(obs, self.observation_space), {}

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        """`(obs, reward, terminated, truncated, info)` of one step (`info["discount"]`:
        0.0 after the terminal step, else 1.0).

        Raises:
          RuntimeError: `step` before the first `reset`.
        """
        if self._state is None:
            raise RuntimeError(f"{NAMESPACE}/{self.probe_id}: call reset() before step()")
        self._key, step_key = jax.random.split(self._key)
        out = self._step(step_key, self._state, jnp.asarray(action), self.params)
        obs, self._state, reward, terminated, truncated, info = out
        info = {k: np.asarray(v).item() for k, v in info.items()}
        return (
            _numpy(obs, self.observation_space),
            float(reward),
            bool(terminated),
            bool(truncated),
            info,
        )


def _numpy(obs: Any, space: gymnasium.spaces.Space) -> Any:
    """A probe's observation as numpy, of `space`'s types: arrays (dicts / tuples of them
    kept as such), and for a Discrete space an `np.int64` (what gymnasium expects)."""
    if isinstance(space, gymnasium.spaces.Discrete):
        return np.int64(obs)
    return jax.tree.map(np.asarray, obs)


def register_probes() -> list[str]:
    """Registers `GYMNASIUM_IDS` with gymnasium (each once; done on import); returns the
    ids."""
    for gym_id, probe_id in GYMNASIUM_IDS.items():
        if gym_id not in gymnasium.registry:
            gymnasium.register(
                id=gym_id, entry_point=f"{__name__}:ProbeGymEnv", kwargs={"probe_id": probe_id}
            )
    return list(GYMNASIUM_IDS)


register_probes()
