"""Does `purejaxppo tune` find better settings than random search? TPE vs `sweep --random`.

Task: Acrobot-v1 (`configs/acrobot.yaml`: 16 envs x 128 steps, lr annealed), `--updates`
updates per trial (default 50: 102,400 env steps), searching `SEARCH` (learning_rate
log-uniform over four decades, ent_coef, gae_lambda and clip_coef uniform). Three
procedures, each `--trials` trials (default 32) of the same length, so equal budgets per
trial and equal total env steps (pruned trials stop early, so `tpe+median` spends less),
each repeated with `--reps` study seeds (default 3):

* `tpe`: `pjp.tune(..., sampler="tpe", pruner="none", batch=--batch)`, the study seeded
  with the rep (`config.seed = rep`);
* `tpe+median`: the same with Optuna's median pruner (`--reports` checks per trial), a
  pruned lane refilled with a new trial at the next segment;
* `random`: `pjp.sweep(random=SEARCH, num_samples=--trials, random_seed=rep, seeds=[rep])`;
* `tpe-4seeds`: `tune` with TPE, no pruner and `seeds_per_trial=4`: a quarter of the
  trials, each scored by the mean over 4 seeds, so the same total env steps (and the
  same lanes: `--batch` / 4 trials at once).

Each procedure picks its best trial by the same number: the mean episode return over the
last 10 updates (`sweep`'s `final_return`; `tune --objective episode_return:W` with W =
10 / updates). The best setting of each procedure and rep is then rerun with 3 fresh seeds
(`--rerun-seeds`, default 100 101 102; `pjp.sweep` with one-value grids) and scored by the
mean `final_return` of those seeds. Reported per procedure: the rerun score (mean and std
over the reps), the best trial's value, wall seconds.

    python -m benchmarks.tune_quality       # about 15 min on 2 CPU cores
    python -m benchmarks.tune_quality --trials 8 --batch 4 --updates 10 --reps 1  # smoke

Writes `benchmarks/results/tune-quality-<device>-<time>.{json,png}` (or `--json`) and
prints the table. Not a test: nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

from benchmarks.harness import RESULTS, ROOT, machine, markdown_table, write_text

#: The searched fields: PPOConfig field -> (distribution, low, high).
SEARCH = {
    "learning_rate": ("log_uniform", 1e-5, 1e-1),
    "ent_coef": ("uniform", 0.0, 0.05),
    "gae_lambda": ("uniform", 0.8, 0.99),
    "clip_coef": ("uniform", 0.1, 0.3),
}
PROCEDURES = ("tpe", "tpe+median", "random", "tpe-4seeds")
#: Seeds per trial of `tpe-4seeds`.
SEEDS_PER_TRIAL = 4
WINDOW_UPDATES = 10  # sweep's final_return window


def run_tune(
    pjp, config, trials: int, batch: int, pruner: str, reports: int, seeds: int = 1
) -> dict:
    """One TPE study; its best params, best value, per-trial values and wall seconds."""
    window = WINDOW_UPDATES / config.num_updates
    started = time.perf_counter()
    result = pjp.tune(
        config,
        SEARCH,
        trials=trials,
        batch=batch,
        sampler="tpe",
        pruner=pruner,
        objective=f"episode_return:{window:g}",
        reports=reports,
        progress=False,
        seeds_per_trial=seeds,
    )
    seconds = time.perf_counter() - started
    study = result.study
    completed = [t for t in study.trials if t.state.name == "COMPLETE"]
    pruned = [t for t in study.trials if t.state.name == "PRUNED"]
    return {
        "seconds": seconds,
        "best_value": float(study.best_value),
        "best_params": {k: float(v) for k, v in study.best_trial.params.items()},
        "values": [float(t.value) if t.value is not None else None for t in study.trials],
        "completed": len(completed),
        "pruned": len(pruned),
    }


def run_random(pjp, config, trials: int, rep: int) -> dict:
    """`sweep`'s random search with the rep's draws and seed."""
    started = time.perf_counter()
    sweep = pjp.sweep(
        config, seeds=[rep], random=SEARCH, num_samples=trials, random_seed=rep, verbose=False
    )
    seconds = time.perf_counter() - started
    finals = sweep.runs["final_return"].to_numpy(np.float64)
    top = int(np.nanargmax(finals))
    row = sweep.runs.iloc[top]
    return {
        "seconds": seconds,
        "best_value": float(finals[top]),
        "best_params": {f: float(row[f"config/{f}"]) for f in SEARCH},
        "values": [float(v) for v in finals],
        "completed": len(finals),
        "pruned": 0,
    }


def rerun(pjp, config, params: dict, seeds: list[int]) -> list[float]:
    """`final_return` of `params` trained with each of `seeds` (one program)."""
    grid = {field: [value] for field, value in params.items()}
    sweep = pjp.sweep(config, seeds=seeds, grid=grid, verbose=False)
    return [float(v) for v in sweep.runs["final_return"]]


def summarize(rows: list[dict]) -> list[dict]:
    """One row per procedure: the rerun score and best value over reps (mean, std), total
    seconds, and `seconds_warm`: mean seconds per rep without compiles (reps 1 and on)."""
    table = []
    for procedure in PROCEDURES:
        mine = [r for r in rows if r["procedure"] == procedure]
        if not mine:
            continue
        scores = np.array([r["rerun_mean"] for r in mine])
        bests = np.array([r["best_value"] for r in mine])
        # Rep 0 compiles each program once (tune's lanes, the random sweep, the rerun).
        warm = [r["seconds"] for r in mine if r["rep"] > 0]
        table.append(
            {
                "procedure": procedure,
                "reps": len(mine),
                "rerun_mean": float(scores.mean()),
                "rerun_std": float(scores.std()),
                "rerun_min": float(scores.min()),
                "best_value_mean": float(bests.mean()),
                "trials_pruned": int(sum(r["pruned"] for r in mine)),
                "seconds": float(sum(r["seconds"] for r in mine)),
                "seconds_warm": float(np.mean(warm)) if warm else float("nan"),
            }
        )
    return table


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", type=Path, default=ROOT / "configs" / "acrobot.yaml")
    parser.add_argument("--updates", type=int, default=50, help="updates per trial")
    parser.add_argument("--trials", type=int, default=32, help="trials per study")
    parser.add_argument("--batch", type=int, default=8, help="tune --batch")
    parser.add_argument("--reports", type=int, default=5, help="pruning checks per trial")
    parser.add_argument("--reps", type=int, default=3, help="study seeds 0..reps-1")
    parser.add_argument("--rerun-seeds", type=int, nargs="+", default=[100, 101, 102])
    parser.add_argument("--procedures", nargs="+", choices=PROCEDURES, default=PROCEDURES)
    parser.add_argument("--json", type=Path, help="results file (default: results/...)")
    parser.add_argument(
        "--resummarize", type=Path, help="recompute the table of this results file and exit"
    )
    argv = sys.argv[1:] if argv is None else argv
    args = parser.parse_args(argv)
    if args.resummarize:
        meta = json.loads(args.resummarize.read_text())
        meta["rows"] = summarize(meta["runs"])
        write_text(args.resummarize, json.dumps(meta, indent=1, default=float) + "\n")
        print("\n".join(markdown_table(meta["rows"], list(meta["rows"][0]), ".1f")))
        return

    import jax

    jax.config.update("jax_num_cpu_devices", 2)  # as the CLI does; before JAX starts
    import purejaxppo as pjp

    base = pjp.PPOConfig.from_yaml(args.config)
    steps = args.updates * base.num_envs * base.num_steps
    rows = []
    started = time.perf_counter()
    for rep in range(args.reps):
        config = base.replace(total_timesteps=steps, seed=rep)
        for procedure in args.procedures:
            if procedure == "random":
                found = run_random(pjp, config, args.trials, rep)
            else:
                pruner = "median" if procedure == "tpe+median" else "none"
                k = SEEDS_PER_TRIAL if procedure == "tpe-4seeds" else 1
                trials, batch = max(1, args.trials // k), max(1, args.batch // k)
                found = run_tune(pjp, config, trials, batch, pruner, args.reports, k)
            finals = rerun(pjp, config, found["best_params"], args.rerun_seeds)
            row = {"procedure": procedure, "rep": rep, **found, "rerun": finals}
            row["rerun_mean"] = float(np.mean(finals))
            rows.append(row)
            print(
                f"rep {rep} {procedure:>10}: best trial {found['best_value']:8.1f}, rerun "
                f"{row['rerun_mean']:8.1f} ({found['seconds']:.0f} s, "
                f"{found['pruned']} pruned)",
                flush=True,
            )
    table = summarize(rows)
    cols = list(table[0])
    print("\n".join(markdown_table(table, cols, ".1f")))
    print(f"total {time.perf_counter() - started:.0f} s; env steps per trial {steps:,}")

    device = jax.devices()[0].platform
    path = args.json or RESULTS / f"tune-quality-{device}-{time.strftime('%Y%m%d-%H%M%S')}.json"
    meta = {
        "command": "python -m benchmarks.tune_quality " + " ".join(argv),
        "config": config.to_dict(),
        "search": {k: list(v) for k, v in SEARCH.items()},
        "env_steps_per_trial": steps,
        "trials": args.trials,
        "batch": args.batch,
        "reports": args.reports,
        "rerun_seeds": args.rerun_seeds,
        "machine": machine(),
        "rows": table,
        "runs": rows,
    }
    write_text(path, json.dumps(meta, indent=1, default=float) + "\n")
    plot(rows, path.with_suffix(".png"))
    print(f"wrote {path} and {path.with_suffix('.png').name}")


def plot(rows: list[dict], path: Path) -> None:
    """Best value so far against trials, one line per procedure and rep."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    colors = {
        "tpe": "tab:red",
        "tpe+median": "tab:orange",
        "random": "tab:blue",
        "tpe-4seeds": "tab:green",
    }
    fig, ax = plt.subplots(figsize=(7, 4.5))
    finite = []
    for row in rows:
        values = np.array([np.nan if v is None else v for v in row["values"]], np.float64)
        best = np.fmax.accumulate(np.where(np.isnan(values), -np.inf, values))
        finite.extend(best[np.isfinite(best)])
        label = row["procedure"] if row["rep"] == 0 else None
        style = "--" if row["procedure"] == "tpe+median" else "-"
        ax.plot(
            np.arange(1, len(best) + 1), best, style, color=colors[row["procedure"]], label=label
        )
    if finite:  # the first trials' outliers would flatten the rest
        ax.set_ylim(np.percentile(finite, 5), max(finite) + 0.05 * abs(max(finite)))
    ax.set_xlabel("trial (in the order the study created them)")
    ax.set_ylabel("best final return so far")
    ax.set_title("Acrobot-v1: TPE through tune vs sweep's random search")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


if __name__ == "__main__":
    main()
