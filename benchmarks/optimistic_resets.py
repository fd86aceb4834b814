"""Optimistic resets (`reset_ratio`): env steps/s of the rollout and of whole
updates with gymnax's auto-reset (one reset per env per step) against N / R resets per
step, measured in the same process, for envs whose reset is expensive (Craftax: world
generation) and cheap (CartPole, MinAtar Breakout).

    python -m benchmarks.optimistic_resets
    python -m benchmarks.optimistic_resets --cases craftax --ratios 4 16 --reps 5

Per case and `reset_ratio` (None = auto-reset): the median over `--reps` calls of the
jitted rollout (num_steps steps of the config's num_envs envs, policy included) and of
one whole update. Writes `benchmarks/results/optimistic-resets-cpu-<time>.{json,md}`.
Not a test; timings on a shared machine vary (the .md records the load average).
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np

from benchmarks.harness import atomic_write

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

#: name -> (config file, overrides)
CASES = {
    "craftax": ("craftax_classic.yaml", {}),
    "cartpole": ("cartpole.yaml", {"num_envs": 64, "num_steps": 64}),
    "minatar": ("breakout_minatar.yaml", {"num_envs": 64, "num_steps": 64}),
}


def measure(case: str, ratio: int | None, reps: int) -> dict:
    import jax

    import purejaxppo as pjp
    from purejaxppo.rollout import make_rollout
    from purejaxppo.train_setup import prepare

    path, overrides = CASES[case]
    config = pjp.PPOConfig.from_yaml(ROOT / "configs" / path, **overrides)
    config = config.replace(
        reset_ratio=ratio, total_timesteps=2 * config.num_envs * config.num_steps
    )
    env, env_params = pjp.make_env(config.env_name, config.env_kwargs)
    fns = pjp.make_train_fns(config, env, env_params)
    setup = prepare(config, env, env_params)
    # config.reset_ratio = ratio: the setup's rows step with optimistic resets
    rollout = jax.jit(make_rollout(setup.rows, setup.networks, config.num_steps))
    update = jax.jit(fns.update)
    hparams = pjp.Hyperparams.from_config(config)
    runner = jax.block_until_ready(jax.jit(fns.init)(jax.random.key(0)))
    runner, _ = jax.block_until_ready(update(runner, hparams))  # compile
    params = runner.train_state.params
    jax.block_until_ready(rollout(params, runner.env, jax.random.key(1)))  # compile
    steps = config.num_envs * config.num_steps

    def median_time(fn) -> float:
        times = []
        for i in range(reps):
            start = time.perf_counter()
            jax.block_until_ready(fn(i))
            times.append(time.perf_counter() - start)
        return float(np.median(times))

    rollout_s = median_time(lambda i: rollout(params, runner.env, jax.random.key(2 + i)))
    update_s = median_time(lambda i: update(runner, hparams))
    return {
        "case": case,
        "env": config.env_name,
        "num_envs": config.num_envs,
        "num_steps": config.num_steps,
        "reset_ratio": ratio,
        "rollout_sps": steps / rollout_s,
        "update_sps": steps / update_s,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", nargs="+", default=list(CASES), choices=list(CASES))
    parser.add_argument("--ratios", type=int, nargs="+", default=[16])
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--note", default="")
    parser.add_argument("--out", type=Path, default=HERE / "results")
    args = parser.parse_args()
    if args.reps < 1 or min(args.ratios) < 1:
        parser.error("--reps and --ratios must be >= 1")
    load = os.getloadavg()[0]
    rows = []
    for case in args.cases:
        base = measure(case, None, args.reps)
        rows.append(base)
        for ratio in args.ratios:
            row = measure(case, ratio, args.reps)
            row["rollout_speedup"] = row["rollout_sps"] / base["rollout_sps"]
            row["update_speedup"] = row["update_sps"] / base["update_sps"]
            rows.append(row)
        for row in rows[-1 - len(args.ratios) :]:
            print({k: round(v, 2) if isinstance(v, float) else v for k, v in row.items()})
    stamp = time.strftime("%Y%m%d-%H%M%S")
    args.out.mkdir(parents=True, exist_ok=True)
    lines = [
        f"# Optimistic resets on this CPU ({os.cpu_count()} cores)",
        "",
        f"Load average before: {load:.1f}. {args.note}".strip(),
        "",
        "| env | N x T | reset_ratio | rollout steps/s | x | update steps/s | x |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['env']} | {r['num_envs']} x {r['num_steps']} | {r['reset_ratio']} | "
            f"{r['rollout_sps']:.0f} | {r.get('rollout_speedup', 1.0):.2f} | "
            f"{r['update_sps']:.0f} | {r.get('update_speedup', 1.0):.2f} |"
        )
    md = "\n".join(lines) + "\n"
    out = args.out / f"optimistic-resets-cpu-{stamp}"
    atomic_write(out.with_suffix(".json"), lambda p: Path(p).write_text(json.dumps(rows, indent=1)))
    atomic_write(out.with_suffix(".md"), lambda p: Path(p).write_text(md))
    print(md, "wrote", out.with_suffix(".md"))


if __name__ == "__main__":
    main()
