"""Multi-agent PPO benchmark: IPPO / MAPPO on MPE simple_spread, MAPPO on SMAX 3m.

Tasks (`--tasks`), each its config's JaxMARL hyperparameters (cited in the yamls) at a
CPU-sized step budget, `--seeds` seeds in one vmapped program per task:
  mpe-ippo / mpe-mappo: configs/jaxmarl_mpe_spread_{ippo,mappo}.yaml, `--mpe-timesteps`
    env steps per seed (default 204,800 = 100 updates of 16 envs x 128 steps). Score: the
    team return, the sum over the 3 agents' rewards per episode (simple_spread's rewards
    differ per agent by a collision penalty, so they are summed).
  smax3m-mappo: configs/jaxmarl_smax_3m_mappo.yaml against JaxMARL's heuristic enemy,
    `--smax-timesteps` (default 163,840) with `--smax-envs` envs (default 32, not the
    config's 128, so the small budget still makes 40 updates). Score: the win rate
    (metric info/won), and the team return (the allies' one shared reward, counted once).
  smax3m-mappo-gru: the same with configs/jaxmarl_smax_3m_mappo_gru.yaml, JaxMARL's own
    network (a 128-unit GRU per tower), about 4x slower per step on CPU.
"final" = mean of the last 10% of updates, per seed (mean, min, max over seeds). Random:
uniformly random (available) actions, 512 episodes. Team returns are
`JaxMARLEnv.team_reward` summed over an episode, as in training's `episode_return`.

Published (`PUBLISHED`, the "published" column): JaxMARL (Rutherford et al. 2024,
arXiv:2311.10090) trains 1e7 env steps (TOTAL_TIMESTEPS in
baselines/IPPO|MAPPO/config/*mpe*.yaml, *smax*.yaml) and publishes no number for these
tasks that can be quoted: MPE and SMAX results are learning curves (figures), not tables;
Papers with Code lists no results for the paper; SMAX `3m` is not one of its benchmarked
scenarios. The column says so rather than reading a value off a plot; `budget_frac` = our
env steps / 1e7 says how far our budget is from theirs. Where curves exist, the return
definitions match ours (see `PUBLISHED`), so a number read off them compares directly.

Timings are wall-clock on whatever machine runs it (`compile_s` the ahead-of-time compile,
`run_s` the compiled call, `env_steps_per_s` = seeds x env steps / run_s); on the shared
2-core development machine other jobs run at the same time.

Usage:
  python -m benchmarks.marl                  # 3 seeds, ~15 min on 2 cores
  python -m benchmarks.marl --tasks mpe-ippo --mpe-timesteps 51200 --seeds 2
Writes benchmarks/results/marl-<device>-<time>.{csv,md,png}.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd

import purejaxppo as pjp
from purejaxppo.envs import make_env

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = ROOT / "configs"
#: task -> (config file, score metric)
TASKS = {
    "mpe-ippo": (CONFIGS / "jaxmarl_mpe_spread_ippo.yaml", "episode_return"),
    "mpe-mappo": (CONFIGS / "jaxmarl_mpe_spread_mappo.yaml", "episode_return"),
    "smax3m-mappo": (CONFIGS / "jaxmarl_smax_3m_mappo.yaml", "info/won"),
    "smax3m-mappo-gru": (CONFIGS / "jaxmarl_smax_3m_mappo_gru.yaml", "info/won"),
}
PUBLISHED_STEPS = 1e7  # JaxMARL's TOTAL_TIMESTEPS for MPE and SMAX (IPPO and MAPPO)

#: task -> the "published" cell: no quotable number exists (searched 2026-11-25), and why.
#: Sources:
#: - JaxMARL paper, https://arxiv.org/abs/2311.10090 (v5 html: arxiv.org/html/2311.10090v5):
#:   results as curves; its docs summarise them in words only: "JaxMARL is 14x faster than
#:   traditional approaches for MPE, while also producing results consistent with
#:   existing implementations" (github.com/FLAIROx/JaxMARL docs/index.md).
#: - https://paperswithcode.com/paper/jaxmarl-multi-agent-rl-environments-in-jax:
#:   "Results from the Paper: Submit results from this paper ..." (none recorded).
#: - SMAX scenarios JaxMARL lists (docs/Environments/smax.md): 2s3z, 3s5z, 5m_vs_6m,
#:   10m_vs_11m, 27m_vs_30m, 3s5z_vs_3s6z, 3s_vs_5z, 6h_vs_8z, smacv2_{5,10,20}_units; no
#:   3m. Mava (github.com/instadeepai/Mava docs/benchmarks.md) compares against "the final
#:   win rates reported by Rutherford et al., 2023" on eight of them ("up to 10 million
#:   timesteps with 64 vectorised environments"), as plots.
#: - Return definitions (FLAIROx/JaxMARL baselines/IPPO/ippo_ff_mpe.py,
#:   baselines/MAPPO/mappo_rnn_mpe.py; jaxmarl/wrappers/baselines.py): MPE runs log
#:   `returned_episode_returns` of `MPELogWrapper`, which multiplies every agent's reward by
#:   num_agents ("As per on-policy codebase"), averaged over agents: the sum over agents,
#:   our team return. SMAX runs log `SMAXLogWrapper`'s per-agent returns (no scaling)
#:   averaged over agents: the shared team reward once, our SMAX team return; their win
#:   rate is `returned_won_episode`, our info/won.
#: In place of a quotable number: JaxMARL's own baseline scripts run on the same 2-core
#: CPU at 1e7 env steps (benchmarks/peers/jaxmarl_baselines.py,
#: results/marl-jaxmarl-peer-cpu-20261125-full.md), scored the same way as here.
PUBLISHED = {
    "mpe-ippo": "none (curves only); JaxMARL ippo_ff_mpe.py here: -61.0 (3 seeds, 1e7)",
    "mpe-mappo": "none (curves only); JaxMARL mappo_rnn_mpe.py here: -27.8 (1 seed, 1e7)",
    "smax3m-mappo": "none (3m not in its results); JaxMARL mappo_rnn_smax.py here: 0.941 "
    "(3 seeds, 1e7)",
    "smax3m-mappo-gru": "none (3m not in its results); JaxMARL mappo_rnn_smax.py here: 0.941 "
    "(3 seeds, 1e7)",
}


def random_policy(config: pjp.PPOConfig, episodes: int = 512) -> dict[str, float]:
    """Team return (and win rate where the env has one) of uniformly random available
    actions: `episodes` episodes of at most the env's max_steps + 1 steps."""
    env, env_params = make_env(config.env_name, config.env_kwargs)
    num_actions = env.action_space(env_params).n
    length = env.max_steps + 1  # JaxMARL's MPE ends an episode after max_steps + 1 steps

    def episode(key):
        reset_key, key = jax.random.split(key)
        obs, state = env.reset(reset_key, env_params)

        def body(carry, key):
            obs, state, total, won, running = carry
            action_key, step_key = jax.random.split(key)
            mask = obs["action_mask"] if env.action_masks else jnp.ones((1, num_actions), bool)
            logits = jnp.where(mask, 0.0, -jnp.inf) * jnp.ones((env.num_agents, 1))
            action = jax.random.categorical(action_key, logits)
            obs, state, reward, terminated, truncated, info = env.step(
                step_key, state, action, env_params
            )
            total = total + running * env.team_reward(reward)
            if env.outcome_keys:
                won = won + running * info["won"][0]
            running = running * (1.0 - jnp.logical_or(terminated, truncated)[0])
            return (obs, state, total, won, running), None

        carry = (obs, state, 0.0, 0.0, 1.0)
        (*_, total, won, _), _ = jax.lax.scan(body, carry, jax.random.split(key, length))
        return total, won

    keys = jax.random.split(jax.random.key(123), episodes)
    total, won = jax.jit(jax.vmap(episode))(keys)
    result = {"episode_return": float(total.mean())}
    if env.outcome_keys:
        result["info/won"] = float(won.mean())
    return result


