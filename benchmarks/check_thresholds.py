"""Where `purejaxppo check`'s passing ranges come from: each row's distribution over
>= 20 clean seeds, on the configs a user starts from.

For each config, `pjp.check(config, seeds=S)` runs once with S seeds per probe (all of a
program's seeds vmapped), and each row's per-seed values are kept. Reported per row: the
passing range, min / 5th percentile / median / 95th percentile / max over the seeds, and
the margin of the worst seed to the range's edge. A row's verdict is the median of K
seeds (`--seeds`, default 8), so its false-alarm risk is that of a median of K draws
crossing the edge, far smaller than a single seed's.

    python -m benchmarks.check_thresholds                        # S = 20, the three configs
    python -m benchmarks.check_thresholds --seeds 24 --configs configs/probe7_lstm.yaml
    python -m benchmarks.check_thresholds --configs configs/cartpole.yaml \
        --set norm_adv=false --rows "policy clip"   # fields set on every config, some rows
    python -m benchmarks.check_thresholds --battery-updates 1 \
        --rows "GAE lambda" "GAE lambda at a time limit"   # rows read at the first update

`--battery-updates N` trains the shared battery program for N updates instead of
`BATTERY_UPDATES` (100). Only for rows read at the first update (the two GAE lambda
rows): their reading comes from the first rollout, before any gradient step, so it is
the same at any N, and a sweep costs compiles and one rollout instead of a training run
(`configs/craftax_classic.yaml`, 512 x 3: 794 s at 100 updates).

Writes `benchmarks/results/check-thresholds-cpu-<time>.{csv,json}` and prints the table.
A config that `check` refuses is printed and listed under the json's "refused". Not a
test: nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import numpy as np

from benchmarks.harness import machine, markdown_table, stamp, write_text

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
CONFIGS = (
    "configs/cartpole.yaml",
    "configs/probe7.yaml",
    "configs/pendulum_normalized.yaml",
    "configs/probe7_lstm.yaml",
    "configs/probe_masked_action.yaml",
)


def margin(values: np.ndarray, low: float, high: float) -> float:
    """The distance of the worst seed to the nearer edge of `[low, high]` (negative: a
    seed outside the range)."""
    edges = [v for v in (values.min() - low, high - values.max()) if math.isfinite(v)]
    return min(edges)


def rows_of(report, config, path: str) -> list[dict]:
    """One table row per check row that ran."""
    from purejaxppo.drivers.check.invariants import INVARIANTS
    from purejaxppo.drivers.check.probes import probes_for

    ranges = {spec.row: (spec.low, spec.high) for spec in (*probes_for(config), *INVARIANTS)}
    out = []
    for row in report.rows:
        if row.passed is None:
            continue
        values = np.asarray(row.values, np.float64)
        low, high = ranges[row.row]
        out.append(
            {
                "config": path,
                "row": row.row,
                "range": row.expected,
                "seeds": len(values),
                "min": float(values.min()),
                "p5": float(np.percentile(values, 5)),
                "median": float(np.median(values)),
                "p95": float(np.percentile(values, 95)),
                "max": float(values.max()),
                "margin": margin(values, low, high),
                "seeds_outside": int(np.sum((values < low) | (values > high))),
                "seconds": round(report.seconds, 1),
            }
        )
    return out


def _set(text: str) -> tuple[str, object]:
    """`FIELD=VALUE` of `--set`: a config field and its YAML value."""
    field, sep, value = text.partition("=")
    if not sep or not field:
        raise argparse.ArgumentTypeError(f"--set: expected FIELD=VALUE, got {text!r}")
    import yaml

    return field, yaml.safe_load(value)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--configs", nargs="+", default=list(CONFIGS))
    parser.add_argument("--set", type=_set, action="append", default=[], metavar="FIELD=VALUE")
    parser.add_argument("--rows", nargs="+", default=None, metavar="ROW")
    parser.add_argument("--battery-updates", type=int, default=None, metavar="N")
    args = parser.parse_args()

    import purejaxppo as pjp
    from purejaxppo.drivers.check import battery

    if args.battery_updates is not None:
        if args.battery_updates < 1:
            parser.error(f"--battery-updates must be >= 1, got {args.battery_updates}")
        battery.BATTERY_UPDATES = args.battery_updates

    rows, changes, refused = [], dict(args.set), {}
    suffix = "".join(f" {field}={value}" for field, value in args.set)
    for path in args.configs:
        config = pjp.PPOConfig.from_yaml(ROOT / path).replace(**changes)
        try:
            report = pjp.check(config, seeds=args.seeds, rows=args.rows, progress=False)
        except ValueError as error:  # a config check refuses is recorded, not fatal
            refused[path + suffix] = str(error)
            print(f"{path}: refused: {error}", flush=True)
            continue
        print(report, flush=True)
        rows.extend(rows_of(report, config, path + suffix))
    cols = ["config", "row", "range", "seeds", "min", "p5", "median", "p95", "max", "margin"]
    cols += ["seeds_outside"]
    table = markdown_table(rows, cols)
    print("\n".join(table))
    name = f"check-thresholds-cpu-{stamp()}"
    import pandas as pd

    results = HERE / "results"
    write_text(results / f"{name}.csv", pd.DataFrame(rows).to_csv(index=False))
    write_text(
        results / f"{name}.json",
        json.dumps(
            {
                "machine": machine(),
                "seeds": args.seeds,
                "set": changes,
                "battery_updates": battery.BATTERY_UPDATES,
                "rows": rows,
                "refused": refused,
            },
            indent=2,
        ),
    )
    print(f"wrote {results / name}.csv, .json")


if __name__ == "__main__":
    main()
