"""`host_vectorization: async` vs `sync` for a slow host env.

A gymnasium CartPole-v1 whose every step costs `--step-ms` more: either waiting
("sleep", as an external simulator or a game process would) or computing ("busy", a
spin loop: Python work that holds a core). N envs step together through
`HostEnv.make_vec(N, mode)`, i.e. gymnasium's SyncVectorEnv (one process) or
AsyncVectorEnv (a subprocess per env). Per kind and mode: env steps/s of the vector
env alone (random actions, `--steps` vector steps) and of PPO training through
`make_train` (the compiled update, its rollout stepping the vector env through one host
call per step; `--updates` updates after a compiling call of as many). Prints a table and writes `benchmarks/results/host-async-*.json`.

    python -m benchmarks.host_async --num-envs 8 --step-ms 1 --steps 200 --updates 2

The machine's cores may be shared with other work: the JSON records `os.getloadavg()`.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path

import gymnasium
import jax
import numpy as np
from gymnasium.envs.classic_control.cartpole import CartPoleEnv

import purejaxppo as pjp
from purejaxppo.envs import make_env

STEP_COST = {"ms": 1.0, "kind": "sleep"}  # set by main before any env is made (fork copies it)


class SlowCartPole(CartPoleEnv):
    """CartPole-v1 whose step costs `STEP_COST["ms"]` more (sleep or busy wait)."""

    def step(self, action):
        seconds = STEP_COST["ms"] / 1e3
        if STEP_COST["kind"] == "sleep":
            time.sleep(seconds)
        else:
            end = time.perf_counter() + seconds
            while time.perf_counter() < end:
                pass
        return super().step(action)


def vec_steps_per_second(env, num_envs: int, mode: str, steps: int) -> float:
    vec = env.make_vec(num_envs, mode)
    vec.reset(0)
    rng = np.random.default_rng(0)
    vec.step(rng.integers(0, 2, num_envs))  # warm-up (subprocesses started)
    start = time.perf_counter()
    for _ in range(steps):
        vec.step(rng.integers(0, 2, num_envs))
    elapsed = time.perf_counter() - start
    vec.close()
    return steps * num_envs / elapsed


def train_steps_per_second(env_id: str, num_envs: int, mode: str, updates: int) -> float:
    config = pjp.PPOConfig(
        env_name=env_id,
        host_vectorization=mode,
        num_envs=num_envs,
        num_steps=64,
        total_timesteps=num_envs * 64 * (updates + 1),
    )
    fns = pjp.make_train_fns(config)
    runner = jax.jit(fns.init)(jax.random.key(0))  # starts the envs
    hparams = pjp.Hyperparams.from_config(config)
    run = jax.jit(fns.run, static_argnums=2)
    runner = jax.block_until_ready(run(runner, hparams, updates))[0]  # compiles
    start = time.perf_counter()
    jax.block_until_ready(run(runner, hparams, updates))
    return updates * num_envs * 64 / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--num-envs", type=int, default=8)
    parser.add_argument("--step-ms", type=float, default=1.0)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--updates", type=int, default=2)
    parser.add_argument("--kinds", default="sleep,busy")
    args = parser.parse_args()
    gymnasium.register("SlowCartPole-v0", entry_point=SlowCartPole, max_episode_steps=500)
    env_id = "gymnasium:SlowCartPole-v0"
    rows = []
    for kind in args.kinds.split(","):
        STEP_COST.update(ms=args.step_ms, kind=kind)
        env, _ = make_env(env_id)
        row = {"kind": kind}
        for mode in ("sync", "async"):
            row[f"env_{mode}"] = vec_steps_per_second(env, args.num_envs, mode, args.steps)
            row[f"train_{mode}"] = train_steps_per_second(env_id, args.num_envs, mode, args.updates)
        row["env_ratio"] = row["env_async"] / row["env_sync"]
        row["train_ratio"] = row["train_async"] / row["train_sync"]
        rows.append(row)
        print(
            f"{kind:>5} {args.step_ms} ms/step, N={args.num_envs}: env steps/s sync "
            f"{row['env_sync']:.0f} async {row['env_async']:.0f} (x{row['env_ratio']:.2f}); "
            f"training steps/s sync {row['train_sync']:.0f} async {row['train_async']:.0f} "
            f"(x{row['train_ratio']:.2f})",
            flush=True,
        )
    out = (
        Path(__file__).parent / "results" / f"host-async-cpu-{time.strftime('%Y%m%d-%H%M%S')}.json"
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    record = {
        "args": vars(args),
        "rows": rows,
        "cpus": os.cpu_count(),
        "loadavg_at_end": os.getloadavg(),
        "platform": platform.platform(),
        "jax": jax.__version__,
        "gymnasium": gymnasium.__version__,
        "note": "2-core machine shared with other jobs: timings are noisy",
    }
    out.write_text(json.dumps(record, indent=2))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
