"""The Python driver behind `purejaxppo train`: jitted segments, progress, run directory.

The run is split into jitted segments of `config.log_freq` updates (`TrainFns.run`), so
that a progress bar and the metrics file advance while training proceeds. The segments
call the same `update` function as the one-call `train`, so the numbers are the same as
`jax.jit(make_train(config))(key)` for the same key (tests/test_cli.py checks bitwise).
"""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd
import yaml

from purejaxppo.config import Hyperparams, PPOConfig
from purejaxppo.networks import Networks, make_networks
from purejaxppo.sinks import check_sinks, make_sinks
from purejaxppo.train import make_train_fns
from purejaxppo.types import RunnerState

#: `fold_in` index of the evaluation episodes' key stream (of the run's key).
EVAL_KEY_STREAM = 1


class RunResult(NamedTuple):
    """What `train_and_log` returns."""

    run_dir: Path
    metrics: pd.DataFrame  # one row per update; columns "update" and every metric
    final_return: float  # mean episode_return over the last 10 updates (NaN-aware)
    runner_state: RunnerState


def final_return(episode_return: np.ndarray, last: int = 10) -> float:
    """Mean of the non-NaN `episode_return` values of the last `last` updates."""
    tail = np.asarray(episode_return, np.float64)[-last:]
    tail = tail[~np.isnan(tail)]
    return float(tail.mean()) if tail.size else math.nan


