"""Where the rollout computes its values: in the scan at every step, or in one critic pass
after it (`purejaxppo.loops.*_BATCHED_VALUES`), timed in ONE process, interleaved.

Both programs (the standard CartPole workload of `bench_cartpole.py`, shortened to
`--total-timesteps` per agent, `--agents` seeds under one `jax.vmap`, the platform's
default loop layout) are compiled first; then `--reps` rounds each run both, in
alternating order. On a 2-core CPU the run time of one program differs by up to 45%
between processes (benchmarks/results/cartpole-cpu-20261127-184021.json), more than the
effect measured here; timing both in one process takes that spread out of the ratio.

    python -m benchmarks.experiments.values_ab                          # 1 and 8 agents
    python -m benchmarks.experiments.values_ab --agents 1 8 --reps 10 --json out.json

Prints, per agents and placement, compile s (the first program compiled in the process,
"batched", also pays the process's warm-up: compare compile times with bench_cartpole.py)
and the min / median run s, and the median of the per-round ratios (in-scan time /
batched time: above 1, batched is faster).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

from benchmarks.harness import atomic_write, device_name, machine

PLACEMENTS = ("batched", "loop")


def measure(agents: int, total_timesteps: int, reps: int) -> list[dict]:
    """Compiles both placements, runs them `reps` times each, interleaved."""
    import jax

    import purejaxppo as pjp
    from purejaxppo import loops

    keys = jax.random.split(jax.random.key(0), agents)
    programs, compile_s = {}, {}
    for placement in PLACEMENTS:
        batched = placement == "batched"
        loops.COMPACT_BATCHED_VALUES = loops.UNROLLED_BATCHED_VALUES = batched
        config = pjp.PPOConfig(total_timesteps=total_timesteps)
        start = time.perf_counter()
        programs[placement] = jax.jit(jax.vmap(pjp.make_train(config))).lower(keys).compile()
        compile_s[placement] = time.perf_counter() - start
    times: dict[str, list[float]] = {p: [] for p in PLACEMENTS}
    for rep in range(reps + 1):  # round 0 warms up and is dropped
        order = PLACEMENTS if rep % 2 == 0 else PLACEMENTS[::-1]
        for placement in order:
            start = time.perf_counter()
            out = jax.block_until_ready(programs[placement](keys))
            if rep:
                times[placement].append(time.perf_counter() - start)
        returns = out.metrics["episode_return"]
    ratios = [loop / batched for loop, batched in zip(times["loop"], times["batched"], strict=True)]
    layout = loops.loop_plan().layout
    return [
        {
            "agents": agents,
            "values": placement,
            "layout": layout,
            "total_timesteps": total_timesteps,
            "compile_s": compile_s[placement],
            "run_s_min": min(times[placement]),
            "run_s_median": statistics.median(times[placement]),
            "run_s_all": times[placement],
            "ratio_loop_over_batched_median": statistics.median(ratios),
            "ratio_loop_over_batched_min": min(ratios),
            "ratio_loop_over_batched_max": max(ratios),
            "ratio_loop_over_batched_all": ratios,
            "final_return_last_program": float(returns[..., -1].mean()),
        }
        for placement in PLACEMENTS
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--agents", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--total-timesteps", type=int, default=100_000)
    parser.add_argument("--reps", type=int, default=10)
    parser.add_argument("--json", type=Path, default=None, help="results file to write")
    args = parser.parse_args()
    if args.reps < 1 or args.total_timesteps < 512:
        parser.error(f"--reps {args.reps} / --total-timesteps {args.total_timesteps}: too small")
    if args.json is not None and args.json.exists():
        parser.error(f"--json {args.json} exists; not overwriting it")
    rows = [
        row for agents in args.agents for row in measure(agents, args.total_timesteps, args.reps)
    ]
    print(
        f"{'agents':>6} {'values':>8} {'compile s':>9} {'min s':>7} {'median s':>8}  loop/batched"
    )
    for r in rows:
        ratio = f"{r['ratio_loop_over_batched_median']:.3f}" if r["values"] == "batched" else ""
        print(
            f"{r['agents']:>6} {r['values']:>8} {r['compile_s']:>9.2f} {r['run_s_min']:>7.3f} "
            f"{r['run_s_median']:>8.3f}  {ratio}"
        )
    if args.json is not None:
        record = {**machine(), **device_name(), "what": __doc__.split("\n")[0], "rows": rows}
        atomic_write(args.json, lambda p: Path(p).write_text(json.dumps(record, indent=1)))
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
