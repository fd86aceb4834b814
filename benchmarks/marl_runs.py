"""Multi-agent CLI runs: summarise `purejaxppo train` run directories of one
config the way `benchmarks/marl.py` scores its own runs.

"final" = per run, the NaN-aware mean of the last 10% of updates of `--metric` (SMAX:
`info/won`, the win rate of the episodes that ended in the update); then mean / min / max
over the runs. A `--num-seeds` directory counts as its `seed_<s>/` runs. Useful when
seeds were trained as separate CLI runs (e.g. one run, then two more with `--num-seeds 2
--seed 1`) rather than by `marl.py`'s one program.

    python -m benchmarks.marl_runs RUN_DIR [RUN_DIR ...] --metric info/won --note "..."

Writes `benchmarks/results/marl-runs-<time>.{csv,md,png}`: one row per run plus the
summary, and the metric's learning curves against env steps. Not a test.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

from benchmarks.harness import atomic_write, markdown_table, portable

HERE = Path(__file__).resolve().parent


def expand(run_dirs: list[Path]) -> list[Path]:
    """Each directory, or its `seed_<s>/` runs for a `--num-seeds` directory."""
    runs = []
    for run_dir in run_dirs:
        seeds = sorted(run_dir.glob("seed_*/metrics.csv"))
        runs += [p.parent for p in seeds] if seeds else [run_dir]
    missing = [str(r) for r in runs if not (r / "metrics.csv").is_file()]
    if missing:
        raise SystemExit(f"marl_runs: no metrics.csv in {missing}")
    return runs


def final(values: np.ndarray) -> float:
    """NaN-aware mean of the last 10% of updates (at least one)."""
    return float(np.nanmean(values[-max(1, len(values) // 10) :]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", type=Path, nargs="+", help="purejaxppo train run dirs")
    parser.add_argument("--metric", default="info/won")
    parser.add_argument("--note", default="", help="a line for the .md (machine, load, ...)")
    parser.add_argument("--out", type=Path, default=HERE / "results")
    args = parser.parse_args()
    rows, curves = [], {}
    for run in expand(args.runs):
        table = pd.read_csv(run / "metrics.csv")
        if args.metric not in table:
            raise SystemExit(f"marl_runs: {run / 'metrics.csv'} has no column {args.metric!r}")
        config = yaml.safe_load((run / "config.yaml").read_text())
        rows.append(
            {
                "run": portable(run),
                "env": config["env_name"],
                "seed": config["seed"],
                "env_steps": int(table["env_steps"].iloc[-1]),
                "updates": len(table),
                "final": final(table[args.metric].to_numpy(dtype=float)),
                "final_episode_return": final(table["episode_return"].to_numpy(dtype=float)),
            }
        )
        curves[portable(run)] = table[["env_steps", args.metric]]
    frame = pd.DataFrame(rows)
    scores = frame["final"]
    summary = (
        f"{args.metric}, final over {len(frame)} runs: mean {scores.mean():.4f} "
        f"(min {scores.min():.4f}, max {scores.max():.4f})"
    )
    cols = list(frame.columns)
    lines = [
        f"# Multi-agent CLI runs: {args.metric}, final = mean of the last 10% of updates",
        "",
        args.note,
        "",
        *markdown_table(rows, cols, ".4f"),
        "",
        summary,
        "",
    ]
    args.out.mkdir(parents=True, exist_ok=True)
    base = args.out / f"marl-runs-{time.strftime('%Y%m%d-%H%M%S')}"
    atomic_write(base.with_suffix(".csv"), lambda p: frame.to_csv(p, index=False))
    atomic_write(base.with_suffix(".md"), lambda p: Path(p).write_text("\n".join(lines)))

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for name, curve in curves.items():
        ax.plot(curve["env_steps"], curve[args.metric], lw=0.8, label=Path(name).name)
    ax.set_xlabel("env steps")
    ax.set_ylabel(args.metric)
    ax.set_title(f"{rows[0]['env']}: {summary.split(',')[0]}")
    ax.legend(fontsize=7)
    fig.tight_layout()
    atomic_write(base.with_suffix(".png"), lambda p: fig.savefig(p, dpi=120, format="png"))
    print("\n".join(lines), "wrote", base.with_suffix(".md"))


if __name__ == "__main__":
    main()
