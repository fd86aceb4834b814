"""Does PBT help? PBT vs random search vs the default config at equal total env steps.

Task: Acrobot-v1 (`configs/acrobot.yaml`: 16 envs x 128 steps, lr annealed), a wide
learning-rate range, `log_uniform(1e-5, 1e-1)`. Three procedures, each 16 runs of the same
length (equal total env steps), each repeated with 3 seeds:

* `pbt`: `pjp.pbt(population=16, ready_every=K, search={"learning_rate": ...},
  exploit="truncation", explore="perturb", seed=rep)`; its initial learning rates are the
  same 16 draws as the random search of the same rep (`sweeps.sample_random`, seed rep).
* `random`: `pjp.sweep(random={"learning_rate": ...}, num_samples=16, random_seed=rep)`,
  one seed (rep) per sample.
* `default`: the config's learning rate (2.5e-4), 16 seeds (16 * rep ... 16 * rep + 15).

Final return of a run: mean training-episode return over its last 10 updates (for PBT:
each final member, whose weights went through several slots). Reported per procedure:
best and median over the 16 runs, mean and std over the 3 repetitions.

    python -m benchmarks.pbt_vs_random                       # about 10-15 min on 2 CPU cores
    python -m benchmarks.pbt_vs_random --total-timesteps 100000 --reps 1   # smoke test

Writes `benchmarks/results/pbt-vs-random-<device>-<time>.{json,csv,png}` and prints the
table. Not a test: nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", type=Path, default=ROOT / "configs" / "acrobot.yaml")
    parser.add_argument("--total-timesteps", type=int, default=2048 * 150, help="per run")
    parser.add_argument("--population", type=int, default=16)
    parser.add_argument("--ready-every", type=int, default=10)
    parser.add_argument("--lr-range", type=float, nargs=2, default=(1e-5, 1e-1))
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--cpu-devices", type=int, default=2)
    parser.add_argument("--out", type=Path, default=HERE / "results")
    args = parser.parse_args()

    import jax

    if args.cpu_devices > 1:  # CPU only; must come before JAX starts its backend
        jax.config.update("jax_num_cpu_devices", args.cpu_devices)
    import pandas as pd

    import purejaxppo as pjp

    config = pjp.PPOConfig.from_yaml(args.config, total_timesteps=args.total_timesteps)
    search = {"learning_rate": ("log_uniform", *args.lr_range)}
    size = args.population
    rows, curves = [], {}
    started = time.perf_counter()
    for rep in range(args.reps):
        # PBT
        t0 = time.perf_counter()
        result = pjp.pbt(
            config, population=size, ready_every=args.ready_every, search=search, seed=rep
        )
        finals = result.summary["final_return"].to_numpy()
        rows.append(_row("pbt", rep, finals, time.perf_counter() - t0, result.num_compiles))
        rows[-1]["best_lr_final"] = result.best_hparams["learning_rate"]
        best = result.summary.iloc[0]["member"]
        curves[("pbt", rep)] = (
            result.best_metrics["episode_return"],
            result.best_lineage["learning_rate"].to_numpy(),
            result.best_lineage["update"].to_numpy(),
        )
        rows[-1]["best_member"] = int(best)
        # Random search: the same 16 initial draws
        t0 = time.perf_counter()
        sweep = pjp.sweep(config, seeds=[rep], random=search, num_samples=size, random_seed=rep)
        finals = sweep.runs["final_return"].to_numpy()
        rows.append(_row("random", rep, finals, time.perf_counter() - t0, sweep.num_compiles))
        top = int(np.nanargmax(finals))
        rows[-1]["best_lr_final"] = float(sweep.runs["config/learning_rate"].iloc[top])
        curves[("random", rep)] = (_curve(sweep, top), None, None)
        # Default config, 16 seeds
        t0 = time.perf_counter()
        sweep = pjp.sweep(config, seeds=list(range(size * rep, size * rep + size)))
        finals = sweep.runs["final_return"].to_numpy()
        rows.append(_row("default", rep, finals, time.perf_counter() - t0, sweep.num_compiles))
        rows[-1]["best_lr_final"] = config.learning_rate
        curves[("default", rep)] = (_curve(sweep, int(np.nanargmax(finals))), None, None)
        print(pd.DataFrame(rows[-3:]).to_string(index=False), flush=True)
    elapsed = time.perf_counter() - started

    frame = pd.DataFrame(rows)
    table = (
        frame.groupby("procedure", sort=False)
        .agg(
            best_mean=("best", "mean"),
            best_std=("best", "std"),
            median_mean=("median", "mean"),
            median_std=("median", "std"),
            seconds=("seconds", "sum"),
        )
        .reset_index()
    )
    print()
    print(table.to_string(index=False, float_format=lambda v: f"{v:.1f}"))
    print(
        f"total {elapsed:.0f} s; env steps per procedure and rep: {size} x "
        f"{config.num_updates * config.batch_size:,}"
    )

    device = jax.devices()[0].platform
    stamp = time.strftime("%Y%m%d-%H%M%S")
    args.out.mkdir(parents=True, exist_ok=True)
    stem = args.out / f"pbt-vs-random-{device}-{stamp}"
    frame.to_csv(stem.with_suffix(".csv"), index=False)
    meta = {
        "config": config.to_dict(),
        "search": {k: list(v) for k, v in search.items()},
        "population": size,
        "ready_every": args.ready_every,
        "reps": args.reps,
        "cpu_devices": jax.device_count(),
        "machine": platform.platform(),
        "python": sys.version.split()[0],
        "jax": jax.__version__,
        "elapsed_s": elapsed,
        "rows": rows,
        "table": table.to_dict(orient="records"),
        "env_steps_per_run": config.num_updates * config.batch_size,
    }
    stem.with_suffix(".json").write_text(json.dumps(meta, indent=1, default=float))
    _plot(curves, config, args.reps, stem.with_suffix(".png"))
    print(f"wrote {stem}.{{csv,json,png}}")


def _row(procedure, rep, finals, seconds, compiles):
    finals = np.asarray(finals, np.float64)
    return {
        "procedure": procedure,
        "rep": rep,
        "best": float(np.nanmax(finals)),
        "median": float(np.nanmedian(finals)),
        "worst": float(np.nanmin(finals)),
        "seconds": seconds,
        "compiles": compiles,
    }


def _curve(sweep, run):
    rows = sweep.curves[sweep.curves["run"] == sweep.runs["run"].iloc[run]]
    return rows.sort_values("update")["episode_return"].to_numpy()


def _plot(curves, config, reps, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5))
    colors = {"pbt": "tab:red", "random": "tab:blue", "default": "tab:gray"}
    for (procedure, rep), (returns, lrs, updates) in curves.items():
        steps = np.arange(1, len(returns) + 1) * config.batch_size
        keep = ~np.isnan(returns)
        label = f"{procedure} (best run)" if rep == 0 else None
        left.plot(steps[keep], returns[keep], color=colors[procedure], lw=1, alpha=0.8, label=label)
        if lrs is not None:
            starts = np.concatenate([[0], updates[:-1]]) * config.batch_size
            right.step(
                starts, lrs, where="post", color=colors[procedure], alpha=0.8, label=f"rep {rep}"
            )
    left.set_xlabel("env steps per run")
    left.set_ylabel("episode return")
    left.set_title(f"{config.env_name}: best run of each procedure, {reps} reps")
    left.legend(fontsize=8)
    left.grid(alpha=0.3)
    right.set_yscale("log")
    right.set_xlabel("env steps")
    right.set_ylabel("learning rate")
    right.set_title("PBT: learning rate along the best member's ancestry")
    right.legend(fontsize=8)
    right.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


if __name__ == "__main__":
    main()
