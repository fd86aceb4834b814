"""Learning results on the environment suites: one config per suite, against a random policy.

For each entry of `RUNS` (a config under `configs/`): train it (one seed, the config's
`total_timesteps`, one jitted program; gymnasium ids too, their vector env called from
inside it), and play
`--random-episodes` episodes of a uniformly random policy (valid actions only where the
observation carries an action mask) on the same env. Reported per run: env steps, wall
time (compile + run), the final return (mean training-episode return over the last 5%
of updates, at least 10; sampled actions), the trained policy's greedy return (mean /
argmax actions, `pjp.evaluate`, `--random-episodes` episodes), the
random policy's mean return, the target and whether the final (training) return meets it. Also Pendulum-v1 with and without observation / reward normalisation, curves side
by side.

    python -m benchmarks.env_suites                      # every suite (about 30-60 min, 2 CPU cores)
    python -m benchmarks.env_suites --only brax navix    # some of them
    python -m benchmarks.env_suites --scale 0.1          # smoke test: 10% of the steps

Writes `benchmarks/results/env-suites-<device>-<time>.{json,csv,png}` and prints the
table. Suites whose extra is not installed are reported as "missing extra" rows. Not a
test: nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import platform
import time
import traceback
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

# name, config file, target (a string for the table), check(final, random) -> bool
RUNS = [
    ("brax", "brax_inverted_pendulum.yaml", ">= 900", lambda f, r: f >= 900),
    ("playground", "playground_cartpole_balance.yaml", ">= 700", lambda f, r: f >= 700),
    ("navix", "navix_empty.yaml", ">= 0.9 of max", None),  # max filled from the config
    ("xminigrid", "xminigrid_empty.yaml", ">= 0.9 of max", None),
    ("jumanji", "jumanji_snake.yaml", ">= 3x random", lambda f, r: f >= 3 * r),
    ("craftax", "craftax_classic.yaml", ">= 2x random", lambda f, r: f >= 2 * r),
    ("gymnasium", "gymnasium_cartpole.yaml", ">= 475", lambda f, r: f >= 475),
    ("pendulum-norm", "pendulum_normalized.yaml", ">= -250", lambda f, r: f >= -250),
    ("pendulum", "pendulum.yaml", "(unnormalised, for comparison)", lambda f, r: True),
]
MAX_RETURN = {"navix": 1.0, "xminigrid": 1.0}  # reward of reaching the goal at once


def final_return(curve: np.ndarray) -> float:
    tail = curve[-max(10, len(curve) // 20) :]
    tail = tail[~np.isnan(tail)]
    return float(tail.mean()) if tail.size else float("nan")


def random_return(env, env_params, episodes: int, max_steps: int, seed: int = 0) -> float:
    """Mean undiscounted return of a uniformly random policy (masked: valid actions)."""
    import jax
    import jax.numpy as jnp

    space = env.action_space(env_params)

    def sample(key, obs):
        mask = obs.get("action_mask") if isinstance(obs, dict) else None
        if mask is not None and hasattr(space, "n"):
            logits = jnp.where(jnp.asarray(mask, bool), 0.0, -jnp.inf)
            return jax.random.categorical(key, logits).astype(jnp.int32)
        return space.sample(key)

    @jax.jit
    def run(key):
        reset_key, scan_key = jax.random.split(key)
        obs, state = jax.vmap(env.reset, in_axes=(0, None))(
            jax.random.split(reset_key, episodes), env_params
        )

        def step(carry, key):
            obs, state, ret, active = carry
            act_key, env_key = jax.random.split(key)
            action = jax.vmap(sample)(jax.random.split(act_key, episodes), obs)
            obs, state, reward, term, trunc, _ = jax.vmap(env.step, in_axes=(0, 0, 0, None))(
                jax.random.split(env_key, episodes), state, action, env_params
            )
            ret = ret + jnp.where(active, reward.astype(jnp.float32), 0.0)
            return (obs, state, ret, active & ~(term | trunc)), None

        init = (obs, state, jnp.zeros(episodes), jnp.ones(episodes, bool))
        (_, _, ret, _), _ = jax.lax.scan(step, init, jax.random.split(scan_key, max_steps))
        return ret

    return float(np.mean(np.asarray(run(jax.random.key(seed)))))


def host_random_return(env, episodes: int, seed: int = 0) -> float:
    """Mean return of a uniformly random policy on a host env (`HostVecEnv`, NumPy)."""
    vec = env.make_vec(episodes)
    space = env.action_space(None)
    rng = np.random.default_rng(seed)
    vec.reset(seed)
    ret, active = np.zeros(episodes), np.ones(episodes, bool)
    try:
        while active.any():
            action = rng.integers(0, space.n, episodes).astype(np.int32)
            _, reward, term, trunc, _ = vec.step(action)
            ret += np.where(active, reward, 0.0)
            active &= ~(term | trunc)
    finally:
        vec.close()
    return float(ret.mean())


def train_curve(config) -> tuple[np.ndarray, float, float, object]:
    """(episode_return per update, compile s, run s, TrainOutput) of one seed of `config`."""
    import jax

    import purejaxppo as pjp

    start = time.perf_counter()
    train = jax.jit(pjp.make_train(config))
    key = jax.random.key(config.seed)
    compiled = train.lower(key).compile()
    compile_s = time.perf_counter() - start
    start = time.perf_counter()
    out = jax.block_until_ready(compiled(key))
    run_s = time.perf_counter() - start
    return np.asarray(out.metrics["episode_return"], np.float64), compile_s, run_s, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", help="run names to keep (default: all)")
    parser.add_argument("--scale", type=float, default=1.0, help="fraction of total_timesteps")
    parser.add_argument("--random-episodes", type=int, default=64)
    parser.add_argument("--out", type=Path, default=HERE / "results")
    args = parser.parse_args()

    import jax
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import pandas as pd

    import purejaxppo as pjp

    runs = [r for r in RUNS if not args.only or r[0] in args.only]
    rows, curves = [], {}
    for name, config_file, target, check in runs:
        row = {"run": name, "config": f"configs/{config_file}", "target": target}
        try:
            config = pjp.PPOConfig.from_yaml(ROOT / "configs" / config_file)
            if args.scale != 1.0:
                steps = max(config.batch_size * 2, int(config.total_timesteps * args.scale))
                config = config.replace(total_timesteps=steps)
            row["env"] = config.env_name
            env, env_params = pjp.make_env(config.env_name, config.env_kwargs)
            print(f"[{name}] {config.env_name}: {config.total_timesteps} steps", flush=True)
            curve, compile_s, run_s, out = train_curve(config)
            final = final_return(curve)
            if name == "gymnasium":
                rand = host_random_return(env, args.random_episodes)
                max_steps = int(env.max_steps_in_episode)
            else:
                max_steps = int(getattr(env_params, "max_steps_in_episode", 1000))
                rand = random_return(env, env_params, args.random_episodes, max_steps)
            greedy = float(
                pjp.evaluate(
                    out,
                    config=config,
                    num_episodes=args.random_episodes,
                    greedy=True,
                    max_steps=max_steps,
                ).returns.mean()
            )
            if check is None:
                top = MAX_RETURN[name]
                met = final >= 0.9 * top
                row["target"] = f">= {0.9 * top:g} (0.9 of max {top:g})"
            else:
                met = bool(check(final, rand))
            row.update(
                env_steps=config.num_updates * config.batch_size,
                compile_s=round(compile_s, 1),
                run_s=round(run_s, 1),
                steps_per_s=round(config.num_updates * config.batch_size / run_s),
                final_return=round(final, 3),
                greedy_return=round(greedy, 3),
                random_return=round(rand, 3),
                met=met,
            )
            curves[name] = (config.batch_size, curve)
        except ImportError as err:
            row.update(error=f"missing extra: {err}")
        except Exception as err:  # noqa: BLE001 - report and go on with the other suites
            traceback.print_exc()
            row.update(error=f"{type(err).__name__}: {err}"[:300])
        rows.append(row)
        print(json.dumps(row), flush=True)

    table = pd.DataFrame(rows)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    device = jax.devices()[0].platform
    args.out.mkdir(parents=True, exist_ok=True)
    stem = args.out / f"env-suites-{device}-{stamp}"
    table.to_csv(stem.with_suffix(".csv"), index=False)
    meta = {
        "machine": platform.platform(),
        "cpu_count": __import__("os").cpu_count(),
        "jax": jax.__version__,
        "device": str(jax.devices()[0]),
        "scale": args.scale,
        "rows": rows,
    }
    stem.with_suffix(".json").write_text(json.dumps(meta, indent=2, default=str))

    if curves:
        cols = min(3, len(curves))
        rows_n = -(-len(curves) // cols)
        fig, axes = plt.subplots(rows_n, cols, figsize=(4.5 * cols, 3.2 * rows_n), squeeze=False)
        pendulum = [n for n in ("pendulum-norm", "pendulum") if n in curves]
        names = [n for n in curves if n not in pendulum] + (["pendulum"] if pendulum else [])
        for ax, name in zip(axes.flat, names, strict=False):
            for label in pendulum if name == "pendulum" else [name]:
                batch, curve = curves[label]
                steps = np.arange(1, len(curve) + 1) * batch
                ended = np.isfinite(curve)  # NaN: no episode ended in that update
                ax.plot(steps[ended], curve[ended], label=label, lw=1)
            row = next(r for r in rows if r["run"] == name)
            if np.isfinite(row.get("random_return", np.nan)):
                ax.axhline(row["random_return"], color="grey", ls="--", label="random")
            ax.set_title(row.get("env", name), fontsize=9)
            ax.set_xlabel("env steps")
            ax.set_ylabel("episode return")
            ax.legend(fontsize=7)
        for ax in list(axes.flat)[len(names) :]:
            ax.axis("off")
        fig.tight_layout()
        fig.savefig(stem.with_suffix(".png"), dpi=110)
    with pd.option_context("display.width", 200, "display.max_columns", 20):
        print(table.to_string(index=False))
    print(f"wrote {stem}.{{csv,json,png}}")


if __name__ == "__main__":
    main()
