"""Grid-world reference rows: Navix's own PPO baseline, reproduced.

For each `--row`, trains its config (the PPO settings of Navix's rejax baseline, see
`REFERENCES`) with `--seeds` seeds vmapped in ONE compiled program
(`jit(vmap(make_train))` over the seeds' keys) for `--total-timesteps` env steps per seed
(default: the published budget, 1,048,576), then evaluates each seed's final policy on
`--eval-episodes` episodes with sampled actions, as rejax's `evaluate` does for the
published numbers. Reported per row: the final return of each seed (mean evaluation
return), mean ± std across seeds, the IQM of the pooled seeds x episodes returns, the
training-episode return over the last `--tail` updates (as benchmarks/minatar_reference.py),
the published mean ± std read from the published curve at the largest evaluation step not
above ours, ours / published, and whether the row meets the reference target: mean >= the
published mean and no seed below the published mean minus its std.

    python -m benchmarks.gridworld_reference                         # both Navix rows
    python -m benchmarks.gridworld_reference --row navix-doorkey-8x8 --total-timesteps 262144

Published numbers: Navix's repository (github.com/epignatelli/navix, commit 250d46e9),
`baselines/rejax/results/navix_<env>_ppo_5_0_<time>.json`: 5 seeds trained with
`baselines/rejax/configs/navix_<env>_1m.yaml` (rejax PPO), evaluated every 262,144 steps on
rejax's sampled-action episodes; the file's "return" is [evaluation, seed]. Its summary,
`baselines/rejax/baselines.md` ("PPO" table, mean ± population std across seeds), shows
the same values under wrong column labels (131080, ... : the labels of another run, the last
value repeated); the JSON's "time/step" gives the true steps.

XLand-MiniGrid (Nikulin et al. 2023) has no row: its repository's single-task PPO
(`training/train_single_task.py`, `configs/single.yaml`, `examples/train_single_standalone
.ipynb`) publishes settings but no per-env return, and none was found in the material
available here. A row can be added to `REFERENCES` once a number with a source exists.

Writes `benchmarks/results/gridworld-reference-cpu-<time>.{csv,json}` (one row per env;
the JSON adds the machine record) and `...-curves.csv` (per-update training return of every
seed), rewritten after each row, and prints the table. Not a test: nothing is asserted.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from benchmarks.harness import RESULTS, ROOT, machine, markdown_table, stamp
from benchmarks.minatar_reference import write_results

CONFIGS = ROOT / "configs"
NAVIX = "github.com/epignatelli/navix@250d46e9 baselines/rejax/results/{file} (5 seeds)"


@dataclass(frozen=True)
class Reference:
    """A published PPO learning curve: evaluation points of (env steps, mean, std)."""

    env: str  # our env id
    config: str  # file under configs/
    curve: tuple[tuple[int, float, float], ...]  # (env steps, mean return, std across seeds)
    source: str


REFERENCES = {
    "navix-empty-6x6": Reference(
        env="navix:Navix-Empty-6x6-v0",
        config="navix_empty_6x6_rejax.yaml",
        curve=(
            (0, 0.13, 0.169),
            (262_144, 1.0, 0.0),
            (524_288, 1.0, 0.0),
            (786_432, 1.0, 0.0),
            (1_048_576, 1.0, 0.0),
        ),
        source=NAVIX.format(file="navix_Navix-Empty-6x6-v0_ppo_5_0_1760717037.4253123.json"),
    ),
    "navix-empty-random-8x8": Reference(
        env="navix:Navix-Empty-Random-8x8-v0",
        config="navix_empty_random_8x8_rejax.yaml",
        curve=(
            (0, 0.21, 0.107),
            (262_144, 0.57, 0.075),
            (524_288, 0.93, 0.051),
            (786_432, 1.0, 0.0),
            (1_048_576, 1.0, 0.0),
        ),
        source=NAVIX.format(file="navix_Navix-Empty-Random-8x8-v0_ppo_5_0_1760717043.229368.json"),
    ),
    "navix-doorkey-8x8": Reference(
        env="navix:Navix-DoorKey-8x8-v0",
        config="navix_doorkey_8x8_rejax.yaml",
        curve=(
            (0, 0.0, 0.0),
            (262_144, 0.77, 0.081),
            (524_288, 0.89, 0.086),
            (786_432, 0.94, 0.073),
            (1_048_576, 0.96, 0.037),
        ),
        source=NAVIX.format(file="navix_Navix-DoorKey-8x8-v0_ppo_5_0_1760716970.5776014.json"),
    ),
}
#: The same env and published curve, with the learning rate annealed (the one change).
REFERENCES["navix-empty-6x6-anneal"] = dataclasses.replace(
    REFERENCES["navix-empty-6x6"], config="navix_empty_6x6.yaml"
)


def published_at(curve: tuple[tuple[int, float, float], ...], env_steps: int) -> tuple:
    """(steps, mean, std) of the last published evaluation at or below `env_steps`.

    Raises:
      ValueError: `env_steps` is below the curve's first point.
    """
    points = [p for p in curve if p[0] <= env_steps]
    if not points:
        raise ValueError(f"env_steps={env_steps}: below the published curve's first point")
    return max(points)


def iqm(x: np.ndarray) -> float:
    """Mean of the middle 50% (Agarwal et al. 2021), as `EvalResult.summary`."""
    r = np.sort(np.asarray(x, np.float64).ravel())
    n = len(r)
    return float((r[n // 4 : n - n // 4] if n >= 4 else r).mean())


def summarize(
    name: str, ref: Reference, eval_returns: np.ndarray, train_finals: np.ndarray, env_steps: int
) -> dict:
    """The results row of `name` from the evaluation returns `[S, E]` (S seeds, E episodes)
    and the per-seed training-window returns `[S]`; times are added by the caller."""
    finals = eval_returns.mean(axis=1)  # [S]
    at_steps, published, published_std = published_at(ref.curve, env_steps)
    mean, low = float(finals.mean()), published - published_std
    return {
        "row": name,
        "env": ref.env,
        "config": ref.config,
        "seeds": len(finals),
        "env_steps": env_steps,
        "eval_episodes": eval_returns.shape[1],
        "final_mean": round(mean, 3),
        "final_std": round(float(finals.std()), 3),
        "final_iqm": round(iqm(eval_returns), 3),
        "final_min": round(float(finals.min()), 3),
        "finals": " ".join(f"{f:.3f}" for f in finals),
        "train_final_mean": round(float(np.nanmean(train_finals)), 3),
        "published": published,
        "published_std": published_std,
        "published_at_steps": at_steps,
        "published_env_steps": ref.curve[-1][0],
        "budget_fraction": round(env_steps / ref.curve[-1][0], 4),
        "ratio": round(mean / published, 3) if published else float("nan"),
        "min_floor": round(low, 3),
        "met": bool(mean >= published and finals.min() >= low),
        "published_source": ref.source,
    }


def evaluate_seeds(config, train_state, seeds: int, episodes: int) -> np.ndarray:
    """Returns `[S, E]` of each seed's final policy, sampled actions (one compiled runner)."""
    import jax

    from purejaxppo.acting.evaluation import make_episode_runner
    from purejaxppo.envs.spaces import episode_limit
    from purejaxppo.policy import Policy

    params = [jax.tree.map(lambda x, k=k: x[k], train_state.params) for k in range(seeds)]
    policy = Policy(params[0], config)
    env, env_params = policy.env, policy.env_params
    run = make_episode_runner(policy, env, env_params, episodes, episode_limit(env, env_params))
    returns = [
        np.asarray(run(p, jax.random.key(10_000 + k), jax.numpy.float32(1.0))[0])
        for k, p in enumerate(params)
    ]
    return np.stack(returns)


