"""A training run's periodic acting: evaluation splits, videos and datasets.

`make_evaluators` builds the jitted greedy / sampled evaluation episodes of the eval
splits (`split_env`: another env, other `EnvParams`, another level distribution);
`make_media` the periodic greedy videos and collected datasets. Drivers call them
between segments; nothing here knows how the run is driven.
"""

from __future__ import annotations

import inspect
import shutil
from pathlib import Path
from typing import Any

import jax

from purejaxppo.config import PPOConfig
from purejaxppo.envs.spaces import episode_limit
from purejaxppo.networks import (
    Networks,
    make_networks,
)
from purejaxppo.types import RunnerState

#: `fold_in` index of the evaluation episodes' key stream (of the run's key).
EVAL_KEY_STREAM = 1

#: Keys of an `eval_splits` entry that pick another env id (with the same spaces) rather
#: than override an `EnvParams` field.
SPLIT_ENV_KEYS = ("env_name", "env_kwargs")

#: Key of an `eval_splits` entry that gives a level distribution: arguments of the split
#: env's level generator (Jumanji; `level_generator`).
LEVEL_KEY = "generator"


def describe_space(space: Any) -> str:
    """A gymnax space as text, e.g. "Box((4,), float32)", "Discrete(2)", "Dict(a=...)":
    what the networks depend on (kind, shape, dtype, categories; not the bounds)."""
    inner = getattr(space, "spaces", None)
    kind = type(space).__name__
    if isinstance(inner, dict):
        return f"{kind}({', '.join(f'{k}={describe_space(inner[k])}' for k in sorted(inner))})"
    if isinstance(inner, (list, tuple)):
        return f"{kind}({', '.join(describe_space(s) for s in inner)})"
    if hasattr(space, "n") and not hasattr(space, "low"):
        return f"{kind}({int(space.n)})"
    dtype = getattr(space, "dtype", None)
    dtype = getattr(dtype, "__name__", None) or str(dtype)
    return f"{kind}({tuple(int(s) for s in space.shape)}, {dtype})"


def split_env(config: PPOConfig, name: str, spec: dict[str, Any], env: Any, env_params: Any):
    """`(env, env_params)` of the eval split `name`: the training env, or the env id of
    `spec["env_name"]` (with `spec["env_kwargs"]`), with the level distribution of
    `spec["generator"]` (`level_generator`), then the other keys of `spec` as `EnvParams`
    overrides (for gymnax envs and XLand-MiniGrid, whose `EnvParams` hold their level
    settings).

    Raises:
      ValueError: the split's env has other observation / action spaces than the training
        env (naming both), an override is not an `EnvParams` field of the split's env, or
        a `generator` for an env without a level generator / with unknown arguments.
    """
    from purejaxppo.envs import make_env

    env_id = config.env_name
    base_env, base_params = env, env_params
    if any(key in spec for key in (*SPLIT_ENV_KEYS, LEVEL_KEY)):
        env_id = spec.get("env_name", config.env_name)
        renamed = any(key in spec for key in SPLIT_ENV_KEYS)
        kwargs = dict(spec.get("env_kwargs", {}) if renamed else config.env_kwargs)
        if renamed:
            env, env_params = make_env(env_id, kwargs)
        if LEVEL_KEY in spec:
            kwargs["generator"] = level_generator(name, env_id, env, spec[LEVEL_KEY])
            env, env_params = make_env(env_id, kwargs)
    overrides = {k: v for k, v in spec.items() if k not in (*SPLIT_ENV_KEYS, LEVEL_KEY)}
    fields = set(getattr(env_params, "__dataclass_fields__", ()))  # host envs: no EnvParams
    unknown = sorted(set(overrides) - fields)
    if unknown:
        raise ValueError(
            f"eval_splits[{name!r}]: {unknown} are not EnvParams fields of "
            f"{env_id} ({sorted(fields)})"
        )
    if overrides:
        env_params = env_params.replace(**overrides)
    if spec:  # the same spaces as the training env: the policy's network fits both
        for what in ("observation_space", "action_space"):
            want = describe_space(getattr(base_env, what)(base_params))
            got = describe_space(getattr(env, what)(env_params))
            if got != want:
                raise ValueError(
                    f"eval_splits[{name!r}]: {env_id!r} with this split's settings "
                    f"has the {what} {got}, but the training env {config.env_name!r} has {want}"
                )
    return env, env_params


