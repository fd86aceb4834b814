"""SpaceInvaders-MinAtar with the IMPALA encoder: a longer run that must learn.

Trains `configs/space_invaders_minatar_impala.yaml` (seeds under one `jax.vmap`) in jitted
segments of `log_freq` updates with a progress bar, measures a random-policy baseline on
the same env, prints a table and writes
`benchmarks/results/minatar-impala-<device>-<time>.json` (machine, versions, device,
config, numbers, per-update returns of every seed) and `.png` (episode return against
env steps, the random baseline dashed).

    python -m benchmarks.minatar_impala --total-timesteps 20000          # smoke run
    python -m benchmarks.minatar_impala --total-timesteps 1.5e6 --seeds 1

Compile time is measured apart (every segment length is compiled ahead of time), so
"run s" and "steps/s" are training only; "wall s" is the whole run, compiles included.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

import purejaxppo as pjp
from benchmarks.harness import machine, write_text

HERE = Path(__file__).resolve().parent
DEFAULT_CONFIG = HERE.parent / "configs" / "space_invaders_minatar_impala.yaml"


def random_policy_returns(
    env: Any, env_params: Any, key: jax.Array, num_episodes: int, max_steps: int
) -> tuple[jax.Array, jax.Array]:
    """Returns and lengths of `num_episodes` episodes of uniformly random actions.

    Each of `num_episodes` vmapped envs plays until its FIRST episode ends (terminated, or
    truncated at `max_steps` = the env's `max_steps_in_episode`), so short episodes are
    not over-represented. An episode still running after `max_steps` steps returns NaN.

    Returns:
      (returns float32 `[E]`, lengths int32 `[E]`), E = num_episodes.
    """
    num_actions = env.action_space(env_params).n
    reset_key, run_key = jax.random.split(key)
    _, state = jax.vmap(env.reset, in_axes=(0, None))(
        jax.random.split(reset_key, num_episodes), env_params
    )
    step = jax.vmap(env.step, in_axes=(0, 0, 0, None))

    def body(carry, key):
        state, episode_return, length, done = carry
        action_key, step_key = jax.random.split(key)
        action = jax.random.randint(action_key, (num_episodes,), 0, num_actions)
        _, state, reward, terminated, truncated, _ = step(
            jax.random.split(step_key, num_episodes), state, action, env_params
        )
        live = ~done
        episode_return = episode_return + jnp.where(live, reward, 0.0)
        length = length + live.astype(jnp.int32)
        done = done | terminated | truncated
        return (state, episode_return, length, done), None

    carry = (
        state,
        jnp.zeros((num_episodes,), jnp.float32),
        jnp.zeros((num_episodes,), jnp.int32),
        jnp.zeros((num_episodes,), bool),
    )
    (_, returns, lengths, done), _ = jax.lax.scan(body, carry, jax.random.split(run_key, max_steps))
    return jnp.where(done, returns, jnp.nan), lengths


def window_mean(returns: np.ndarray, first: bool, count: int = 10) -> float:
    """NaN-aware mean of `returns` `[S, U]` over the first / last `count` updates."""
    window = returns[:, :count] if first else returns[:, -count:]
    return float(np.nanmean(window)) if np.isfinite(window).any() else math.nan


def train_seeds(config: pjp.PPOConfig, seeds: int, log_freq: int, progress: bool) -> dict:
    """Trains `seeds` agents (keys split from `config.seed`) in vmapped jitted segments.

    Returns a dict with compile / run seconds and the per-update metrics `[S, U]`.
    """
    from tqdm.auto import tqdm

    fns = pjp.make_train_fns(config)
    hparams = pjp.Hyperparams.from_config(config)
    keys = jax.random.split(jax.random.key(config.seed), seeds)

    def run_segment(runner, hparams, length):
        def one(runner):
            return fns.run(runner, hparams, length)

        return jax.vmap(one)(runner)

    start = time.perf_counter()
    runner = jax.block_until_ready(jax.jit(jax.vmap(fns.init))(keys))
    segment = jax.jit(run_segment, static_argnums=2)
    lengths = [log_freq] * (config.num_updates // log_freq)
    if config.num_updates % log_freq:
        lengths.append(config.num_updates % log_freq)
    compiled = {n: segment.lower(runner, hparams, n).compile() for n in sorted(set(lengths))}
    compile_s = time.perf_counter() - start

    history: dict[str, list[np.ndarray]] = {}
    done_updates = 0
    start = time.perf_counter()
    bar = tqdm(total=config.num_updates, unit="update", disable=not progress, dynamic_ncols=True)
    with bar:
        for length in lengths:
            runner, metrics = compiled[length](runner, hparams)
            metrics = jax.device_get(metrics)
            for name, values in metrics.items():
                history.setdefault(name, []).append(np.asarray(values))
            done_updates += length
            elapsed = time.perf_counter() - start
            latest = np.asarray(metrics["episode_return"], np.float64)[:, -1]
            bar.set_description(config.env_name)
            bar.set_postfix(
                env_steps=f"{done_updates * config.batch_size:,}",
                sps=f"{done_updates * config.batch_size * seeds / elapsed:,.0f}",
                ret=f"{np.nanmean(latest):.1f}" if np.isfinite(latest).any() else "n/a",
                refresh=False,
            )
            bar.update(length)
    run_s = time.perf_counter() - start
    return {
        "compile_s": compile_s,
        "run_s": run_s,
        "metrics": {name: np.concatenate(parts, axis=1) for name, parts in history.items()},
    }


def to_json(values: np.ndarray) -> list:
    """Nested lists with NaN as null."""
    return (
        [to_json(v) for v in values]
        if values.ndim > 1
        else [None if not np.isfinite(v) else float(v) for v in values]
    )


def moving_average(values: np.ndarray, window: int) -> np.ndarray:
    """NaN-aware trailing mean over the last `window` entries of `values` `[U]`."""
    out = np.full(values.shape, np.nan)
    for i in range(len(values)):
        chunk = values[max(0, i + 1 - window) : i + 1]
        if np.isfinite(chunk).any():
            out[i] = np.nanmean(chunk)
    return out


def plot(
    path: Path, env_steps: np.ndarray, returns: np.ndarray, random_return: float, title: str
) -> None:
    """Episode return `[S, U]` against env steps `[U]`: per seed, smoothed mean, random."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for run, curve in enumerate(returns):
        keep = np.isfinite(curve)
        ax.plot(env_steps[keep], curve[keep], lw=0.8, alpha=0.45, label=f"run {run}")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all seeds NaN at an update
        mean = np.nanmean(returns, axis=0)
    smooth = moving_average(mean, 10)
    keep = np.isfinite(smooth)
    label = "mean over seeds, " if len(returns) > 1 else ""
    ax.plot(env_steps[keep], smooth[keep], lw=2.0, color="k", label=f"{label}10-update mean")
    ax.axhline(random_return, ls="--", color="r", lw=1.2, label=f"random ({random_return:.2f})")
    ax.set_xlabel("env steps (per seed)")
    ax.set_ylabel("training episode return")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(loc="upper left", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", type=Path, default=DEFAULT_CONFIG)
    parser.add_argument("--total-timesteps", type=float, default=None, help="env steps per seed")
    parser.add_argument("--seeds", type=int, default=1, help="seeds under one jax.vmap")
    parser.add_argument("--out", type=Path, default=HERE / "results")
    parser.add_argument("--log-freq", type=int, default=None, help="updates per segment")
    parser.add_argument("--random-episodes", type=int, default=2048)
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="FIELD=YAML",
        help="config override, e.g. --set learning_rate=1e-3 (repeatable)",
    )
    parser.add_argument("--no-progress", action="store_true")
    args = parser.parse_args(argv)

    import yaml

    overrides = {}
    for item in args.set:
        field, _, value = item.partition("=")
        overrides[field] = yaml.safe_load(value)
    if args.total_timesteps is not None:
        overrides["total_timesteps"] = int(args.total_timesteps)
    config = pjp.PPOConfig.from_yaml(args.config, **overrides)
    log_freq = args.log_freq or config.log_freq
    load_before = os.getloadavg()
    wall_start = time.perf_counter()

    env, env_params = pjp.make_env(config.env_name, config.env_kwargs)
    start = time.perf_counter()
    random_returns, random_lengths = jax.device_get(
        jax.jit(random_policy_returns, static_argnums=(0, 3, 4))(
            env,
            env_params,
            jax.random.key(config.seed + 12345),
            args.random_episodes,
            int(env_params.max_steps_in_episode),
        )
    )
    random_s = time.perf_counter() - start
    random_mean = float(np.nanmean(random_returns))
    random_sem = float(np.nanstd(random_returns) / math.sqrt(np.isfinite(random_returns).sum()))
    print(
        f"random policy: {np.isfinite(random_returns).sum()} episodes, return "
        f"{random_mean:.2f} +- {random_sem:.2f} (sem), length {random_lengths.mean():.0f} "
        f"({random_s:.1f} s)",
        file=sys.stderr,
    )

    result = train_seeds(config, args.seeds, log_freq, not args.no_progress)
    wall_s = time.perf_counter() - wall_start
    metrics = result["metrics"]
    returns = np.asarray(metrics["episode_return"], np.float64)  # [S, U]
    env_steps = np.asarray(metrics["env_steps"])[0]  # [U], per seed
    total_steps = config.num_updates * config.batch_size
    numbers = {
        "seeds": args.seeds,
        "env_steps_per_seed": total_steps,
        "updates": config.num_updates,
        "wall_s": wall_s,
        "compile_s": result["compile_s"],
        "run_s": result["run_s"],
        "random_baseline_s": random_s,
        "env_steps_per_s": total_steps * args.seeds / result["run_s"],
        "first10_return": window_mean(returns, first=True),
        "last10_return": window_mean(returns, first=False),
        "last10_return_per_seed": [window_mean(r[None], first=False) for r in returns],
        "random_return_mean": random_mean,
        "random_return_sem": random_sem,
        "random_episodes": int(np.isfinite(random_returns).sum()),
        "random_length_mean": float(random_lengths.mean()),
        "load_average_before": load_before,
        "load_average_after": os.getloadavg(),
    }

    header = ["env steps", "seeds", "wall s", "compile s", "run s", "steps/s",
              "first-10 return", "last-10 return", "random"]  # fmt: skip
    row = [
        f"{total_steps:,}",
        str(args.seeds),
        f"{wall_s:.0f}",
        f"{result['compile_s']:.1f}",
        f"{result['run_s']:.0f}",
        f"{numbers['env_steps_per_s']:,.0f}",
        f"{numbers['first10_return']:.2f}",
        f"{numbers['last10_return']:.2f}",
        f"{random_mean:.2f}",
    ]
    print("| " + " | ".join(header) + " |")
    print("|" + " --- |" * len(header))
    print("| " + " | ".join(row) + " |")

    device = jax.devices()[0]
    args.out.mkdir(parents=True, exist_ok=True)
    stem = args.out / f"minatar-impala-{device.platform}-{time.strftime('%Y%m%d-%H%M%S')}"
    record = {
        **machine(
            ("jax", "jaxlib", "flax", "optax", "gymnax", "distrax", "purejaxppo"),
            jax=jax.__version__,
            device=getattr(device, "device_kind", device.platform),
            platform=device.platform,
            xla_flags=os.environ.get("XLA_FLAGS", ""),
        ),
        "config": config.to_dict(),
        "log_freq": log_freq,
        "numbers": numbers,
        "per_update": {
            "env_steps": env_steps.tolist(),
            "episode_return": to_json(returns),
            "episode_length": to_json(np.asarray(metrics["episode_length"], np.float64)),
            "entropy": to_json(np.asarray(metrics["entropy"], np.float64)),
        },
    }
    write_text(stem.with_suffix(".json"), json.dumps(record, indent=1))
    runs = f"{args.seeds} run{'s' * (args.seeds > 1)}"
    title = f"PPO + IMPALA on {config.env_name} ({runs}, seed {config.seed})"
    plot(stem.with_suffix(".png"), env_steps, returns, random_mean, title)
    print(f"wrote {stem}.json and .png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
