"""MetaBBO benchmark: PPO learns to configure an evosax optimiser on MetaBox's
training BBOB functions, and is compared on the held-out test functions, with the same
budget, instances and optimiser seeds, against

- `default`: the optimiser's default parameters (DE: F 0.8, CR 0.9; PSO: w 0.75,
  c1 1.5, c2 2.0; DE-operator: best/1/bin);
- `random`: uniformly random actions every generation;
- `dither` (DE only): F drawn uniformly in [0.5, 1.0] every generation with CR 0.9, the
  dither scheme evosax's DE implements (`differential_weight_min/max`; Das et al. 2005),
  a well-known adaptive scheme (a fresh policy starts at `default`: the action is a
  correction around the defaults).

Two learned controllers per training seed: `learned` samples its actions (temperature 1),
which is MetaBox's test protocol for LDE (`LDE_Agent.rollout_episode` samples F and CR
from the policy's Gaussian, github.com/GMC-DRL/MetaBox src/agent/lde_agent.py) and the
controller the final line reports; `greedy` plays the policy mean. Why they differ: see
docs/benchmarks.md (MetaBBO). `--seeds` training seeds are trained in one vmapped program.

Metrics. Per test function: mean over instances x repeats (x training seeds for `learned`)
of log10 of the final best cost `f - f_opt` (floored at 1e-8, COCO's target). Aggregate
score (a documented normalised gap): the mean over all runs of
(log10 c_0 - log10 c_T) / (log10 c_0 + 8), the fraction of the log-distance from the
initial best cost c_0 to the 1e-8 target that the run closed (1 = target reached); for
`learned` and `greedy` also per training seed, and its std over the seeds (ddof 1, the
"seed spread" that the margin over `default` is compared with). Beside it, MetaBox's own AEI
cost component (`aei_cost`, MetaBox's `src/logger.py`; the FEs factor is 1 with equal
budgets, the wall-clock factor is not measured). `learned` beats `default` on a function
when its mean log10 final cost over training seeds x instances x repeats is lower; the
script prints K/N per training seed (for `learned` and `greedy`) and ends with
`metabbo_learned_beats_default=K/N` (seeds pooled).

Usage:
  python -m benchmarks.metabbo --quick      # < 10 min on 2 CPU cores
  python -m benchmarks.metabbo --quick --total-timesteps 96000 [--env metabbo:PSO]
      # the results in docs/guides/env-suites.md (benchmarks/claims.yaml), ~4 min each
  python -m benchmarks.metabbo              # configs/metabbo_de.yaml, 3 seeds
Writes benchmarks/results/metabbo[_quick]_<env>.{csv,md,png}.
"""

from __future__ import annotations

import argparse
import dataclasses
import pickle
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd

import purejaxppo  # noqa: F401  (XLA flags before jax compiles)
from benchmarks.harness import atomic_write, write_text
from purejaxppo.config import PPOConfig
from purejaxppo.envs import make_env
from purejaxppo.envs.suites.metabbo.rollout import (
    constant_controller,
    make_run_instances,
    random_controller,
)
from purejaxppo.networks import make_networks
from purejaxppo.policy import make_act
from purejaxppo.train import make_train

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = {
    "metabbo:DE": "metabbo_de.yaml",
    "metabbo:DE-operator": "metabbo_de_operator.yaml",
    "metabbo:PSO": "metabbo_pso.yaml",
}
#: --quick: MetaBox's "easy" partition without Gallagher's functions (f21, f22), whose
#: evosax code takes minutes to compile on 2 CPU cores; a shorter training run.
QUICK = {
    "env_kwargs": {
        "train_functions": [4, 6, 7, 8, 9, 10, 11, 12, 13, 14, 18, 19, 20, 23, 24],
        "test_functions": [1, 2, 3, 5, 15, 16, 17],
    },
    "total_timesteps": 48000,
    "num_envs": 16,
}
FLOOR = 1e-8


def build_config(env_id: str, quick: bool, total_timesteps: int | None = None) -> PPOConfig:
    config = PPOConfig.from_yaml(ROOT / "configs" / CONFIGS[env_id])
    if quick:
        kwargs = {**config.env_kwargs, **QUICK["env_kwargs"]}
        config = dataclasses.replace(
            config,
            env_kwargs=kwargs,
            total_timesteps=QUICK["total_timesteps"],
            num_envs=QUICK["num_envs"],
        )
    if total_timesteps is not None:
        config = dataclasses.replace(config, total_timesteps=total_timesteps)
    return dataclasses.replace(config, eval_freq=0)


