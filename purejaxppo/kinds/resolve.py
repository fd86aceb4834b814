"""`resolve`: the env-setup sequence of a run, written once.

Every user of a run's env (training's setup, `Policy`, the exports, the drivers through
`make_train_fns`) resolves it here, once: the env object (given, or made from the config),
the operations asked of its kind checked against the table, the env configured for the
run, the networks built, observation normalisation ensured, and the `RowsEnv` the rollout
steps. Acting (evaluation, videos, datasets) resolves its env with `resolve_acting`: the
same `Resolved`, with the env as the networks read it, its episodes and its rows.

    from purejaxppo import kinds
    setup = kinds.resolve(config, operations=("policy",))
    setup.networks.apply(params, obs)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

from purejaxppo.config import PPOConfig
from purejaxppo.envs import make_env
from purejaxppo.envs.episodes import Episodes
from purejaxppo.envs.rows import RowsEnv
from purejaxppo.kinds.table import EnvKind, as_env, check, kind_of
from purejaxppo.networks import Networks, ensure_normalization

__all__ = ["Resolved", "resolve", "resolve_acting", "resolve_env"]


class Resolved(NamedTuple):
    """A run's env and networks, resolved once (`resolve`)."""

    kind: EnvKind  # the kind of env (`kinds.table`)
    env: Any  # the env the run steps, configured (`EnvKind.configure`)
    env_params: Any  # the env's params (None for a host env's own)
    networks: Networks  # with normalisation where the config asks for it
    # The envs as rows of the batch, with `config.info_metrics` as info keys: what the
    # rollout steps (None unless "train" is among the operations); for acting
    # (`resolve_acting`), the acting env's rows (None for the host loop).
    rows: RowsEnv | None
    # Where an episode of the env ends, what it scores and what a video keeps
    # (`EnvKind.episodes_of`; set by `resolve_acting`, None otherwise).
    episodes: Episodes | None = None


def resolve_env(config: PPOConfig, env: Any = None, env_params: Any = None) -> tuple[Any, Any]:
    """`(env, env_params)`: the given env, or `make_env(config.env_name, config.env_kwargs)`;
    a given `env_params` is kept either way (default: the env's own / the config's). A
    gymnasium env factory becomes a host env (`kinds.as_env`).

    Raises:
      ValueError: an `env` that is neither an env object nor a gymnasium env factory; an
        unknown env id or env kwarg (`make_env`).
    """
    if env is None:
        env, default_params = make_env(config.env_name, config.env_kwargs)
    else:
        env = as_env(env)
        default_params = env.default_params
    return env, default_params if env_params is None else env_params


def resolve(
    config: PPOConfig,
    env: Any = None,
    env_params: Any = None,
    networks: Networks | None = None,
    operations: Sequence[str] = (),
) -> Resolved:
    """Resolves the env and networks of `config`: the env (`resolve_env`), the operations
    asked of its kind (checked in order, `kinds.check`), the env configured for the run
    (`EnvKind.configure`: multi-agent checks, MAPPO's world state, host vectorisation),
    the networks (`networks`, default the kind's built-in actor-critic) with observation /
    reward normalisation where the config asks (`networks.ensure_normalization`), and,
    for a run that trains ("train" in `operations`), the `RowsEnv` the rollout steps
    (`EnvKind.rows`, with `config.info_metrics` and `config.reset_ratio`; building it
    checks neither: `train_setup.prepare` does).

    Args:
      config: the run's config.
      env, env_params: optional env object or gymnasium env factory, and its params
        (see `resolve_env`).
      networks: optional `Networks` to use instead of the built-in ones.
      operations: keys of `kinds.OPERATIONS` the caller will run (e.g. `("policy",)`;
        `("train", ...)` also builds the rows).

    Returns:
      `Resolved(kind, env, env_params, networks, rows)`; `rows` None without "train"
      (an env given for its spaces alone, e.g. to act or export, needs no `step`);
      `episodes` None (acting's: `resolve_acting`).

    Raises:
      ValueError: a bad `env` or env id (`resolve_env`); an operation the kind refuses
        (`kinds.check`: one line naming the env, its kind, the operation and what to do
        instead); a `multi_agent` that does not match the env (`EnvKind.configure`);
        what `make_networks` refuses (action space, tower inputs); `normalize_observations`
        with nothing to normalise (`ensure_normalization`).
    """
    env, env_params = resolve_env(config, env, env_params)
    for operation in operations:
        check(operation, config.env_name, env)
    kind = kind_of(env)
    env = kind.configure(config, env)
    if networks is None:
        networks = kind.networks(config, env, env_params)
    networks = ensure_normalization(networks, config, env, env_params)
    rows = None
    if "train" in operations:
        rows = kind.rows(env, env_params, tuple(config.info_metrics), config.reset_ratio)
    return Resolved(kind=kind, env=env, env_params=env_params, networks=networks, rows=rows)


def resolve_acting(operation: str, env: Any, env_params: Any, networks: Networks) -> Resolved:
    """Resolves the env that evaluation, videos and datasets play: `operation` ("eval",
    "video" or "collect") checked against the env's kind (`kinds.check`), the env as
    `networks` read it (`EnvKind.acting_env`), its episodes (`EnvKind.episodes_of`, of
    the env as given) and, unless the kind plays on the host (`EnvKind.loop == "host"`),
    the acting env's `RowsEnv` (`EnvKind.rows`, no info keys).

    Returns:
      `Resolved(kind, env, env_params, networks, rows, episodes)`; `rows` None for the
      host loop.

    Raises:
      ValueError: an operation the kind refuses (`kinds.check`); networks that read a
        world state the env cannot give (`EnvKind.acting_env`).
    """
    kind = check(operation, getattr(env, "name", repr(env)), env)
    acting_env, episodes = kind.acting_env(env, networks), kind.episodes_of(env)
    rows = None if kind.loop == "host" else kind.rows(acting_env, env_params)
    return Resolved(kind, acting_env, env_params, networks, rows, episodes)
