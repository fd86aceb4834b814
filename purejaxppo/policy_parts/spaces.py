"""An untrained policy from an observation space and an action space (`Policy.from_spaces`).

AgileRL builds an agent from `observation_space` and `action_space` without an env; here
the spaces make a `networks.spaces_env.SpacesEnv`, the one resolved setup
(`kinds.resolve`) builds the config's networks for it (with observation normalisation
where the config asks), and `networks.init(key)` gives the params.
"""

from __future__ import annotations

from typing import Any

import jax

from purejaxppo.acting_checks import check_key
from purejaxppo.config import PPOConfig
from purejaxppo.networks import Networks
from purejaxppo.networks.spaces_env import SpacesEnv

__all__ = ["policy_from_spaces"]


def policy_from_spaces(
    cls: type,
    config: PPOConfig,
    observation_space: Any,
    action_space: Any,
    *,
    key: jax.Array | None = None,
    networks: Networks | None = None,
) -> Any:
    """An untrained `Policy` for two spaces, without an env (AgileRL's agent built from
    `observation_space` and `action_space`): `Policy.from_spaces(config, obs_space,
    action_space, key=key)`.

    It acts (`act`, `predict`, `get_action`, `evaluate_actions`) like a trained one; its
    `env` is the `SpacesEnv` of the two spaces, so `evaluate` plays `config.env_name`
    unless given another `env_id`. `Policy.set_params` loads trained params into it.

    Args:
      cls: the `Policy` class (bound by `classmethod`).
      config: fixes the network as for a run (`hidden_sizes`, `encoder`, `recurrent`,
        `normalize_observations`, ...); its env id is not made.
      observation_space, action_space: gymnasium or gymnax spaces (`SpacesEnv`):
        observations Box / Discrete / Dict / Tuple, actions Box / Discrete /
        MultiDiscrete / MultiBinary.
      key: PRNG key of the initial params; default `jax.random.key(config.seed)`.
      networks: optional custom `Networks` (default the config's actor-critic).

    Raises:
      ValueError: a space that is neither gymnasium's nor gymnax's or has no gymnax
        equivalent, naming the argument (`SpacesEnv`); one the networks cannot take
        (`make_networks`: e.g. Dict actions, a conv encoder without image observations).
      TypeError: `key` not one PRNG key.
    """
    from purejaxppo import kinds

    if key is None:
        key = jax.random.key(config.seed)
    check_key("from_spaces: key", key)
    env = SpacesEnv(observation_space, action_space)
    setup = kinds.resolve(config, env, None, networks, operations=("policy",))
    return cls(setup.networks.init(key), config, env, networks=setup.networks)
