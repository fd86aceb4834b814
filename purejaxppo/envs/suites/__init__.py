"""Adapters for the JAX environment suites behind one id scheme, `"<prefix>:<name>"`.

Each suite has a module `purejaxppo.envs.suites.<prefix>` with `EXTRA` (the optional
extra that installs it) and `make(name, env_kwargs) -> (env, env_params)`; the env has
the gymnax 1.0 API that `purejaxppo.rollout` steps (`reset(key, params)`, `step(key,
state, action, params) -> (obs, state, reward, terminated, truncated, info)` with
auto-reset and `info["final_observation"]`, `observation_space`, `action_space`,
`default_params`, `name`). `terminated` / `truncated` come from the suite's own flags;
each module's docstring says how.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any

#: Suite prefix -> the optional extra (`pip install 'purejaxppo[<extra>]'`) it needs.
SUITES = {
    "brax": "brax",
    "playground": "playground",
    "jumanji": "jumanji",
    "craftax": "craftax",
    "navix": "navix",
    "xminigrid": "xminigrid",
    "gymnasium": "gymnasium",
    "envpool": "envpool",
    "metabbo": "metabbo",
    "jaxmarl": "jaxmarl",
}


def split_env_id(env_id: str) -> tuple[str, str] | None:
    """`(prefix, name)` of an id `"<prefix>:<name>"`, or None for an id without a prefix."""
    if ":" not in env_id:
        return None
    prefix, name = env_id.split(":", 1)
    return prefix, name


def make_suite_env(env_id: str, env_kwargs: Mapping[str, Any] | None = None) -> tuple[Any, Any]:
    """Builds `"<prefix>:<name>"` with the suite's adapter.

    Raises:
      ValueError: unknown prefix (the known ones listed), unknown name in the suite
        (close matches listed), or env_kwargs the suite rejects (naming the id and kwarg).
      ImportError: the suite is not installed (the message names the extra).
    """
    parts = split_env_id(env_id)
    if parts is None or parts[0] not in SUITES:
        prefix = parts[0] if parts else env_id
        raise ValueError(
            f"env_name={env_id!r}: unknown suite prefix {prefix!r}; known prefixes: "
            f"{', '.join(p + ':' for p in SUITES)}"
        )
    prefix, name = parts
    module = importlib.import_module(f"purejaxppo.envs.suites.{prefix}")
    return module.make(name, dict(env_kwargs or {}))


__all__ = ["SUITES", "make_suite_env", "split_env_id"]
