"""A worked MuJoCo study: the tuning guide's Hopper command, run, then its best setting and
the base config rerun with fresh seeds.

1. `purejaxppo tune` exactly as docs/guides/tuning.md gives it: `configs/mujoco.yaml` on
   `envpool:Hopper-v4`, `--total-timesteps` env steps per seed (default 200,000),
   `--trials` trials (default 16) of `--seeds-per-trial` seeds (default 2), TPE after
   `--n-startup-trials` random ones (default 5), the median pruner, searching the learning
   rate (log-uniform 1e-4 to 1e-3) and the entropy coefficient (0 to 0.01); trial 0 is the
   base config's own values (`tune` enqueues them).
2. `purejaxppo train --num-seeds N --seed S` of the study's `best.yaml` and of the base
   config (`configs/mujoco.yaml` on Hopper at the same budget), with seeds the study never
   used (`--rerun-seeds`, default 100 101 102), each scored by its `final_return` (the mean
   return of its newest 100 training episodes, summary.csv).

    python -m benchmarks.tune_mujoco_study       # about 25 min on 2 CPU cores
    python -m benchmarks.tune_mujoco_study --trials 3 --total-timesteps 20480 \
        --json /tmp/study.json --figure /tmp/study.png   # smoke test, about 2 min

Writes `benchmarks/results/tune-mujoco-study-cpu-<date>.json` (or `--json`): every trial's
value, state and parameters, the best trial, the reruns and the wall seconds of each step;
and the guide's figure `docs/figures/tune-mujoco-study.png` (or `--figure`): each trial's
value with the best so far, and the reruns' returns of the tuned and the base setting.
Prints a table. Not a test: nothing is asserted.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.harness import (
    RESULTS,
    ROOT,
    atomic_write,
    machine,
    markdown_table,
    time_call,
    write_text,
)

ENV = "envpool:Hopper-v4"
SEARCH = ["learning_rate=log_uniform:1e-4:1e-3", "ent_coef=uniform:0:0.01"]
PURE = str(Path(sys.executable).with_name("purejaxppo"))


def tune_command(args: argparse.Namespace, out: Path) -> list[str]:
    """The guide's `purejaxppo tune` command (`--trials`, the budget and the seeds per
    trial from `args`), writing to `out`."""
    command = [PURE, "tune", "--config", "configs/mujoco.yaml"]  # run from ROOT
    command += ["--env-name", ENV, "--total-timesteps", str(args.total_timesteps)]
    for spec in SEARCH:
        command += ["--search", spec]
    command += ["--trials", str(args.trials), "--seeds-per-trial", str(args.seeds_per_trial)]
    return command + ["--n-startup-trials", str(args.n_startup_trials), "--out", str(out)]


def rerun_command(args: argparse.Namespace, config: Path, run_dir: Path) -> list[str]:
    """`purejaxppo train` of `config` on Hopper at the study's budget, `--rerun-seeds`
    (consecutive) as one program."""
    first, count = args.rerun_seeds[0], len(args.rerun_seeds)
    return [
        *[PURE, "train", "--config", str(config), "--env-name", ENV],
        *["--total-timesteps", str(args.total_timesteps), "--num-seeds", str(count)],
        *["--seed", str(first), "--run-dir", str(run_dir), "--no-progress"],
    ]


def timed(command: list[str]) -> float:
    """Runs `command` from the repository root; its wall seconds (`harness.time_call`).
    Raises `subprocess.CalledProcessError` (with its stderr's end printed) on failure."""
    seconds, proc = time_call(
        lambda: subprocess.run(command, capture_output=True, text=True, cwd=ROOT)
    )
    if proc.returncode != 0:
        print(proc.stderr[-3000:], file=sys.stderr)
        proc.check_returncode()
    return seconds


def read_trials(trials_csv: Path) -> list[dict]:
    """number, state, value (NaN where none) and the searched parameters of each trial."""
    with open(trials_csv, newline="") as f:
        rows = list(csv.DictReader(f))
    column = next(c for c in rows[0] if c.startswith("value"))
    return [
        {
            "number": int(r["number"]),
            "state": r["state"],
            "value": float(r[column]) if r[column] else math.nan,
            **{k[len("params_") :]: float(v) for k, v in r.items() if k.startswith("params_")},
        }
        for r in rows
    ]


def rerun_returns(run_dir: Path) -> list[float]:
    """The per-seed `final_return` of a `--num-seeds` run's summary.csv."""
    with open(run_dir / "summary.csv", newline="") as f:
        rows = [r for r in csv.DictReader(f) if r["seed"].lstrip("-").isdigit()]
    return [float(r["final_return"]) for r in rows]


def setting_rows(trials: list[dict], best: dict, reruns: dict) -> list[dict]:
    """The results file's `rows`: the base config (trial 0) and the best trial, each with
    its searched values, its value in the study and its reruns' returns (space-joined)."""
    return [
        {
            "setting": name,
            "trial": trial["number"],
            "learning_rate": trial["learning_rate"],
            "ent_coef": trial["ent_coef"],
            "value": trial["value"],
            "rerun_returns": " ".join(f"{x:.2f}" for x in reruns[name]["returns"]),
            "rerun_mean": reruns[name]["mean"],
        }
        for name, trial in (("base", trials[0]), ("tuned", best))
    ]


def plot(record: dict, path: Path) -> None:
    """Each trial's value with the best so far; the reruns' returns per setting."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4), width_ratios=[2, 1])
    trials = record["trials"]
    numbers = [t["number"] for t in trials]
    values = np.array([t["value"] for t in trials], dtype=float)
    pruned = [t["state"] == "PRUNED" for t in trials]
    left.scatter(numbers, values, c=["tab:gray" if p else "tab:blue" for p in pruned], s=18)
    left.plot(
        numbers,
        np.fmax.accumulate(np.nan_to_num(values, nan=-np.inf)),
        "k-",
        lw=1,
        drawstyle="steps-post",
    )
    left.set(xlabel="trial (0: the base config)", ylabel="trial value (training return)")
    left.set_title("Hopper-v4 study (grey: pruned, at its last report)")
    for i, name in enumerate(("tuned", "base")):
        returns = record["reruns"][name]["returns"]
        right.scatter([i] * len(returns), returns, s=24)
        right.hlines(np.mean(returns), i - 0.2, i + 0.2, colors="k")
    right.set_xticks([0, 1], ["tuned (best.yaml)", "base config"])
    right.set(ylabel="final return, fresh seeds", xlim=(-0.5, 1.5))
    right.set_title(f"rerun, {record['total_timesteps']:,} steps")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=16)
    parser.add_argument("--total-timesteps", type=int, default=200_000, help="per seed")
    parser.add_argument("--seeds-per-trial", type=int, default=2)
    parser.add_argument("--n-startup-trials", type=int, default=5)
    parser.add_argument("--rerun-seeds", type=int, nargs="+", default=[100, 101, 102])
    parser.add_argument("--json", type=Path, help="results file (default: results/...)")
    parser.add_argument("--figure", type=Path, default=ROOT / "docs/figures/tune-mujoco-study.png")
    args = parser.parse_args()
    seeds = args.rerun_seeds
    if seeds != list(range(seeds[0], seeds[0] + len(seeds))):
        parser.error(f"--rerun-seeds must be consecutive (one --num-seeds run), got {seeds}")
    path = args.json or RESULTS / f"tune-mujoco-study-cpu-{time.strftime('%Y%m%d')}.json"
    with tempfile.TemporaryDirectory(prefix="tune-mujoco-study-") as scratch:
        out = Path(scratch) / "tune"
        tune_s = timed(tune_command(args, out))
        trials = read_trials(out / "trials.csv")
        best = max((t for t in trials if t["state"] == "COMPLETE"), key=lambda t: t["value"])
        reruns = {}
        for name, config in (("tuned", out / "best.yaml"), ("base", Path("configs/mujoco.yaml"))):
            run_dir = Path(scratch) / f"rerun-{name}"
            seconds = timed(rerun_command(args, config, run_dir))
            returns = rerun_returns(run_dir)
            reruns[name] = {"returns": returns, "mean": sum(returns) / len(returns)}
            reruns[name]["wall_s"] = seconds
    record = {
        "env": ENV,
        "total_timesteps": args.total_timesteps,
        "seeds_per_trial": args.seeds_per_trial,
        "n_startup_trials": args.n_startup_trials,
        "search": SEARCH,
        "rerun_seeds": seeds,
        "tune_wall_s": tune_s,
        "trials": trials,
        "best": best,
        "reruns": reruns,
        "rows": setting_rows(trials, best, reruns),
        "states": {s: sum(t["state"] == s for t in trials) for s in {t["state"] for t in trials}},
        "machine": machine(("purejaxppo", "jax", "jaxlib", "optuna", "envpool")),
    }
    cols = ["setting", "trial", "learning_rate", "ent_coef", "value", "rerun_mean"]
    print("\n".join(markdown_table(record["rows"], cols, float_format=".4g")))
    print(f"study: {tune_s:.0f} s, {record['states']}, best trial {best['number']}: {best}")
    write_text(path, json.dumps(record, indent=1) + "\n")
    atomic_write(args.figure, lambda p: plot(record, p))
    print(f"wrote {path} and {args.figure}")


if __name__ == "__main__":
    main()