def train_and_log(
    config: PPOConfig,
    run_dir: str | Path,
    *,
    key: jax.Array | None = None,
    progress: bool = True,
    plot: bool = True,
    resume: bool = False,
    overwrite: bool = False,
) -> RunResult:
    """Trains one agent in jitted segments and writes a run directory.

    Writes `run_dir/config.yaml` (the resolved config), `run_dir/metrics.csv` (one row per
    update, appended after every segment of `log_freq` updates) and
    `run_dir/learning_curve.png`. The other `config.loggers` (`purejaxppo.sinks`: jsonl,
    tensorboard, wandb, mlflow) get the config, every row keyed by env steps, the PNG
    and the videos. With `config.video_freq`, a greedy episode of the current policy is
    recorded every `video_freq` updates to `run_dir/videos/update_<n>.gif`; with
    `config.collect_freq`, `collect_episodes` sampled episodes are written every
    `collect_freq` updates to `run_dir/datasets/update_<n>/` (`purejaxppo.datasets`).

    Everything is validated (config, env and its kwargs, networks, evaluation splits,
    the checkpoint to resume) before anything in `run_dir` changes.

    Args:
      config: the run's configuration.
      run_dir: output directory (created). A fresh run refuses a non-empty one unless
        `overwrite`.
      key: PRNG key; default `jax.random.key(config.seed)`. Training and the periodic
        evaluations (`fold_in(key, EVAL_KEY_STREAM)`, then the update index) derive from
        it. A resumed run uses `config.seed`'s key for its evaluations.
      progress: show a tqdm progress bar (updates, env steps, steps/s, latest return).
      plot: write the learning-curve PNG.
      resume: continue from the newest checkpoint in `run_dir` (see `checkpoint.py`);
        the continued run ends bitwise equal to an uninterrupted one on CPU.
      overwrite: a fresh run may replace the contents of a non-empty run directory
        (removed after validation, just before training starts).

    Checkpoints (orbax, atomic) are written every `config.save_freq` updates, every
    `config.save_minutes` minutes of wall time and at the end, under
    `run_dir/checkpoints/last` (the newest `config.keep_checkpoints` are kept). After
    every segment the loss metrics and the parameters are checked: a NaN / Inf stops the
    run with `TrainingDiverged`; the last finite state is saved (if newer than the last
    checkpoint) and a non-finite one never is.

    Raises:
      ValueError: from `make_env` / `make_networks` for a bad env id, env kwarg or action
        space; from `load_checkpoint` when resuming from a missing / mismatched
        checkpoint; `rundir.DirectoryNotEmpty` for a fresh run in a non-empty directory.
      guards.TrainingDiverged: non-finite losses or parameters.
      ImportError: naming the extra of a logger whose package is missing.
    Also `ValueError` for `video_freq` on an env without a renderer (before anything on
    disk changes).
    """
    from tqdm.auto import tqdm

    from purejaxppo import rundir
    from purejaxppo.checkpoint import load_checkpoint, save_checkpoint
    from purejaxppo.guards import TrainingDiverged, first_nonfinite_update, nonfinite_leaf

    run_dir = Path(run_dir)
    metrics_path = run_dir / "metrics.csv"
    # Validate everything before anything on disk changes.
    if not resume:
        rundir.check_fresh(run_dir, overwrite)
    fns = make_train_fns(config)
    if fns.host:
        for field in ("eval_freq", "video_freq", "collect_freq"):
            if getattr(config, field):
                raise ValueError(
                    f"{field}={getattr(config, field)}: not available for the host env "
                    f"{config.env_name!r} (evaluation, videos and datasets run the env "
                    "inside jit); set it to 0"
                )
    names = fns.metric_names  # METRICS, then action_frac/<i>, info/<key>
    loggers = [name for name in config.loggers if name != "csv"]  # metrics.csv: below
    check_sinks(loggers)
    media = make_media(config, fns)  # checks video_freq's renderer
    hparams = Hyperparams.from_config(config)
    evaluators = make_evaluators(config, fns.networks)
    key = jax.random.key(config.seed) if key is None else key
    # Evaluation episodes draw from their own stream of the caller's key.
    eval_base_key = jax.random.fold_in(key, EVAL_KEY_STREAM)
    eval_columns = [f"eval/{name}/return" for name in evaluators]
    eval_history: dict[str, list] = {name: [] for name in evaluators}
    frames = []
    done_updates = 0
    if resume:
        checkpoint = load_checkpoint(run_dir, config)
        rundir.set_aside_newer_checkpoints(run_dir, checkpoint.update_step)
        runner = checkpoint.runner_state
        done_updates = checkpoint.update_step
        eval_history.update(checkpoint.eval_history)
        frame = pd.DataFrame(checkpoint.metrics)[list(names)]
        frame.insert(0, "update", np.arange(1, done_updates + 1))
        for name, column in zip(evaluators, eval_columns, strict=True):
            frame[column] = np.nan
            for update, value in eval_history.get(name, []):
                frame.loc[frame["update"] == update, column] = value
        frames.append(frame)
        frame.to_csv(metrics_path, index=False)  # drops rows logged after the checkpoint
    else:
        runner = jax.jit(fns.init)(key)
        if overwrite:
            rundir.clear(run_dir)
        run_dir.mkdir(parents=True, exist_ok=True)
        (run_dir / "config.yaml").write_text(yaml.safe_dump(config.to_dict(), sort_keys=False))
    sinks = make_sinks(loggers, run_dir, append=resume)
    if not resume:
        sinks.log_config(config.to_dict())
    # A host env (`TrainFns.host`) steps on the host: its `run` jits its own pieces.
    run_segment = fns.run if fns.host else jax.jit(fns.run, static_argnums=2)

    start, start_updates = time.perf_counter(), done_updates
    saved_step = done_updates if resume else None  # newest "last" checkpoint on disk
    last_save_time = time.monotonic()
    bar = tqdm(
        total=config.num_updates,
        initial=done_updates,
        unit="update",
        disable=not progress,
        desc=f"{config.env_name} (compiling)",
        dynamic_ncols=True,
    )
    with bar, sinks:
        while done_updates < config.num_updates:
            length = min(config.log_freq, config.num_updates - done_updates)
            for every in (
                config.save_freq,
                config.eval_freq,
                config.video_freq,
                config.collect_freq,
            ):
                if every:
                    length = min(length, every - done_updates % every)
            previous = runner
            runner, metrics = run_segment(runner, hparams, length)
            metrics = jax.device_get(metrics)
            frame = pd.DataFrame({name: np.asarray(metrics[name]) for name in names})
            frame.insert(0, "update", np.arange(done_updates + 1, done_updates + length + 1))
            diverged = first_nonfinite_update(metrics, done_updates + 1)
            if diverged is None and nonfinite_leaf(runner.train_state.params) is not None:
                diverged = (done_updates + length, "params")
            if diverged is not None:  # keep the rows as evidence, never the state
                for column in eval_columns:
                    frame[column] = np.nan
                frame.to_csv(metrics_path, mode="a", header=len(frames) == 0, index=False)
                previous_step = int(previous.update_step)
                if previous_step > 0 and (saved_step is None or previous_step > saved_step):
                    so_far = pd.concat(frames, ignore_index=True)
                    history = {name: so_far[name].to_numpy() for name in names}
                    save_checkpoint(run_dir, previous, history, config, eval_history)
                    saved_step = previous_step
                kept = (
                    "no update finished with finite values, so there is no checkpoint"
                    if saved_step is None
                    else f"the last finite state (update {saved_step}) is kept in "
                    f"{run_dir / 'checkpoints' / 'last' / str(saved_step)}"
                )
                raise TrainingDiverged(
                    f"training diverged at update {diverged[0]}: {diverged[1]} is not finite "
                    f"(NaN or Inf); {kept}; nothing non-finite was saved. Try a smaller "
                    f"learning_rate or max_grad_norm.",
                    update=diverged[0],
                    what=diverged[1],
                )
            done_updates += length
            for column in eval_columns:
                frame[column] = np.nan
            improved = False
            if config.eval_freq and done_updates % config.eval_freq == 0:
                params = runner.train_state.params
                eval_key = jax.random.fold_in(eval_base_key, done_updates)
                for (name, run_eval), column in zip(evaluators.items(), eval_columns, strict=True):
                    returns, _ = run_eval(params, eval_key, jnp.float32(1.0))
                    value = float(np.mean(returns))
                    frame.loc[frame.index[-1], column] = value
                    eval_history[name].append([done_updates, value])
                first = eval_history[next(iter(evaluators))]
                improved = first[-1][1] >= max(v for _, v in first)
            frame.to_csv(metrics_path, mode="a", header=len(frames) == 0, index=False)
            frames.append(frame)
            for row in frame.drop(columns="update").to_dict("records"):
                sinks.log_metrics(int(row["env_steps"]), row)
            media(runner, done_updates, int(frame["env_steps"].iloc[-1]), run_dir, sinks)
            at_save = bool(config.save_freq) and done_updates % config.save_freq == 0
            at_save |= bool(config.save_minutes) and (
                time.monotonic() - last_save_time >= 60 * config.save_minutes
            )
            if at_save or improved or done_updates == config.num_updates:
                so_far = pd.concat(frames, ignore_index=True)
                history = {name: so_far[name].to_numpy() for name in names}
                kinds = ["last"] if at_save or done_updates == config.num_updates else []
                kinds += ["best"] if improved else []
                for kind in kinds:
                    save_checkpoint(run_dir, runner, history, config, eval_history, kind=kind)
                if "last" in kinds:
                    saved_step, last_save_time = done_updates, time.monotonic()

            env_steps = int(frame["env_steps"].iloc[-1])
            returns = frame["episode_return"].dropna()
            elapsed = time.perf_counter() - start
            bar.set_description(config.env_name)
            bar.set_postfix(
                env_steps=f"{env_steps:,}",
                sps=f"{(done_updates - start_updates) * config.batch_size / elapsed:,.0f}",
                ret=f"{returns.iloc[-1]:.1f}" if len(returns) else "n/a",
                refresh=False,
            )
            bar.update(length)

        table = pd.concat(frames, ignore_index=True)
        if plot:
            plot_learning_curve(table, run_dir / "learning_curve.png", title=config.env_name)
            steps = int(table["env_steps"].iloc[-1])
            sinks.log_image("learning_curve", run_dir / "learning_curve.png", steps)
    return RunResult(
        run_dir=run_dir,
        metrics=table,
        final_return=final_return(table["episode_return"].to_numpy()),
        runner_state=runner,
    )


