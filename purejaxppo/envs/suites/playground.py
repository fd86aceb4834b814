"""MuJoCo Playground environments (`"playground:<name>"`, e.g.
"playground:CartpoleBalance") as gymnax 1.0 envs.

As `wrap_for_brax_training` does, the env goes inside Brax's `EpisodeWrapper(episode_length,
action_repeat)`; the auto-reset is ours (see `purejaxppo.envs.suites.brax.EpisodeEnv`):

- `terminated = done & ~truncation`, `truncated = truncation = state.info["truncation"]`.
- observations: float32 `[observation_size]` `Box(-inf, inf)`, or a `Dict` of such boxes
  for envs whose observation is a dict (locomotion: "state", "privileged_state");
  actions: float32 `[action_size]` `Box(-1, 1)`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import jax
import numpy as np
from gymnax.environments import spaces

from purejaxppo.envs.suites._common import SuiteParams, bad_kwargs, box, unknown_name
from purejaxppo.envs.suites.brax import EpisodeEnv, split_episode_kwargs

EXTRA = "playground"

#: MJX implementation used unless env_kwargs names one: "jax" runs everywhere ("warp"
#: needs mujoco_warp and an NVIDIA GPU).
DEFAULT_IMPL = "jax"


def make(name: str, env_kwargs: Mapping[str, Any]) -> tuple[EpisodeEnv, SuiteParams]:
    """Builds `"playground:<name>"`.

    env_kwargs: `episode_length` and `action_repeat` (default: the env's config, 1000 and
    1 for the DM Control suite); any other key overrides the entry of that name of the
    env's default config (`registry.get_default_config(name)`, dotted keys for nested
    entries), e.g. `impl` (default `DEFAULT_IMPL`) or `ctrl_dt`.

    Raises:
      ImportError: playground is not installed.
      ValueError: unknown name (close matches listed) or a key that is not in the config.
    """
    try:
        from brax.envs.wrappers.training import EpisodeWrapper
        from mujoco_playground import registry
    except ImportError as err:
        raise ImportError(
            f"playground:{name} needs the optional extra: pip install 'purejaxppo[{EXTRA}]' ({err})"
        ) from None
    if name not in registry.ALL_ENVS:
        raise unknown_name("playground", name, registry.ALL_ENVS)
    config = registry.get_default_config(name)
    kwargs = {
        "episode_length": int(config.get("episode_length", 1000)),
        "action_repeat": int(config.get("action_repeat", 1)),
        **env_kwargs,
    }
    episode_length, action_repeat, overrides = split_episode_kwargs(kwargs, f"playground:{name}")
    accepted = set(config.to_dict()) | {"episode_length", "action_repeat"}
    unknown = [k for k in overrides if k.split(".")[0] not in accepted]
    if unknown:
        raise bad_kwargs("playground", name, unknown, accepted)
    if "impl" in config:
        overrides.setdefault("impl", DEFAULT_IMPL)
    try:
        env = registry.load(name, config_overrides=overrides or None)
    except (TypeError, ValueError, KeyError, AttributeError) as err:
        raise ValueError(
            f"env_kwargs of playground:{name}: {overrides!r} rejected ({err})"
        ) from err
    obs = jax.eval_shape(env.reset, jax.random.PRNGKey(0)).obs

    def space(leaf: Any) -> spaces.Box:
        return box(-np.inf, np.inf, leaf.shape, leaf.dtype)

    if isinstance(obs, Mapping):
        obs_space = spaces.Dict({key: space(leaf) for key, leaf in obs.items()})
    else:
        obs_space = space(obs)
    wrapped = EpisodeWrapper(env, episode_length, action_repeat)
    suite_env = EpisodeEnv(f"playground:{name}", wrapped, obs_space, env.action_size)
    return suite_env, suite_env.default_params