def train_row(name: str, total_timesteps: int | None, seeds: int, tail: int, episodes: int):
    """Trains and evaluates one row; returns its results row with "curves"."""
    import jax

    import purejaxppo as pjp

    ref = REFERENCES[name]
    overrides = {} if total_timesteps is None else {"total_timesteps": total_timesteps}
    config = pjp.PPOConfig.from_yaml(CONFIGS / ref.config, **overrides)
    train = jax.jit(jax.vmap(pjp.make_train(config)))
    keys = jax.vmap(jax.random.key)(np.arange(seeds))
    start = time.perf_counter()
    compiled = train.lower(keys).compile()
    compile_s = time.perf_counter() - start
    run_start = time.perf_counter()
    out = jax.block_until_ready(compiled(keys))
    run_s = time.perf_counter() - run_start
    metrics = jax.device_get(out.metrics)
    returns = np.asarray(metrics["episode_return"], np.float64)  # [S, num_updates]
    steps = np.asarray(metrics["env_steps"], np.float64)  # [S, num_updates]
    ended = [np.flatnonzero(~np.isnan(r))[-tail:] for r in returns]
    train_finals = np.array(
        [r[i].mean() if i.size else np.nan for r, i in zip(returns, ended, strict=True)]
    )
    eval_start = time.perf_counter()
    eval_returns = evaluate_seeds(config, out.train_state, seeds, episodes)
    eval_s = time.perf_counter() - eval_start
    row = summarize(name, ref, eval_returns, train_finals, int(steps[0, -1]))
    row |= {
        "wall_s": round(time.perf_counter() - start, 1),
        "compile_s": round(compile_s, 1),
        "run_s": round(run_s, 1),
        "eval_s": round(eval_s, 1),
        "env_steps_per_s": round(seeds * row["env_steps"] / run_s),
        "curves": (steps, returns),
    }
    print(
        f"{name}: {row['final_mean']} ± {row['final_std']} (seeds {row['finals']}), published "
        f"{row['published']} ± {row['published_std']} at {row['published_at_steps']}; "
        f"met {row['met']}; {run_s:.0f} s (+ {compile_s:.0f} s compile)",
        flush=True,
    )
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--row", nargs="+", default=list(REFERENCES), choices=list(REFERENCES))
    parser.add_argument(
        "--total-timesteps", type=int, default=None, help="env steps per seed (default: config)"
    )
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--tail", type=int, default=10, help="updates in the training window")
    parser.add_argument("--eval-episodes", type=int, default=128, help="per seed")
    parser.add_argument("--note", default="", help="stored in the JSON (machine load, ...)")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    if args.seeds < 1 or args.tail < 1 or args.eval_episodes < 1:
        parser.error("--seeds, --tail and --eval-episodes must be >= 1")
    if args.total_timesteps is not None and args.total_timesteps < 1:
        parser.error("--total-timesteps must be >= 1")

    import jax

    args.out.mkdir(parents=True, exist_ok=True)
    base = args.out / f"gridworld-reference-{jax.default_backend()}-{stamp()}"
    record = machine(
        device=jax.devices()[0].device_kind,
        note=args.note,
        final_return=f"per seed: mean return of {args.eval_episodes} evaluation episodes of the "
        "final policy, sampled actions (rejax's evaluate)",
        final_iqm="IQM of the pooled seeds x evaluation-episode returns",
        train_final_mean=f"mean over seeds of the training return over the last {args.tail} "
        "updates with an episode end",
        target="final_mean >= published and final_min >= published - published_std",
    )
    launch = time.perf_counter()
    rows = []
    for name in args.row:
        rows.append(
            train_row(name, args.total_timesteps, args.seeds, args.tail, args.eval_episodes)
        )
        paths = write_results(
            rows, base, {**record, "launch_to_now_s": round(time.perf_counter() - launch)}
        )
    cols = [
        "row",
        "env_steps",
        "final_mean",
        "final_std",
        "final_iqm",
        "final_min",
        "train_final_mean",
        "published",
        "published_std",
        "ratio",
        "met",
        "wall_s",
    ]
    print("\n".join(markdown_table([{k: r[k] for k in cols} for r in rows], cols)))
    print(f"launch to exit: {time.perf_counter() - launch:.0f} s; wrote", *paths)
    print(json.dumps({r["row"]: r["met"] for r in rows}))


if __name__ == "__main__":
    main()