def markdown(table: pd.DataFrame) -> str:
    """A GitHub markdown table (floats with 3 decimals)."""

    def cell(v):
        if isinstance(v, float):
            return "" if np.isnan(v) else f"{v:.3f}"
        return str(v)

    cells = [[cell(v) for v in row] for row in table.values]
    lines = ["| " + " | ".join(map(str, table.columns)) + " |"]
    lines.append("|" + "---|" * len(table.columns))
    lines += ["| " + " | ".join(row) + " |" for row in cells]
    return "\n".join(lines)


def seed_params(params, seed: int):
    """The params of training seed `seed` from the vmapped `[S, ...]` params."""
    return jax.tree.map(lambda x: x[seed], params)


def learned_controller(networks, params, temperature: float = 1.0):
    act = make_act(networks)

    def controller(obs, key):
        _, action, _ = act(
            params, networks.initial_state(1), obs[None], jnp.zeros(1, bool), key, temperature
        )
        return action[0]

    return controller


def dither_controller(env):
    """F ~ U[0.5, 1.0] every generation, CR 0.9 (evosax's dither, Das et al. 2005): the
    constant action F = 0.75 (a0 = (0.75 - 0.8) / 0.8 on `DEEnv`'s piecewise map), CR =
    0.9 (a1 = 0), half-width 0.25 (a2 = 0.25 / F_DITHER_MAX)."""
    action = jnp.array([(0.75 - 0.8) / 0.8, 0.0, 0.25 / env.F_DITHER_MAX], jnp.float32)
    return constant_controller(action)


def log_cost(costs: np.ndarray) -> np.ndarray:
    return np.log10(np.maximum(costs, FLOOR))


def gap_score(costs: np.ndarray) -> float:
    """Mean over runs of (log10 c_0 - log10 c_T) / (log10 c_0 + 8); costs `[..., T + 1]`."""
    start, end = log_cost(costs[..., 0]), log_cost(costs[..., -1])
    return float(np.mean((start - end) / np.maximum(start + 8.0, 1e-6)))


def aei_cost(curves: dict, baseline: str = "random") -> dict:
    """MetaBox's AEI cost component per controller (github.com/GMC-DRL/MetaBox
    `src/logger.py`, `get_random_baseline` and `Logger.aei_cost`, commit 1b796582): per
    function g_f = mean over runs of log10(1 / (c_T + 1)); AEI_cost = mean over functions
    of exp(g_f - mean_f g_f(baseline)), the baseline being MetaBox's random search (here
    our `random` controller). Higher is better; only final costs far above 1 separate
    controllers (a cost below 1 gives g near 0). MetaBox's full AEI multiplies this by an
    FEs factor (1 here: every controller spends the whole budget) and a wall-clock
    complexity factor (not measured here). curves: name -> costs `[F, ..., T + 1]`."""

    def g(costs):
        final = costs[..., -1].reshape(costs.shape[0], -1)
        return np.mean(np.log10(1.0 / (final + 1.0)), axis=1)  # [F]

    ref = float(np.mean(g(curves[baseline])))
    return {name: float(np.mean(np.exp(g(costs) - ref))) for name, costs in curves.items()}


def train(config, env, env_params, seeds: int):
    train_fn = jax.jit(jax.vmap(make_train(config, env, env_params)))
    keys = jax.random.split(jax.random.key(0), seeds)
    start = time.perf_counter()
    compiled = train_fn.lower(keys).compile()
    compile_s = time.perf_counter() - start
    start = time.perf_counter()
    out = compiled(keys)
    jax.block_until_ready(out)
    wall_s = time.perf_counter() - start
    steps = config.total_timesteps // (config.num_envs * config.num_steps)
    env_steps = steps * config.num_envs * config.num_steps * seeds
    return out, compile_s, wall_s, env_steps


