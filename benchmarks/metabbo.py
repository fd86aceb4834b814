"""MetaBBO benchmark (issue #27): PPO learns to configure an evosax optimiser on MetaBox's
training BBOB functions, and is compared on the held-out test functions, with the same
budget, instances and optimiser seeds, against

- `default`: the optimiser's default parameters (DE: F 0.8, CR 0.9; PSO: w 0.75,
  c1 1.5, c2 2.0; DE-operator: best/1/bin);
- `random`: uniformly random actions every generation;
- `dither` (DE only): F drawn uniformly in [0.5, 1.0] every generation with CR 0.9, the
  dither scheme evosax's DE implements (`differential_weight_min/max`; Das et al. 2005).

The learned controller samples its actions (temperature 1, the stochastic policy PPO
trained, as LDE samples F and CR at test time; `--greedy` plays the mean); `--seeds` training seeds are
trained in one vmapped program and each is evaluated.

Metrics. Per test function: mean over instances x repeats (x training seeds for `learned`)
of log10 of the final best cost `f - f_opt` (floored at 1e-8, COCO's target). Aggregate
score (a documented normalised gap, in place of MetaBox's AEI): the mean over all runs of
(log10 c_0 - log10 c_T) / (log10 c_0 + 8), the fraction of the log-distance from the
initial best cost c_0 to the 1e-8 target that the run closed (1 = target reached).
`learned` beats `default` on a function when its mean log10 final cost is lower; the
script ends with `metabbo_learned_beats_default=K/N` (N test functions).

Usage:
  PYTHONPATH=. python benchmarks/metabbo.py --quick      # < 10 min on 2 CPU cores
  PYTHONPATH=. python benchmarks/metabbo.py              # configs/metabbo_de.yaml, 3 seeds
Writes benchmarks/results/metabbo[_quick]_<env>.{csv,md,png}.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import pickle
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd

import purejaxppo  # noqa: F401  (XLA flags before jax compiles)
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


def build_config(env_id: str, quick: bool) -> PPOConfig:
    config = PPOConfig.from_yaml(ROOT / "configs" / CONFIGS[env_id])
    if quick:
        kwargs = {**config.env_kwargs, **QUICK["env_kwargs"]}
        config = dataclasses.replace(
            config,
            env_kwargs=kwargs,
            total_timesteps=QUICK["total_timesteps"],
            num_envs=QUICK["num_envs"],
        )
    return dataclasses.replace(config, eval_freq=0)


def markdown(table: pd.DataFrame) -> str:
    """A GitHub markdown table (floats with 3 decimals)."""
    cells = [[f"{v:.3f}" if isinstance(v, float) else str(v) for v in row] for row in table.values]
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
    """F ~ U[0.5, 1.0], CR 0.9 (the default: a1 = 0); a0 inverts `DEEnv`'s piecewise map
    (F = 0.8 + 0.8 a0 below the default, 0.8 + 0.2 a0 above it)."""

    def controller(obs, key):
        f = jax.random.uniform(key, minval=0.5, maxval=1.0)
        a0 = jnp.where(f < 0.8, (f - 0.8) / 0.8, (f - 0.8) / 0.2)
        return jnp.stack([a0, jnp.float32(0.0)]).astype(jnp.float32)

    return controller


def log_cost(costs: np.ndarray) -> np.ndarray:
    return np.log10(np.maximum(costs, FLOOR))


def gap_score(costs: np.ndarray) -> float:
    """Mean over runs of (log10 c_0 - log10 c_T) / (log10 c_0 + 8); costs `[..., T + 1]`."""
    start, end = log_cost(costs[..., 0]), log_cost(costs[..., -1])
    return float(np.mean((start - end) / np.maximum(start + 8.0, 1e-6)))


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


def evaluate(
    env, env_params, networks, params, seeds, baselines, functions, instances, repeats, temperature
):
    """Costs `[F, I, R, T + 1]` for "learned" (R x seeds runs) and each baseline, all in
    one compiled program (one compile of the BBOB functions): a `lax.switch` over the
    controllers, vmapped over the S learned params and the baselines; the same key (so
    the same instances, initial populations and optimiser seeds) for every controller."""
    dtype = env.action_space(env_params).dtype

    def branch(controller):
        return lambda obs, key, p: jnp.asarray(controller(obs, key)).astype(dtype)

    learned = [
        lambda obs, key, p: learned_controller(networks, p, temperature)(obs, key).astype(dtype)
    ]
    branches = learned + [branch(c) for c in baselines.values()]

    def run_one(index, p):
        def controller(obs, key):
            return jax.lax.switch(index, branches, obs, key, p)

        run = make_run_instances(env, env_params, controller, functions, instances, repeats)
        return run(jax.random.PRNGKey(2024))

    index = jnp.array([0] * seeds + list(range(1, len(branches))))
    first = seed_params(params, 0)
    stacked = jax.tree.map(
        lambda x, f: jnp.concatenate([x, jnp.broadcast_to(f, (len(baselines), *f.shape))]),
        params,
        first,
    )
    costs = np.asarray(jax.jit(jax.vmap(run_one))(index, stacked))  # [S + B, F, I, R, T+1]
    out = {"learned": np.concatenate(list(costs[:seeds]), axis=2)}
    out.update({name: costs[seeds + b] for b, name in enumerate(baselines)})
    return out


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
    tmp = path.with_suffix(".tmp.png")
    fig.savefig(tmp, dpi=80)
    os.replace(tmp, path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--env", default="metabbo:DE", choices=sorted(CONFIGS))
    parser.add_argument("--quick", action="store_true", help="< 10 min on 2 CPU cores")
    parser.add_argument("--seeds", type=int, default=3, help="training seeds (>= 1)")
    parser.add_argument("--greedy", action="store_true", help="learned: play the policy mean")
    parser.add_argument("--repeats", type=int, default=4, help="optimiser seeds per instance")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results")
    parser.add_argument(
        "--save-params",
        type=Path,
        help="also write the trained params ([S, ...] leaves) to this .pkl (new file)",
    )
    args = parser.parse_args()
    if args.seeds < 1 or args.repeats < 1:
        parser.error(f"--seeds={args.seeds} and --repeats={args.repeats} must be >= 1")
    args.out.mkdir(parents=True, exist_ok=True)

    config = build_config(args.env, args.quick)
    env, env_params = make_env(config.env_name, config.env_kwargs)
    if args.save_params is not None and args.save_params.exists():
        parser.error(f"--save-params={args.save_params} exists; not overwriting it")
    out, compile_s, wall_s, env_steps = train(config, env, env_params, args.seeds)
    if args.save_params is not None:
        tmp = args.save_params.with_suffix(".tmp")
        tmp.write_bytes(pickle.dumps(jax.device_get(out.train_state.params)))
        os.replace(tmp, args.save_params)
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
    curves = evaluate(
        env,
        test_params,
        networks,
        out.train_state.params,
        args.seeds,
        baselines,
        functions,
        instances,
        args.repeats,
        0.0 if args.greedy else 1.0,
    )
    print(f"evaluation (compile + run): {time.perf_counter() - start:.0f} s")

    rows = []
    for j, fn in enumerate(functions):
        row = {"function": fn}
        for name, costs in curves.items():
            row[name] = float(log_cost(costs[j][..., -1]).mean())
        rows.append(row)
    table = pd.DataFrame(rows).astype({"function": object})
    score = {name: gap_score(costs) for name, costs in curves.items()}
    table.loc[len(table)] = {"function": "gap_score", **score}
    k = int(sum(r["learned"] < r["default"] for r in rows))
    n = len(rows)

    tag = ("metabbo_quick_" if args.quick else "metabbo_") + args.env.split(":")[1].lower()
    csv = args.out / f"{tag}.csv"
    table.to_csv(csv.with_suffix(".tmp"), index=False)
    os.replace(csv.with_suffix(".tmp"), csv)
    header = (
        f"# {args.env}{' --quick' if args.quick else ''}: mean log10 final best cost on the "
        f"test functions (lower is better), {instances} instances x {args.repeats} repeats"
        f" (x {args.seeds} training seeds for learned); last row: normalised gap score "
        f"(higher is better)\n\ntraining: {args.seeds} seeds x {config.total_timesteps} env "
        f"steps, compile {compile_s:.0f} s, run {wall_s:.0f} s, "
        f"{env_steps / wall_s:.0f} env steps/s (2 CPU cores shared with other jobs)\n\n"
    )
    md = args.out / f"{tag}.md"
    md.with_suffix(".tmp").write_text(
        header + markdown(table) + f"\n\nmetabbo_learned_beats_default={k}/{n}\n"
    )
    os.replace(md.with_suffix(".tmp"), md)
    plot(curves, functions, args.out / f"{tag}.png", f"{args.env} test functions")
    print(table.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    print(f"wrote {csv}, {md}, {md.with_suffix('.png')}")
    print(f"metabbo_learned_beats_default={k}/{n}")


if __name__ == "__main__":
    main()
