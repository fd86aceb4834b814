"""False alarms of `purejaxppo check`: clean reruns with `--seed 0..N-1` must all pass.

For each config, `pjp.check(config, seeds=K, seed=s)` runs for s = 0 .. N-1 (K = 8, the
default, so each rerun is what a user runs). The code is clean, so every failed row is a
false alarm. The persistent compile cache is on: the reruns of a config compile once.

    python -m benchmarks.check_false_alarms                 # N = 20, the three configs
    python -m benchmarks.check_false_alarms --reruns 5 --configs configs/cartpole.yaml
    python -m benchmarks.check_false_alarms --reruns 1 --no-invariants --configs configs/*.yaml

`--no-invariants` runs the probe battery alone (`check(..., invariants=False)`), not the
short run on each config's own env. A config `check` refuses is a row with its error.

Writes `benchmarks/results/check-false-alarms-cpu-<time>.{csv,md}` (one row per rerun:
config, seed, passed, the failed rows, seconds) and prints the summary. Not a test.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from benchmarks.harness import machine, markdown_table, stamp, write_text

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
CONFIGS = ("configs/cartpole.yaml", "configs/probe7.yaml", "configs/pendulum_normalized.yaml")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reruns", type=int, default=20)
    parser.add_argument("--seeds", type=int, default=8)
    parser.add_argument("--configs", nargs="+", default=list(CONFIGS))
    parser.add_argument("--no-invariants", action="store_true")
    args = parser.parse_args()

    import pandas as pd

    import purejaxppo as pjp
    from purejaxppo.platform import enable_compile_cache

    enable_compile_cache()
    name = f"check-false-alarms-cpu-{stamp()}"
    results = HERE / "results"
    rows = []
    for path in args.configs:
        config = pjp.PPOConfig.from_yaml(ROOT / path)
        for seed in range(args.reruns):
            rows.append(_rerun(pjp, config, path, seed, args))
            print(rows[-1], flush=True)
        # the rows so far, rewritten after each config: a long run stopped keeps them
        write_text(results / f"{name}.csv", pd.DataFrame(rows).to_csv(index=False))
    frame = pd.DataFrame(rows)
    summary = [
        {
            "config": config,
            "reruns": len(group),
            "false_alarms": int((~group["passed"]).sum()),
            "rows_per_rerun": int(group["rows_run"].iloc[0]),
            "median_seconds": float(group["seconds"].median()),
            "failed": "; ".join(sorted({f for f in group["failed_rows"] if f})),
        }
        for config, group in frame.groupby("config", sort=False)
    ]
    cols = ["config", "reruns", "false_alarms", "rows_per_rerun", "median_seconds", "failed"]
    table = markdown_table(summary, cols)
    print("\n".join(table))
    what = "the probe battery" if args.no_invariants else "the probe battery and invariants"
    head = [f"# check false alarms ({what}, {args.seeds} seeds per probe)", "", *table, ""]
    record = machine(seeds=args.seeds)
    head += [f"- {key}: {value}" for key, value in record.items() if key != "versions"]
    write_text(results / f"{name}.md", "\n".join(head) + "\n")
    print(f"wrote {results / name}.csv, .md")


def _rerun(pjp, config, path: str, seed: int, args: argparse.Namespace) -> dict:
    """One rerun's row: passed, the rows run and failed, seconds; or the refusal."""
    invariants = not args.no_invariants
    try:
        report = pjp.check(
            config, seeds=args.seeds, seed=seed, invariants=invariants, progress=False
        )
    except (ValueError, ImportError) as err:
        row = {"passed": False, "rows_run": 0, "failed_rows": f"refused: {err}", "seconds": 0}
        return {"config": path, "seed": seed, **row}
    failed = [f"{r.row} ({r.measured:.3g})" for r in report.failed]
    return {
        "config": path,
        "seed": seed,
        "passed": report.passed,
        "rows_run": sum(r.passed is not None for r in report.rows),
        "failed_rows": "; ".join(failed),
        "seconds": round(report.seconds, 1),
    }


if __name__ == "__main__":
    main()