def evaluate(env, env_params, networks, params, seeds, baselines, functions, instances, repeats):
    """Costs `[F, I, R, T + 1]` per controller and `[S, F, I, R, T + 1]` per training seed
    for "learned" (sampled actions, temperature 1) and "greedy" (the policy mean), all in
    one compiled program (one compile of the BBOB functions): a `lax.switch` over the
    controllers, vmapped over the S learned params, the temperature and the baselines; the
    same key (so the same instances, initial populations and optimiser seeds) for every
    controller."""
    dtype = env.action_space(env_params).dtype

    def branch(controller):
        return lambda obs, key, p, temp: jnp.asarray(controller(obs, key)).astype(dtype)

    def learned(obs, key, p, temp):
        return learned_controller(networks, p, temp)(obs, key).astype(dtype)

    branches = [learned] + [branch(c) for c in baselines.values()]

    def run_one(index, p, temp):
        def controller(obs, key):
            return jax.lax.switch(index, branches, obs, key, p, temp)

        run = make_run_instances(env, env_params, controller, functions, instances, repeats)
        return run(jax.random.PRNGKey(2024))

    index = jnp.array([0] * (2 * seeds) + list(range(1, len(branches))))
    temps = jnp.array([1.0] * seeds + [0.0] * seeds + [1.0] * len(baselines))
    first = seed_params(params, 0)
    stacked = jax.tree.map(
        lambda x, f: jnp.concatenate([x, x, jnp.broadcast_to(f, (len(baselines), *f.shape))]),
        params,
        first,
    )
    costs = np.asarray(jax.jit(jax.vmap(run_one))(index, stacked, temps))  # [2S + B, ...]
    per_seed = {"learned": costs[:seeds], "greedy": costs[seeds : 2 * seeds]}
    out = {name: np.concatenate(list(c), axis=2) for name, c in per_seed.items()}
    out.update({name: costs[2 * seeds + b] for b, name in enumerate(baselines)})
    return out, per_seed


def plot(curves: dict, functions, path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cols = min(4, len(functions))
    rows = -(-len(functions) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4 * cols, 3 * rows), squeeze=False)
    for j, fn in enumerate(functions):
        ax = axes.flat[j]
        for name, costs in curves.items():
            mean = log_cost(costs[j]).reshape(-1, costs.shape[-1]).mean(axis=0)
            ax.plot(mean, label=name)
        ax.set_title(f"f{fn}")
        ax.set_xlabel("generation")
        ax.set_ylabel("log10 best cost")
    for ax in list(axes.flat)[len(functions) :]:
        ax.axis("off")
    axes.flat[0].legend()
    fig.suptitle(title)
    fig.tight_layout()
    atomic_write(path, lambda p: fig.savefig(p, dpi=80, format="png"))


def policy_std(params) -> np.ndarray:
    """exp(log_std) `[S, A]` of the Gaussian (pre-squash) from the `[S, ...]` params, or an
    empty array for discrete actions."""
    found = [
        np.exp(np.asarray(leaf))
        for path, leaf in jax.tree_util.tree_leaves_with_path(params)
        if "log_std" in jax.tree_util.keystr(path)
    ]
    return found[0] if found else np.zeros((0, 0))