def run(
    task: str,
    total_timesteps: int,
    seeds: int,
    num_envs: int | None = None,
    with_random: bool = True,
) -> dict:
    """Trains `seeds` seeds of a task; returns the row of the table and the curves
    (`with_random=False`: the random-policy columns are NaN, for timing-only runs)."""
    path, score = TASKS[task]
    changes = {"total_timesteps": total_timesteps}
    if num_envs is not None:
        changes["num_envs"] = num_envs
    config = pjp.PPOConfig.from_yaml(path, **changes)
    train = jax.jit(jax.vmap(pjp.make_train(config)))
    keys = jax.random.split(jax.random.key(0), seeds)
    start = time.perf_counter()
    compiled = train.lower(keys).compile()
    compile_seconds = time.perf_counter() - start
    start = time.perf_counter()
    out = jax.block_until_ready(compiled(keys))
    run_seconds = time.perf_counter() - start
    steps = np.asarray(out.metrics["env_steps"][0])
    tail = max(1, len(steps) // 10)

    def final(name):  # [S] mean of the last 10% of updates per seed (NaN-aware)
        return np.nanmean(np.asarray(out.metrics[name])[:, -tail:], axis=1)

    random = random_policy(config) if with_random else {score: np.nan, "episode_return": np.nan}
    scores = final(score)
    returns = final("episode_return")
    row = {
        "task": task,
        "score": score,
        "seeds": seeds,
        "num_envs": config.num_envs,
        "env_steps": int(steps[-1]),
        "budget_frac": float(steps[-1]) / PUBLISHED_STEPS,
        "final_mean": float(scores.mean()),
        "final_min": float(scores.min()),
        "final_max": float(scores.max()),
        "random": random[score],
        "team_return": float(returns.mean()),
        "random_return": random["episode_return"],
        "published": PUBLISHED[task],
        "compile_s": compile_seconds,
        "run_s": run_seconds,
        "env_steps_per_s": seeds * float(steps[-1]) / run_seconds,
    }
    return {"row": row, "curve": (steps, np.asarray(out.metrics[score]), random[score])}


def markdown(table: pd.DataFrame) -> str:
    """A GitHub markdown table (floats with 3 significant decimals)."""
    cells = [[f"{v:.3g}" if isinstance(v, float) else str(v) for v in row] for row in table.values]
    lines = ["| " + " | ".join(map(str, table.columns)) + " |"]
    lines.append("|" + "---|" * len(table.columns))
    lines += ["| " + " | ".join(row) + " |" for row in cells]
    return "\n".join(lines)


def plot(curves: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    groups = {"MPE simple_spread_v3: team return": [], "SMAX 3m: win rate": []}
    for task, curve in curves.items():
        groups["SMAX 3m: win rate" if task.startswith("smax") else next(iter(groups))].append(
            (task, *curve)
        )
    groups = {title: rows for title, rows in groups.items() if rows}
    fig, axes = plt.subplots(1, len(groups), figsize=(6 * len(groups), 4), squeeze=False)
    for ax, (title, rows) in zip(axes[0], groups.items(), strict=True):
        for task, steps, values, _ in rows:
            ax.plot(steps, np.nanmean(values, axis=0), label=task)
            ax.fill_between(steps, np.nanmin(values, axis=0), np.nanmax(values, axis=0), alpha=0.2)
        ax.axhline(rows[0][3], color="gray", linestyle="--", label="random")
        ax.set_xlabel("env steps")
        ax.set_title(f"{title} (seeds: mean, min-max)")
        ax.legend()
    fig.tight_layout()
    from benchmarks.harness import atomic_write  # here: marl_truncation.py imports this module

    atomic_write(path, lambda p: fig.savefig(p, dpi=80, format="png"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mpe-timesteps", type=int, default=204_800)
    parser.add_argument("--smax-timesteps", type=int, default=163_840)
    parser.add_argument("--smax-envs", type=int, default=32)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--tasks", nargs="+", default=list(TASKS), choices=list(TASKS))
    parser.add_argument(
        "--no-random", action="store_true", help="skip the random policy (timing runs)"
    )
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)

    rows, curves = [], {}
    for task in args.tasks:
        if task.startswith("smax"):
            result = run(task, args.smax_timesteps, args.seeds, args.smax_envs, not args.no_random)
        else:
            result = run(task, args.mpe_timesteps, args.seeds, with_random=not args.no_random)
        rows.append(result["row"])
        curves[task] = result["curve"]
        print(pd.DataFrame([result["row"]]).to_string(index=False), flush=True)
    table = pd.DataFrame(rows)
    device = jax.devices()[0].platform
    tag = f"marl-{device}-{time.strftime('%Y%m%d-%H%M%S')}"
    from benchmarks.harness import atomic_write, write_text

    csv = args.out / f"{tag}.csv"
    atomic_write(csv, lambda p: table.to_csv(p, index=False))
    md = args.out / f"{tag}.md"
    write_text(md, markdown(table) + "\n")
    plot(curves, args.out / f"{tag}.png")
    print(table.to_string(index=False, float_format=lambda x: f"{x:.3g}"))
    print(f"wrote {csv}, {md}, {md.with_suffix('.png')}")


if __name__ == "__main__":
    jnp.zeros(())  # initialise the backend before timing
    main()
