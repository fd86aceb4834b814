"""`SpacesEnv`: an observation space and an action space standing in for an env.

AgileRL builds an agent from `observation_space` and `action_space` alone; here the two
spaces make an object with the gymnax env's space methods (`observation_space(params)`,
`action_space(params)`, `default_params`), which is all `make_networks` and `Policy` read
of an env:

    networks = make_networks(config, SpacesEnv(observation_space, action_space))
    policy = Policy.from_spaces(config, observation_space, action_space, key=key)

It cannot be stepped: `reset` / `step` raise, naming what to do instead.
"""

from __future__ import annotations

from typing import Any

from gymnax.environments import spaces as gx

from purejaxppo.envs.episodes import space_structs

__all__ = ["SpacesEnv", "as_gymnax_space"]


def as_gymnax_space(space: Any, where: str = "space") -> Any:
    """`space` as a gymnax space: a gymnasium space is converted
    (`envs.suites.gymnasium.convert_space`: Box, Discrete, MultiDiscrete, MultiBinary, Dict,
    Tuple); a gymnax space (purejaxppo's `MultiDiscrete` / `MultiBinary` included) is
    returned as it is.

    Raises:
      ValueError: naming `where` and the space: neither a gymnasium nor a gymnax space, or
        a gymnasium space that has no gymnax equivalent (e.g. `Text`, `Graph`, a
        Discrete with a non-zero start).
    """
    if isinstance(space, gx.Space):
        return space
    module = type(space).__module__ or ""
    if module.split(".")[0] == "gymnasium":
        from purejaxppo.envs.suites.gymnasium import convert_space

        return convert_space(space, where)
    raise ValueError(
        f"{where}={space!r}: not a gymnasium or gymnax space (a {type(space).__name__}); "
        "pass e.g. gymnasium.spaces.Box(-1, 1, (4,)) or gymnasium.spaces.Discrete(2)"
    )


class SpacesEnv:
    """An env of two spaces alone, for `make_networks` and `Policy` (module docstring).

    Args:
      observation_space: a gymnasium or gymnax space (Box, Discrete, Dict, Tuple; a
        MultiDiscrete / MultiBinary observation is read as an int array).
      action_space: a gymnasium or gymnax Box, Discrete, MultiDiscrete or MultiBinary.

    Raises:
      ValueError: a space that is neither gymnasium's nor gymnax's, or has no gymnax
        equivalent (`as_gymnax_space`), naming the argument.
    """

    name = "spaces"
    #: What tells `evaluate` that this env cannot play episodes.
    spaces_only = True
    default_params = None

    def __init__(self, observation_space: Any, action_space: Any):
        self._observation_space = as_gymnax_space(observation_space, "observation_space")
        self._action_space = as_gymnax_space(action_space, "action_space")

    def __repr__(self) -> str:
        return f"SpacesEnv({self._observation_space!r}, {self._action_space!r})"

    def observation_space(self, params: Any = None) -> Any:
        return self._observation_space

    def action_space(self, params: Any = None) -> Any:
        return self._action_space

    def row_observation(self, params: Any = None) -> Any:
        """One observation as `jax.ShapeDtypeStruct` leaves, from the space (what
        observation normalisation is sized from)."""
        return space_structs(self._observation_space)

    def reset(self, *args: Any, **kwargs: Any) -> Any:
        raise ValueError(self._cannot("reset"))

    def step(self, *args: Any, **kwargs: Any) -> Any:
        raise ValueError(self._cannot("step"))

    @staticmethod
    def _cannot(what: str) -> str:
        return (
            f"SpacesEnv cannot {what}: it holds spaces only; step a real env (make_env(...) "
            "or a gymnasium env) with the policy's actions"
        )