def make_media(config: PPOConfig, fns: Any) -> Any:
    """`media(runner, done_updates, env_steps, run_dir, sinks)`: records the greedy video
    (`video_freq`) and collects episodes (`collect_freq`) when `done_updates` is due.
    Everything compiles once; rendering runs outside the jit.

    Raises:
      ValueError: `video_freq` on an env without a renderer.
    """
    if not (config.video_freq or config.collect_freq):
        return lambda *args: None
    import shutil

    from purejaxppo.envs import make_env
    from purejaxppo.policy import Policy

    env, env_params = make_env(config.env_name, config.env_kwargs)
    policy = Policy(None, config, env, env_params, networks=fns.networks)
    if config.video_freq:
        from purejaxppo.video import make_episode_recorder, make_renderer

        renderer = make_renderer(env, env_params)
        max_steps = int(env_params.max_steps_in_episode)
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
            int(split_params.max_steps_in_episode),
        )
    return evaluators


def plot_learning_curve(table: pd.DataFrame, path: str | Path, title: str = "") -> None:
    """Writes a 2x2 PNG: episode return, value loss, entropy, approx KL vs env steps."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 2, figsize=(10, 7), sharex=True)
    panels = [
        ("episode_return", "episode return"),
        ("v_loss", "value loss"),
        ("entropy", "policy entropy (nats)"),
        ("approx_kl", "approx KL"),
    ]
    steps = table["env_steps"].to_numpy()
    for ax, (column, label) in zip(axes.flat, panels, strict=True):
        values = table[column].to_numpy(dtype=float)
        keep = ~np.isnan(values)
        ax.plot(steps[keep], values[keep], lw=1.2)
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
    for ax in axes[1]:
        ax.set_xlabel("env steps")
    fig.suptitle(f"PPO on {title}" if title else "PPO")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
