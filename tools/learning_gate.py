"""The learning gate: does PPO still learn right? Run from `.ci/run`.

    python -m tools.learning_gate                  # every row (about 10 min, 2 CPU cores)
    python -m tools.learning_gate --only learn:cartpole check:pendulum
    python -m tools.learning_gate --calibrate 20   # the learning rows' 20-seed distributions
    python -m tools.learning_gate --jobs 2         # rows in 2 processes at once (CI)

Two kinds of row:
  * `check:NAME`: `pjp.check` (the probe battery and the invariants) on a shipped config a
    user starts from, K = `CHECK_SEEDS` seeds per probe (`CHECK_SEEDS_OF` for a slow
    config); red when any check row fails.
  * `learn:NAME`: a short training run of a shipped config, `LearningRow.seeds` seeds
    vmapped in one program; the row's value is the median over seeds of the final return
    (mean episode return over the last 5% of updates); red below its threshold. Each
    threshold sits below the 5th percentile of 20 clean seeds of the same run, measured
    on the 2-core CPU by `--calibrate` (`benchmarks/results/learning-gate-*.csv`), the
    numbers stated beside it: the median of the row's seeds crosses it only when half
    of them do.

Prints one line per row; exit 0 when every row is green, 1 with a last line naming the
first red row (`RED: ROW: ...`), 2 for an unknown `--only` name.
"""

from __future__ import annotations

import argparse
import multiprocessing
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parent.parent
CONFIGS = ROOT / "configs"
#: Seeds per probe of a check row.
CHECK_SEEDS = 4
#: Fewer seeds for a config whose battery is slow on the CPU: the transformer took 427 s
#: of the gate at 4 seeds (2c61823). At 2 seeds (206 s alone, 2026-12-06) every row sat
#: well inside its range (the nearest: policy clip 1.01 against [0.5, 3.5], the value clip
#: row's worst seed 1.98 against [0.5, 10]).
CHECK_SEEDS_OF = {"transformer-memory": 2}

#: check rows: name -> shipped config.
CHECK_ROWS = {
    "cartpole": "cartpole.yaml",
    "acrobot": "acrobot.yaml",
    "pendulum": "pendulum.yaml",
    "pendulum-normalized": "pendulum_normalized.yaml",
    "gru-memory": "memory_chain_gru.yaml",
    "transformer-memory": "probe7_transformer.yaml",
    "masked": "probe_masked_action.yaml",
    "multi-discrete": "probe_multi_discrete.yaml",
    "gymnasium": "gymnasium_cartpole.yaml",
    "jaxmarl": "jaxmarl_mpe_spread_ippo.yaml",
}


class LearningRow(NamedTuple):
    """A short learning run: `config` with `total_timesteps`, `seeds` seeds vmapped; green
    when the median final return is >= `threshold`."""

    config: str
    total_timesteps: int
    seeds: int
    threshold: float
    source: str  # where the threshold comes from


LEARNING_ROWS = {
    # 20 clean seeds: min 281, 5th percentile 441, median 492 (random play ~22); the median
    # of 4 seeds falls below 400 only when two of the four do
    "cartpole": LearningRow(
        "cartpole.yaml", 300_000, 4, 400.0, "learning-gate-cpu-20261202-043900.csv"
    ),
    # 20 clean seeds: min -187, 5th percentile -182, median -146 (random play -500)
    "acrobot": LearningRow(
        "acrobot.yaml", 300_000, 4, -200.0, "learning-gate-cpu-20261202-043900.csv"
    ),
    # 20 clean seeds: min 5.93, 5th percentile 6.12, median 6.71; the first 5% of updates
    # (the untrained policy) 0.41. 2 seeds (the gate's longest row: 171 s at 4 after the
    # suite, 2026-12-07): the threshold sits 1.9 below the weakest of the 20, so the median
    # of 2 clean seeds does not reach it
    "minatar-breakout": LearningRow(
        "breakout_minatar.yaml", 400_000, 2, 4.0, "learning-gate-cpu-20261202-060731.csv"
    ),
    # 20 clean seeds: min -274, 5th percentile -273, median -213 (random play about -1200)
    "pendulum": LearningRow(
        "pendulum_normalized.yaml", 500_000, 4, -350.0, "learning-gate-cpu-20261202-043900.csv"
    ),
}


#: The rows `--jobs` starts first: the longest, measured after the suite on the 2-core CPU
#: (199 s at 2 seeds and 218 s of a 7.8-minute gate at f6c2f30; the others 20-93 s).
LONGEST_ROWS = ("check:transformer-memory", "learn:minatar-breakout")


def row_names() -> list[str]:
    """Every row's name, `check:NAME` and `learn:NAME`."""
    return [f"check:{n}" for n in CHECK_ROWS] + [f"learn:{n}" for n in LEARNING_ROWS]


def run_check(name: str) -> tuple[bool, str]:
    """`(green, line)` of a check row."""
    import purejaxppo as pjp

    config = pjp.PPOConfig.from_yaml(CONFIGS / CHECK_ROWS[name])
    report = pjp.check(config, seeds=CHECK_SEEDS_OF.get(name, CHECK_SEEDS), progress=False)
    ran = sum(row.passed is not None for row in report.rows)
    if report.passed:
        return True, f"check:{name}: green ({ran} rows ran, {report.seconds:.0f} s)"
    first = report.failed[0]
    return False, (
        f"check:{name}: row {first.row!r} failed (measured {first.measured:.3g}, expected "
        f"{first.expected}): points to {first.points_to}"
    )


