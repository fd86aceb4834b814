"""Acting during training, shared below every driver (as brax's `training/acting.py`).

`make_evaluators` builds the jitted greedy / sampled evaluation episodes of the eval
splits; `make_media` the periodic greedy videos and collected datasets. Drivers call them
between segments; nothing here knows how the run is driven.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import jax

from purejaxppo.config import PPOConfig
from purejaxppo.envs.spaces import episode_limit
from purejaxppo.networks import Networks, make_networks
from purejaxppo.types import RunnerState

#: `fold_in` index of the evaluation episodes' key stream (of the run's key).
EVAL_KEY_STREAM = 1


def make_evaluators(config: PPOConfig, networks: Networks | None = None) -> dict[str, Any]:
    """split name -> jitted episode runner (see `policy.make_episode_runner`); {} if off.

    `networks`: the run's `Networks` (default `make_networks(config, env, env_params)`).

    Raises:
      ValueError: for a split override that is not an `EnvParams` field of the env.
    """
    if not config.eval_freq:
        return {}
    from purejaxppo.envs import make_env
    from purejaxppo.policy import make_episode_runner

    env, env_params = make_env(config.env_name, config.env_kwargs)
    if networks is None:
        networks = make_networks(config, env, env_params)
    splits = config.eval_splits or {"train": {}}
    evaluators = {}
    for name, overrides in splits.items():
        fields = set(env_params.__dataclass_fields__)
        unknown = sorted(set(overrides) - fields)
        if unknown:
            raise ValueError(
                f"eval_splits[{name!r}]: {unknown} are not EnvParams fields of "
                f"{config.env_name} ({sorted(fields)})"
            )
        split_params = env_params.replace(**overrides)
        evaluators[name] = make_episode_runner(
            networks,
            env,
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
        from purejaxppo.video import make_episode_recorder, make_renderer

        renderer = make_renderer(env, env_params)
        max_steps = episode_limit(env, env_params)
        recorder = make_episode_recorder(fns.networks, env, env_params, max_steps)
    if config.collect_freq:
        from purejaxppo.datasets import make_chunk_runner

        chunk_runner = make_chunk_runner(fns.networks, env, env_params)

    def media(runner: RunnerState, done: int, env_steps: int, run_dir: Path, sinks) -> None:
        params = runner.train_state.params
        key = jax.random.fold_in(jax.random.key(config.seed + 2), done)
        if config.video_freq and done % config.video_freq == 0:
            from purejaxppo.video import record_episode, render_episode, write_video

            episode = record_episode(policy, key, params=params, recorder=recorder)
            path = write_video(
                render_episode(episode, renderer), run_dir / "videos" / f"update_{done:06d}.gif"
            )
            sinks.log_video("video", path, env_steps)
        if config.collect_freq and done % config.collect_freq == 0:
            from purejaxppo.datasets import collect

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