def level_generator(name: str, env_id: str, env: Any, overrides: Any) -> Any:
    """A Jumanji env's level generator with some constructor arguments replaced: the
    split `{"generator": {"num_mines": 30}}` on "jumanji:Minesweeper-v0" evaluates on
    boards of 30 mines (`UniformSamplingGenerator(num_rows, num_cols, num_mines)`), the
    others keep the training env's generator's values.

    Raises:
      ValueError: `env` has no level generator (not a Jumanji env: gymnax and
        XLand-MiniGrid levels are `EnvParams` fields, given as the split's other keys),
        `overrides` not a mapping, or an argument the generator does not take.
    """
    generator = getattr(getattr(env, "env", None), "generator", None)
    if generator is None:
        raise ValueError(
            f"eval_splits[{name!r}]: generator= needs a Jumanji env with a level generator; "
            f"{env_id!r} has none (give its EnvParams fields as the split's keys instead)"
        )
    cls = type(generator)
    args = [a for a in inspect.signature(cls.__init__).parameters if a != "self"]
    if not isinstance(overrides, dict) or set(overrides) - set(args):
        raise ValueError(
            f"eval_splits[{name!r}]: generator={overrides!r} must map arguments of "
            f"{cls.__name__} ({args}) to values"
        )
    current = {a: getattr(generator, a) for a in args if hasattr(generator, a)}
    return cls(**{**current, **overrides})


def make_evaluators(config: PPOConfig, networks: Networks | None = None) -> dict[str, Any]:
    """split name -> jitted episode runner (see `evaluation.make_episode_runner`); {} if off.

    `networks`: the run's `Networks` (default `make_networks(config, env, env_params)`).

    A split is `{EnvParams field: value}` overrides of the training env (gymnax params,
    XLand-MiniGrid's level settings), names another env id with the same spaces
    (`{"env_name": id, "env_kwargs": {...}, field: value}`), or a level distribution of
    a Jumanji env (`{"generator": {argument: value}}`); see `split_env`. Each reports
    its own mean return.

    Raises:
      ValueError: for a split override that is not an `EnvParams` field of its env, or a
        split env whose spaces differ from the training env's (naming both), a bad
        `generator` (`level_generator`).
    """
    if not config.eval_freq:
        return {}
    from purejaxppo.acting.evaluation import make_episode_runner
    from purejaxppo.envs import make_env

    env, env_params = make_env(config.env_name, config.env_kwargs)
    if networks is None:
        networks = make_networks(config, env, env_params)
    splits = config.eval_splits or {"train": {}}
    evaluators = {}
    for name, spec in splits.items():
        env_of_split, split_params = split_env(config, name, spec, env, env_params)
        evaluators[name] = make_episode_runner(
            networks,
            env_of_split,
            split_params,
            config.eval_episodes,
            episode_limit(env, split_params),
        )
    return evaluators


def make_media(config: PPOConfig, fns: Any) -> Any:
    """`media(runner, done_updates, env_steps, run_dir, sinks)`: records the greedy video
    (`video_freq`) and collects episodes (`collect_freq`) when `done_updates` is due.
    Everything compiles once; rendering runs outside the jit.

    Raises:
      ValueError: `video_freq` on an env without a renderer.
    """
    if not (config.video_freq or config.collect_freq):
        return lambda *args: None

    from purejaxppo.envs import make_env
    from purejaxppo.policy import Policy

    env, env_params = make_env(config.env_name, config.env_kwargs)
    policy = Policy(None, config, env, env_params, networks=fns.networks)
    if config.video_freq:
        from purejaxppo.acting.video import make_episode_recorder, make_renderer

        renderer = make_renderer(env, env_params)
        max_steps = episode_limit(env, env_params)
        recorder = make_episode_recorder(fns.networks, env, env_params, max_steps)
    if config.collect_freq:
        from purejaxppo.acting.datasets import make_chunk_runner

        chunk_runner = make_chunk_runner(fns.networks, env, env_params)

    def media(runner: RunnerState, done: int, env_steps: int, run_dir: Path, sinks) -> None:
        params = runner.train_state.params
        key = jax.random.fold_in(jax.random.key(config.seed + 2), done)
        if config.video_freq and done % config.video_freq == 0:
            from purejaxppo.acting.video import record_episode, render_episode, write_video

            episode = record_episode(policy, key, params=params, recorder=recorder)
            path = write_video(
                render_episode(episode, renderer), run_dir / "videos" / f"update_{done:06d}.gif"
            )
            sinks.log_video("video", path, env_steps)
        if config.collect_freq and done % config.collect_freq == 0:
            from purejaxppo.acting.datasets import collect

            out = run_dir / "datasets" / f"update_{done:06d}"
            shutil.rmtree(out, ignore_errors=True)  # a resumed run redoes this collection
            collect(
                policy,
                config.collect_episodes,
                out,
                key,
                params=params,
                chunk_runner=chunk_runner,
            )

    return media
