"""Atari on the CPU: where one update of `configs/atari.yaml` spends its time,
and what the CPU targets (Pong-v5 >= 0 within 3M env steps; Breakout well above
random at the same budget) cost on this machine.

Per `--env` (an EnvPool Atari id), with the config's 8 envs x 128 steps and 4 epochs x 4
minibatches of 256 frames through the Nature DQN torso (`encoder: nature`):

  env only    EnvPool stepped from Python with random actions (8 envs), no network
  rollout     the jitted rollout: 128 steps of policy forward + sampling + env step
  update      one whole update (rollout + GAE + the 16 minibatch Adam steps)
  learn       update - rollout: the epochs of minibatch steps (and GAE, ~0)
  compile     the first call of the update program

then the projected wall time of `--budget` env steps (`update` x budget / 1024) and the
share of it the env takes. Steps are agent steps (each is 4 emulator frames: EnvPool's
`frame_skip`), as CleanRL counts them.

    python -m benchmarks.atari_cpu                        # Pong-v5 and Breakout-v5
    python -m benchmarks.atari_cpu --env Pong-v5 --updates 3 --note "load 3"

Writes `benchmarks/results/atari-cpu-<time>.{json,md}` and prints the table. Not a test;
timings on a shared machine vary (the .md records `os.getloadavg()`).
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


def env_only(task_id: str, options: dict, num_envs: int, steps: int) -> float:
    """Env steps/s of EnvPool stepped from Python with uniform random actions."""
    import envpool

    pool = envpool.make(
        task_id, env_type="gymnasium", num_envs=num_envs, batch_size=num_envs, **options
    )
    pool.reset()
    rng = np.random.default_rng(0)
    n = pool.action_space.n
    start = time.perf_counter()
    for _ in range(steps):
        pool.step(rng.integers(0, n, num_envs).astype(np.int32))
    return steps * num_envs / (time.perf_counter() - start)


def block(tree):
    import jax

    return jax.block_until_ready(tree)


def profile(config_path: Path, task_id: str, updates: int) -> dict:
    """The timings of one env (see the module docstring); seconds and env steps/s."""
    import jax

    import purejaxppo as pjp
    from purejaxppo.rollout import make_rollout
    from purejaxppo.train_setup import prepare

    config = pjp.PPOConfig.from_yaml(config_path, env_name=f"envpool:{task_id}")
    per_update = config.num_envs * config.num_steps
    row: dict = {
        "env": task_id,
        "num_envs": config.num_envs,
        "num_steps": config.num_steps,
        "minibatch": per_update // config.num_minibatches,
        "update_epochs": config.update_epochs,
        "num_minibatches": config.num_minibatches,
    }
    row["env_only_sps"] = env_only(task_id, dict(config.env_kwargs), config.num_envs, 1000)

    env, env_params = pjp.make_env(config.env_name, config.env_kwargs)
    fns = pjp.make_train_fns(config, env, env_params)  # one env: its pools are shared
    setup = prepare(config, env, env_params)
    hparams = pjp.Hyperparams.from_config(config)
    rollout = jax.jit(make_rollout(setup.rows, setup.networks, setup.num_steps))
    update = jax.jit(fns.update)
    runner = block(jax.jit(fns.init)(jax.random.key(0)))

    start = time.perf_counter()
    runner, _ = block(update(runner, hparams))
    row["compile_update_s"] = time.perf_counter() - start
    block(rollout(runner.train_state.params, runner.env, jax.random.key(1)))  # compile

    times = []
    for i in range(updates):
        start = time.perf_counter()
        block(rollout(runner.train_state.params, runner.env, jax.random.key(2 + i)))
        times.append(time.perf_counter() - start)
    row["rollout_s"] = float(np.median(times))
    times = []
    for _ in range(updates):
        start = time.perf_counter()
        runner, metrics = block(update(runner, hparams))
        times.append(time.perf_counter() - start)
    row["update_s"] = float(np.median(times))
    row["learn_s"] = row["update_s"] - row["rollout_s"]
    row["rollout_sps"] = per_update / row["rollout_s"]
    row["train_sps"] = per_update / row["update_s"]
    row["env_share_of_update"] = per_update / row["env_only_sps"] / row["update_s"]
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", type=Path, default=ROOT / "configs" / "atari.yaml")
    parser.add_argument("--env", nargs="+", default=["Pong-v5", "Breakout-v5"])
    parser.add_argument("--updates", type=int, default=3, help="timed calls (median)")
    parser.add_argument("--budget", type=float, default=3e6, help="env steps to project")
    parser.add_argument("--note", default="", help="a line for the .md (machine, load, ...)")
    parser.add_argument("--out", type=Path, default=HERE / "results")
    args = parser.parse_args()
    if args.updates < 1 or args.budget <= 0:
        parser.error("--updates must be >= 1 and --budget > 0")
    if not args.config.is_file():
        parser.error(f"--config {args.config}: no such file")
    load_before = os.getloadavg()
    rows = []
    for task_id in args.env:
        row = profile(args.config, task_id, args.updates)
        row["budget"] = args.budget
        row["projected_h"] = args.budget / (row["num_envs"] * row["num_steps"])
        row["projected_h"] *= row["update_s"] / 3600
        rows.append(row)
        print({k: round(v, 3) if isinstance(v, float) else v for k, v in row.items()})
    stamp = time.strftime("%Y%m%d-%H%M%S")
    args.out.mkdir(parents=True, exist_ok=True)
    cols = [
        ("env", "env"),
        ("env_only_sps", "env only (steps/s)"),
        ("rollout_sps", "rollout (steps/s)"),
        ("train_sps", "training (steps/s)"),
        ("rollout_s", "rollout s/update"),
        ("learn_s", "learn s/update"),
        ("compile_update_s", "compile s"),
        ("env_share_of_update", "env share"),
        ("projected_h", f"hours for {args.budget:.0e} steps"),
    ]
    lines = [
        f"# Atari on this CPU ({os.cpu_count()} cores), {args.config.name}",
        "",
        f"Load average before: {load_before[0]:.1f}. {args.note}".strip(),
        "",
        "| " + " | ".join(title for _, title in cols) + " |",
        "|" + "---|" * len(cols),
    ]
    for row in rows:
        cells = [f"{row[k]:.3g}" if isinstance(row[k], float) else str(row[k]) for k, _ in cols]
        lines.append("| " + " | ".join(cells) + " |")
    md = "\n".join(lines) + "\n"
    out_md = args.out / f"atari-cpu-{stamp}.md"
    atomic_write(
        args.out / f"atari-cpu-{stamp}.json",
        lambda p: Path(p).write_text(json.dumps(rows, indent=1)),
    )
    atomic_write(out_md, lambda p: Path(p).write_text(md))
    print(md, "wrote", out_md)


if __name__ == "__main__":
    main()
