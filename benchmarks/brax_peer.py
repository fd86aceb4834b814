"""Ours vs Brax's own PPO (`brax.training.agents.ppo.train`) on Brax envs.

For each env (inverted_pendulum, hopper, halfcheetah) both agents train with Brax's
published PPO recipe for it (configs/brax_<env>.yaml for ours, the mapping is in their
comments; `RECIPES` below for Brax's, from the Brax training colab), on the same env
(`backend="positional"`, 1000-step episodes), env steps and seeds, on the same machine.
Reported per (env, agent, seed): the final evaluation return (128 episodes, greedy /
deterministic actions, as `ppo.train(deterministic_eval=True)` evaluates) and the wall
time of the training call (ours: `jax.jit(make_train(config))`, its compilation counted
once per env on the first seed; Brax's: one `ppo.train` call, its own compilation
included each time; a persistent compilation cache is on for both).

    python -m benchmarks.brax_peer                               # all envs, 3 seeds
    python -m benchmarks.brax_peer --envs inverted_pendulum --steps 2000000
    python -m benchmarks.brax_peer --budget-s 480                # skip cells after 480 s

Writes `benchmarks/results/brax-peer-<device>-<time>.{csv,md,png}` (rewritten after each
cell, so a run stopped early keeps what it finished) and prints the table. Not a test.
Needs brax (0.14) and, for `ppo.train` under jax >= 0.11, the `device_put_replicated`
shim below (Brax 0.14 still calls it).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

#: Brax's PPO recipe per env (Brax training colab, github.com/google/brax
#: notebooks/training.ipynb `train_fn[...]`; hopper: the colab's generic PPO recipe of its
#: ant / inverted_pendulum entries, as the colab trains hopper with SAC).
_COMMON = dict(episode_length=1000, normalize_observations=True, action_repeat=1)
RECIPES = {
    "inverted_pendulum": dict(
        _COMMON,
        reward_scaling=10,
        unroll_length=5,
        num_minibatches=32,
        num_updates_per_batch=4,
        discounting=0.97,
        learning_rate=3e-4,
        entropy_cost=1e-2,
        num_envs=2048,
        batch_size=1024,
    ),  # fmt: skip
    "hopper": dict(
        _COMMON,
        reward_scaling=10,
        unroll_length=5,
        num_minibatches=32,
        num_updates_per_batch=4,
        discounting=0.97,
        learning_rate=3e-4,
        entropy_cost=1e-2,
        num_envs=2048,
        batch_size=1024,
    ),  # fmt: skip
    "halfcheetah": dict(
        _COMMON,
        reward_scaling=1,
        unroll_length=20,
        num_minibatches=32,
        num_updates_per_batch=8,
        discounting=0.95,
        learning_rate=3e-4,
        entropy_cost=1e-3,
        num_envs=2048,
        batch_size=512,
    ),  # fmt: skip
}
#: Default env steps per env (Brax's own budget for inverted_pendulum; a shorter one than
#: its 50M for halfcheetah).
STEPS = {"inverted_pendulum": 2_000_000, "hopper": 10_000_000, "halfcheetah": 10_000_000}
EVAL_EPISODES = 128


def jax_compat() -> None:
    """Brax 0.14's `ppo.train` calls `jax.device_put_replicated`, removed in jax 0.11:
    put it back as "stack one copy per device" (what it did), if it is missing."""
    import jax
    import jax.numpy as jnp

    try:
        jax.device_put_replicated  # noqa: B018
    except AttributeError:

        def device_put_replicated(x, devices):
            return jax.tree.map(lambda a: jnp.stack([jnp.asarray(a)] * len(devices)), x)

        jax.device_put_replicated = device_put_replicated


def run_brax(env_name: str, steps: int, seed: int) -> dict:
    """Brax's own PPO: one `ppo.train` call; final deterministic eval return."""
    from brax import envs
    from brax.training.agents.ppo import train as ppo

    jax_compat()
    env = envs.get_environment(env_name, backend="positional")
    curve: list[tuple[int, float]] = []
    t0 = time.perf_counter()
    _, _, metrics = ppo.train(
        environment=env,
        num_timesteps=steps,
        num_evals=5,
        num_eval_envs=EVAL_EPISODES,
        deterministic_eval=True,
        seed=seed,
        progress_fn=lambda s, m: curve.append((int(s), float(m["eval/episode_reward"]))),
        **RECIPES[env_name],
    )
    wall = time.perf_counter() - t0
    return {"final_eval_return": float(metrics["eval/episode_reward"]), "wall_s": wall}


def make_ours(env_name: str, steps: int):
    """Compiles our training program for configs/brax_<env>.yaml; returns (run, compile_s)."""
    import jax

    import purejaxppo  # noqa: F401  (before jax runs: XLA flags)
    from purejaxppo.acting.evaluation import evaluate
    from purejaxppo.config import PPOConfig
    from purejaxppo.train import make_train

    config = PPOConfig.from_yaml(ROOT / "configs" / f"brax_{env_name}.yaml", total_timesteps=steps)
    t0 = time.perf_counter()
    compiled = jax.jit(make_train(config)).lower(jax.random.key(0)).compile()
    compile_s = time.perf_counter() - t0

    def run(seed: int) -> dict:
        t0 = time.perf_counter()
        out = jax.block_until_ready(compiled(jax.random.key(seed)))
        wall = time.perf_counter() - t0
        result = evaluate(
            out, config=config, num_episodes=EVAL_EPISODES, greedy=True,
            key=jax.random.key(10_000 + seed),
        )  # fmt: skip
        returns = np.asarray(out.metrics["episode_return"], np.float64)
        return {
            "final_eval_return": float(np.mean(result.returns)),
            "final_train_return": float(np.nanmean(returns[-3:])),
            "wall_s": wall,
        }

    return run, compile_s