def learning_returns(name: str, seeds: int | None = None, first: bool = False):
    """Final returns `[S]` of a learning row: the mean episode return over the last 5% of
    updates of each of `seeds` (default the row's) seeds, vmapped in one program; with
    `first`, also the first 5% of updates' (the untrained policy's), as `(final, first)`."""
    import jax
    import numpy as np

    import purejaxppo as pjp

    row = LEARNING_ROWS[name]
    config = pjp.PPOConfig.from_yaml(CONFIGS / row.config, total_timesteps=row.total_timesteps)
    keys = jax.random.split(jax.random.key(config.seed), seeds or row.seeds)
    out = jax.jit(jax.vmap(pjp.make_train(config)))(keys)
    returns = np.asarray(out.metrics["episode_return"], np.float64)
    last = max(1, returns.shape[1] // 20)
    final = np.nanmean(returns[:, -last:], axis=1)
    return (final, np.nanmean(returns[:, :last], axis=1)) if first else final


def run_learning(name: str) -> tuple[bool, str]:
    """`(green, line)` of a learning row."""
    import numpy as np

    row = LEARNING_ROWS[name]
    start = time.perf_counter()
    finals = learning_returns(name)
    median = float(np.median(finals))
    seconds = time.perf_counter() - start
    values = ", ".join(f"{v:.1f}" for v in finals)
    line = (
        f"learn:{name}: median final return {median:.1f} over {row.seeds} seeds ({values}); "
        f"threshold {row.threshold:g}; {seconds:.0f} s"
    )
    return median >= row.threshold, line


def run_row(name: str) -> tuple[bool, str]:
    """`(green, line)` of any row, with the persistent compile cache on, as `purejaxppo`
    commands use it: `.ci/run` points it at the directory the test suite filled, so a
    program the suite compiled (e.g. the check battery on configs/cartpole.yaml) is loaded
    here. Runs in a worker process with `--jobs`."""
    from purejaxppo.platform import enable_compile_cache

    enable_compile_cache()
    kind, key = name.split(":", 1)
    return run_check(key) if kind == "check" else run_learning(key)


def run_rows(names: list[str], jobs: int) -> Iterator[tuple[bool, str]]:
    """Each row's `(green, line)`, in the order of `names`. With `jobs` > 1 the rows run in
    that many fresh processes (spawned: JAX does not survive a fork), `LONGEST_ROWS`
    first."""
    if jobs <= 1:
        yield from map(run_row, names)
        return
    with ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
        longest_first = sorted(names, key=lambda name: name not in LONGEST_ROWS)
        futures = {name: pool.submit(run_row, name) for name in longest_first}
        for name in names:
            yield futures[name].result()


def calibrate(seeds: int, names: list[str]) -> None:
    """Each learning row with `seeds` seeds: the distribution, written to
    `benchmarks/results/learning-gate-cpu-<time>.csv`."""
    import numpy as np
    import pandas as pd

    from tools.common import stamp, write_text

    records = []
    for name in names:
        start = time.perf_counter()
        finals, firsts = learning_returns(name, seeds, first=True)
        row = LEARNING_ROWS[name]
        records.append(
            {
                "row": f"learn:{name}",
                "config": row.config,
                "total_timesteps": row.total_timesteps,
                "seeds": seeds,
                "min": finals.min(),
                "p5": np.percentile(finals, 5),
                "median": np.median(finals),
                "max": finals.max(),
                "first_updates_median": np.median(firsts),
                "seconds": round(time.perf_counter() - start, 1),
                "values": " ".join(f"{v:.2f}" for v in finals),
            }
        )
        print(records[-1], flush=True)
    path = ROOT / "benchmarks" / "results" / f"learning-gate-cpu-{stamp()}.csv"
    write_text(path, pd.DataFrame(records).to_csv(index=False))
    print(f"wrote {path.relative_to(ROOT)}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="The learning gate (see the module doc).")
    parser.add_argument("--only", nargs="+", metavar="ROW", help="run only these rows")
    parser.add_argument("--calibrate", type=int, metavar="SEEDS", help="calibrate instead")
    parser.add_argument(
        "--jobs", type=int, default=1, metavar="N", help="run the rows in N processes at once"
    )
    args = parser.parse_args(argv)
    names = row_names()
    chosen = names if not args.only else args.only
    unknown = [n for n in chosen if n not in names]
    if unknown:
        parser.exit(2, f"learning_gate: unknown row {unknown[0]!r}; rows: {', '.join(names)}\n")
    if args.calibrate:
        learn = [n.split(":", 1)[1] for n in chosen if n.startswith("learn:")]
        calibrate(args.calibrate, learn)
        return 0
    if args.jobs < 1:
        parser.exit(2, f"learning_gate: --jobs must be >= 1, got {args.jobs}\n")
    start = time.perf_counter()
    red = []
    for green, line in run_rows(chosen, args.jobs):
        print(("green  " if green else "RED    ") + line, flush=True)
        if not green:
            red.append(line)
    minutes = (time.perf_counter() - start) / 60
    if red:
        print(f"RED: {red[0]}  ({len(red)} red of {len(chosen)} rows, {minutes:.1f} min)")
        return 1
    print(f"learning gate: {len(chosen)} rows green in {minutes:.1f} min")
    return 0


if __name__ == "__main__":
    sys.exit(main())
