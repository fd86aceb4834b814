"""Multi-agent PPO benchmark (issue #28): IPPO and MAPPO on JaxMARL's MPE simple_spread.

Runs configs/jaxmarl_mpe_spread_ippo.yaml and configs/jaxmarl_mpe_spread_mappo.yaml
(JaxMARL's published hyperparameters, cited in the yamls) at a CPU-sized step budget
(`--total-timesteps`, default 204,800 env steps per seed, i.e. 100 updates of 16 envs x
128 steps; JaxMARL trains 1e7), `--seeds` seeds in one vmapped program per algorithm,
and compares the final team return (sum over the 3 agents' rewards per episode, mean of
the last 10% of updates) with a uniformly random policy (512 episodes).

JaxMARL (Rutherford et al. 2024, arXiv:2311.10090) publishes its MPE results as learning
curves at 1e7 steps, not as a table; the "published" column is therefore left empty here
rather than read off a plot.

Timings are wall-clock on whatever machine runs it (`compile_s` the ahead-of-time compile,
`run_s` and `env_steps_per_s` = seeds x env steps / run_s the compiled call alone); on
the shared 2-core development machine other jobs run at the same time.

Usage:
  PYTHONPATH=. python benchmarks/marl.py                  # 3 seeds, ~10 min on 2 cores
  PYTHONPATH=. python benchmarks/marl.py --total-timesteps 51200 --seeds 2   # quick
Writes benchmarks/results/marl-<device>-<time>.{csv,md,png}.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd

import purejaxppo as pjp
from purejaxppo.envs import make_env

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = {
    "ippo": ROOT / "configs" / "jaxmarl_mpe_spread_ippo.yaml",
    "mappo": ROOT / "configs" / "jaxmarl_mpe_spread_mappo.yaml",
}


def random_return(env_id: str, episodes: int = 512) -> float:
    """Mean team return of uniformly random actions (episodes of the env's length)."""
    env, env_params = make_env(env_id)
    num_actions = env.action_space(env_params).n
    length = env.max_steps + 1  # JaxMARL's MPE ends an episode after max_steps + 1 steps

    def episode(key):
        reset_key, key = jax.random.split(key)
        _, state = env.reset(reset_key, env_params)

        def body(carry, key):
            state, total = carry
            action_key, step_key = jax.random.split(key)
            action = jax.random.randint(action_key, (env.num_agents,), 0, num_actions)
            _, state, reward, *_ = env.step(step_key, state, action, env_params)
            return (state, total + reward.sum()), None

        (_, total), _ = jax.lax.scan(body, (state, 0.0), jax.random.split(key, length))
        return total

    keys = jax.random.split(jax.random.key(123), episodes)
    return float(jax.jit(jax.vmap(episode))(keys).mean())


def run(algo: str, total_timesteps: int, seeds: int) -> dict:
    """Trains `seeds` seeds of `algo`; returns the row of the table and the curves."""
    config = pjp.PPOConfig.from_yaml(CONFIGS[algo], total_timesteps=total_timesteps)
    train = jax.jit(jax.vmap(pjp.make_train(config)))
    keys = jax.random.split(jax.random.key(0), seeds)
    start = time.perf_counter()
    compiled = train.lower(keys).compile()
    compile_seconds = time.perf_counter() - start
    start = time.perf_counter()
    out = jax.block_until_ready(compiled(keys))
    run_seconds = time.perf_counter() - start
    returns = np.asarray(out.metrics["episode_return"])  # [S, num_updates]
    tail = max(1, returns.shape[1] // 10)
    final = returns[:, -tail:].mean(axis=1)
    steps = np.asarray(out.metrics["env_steps"][0])
    return {
        "row": {
            "algo": algo,
            "seeds": seeds,
            "env_steps": int(steps[-1]),
            "final_return_mean": float(final.mean()),
            "final_return_min": float(final.min()),
            "final_return_max": float(final.max()),
            "compile_s": compile_seconds,
            "run_s": run_seconds,
            "env_steps_per_s": seeds * float(steps[-1]) / run_seconds,
        },
        "curve": (steps, returns),
    }


def markdown(table: pd.DataFrame) -> str:
    """A GitHub markdown table (floats with 1 decimal)."""
    cells = [[f"{v:.1f}" if isinstance(v, float) else str(v) for v in row] for row in table.values]
    lines = ["| " + " | ".join(map(str, table.columns)) + " |"]
    lines.append("|" + "---|" * len(table.columns))
    lines += ["| " + " | ".join(row) + " |" for row in cells]
    return "\n".join(lines)


def plot(curves: dict, random: float, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for algo, (steps, returns) in curves.items():
        mean = returns.mean(axis=0)
        ax.plot(steps, mean, label=algo)
        ax.fill_between(steps, returns.min(axis=0), returns.max(axis=0), alpha=0.2)
    ax.axhline(random, color="gray", linestyle="--", label="random")
    ax.set_xlabel("env steps")
    ax.set_ylabel("team return")
    ax.set_title("MPE simple_spread_v3 (seeds: mean, min-max)")
    ax.legend()
    fig.tight_layout()
    tmp = path.with_suffix(".tmp.png")
    fig.savefig(tmp, dpi=80)
    os.replace(tmp, path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--total-timesteps", type=int, default=204_800)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--algos", nargs="+", default=list(CONFIGS), choices=list(CONFIGS))
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)

    random = random_return("jaxmarl:MPE_simple_spread_v3")
    rows, curves = [], {}
    for algo in args.algos:
        result = run(algo, args.total_timesteps, args.seeds)
        rows.append({**result["row"], "random_return": random, "published": ""})
        curves[algo] = result["curve"]
    table = pd.DataFrame(rows)
    device = jax.devices()[0].platform
    tag = f"marl-{device}-{time.strftime('%Y%m%d-%H%M%S')}"
    csv = args.out / f"{tag}.csv"
    table.to_csv(csv, index=False)
    md = args.out / f"{tag}.md"
    md.write_text(markdown(table) + "\n")
    plot(curves, random, args.out / f"{tag}.png")
    print(table.to_string(index=False, float_format=lambda x: f"{x:.1f}"))
    print(f"wrote {csv}, {md}, {md.with_suffix('.png')}")


if __name__ == "__main__":
    jnp.zeros(())  # initialise the backend before timing
    main()