def summarize(cells: list[dict]):
    """Per (env, agent): seeds, mean +- std, min of the final eval return, mean wall."""
    import pandas as pd

    frame = pd.DataFrame(cells)
    rows = []
    for (env, agent), group in frame.groupby(["env", "agent"], sort=False):
        finals = group["final_eval_return"].to_numpy()
        rows.append(
            {
                "env": f"brax:{env}",
                "agent": agent,
                "env_steps": int(group["env_steps"].iloc[0]),
                "seeds": len(finals),
                "eval_mean": round(float(np.mean(finals)), 1),
                "eval_std": round(float(np.std(finals)), 1),
                "eval_min": round(float(np.min(finals)), 1),
                "finals": " ".join(f"{f:.1f}" for f in finals),
                "wall_s_mean": round(float(group["wall_s"].mean()), 1),
                "env_steps_per_s": round(
                    float(group["env_steps"].iloc[0] / group["wall_s"].mean())
                ),
            }
        )
    return pd.DataFrame(rows)


def write_results(cells: list[dict], base: Path, note: str) -> None:
    import matplotlib

    # Here, not at the top: tests/test_brax_recipe.py loads this file by its path (for
    # RECIPES), so `harness` is not importable then.
    from benchmarks.harness import atomic_write

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import pandas as pd

    base.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(
        base.with_name(base.name + "-cells.csv"),
        lambda p: pd.DataFrame(cells).to_csv(p, index=False),
    )
    table = summarize(cells)
    atomic_write(base.with_suffix(".csv"), lambda p: table.to_csv(p, index=False))
    cols = list(table.columns)
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(str(v) for v in r) + " |" for r in table.itertuples(index=False)]
    text = f"# Ours vs Brax's own PPO ({base.name})\n\n{note}\n\n" + "\n".join(lines) + "\n"
    atomic_write(base.with_suffix(".md"), lambda p: Path(p).write_text(text))
    envs = list(dict.fromkeys(c["env"] for c in cells))
    fig, axes = plt.subplots(1, len(envs), figsize=(4 * len(envs), 3.4), squeeze=False)
    for ax, env in zip(axes[0], envs, strict=True):
        for i, agent in enumerate(("ours", "brax")):
            ys = [c["final_eval_return"] for c in cells if c["env"] == env and c["agent"] == agent]
            ax.scatter([i] * len(ys), ys, label=agent)
        ax.set_xticks([0, 1], ["ours", "brax ppo"])
        ax.set_title(f"brax:{env}")
        ax.set_ylabel("final eval return (greedy, 128 ep)")
    fig.tight_layout()
    atomic_write(base.with_suffix(".png"), lambda p: fig.savefig(p, dpi=100, format="png"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--envs", nargs="+", default=list(RECIPES), choices=list(RECIPES))
    parser.add_argument("--agents", nargs="+", default=["ours", "brax"], choices=["ours", "brax"])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=None, help="env steps (default per env)")
    parser.add_argument("--budget-s", type=float, default=None, help="start no cell after this")
    parser.add_argument("--device", default=None, help="name in the results files")
    parser.add_argument("--note", default="", help="a line for the .md (machine, load, ...)")
    parser.add_argument("--out", type=Path, default=HERE / "results")
    parser.add_argument(
        "--from-cells",
        type=Path,
        nargs="+",
        default=None,
        help="rebuild the table and plot from earlier runs' -cells.csv files (no training)",
    )
    args = parser.parse_args()
    if args.from_cells:
        import pandas as pd

        cells = pd.concat([pd.read_csv(p) for p in args.from_cells]).to_dict("records")
        base = args.out / f"brax-peer-{args.device or 'cpu'}-{time.strftime('%Y%m%d-%H%M%S')}"
        write_results(cells, base, args.note)
        print(summarize(cells).to_string(index=False), "\nwrote", base.with_suffix(".csv"))
        return
    if args.seeds < 1 or (args.steps is not None and args.steps < 1):
        parser.error("--seeds and --steps must be >= 1")
    import jax

    jax.config.update("jax_compilation_cache_dir", "/tmp/jax_cache_brax_peer")
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
    device = args.device or jax.default_backend()
    base = args.out / f"brax-peer-{device}-{time.strftime('%Y%m%d-%H%M%S')}"
    start, cells = time.perf_counter(), []
    for env in args.envs:
        steps = args.steps or STEPS[env]
        for agent in args.agents:
            if args.budget_s is not None and time.perf_counter() - start > args.budget_s:
                print(f"budget spent: skipping {env} / {agent}", flush=True)
                continue
            run, compile_s = make_ours(env, steps) if agent == "ours" else (None, 0.0)
            for seed in range(args.seeds):
                try:
                    cell = run(seed) if run else run_brax(env, steps, seed)
                except Exception as err:  # a peer that breaks: say so, keep the other cells
                    print(f"{env} / {agent} / seed {seed} failed: {err!r}", flush=True)
                    break
                if seed == 0:
                    cell["wall_s"] += compile_s
                cells.append({"env": env, "agent": agent, "seed": seed, "env_steps": steps, **cell})
                print(cells[-1], flush=True)
                write_results(cells, base, args.note)
    print(summarize(cells).to_string(index=False))
    print("wrote", base.with_suffix(".csv"))


if __name__ == "__main__":
    main()