def summarize(curves: dict, per_seed: dict, functions, params):
    """The table (mean log10 final cost per function and controller, plus the gap score),
    the report lines (K/N per training seed for the sampled and the greedy policy, the
    policy std), and the aggregate K, N: `learned` (sampled) pooled over the seeds, i.e.
    its mean log10 final cost over seeds x instances x repeats, beats `default` on K of
    the N test functions."""
    rows = []
    for j, fn in enumerate(functions):
        row = {"function": fn}
        for name, costs in curves.items():
            row[name] = float(log_cost(costs[j][..., -1]).mean())
        rows.append(row)
    table = pd.DataFrame(rows).astype({"function": object})
    score = {name: gap_score(costs) for name, costs in curves.items()}
    table.loc[len(table)] = {"function": "gap_score", **score}
    seed_scores = {name: [gap_score(c) for c in costs] for name, costs in per_seed.items()}
    nan = {name: float("nan") for name in curves}
    std = {n: float(np.std(v, ddof=1)) if len(v) > 1 else 0.0 for n, v in seed_scores.items()}
    table.loc[len(table)] = {"function": "gap_score_seed_std", **nan, **std}
    table.loc[len(table)] = {"function": "aei_cost", **aei_cost(curves)}
    default = np.array([r["default"] for r in rows])
    n = len(rows)
    lines = []
    for name, costs in per_seed.items():
        seed_means = log_cost(costs[..., -1]).mean(axis=(2, 3))  # [S, F]
        ks = [int(np.sum(m < default)) for m in seed_means]
        majority = sum(k > n / 2 for k in ks)
        pooled = int(np.sum(np.array([r[name] for r in rows]) < default))
        lines.append(
            f"{name}: K/N per training seed {[f'{k}/{n}' for k in ks]}, seeds with K > N/2: "
            f"{majority}/{len(ks)}, pooled over seeds {pooled}/{n}"
        )
        margin = score[name] - score["default"]
        lines.append(
            f"{name}: gap score per training seed {np.round(seed_scores[name], 3).tolist()}; "
            f"pooled {score[name]:.3f} - default {score['default']:.3f} = {margin:+.3f}, "
            f"seed spread (std over seeds, ddof 1) {std[name]:.3f}: beats the defaults by "
            f"more than the spread: {'yes' if margin > std[name] else 'no'}"
        )
    policy = policy_std(params)
    if policy.size:
        lines.append(
            f"policy std (pre-squash, per seed x action dim): {np.round(policy, 3).tolist()}"
        )
    k = int(np.sum(np.array([r["learned"] for r in rows]) < default))
    return table, lines, k, n


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--env", default="metabbo:DE", choices=sorted(CONFIGS))
    parser.add_argument("--quick", action="store_true", help="< 10 min on 2 CPU cores")
    parser.add_argument("--seeds", type=int, default=3, help="training seeds (>= 1)")
    parser.add_argument("--repeats", type=int, default=4, help="optimiser seeds per instance")
    parser.add_argument(
        "--total-timesteps", type=int, help="env steps per training seed (default: the config's)"
    )
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results")
    parser.add_argument(
        "--reward",
        choices=("log", "relative", "vs_default"),
        help="the env's training reward (default: the config's env_kwargs)",
    )
    parser.add_argument(
        "--save-params",
        type=Path,
        help="also write the trained params ([S, ...] leaves) to this .pkl (new file)",
    )
    args = parser.parse_args()
    if args.seeds < 1 or args.repeats < 1:
        parser.error(f"--seeds={args.seeds} and --repeats={args.repeats} must be >= 1")
    args.out.mkdir(parents=True, exist_ok=True)

    config = build_config(args.env, args.quick, args.total_timesteps)
    if args.reward is not None:
        config = config.replace(env_kwargs={**config.env_kwargs, "reward": args.reward})
    env, env_params = make_env(config.env_name, config.env_kwargs)
    if args.save_params is not None and args.save_params.exists():
        parser.error(f"--save-params={args.save_params} exists; not overwriting it")
    out, compile_s, wall_s, env_steps = train(config, env, env_params, args.seeds)
    if args.save_params is not None:
        params = pickle.dumps(jax.device_get(out.train_state.params))
        atomic_write(args.save_params, lambda p: Path(p).write_bytes(params))
    print(
        f"train: {args.seeds} seeds x {config.total_timesteps} env steps, compile {compile_s:.0f} s, "
        f"run {wall_s:.0f} s, {env_steps / wall_s:.0f} env steps/s (2 shared CPU cores)"
    )

    test_params = env_params.replace(split="test")
    functions = list(env.test_functions)
    networks = make_networks(config, env, env_params)
    baselines = {"default": constant_controller(env.default_action())}
    baselines["random"] = random_controller(env, env_params)
    if args.env == "metabbo:DE":
        baselines["dither"] = dither_controller(env)
    instances = env.num_test_instances
    start = time.perf_counter()
    curves, per_seed = evaluate(
        env,
        test_params,
        networks,
        out.train_state.params,
        args.seeds,
        baselines,
        functions,
        instances,
        args.repeats,
    )
    print(f"evaluation (compile + run): {time.perf_counter() - start:.0f} s")
    table, lines, k, n = summarize(curves, per_seed, functions, out.train_state.params)
    tag = ("metabbo_quick_" if args.quick else "metabbo_") + args.env.split(":")[1].lower()
    csv = args.out / f"{tag}.csv"
    atomic_write(csv, lambda p: table.to_csv(p, index=False))
    header = (
        f"# {args.env}{' --quick' if args.quick else ''}: mean log10 final best cost on the "
        f"test functions (lower is better), {instances} instances x {args.repeats} repeats"
        f" (x {args.seeds} training seeds for learned / greedy); last row: normalised gap "
        f"score (higher is better), its std over training seeds, and MetaBox's AEI cost "
        f"component (higher is better; `aei_cost`). learned: sampled actions (MetaBox's LDE test protocol); "
        f"greedy: the policy mean\n\ntraining: {args.seeds} seeds x {config.total_timesteps} "
        f"env steps, reward {config.env_kwargs.get('reward', 'log')!r}, compile {compile_s:.0f} s, run {wall_s:.0f} s, "
        f"{env_steps / wall_s:.0f} env steps/s (2 CPU cores shared with other jobs)\n\n"
    )
    md = args.out / f"{tag}.md"
    write_text(
        md,
        header + markdown(table) + "\n\n" + "\n".join(lines) + "\n"
        f"\nmetabbo_learned_beats_default={k}/{n}\n",
    )
    plot(curves, functions, args.out / f"{tag}.png", f"{args.env} test functions")
    print(table.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    print("\n".join(lines))
    print(f"wrote {csv}, {md}, {md.with_suffix('.png')}")
    print(f"metabbo_learned_beats_default={k}/{n}")


if __name__ == "__main__":
    main()
