"""Loop layouts of the update (`purejaxppo.loops`) timed side by side, in one process.

Each cell is one (agents, plan) pair of the standard CartPole workload (`bench_cartpole.py`)
at `--total-timesteps` env steps per agent: `jit(vmap(make_train(config)))` compiled ahead
of time (`compile_s`), then run (`run_s`, best of up to 2), with the kernel launches and
loop round trips of one update read from the compiled HLO (`hlo_ops.py`). A plan is
"compact", "unrolled" (the library's layouts) or "unrolled" with overrides, e.g.
"r=8,e=2" (rollout / flat-epoch unroll), "gae=scan", "epochs=nested".

    python -m benchmarks.experiments.gpu_layouts --agents 1 1024 --plans compact unrolled r=8
        --total-timesteps 102400 --budget-s 200 --out /tmp/layouts

Compile times after the first cell of a process profit from its in-memory caches (XLA's
autotuning): compare compile times across processes (`bench_cartpole.py`), run times here.
Self-limiting: no cell starts after `--budget-s`. Writes `<out>/layouts-<platform>-<time>.json`.
Run from the repository root with `benchmarks` on PYTHONPATH (for `hlo_ops`).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from benchmarks.harness import portable


def parse_plan(spec: str):
    """A `LoopPlan` from "compact", "unrolled" or "k=v,..." overrides of "unrolled"."""
    from purejaxppo.loops import loop_plan

    if spec in ("compact", "unrolled"):
        return loop_plan(spec)
    plan = loop_plan("unrolled")
    names = {"r": "rollout_unroll", "e": "epoch_unroll", "gae": "gae", "epochs": "epochs"}
    for item in spec.split(","):
        key, _, value = item.partition("=")
        if key not in names:
            raise ValueError(f"plan {spec!r}: unknown key {key!r} (known: {sorted(names)})")
        field = names[key]
        plan = plan._replace(**{field: int(value) if field.endswith("unroll") else value})
    return plan._replace(layout=spec)


def use_plan(plan) -> None:
    """Makes every module that builds loops use `plan` (they import `loop_plan` by name)."""
    import purejaxppo.learning
    import purejaxppo.train
    import purejaxppo.update

    for module in (purejaxppo.learning, purejaxppo.train, purejaxppo.update):
        module.loop_plan = lambda layout="auto", backend=None: plan


def run_cell(pjp, agents: int, spec: str, total: int, ops: bool) -> dict:
    import jax
    import numpy as np

    plan = parse_plan(spec)
    use_plan(plan)
    config = pjp.PPOConfig(total_timesteps=total)
    keys = jax.random.split(jax.random.key(0), agents)
    start = time.perf_counter()
    compiled = jax.jit(jax.vmap(pjp.make_train(config))).lower(keys).compile()
    compile_s = time.perf_counter() - start
    times = []
    for _ in range(2):
        start = time.perf_counter()
        out = jax.block_until_ready(compiled(keys))
        times.append(time.perf_counter() - start)
        if times[-1] > 10:
            break
    returns = np.asarray(out.metrics["episode_return"])
    row = {
        "agents": agents,
        "plan": spec,
        "loop_plan": plan._asdict(),
        "num_updates": config.num_updates,
        "compile_s": compile_s,
        "run_s": min(times),
        "ms_per_update": 1e3 * min(times) / config.num_updates,
        "env_steps_per_s": agents * config.num_updates * config.batch_size / min(times),
        "final_return": float(np.nanmean(returns[:, -10:])),
    }
    if ops:
        from benchmarks import hlo_ops

        row.update(hlo_ops.update_summary(compiled.as_text(), config.num_updates))
    return row


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", type=int, nargs="+", default=[1])
    parser.add_argument("--plans", nargs="+", default=["compact", "unrolled"])
    parser.add_argument("--total-timesteps", type=int, default=102_400)
    parser.add_argument("--budget-s", type=float, default=300.0)
    parser.add_argument("--ops", action="store_true", help="count kernels from the HLO")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results"))
    args = parser.parse_args(argv)

    import jax

    import purejaxppo as pjp

    for spec in args.plans:
        parse_plan(spec)  # bad specs fail before any compile
    start, rows = time.perf_counter(), []
    for agents in args.agents:
        for spec in args.plans:
            if time.perf_counter() - start > args.budget_s:
                rows.append({"agents": agents, "plan": spec, "skipped": "budget"})
                continue
            try:
                row = run_cell(pjp, agents, spec, args.total_timesteps, args.ops)
            except Exception as error:  # one failing cell must not lose the others
                row = {"agents": agents, "plan": spec, "error": repr(error)[:500]}
            rows.append(row)
            print(json.dumps({k: v for k, v in row.items() if k != "loops"}), flush=True)
    device = jax.devices()[0]
    record = {
        "what": "loop layouts of the update, CartPole standard workload (gpu_layouts.py)",
        "device": getattr(device, "device_kind", device.platform),
        "platform": device.platform,
        "jax": jax.__version__,
        "total_timesteps": args.total_timesteps,
        "command": portable(" ".join(sys.argv)),
        "rows": rows,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / f"layouts-{device.platform}-{time.strftime('%Y%m%d-%H%M%S')}.json"
    path.write_text(json.dumps(record, indent=1))
    print(f"wrote {path}")
    return record


if __name__ == "__main__":
    main()
