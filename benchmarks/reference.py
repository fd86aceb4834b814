"""Reference results: a reference config on the simulators the field benchmarks
on (EnvPool MuJoCo / Atari), against the published numbers.

For each `--env` (an EnvPool id; default HalfCheetah-v4) train `--config` (default
configs/mujoco.yaml) for `--total-timesteps` with `--seeds` seeds, vmapped in ONE
compiled program (`jax.vmap(make_train(config))` over the seeds' keys: one EnvPool pool of
seeds x num_envs envs, one host call per step for all of them; each seed steps the
episodes it steps alone). Reported per env: env steps, seeds, mean +- std and IQM (across
seeds) of the final return (mean training-episode return over the last 5% of updates, at
least 3; sampled actions, like CleanRL's logged episodic returns), the published number
and its source, wall time (compile included, and separately), and env steps/s of all
seeds together (compile excluded).

    python -m benchmarks.reference                                   # HalfCheetah-v4, 1M, 1 seed
    python -m benchmarks.reference --env Hopper-v4 Walker2d-v4 --seeds 3
    python -m benchmarks.reference --total-timesteps 200000          # a shorter budget
    python -m benchmarks.reference --env Hopper-v4 --seed-offset 2 --out parts/h2  # one seed
    python -m benchmarks.reference --merge parts                     # pool parallel seeds
    python -m benchmarks.reference --env Swimmer-v4 --eval-episodes 10  # + greedy evaluation
    python -m benchmarks.reference --set clip_vloss=false   # a config field changed

Parallel seeds (one process each, `--seed-offset`; benchmarks/gpu/mujoco_reference.sh) are
pooled by `--merge PARTS`: per env, mean +- std / IQM over the processes' seeds, wall = the
slowest process, env steps/s = the processes' sum.

`--eval-episodes N` also plays each seed's final policy with mean actions for N episodes
(RL Zoo's protocol: its benchmark.md numbers are deterministic evaluations) and adds
`greedy_episodes`, `greedy_mean`, `greedy_std` and `greedy_finals` (per seed) columns.

Writes `benchmarks/results/reference-<device>-<time>.{csv,md,png}` and `...-curves.csv`
(per-update returns; the PNG: one panel per env, each seed's learning curve and the
published mean +- std as a band) and prints the table. Not a test: nothing is asserted. Timings on a shared machine vary: say so with them.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from benchmarks.harness import atomic_write, markdown_lines

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

#: EnvPool id -> (published mean, std, source) of the final return at 1M (MuJoCo) / 10M
#: (Atari) steps.
PUBLISHED = {
    "HalfCheetah-v4": (1442.64, 46.03, "CleanRL ppo_continuous_action.py, 1M steps"),
    "Hopper-v4": (2382.86, 271.74, "CleanRL ppo_continuous_action.py, 1M steps"),
    "Walker2d-v4": (2287.95, 571.78, "CleanRL ppo_continuous_action.py, 1M steps"),
    "Humanoid-v4": (716.11, 49.08, "CleanRL ppo_continuous_action.py, 1M steps"),
    "InvertedPendulum-v4": (963.09, 22.20, "CleanRL ppo_continuous_action.py, 1M steps"),
    "Pusher-v4": (-40.38, 7.15, "CleanRL ppo_continuous_action.py, 1M steps"),
    # RL Zoo's benchmark.md (DLR-RM/rl-baselines3-zoo): SB3 PPO on Ant-v3 (the v4 task's
    # predecessor, same model and reward), one run, deterministic evaluation over 175
    # episodes; the std is across those episodes, not seeds.
    "Ant-v4": (1327.16, 451.58, "RL Zoo PPO Ant-v3 (one run, deterministic eval), 1M steps"),
    "Swimmer-v4": (281.56, 9.67, "RL Zoo PPO Swimmer-v3 (one run, deterministic eval), 1M steps"),
    "Breakout-v5": (414.66, 28.09, "CleanRL ppo_atari.py, 10M steps"),
    "Pong-v5": (20.36, 0.20, "CleanRL ppo_atari.py, 10M steps"),
    "BeamRider-v5": (1915.93, 484.58, "CleanRL ppo_atari.py, 10M steps"),
}


def final_return(returns: np.ndarray) -> float:
    """Mean of the per-update episode returns over the last 5% of updates (at least 3),
    ignoring updates where no episode ended (NaN)."""
    tail = max(3, int(np.ceil(0.05 * len(returns))))
    return float(np.nanmean(returns[-tail:]))


def greedy_returns(output, config, seeds: int, episodes: int) -> list[float]:
    """Each seed's final policy played greedily (mean actions, `evaluate(greedy=True)`)
    for `episodes` episodes of its own env, as RL Zoo's benchmark.md evaluates its final
    model (deterministic actions).

    Args:
      output: the `TrainOutput` of `jax.vmap(make_train(config))`, every leaf `[S, ...]`.
      config: the runs' `PPOConfig` (its env and observation normalisation).
      seeds: S; episodes: episodes per seed (parallel envs), >= 1.

    Returns:
      S floats: each seed's mean undiscounted episode return.
    """
    import jax

    from purejaxppo.acting.evaluation import evaluate

    means = []
    for k in range(seeds):
        one = jax.tree.map(lambda x, k=k: x[k], output)
        result = evaluate(one, num_episodes=episodes, greedy=True, config=config)
        means.append(float(np.mean(result.returns)))
    return means


def greedy_columns(greedy: list[float], episodes: int) -> dict:
    """The results-file columns of `greedy_returns`' per-seed values."""
    return {
        "greedy_episodes": episodes,
        "greedy_mean": round(float(np.mean(greedy)), 1),
        "greedy_std": round(float(np.std(greedy)), 1),
        "greedy_finals": " ".join(f"{g:.1f}" for g in greedy),
    }


def train_env(
    config_path: Path,
    env: str,
    total_timesteps: int,
    seeds: int,
    seed_offset: int = 0,
    eval_episodes: int = 0,
    changes: dict | None = None,
) -> dict:
    """Trains seeds `seed_offset .. seed_offset + seeds - 1` of the config, with `changes`
    (`{field: value}`, `--set`) on top, on `envpool:<env>`, vmapped in one compiled
    program; with `eval_episodes` > 0 also plays each seed's final policy greedily
    (`greedy_returns`)."""
    import jax

    import purejaxppo  # noqa: F401  (before jax runs: XLA flags)
    from purejaxppo.config import PPOConfig
    from purejaxppo.drivers.report import iqm
    from purejaxppo.train import make_train

    config = PPOConfig.from_yaml(
        config_path, env_name=f"envpool:{env}", total_timesteps=total_timesteps, **(changes or {})
    )
    train = jax.jit(jax.vmap(make_train(config)))
    keys = jax.vmap(jax.random.key)(np.arange(seed_offset, seed_offset + seeds))
    start = time.perf_counter()
    compiled = train.lower(keys).compile()
    compile_s = time.perf_counter() - start
    t0 = time.perf_counter()
    output = jax.block_until_ready(compiled(keys))
    run_s = time.perf_counter() - t0
    metrics = jax.device_get(output.metrics)
    curves, finals = [], []
    for k, seed in enumerate(range(seed_offset, seed_offset + seeds)):
        returns = np.asarray(metrics["episode_return"][k], np.float64)
        if "info/game_over_return" in metrics:  # Atari: full-game returns
            games = np.asarray(metrics["info/game_over"][k], np.float64)
            with np.errstate(invalid="ignore", divide="ignore"):
                returns = np.asarray(metrics["info/game_over_return"][k]) / games
            returns[games == 0] = np.nan
        steps = np.asarray(metrics["env_steps"][k], np.float64)
        curves.append((steps, returns))
        finals.append(final_return(returns))
        print(f"  {env} seed {seed}: final return {finals[-1]:.1f}")
    print(f"  {env}: {seeds} seed(s) in one program, {run_s:.0f} s (+ {compile_s:.0f} s compile)")
    wall = time.perf_counter() - start  # compile + training, as before --eval-episodes
    evaluated = {}
    if eval_episodes:
        greedy = greedy_returns(output, config, seeds, eval_episodes)
        for seed, value in zip(range(seed_offset, seed_offset + seeds), greedy, strict=True):
            print(f"  {env} seed {seed}: greedy return {value:.1f} ({eval_episodes} episodes)")
        evaluated = greedy_columns(greedy, eval_episodes)
    steps_done = float(curves[0][0][-1])
    published = PUBLISHED.get(env)
    return {
        "env": f"envpool:{env}",
        "config": " ".join([config_path.name, *(f"{k}={v}" for k, v in (changes or {}).items())]),
        "env_steps": int(steps_done),
        "seeds": seeds,
        "seed_offset": seed_offset,
        "final_mean": round(float(np.mean(finals)), 1),
        "final_std": round(float(np.std(finals)), 1),
        "final_iqm": round(float(iqm(np.asarray(finals))), 1),
        "finals": " ".join(f"{f:.1f}" for f in finals),
        "published": (
            f"{published[0]:.2f} ± {published[1]:.2f} ({published[2]})" if published else ""
        ),
        "wall_s": round(wall, 1),
        "compile_s": round(compile_s, 1),
        "env_steps_per_s": round(steps_done * seeds / run_s),
        **evaluated,
        "curves": curves,
    }


def direct_steps_per_s(env: str, num_envs: int, steps: int = 2000) -> float:
    """EnvPool stepped directly from Python (`pool.step`, zero actions, one pool of
    `num_envs`), env steps/s."""
    import envpool

    pool = envpool.make(env, env_type="gymnasium", num_envs=num_envs, batch_size=num_envs)
    pool.reset()
    action = np.zeros((num_envs, *pool.action_space.shape), pool.action_space.dtype)
    t0 = time.perf_counter()
    for _ in range(steps):
        pool.step(action)
    seconds = time.perf_counter() - t0
    pool.close()
    return steps * num_envs / seconds


def env_only(env: str, num_envs: int, steps: int) -> dict:
    """Env-only speed: EnvPool stepped directly from Python (`pool.step`, zero actions)
    against the adapter stepped inside one jitted `lax.scan` (vmapped `env.step`, the
    `io_callback` path training uses), env steps/s each (compile excluded)."""
    import jax
    import jax.numpy as jnp

    import purejaxppo  # noqa: F401
    from purejaxppo.envs import make_env

    direct_sps = direct_steps_per_s(env, num_envs, steps)
    adapter, params = make_env(f"envpool:{env}")
    space = adapter.action_space(params)
    zero = jnp.zeros((num_envs, *space.shape), space.dtype)

    @jax.jit
    def run(key):
        _, state = jax.vmap(adapter.reset, in_axes=(0, None))(
            jax.random.split(key, num_envs), params
        )

        def body(state, key):
            out = jax.vmap(adapter.step, in_axes=(0, 0, 0, None))(
                jax.random.split(key, num_envs), state, zero, params
            )
            return out[1], out[2]

        return jax.lax.scan(body, state, jax.random.split(key, steps))[1].sum()

    jax.block_until_ready(run(jax.random.key(0)))  # compile + one run
    t0 = time.perf_counter()
    jax.block_until_ready(run(jax.random.key(1)))
    jit_s = time.perf_counter() - t0
    return {
        "env": f"envpool:{env}",
        "num_envs": num_envs,
        "direct_steps_per_s": round(direct_sps),
        "adapter_in_jit_steps_per_s": round(steps * num_envs / jit_s),
        "adapter_fraction": round(steps * num_envs / jit_s / direct_sps, 2),
    }


def write_results(
    rows: list[dict], out: Path, stamp: str, note: str, device: str | None = None
) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import pandas as pd

    out.mkdir(parents=True, exist_ok=True)
    table = pd.DataFrame([{k: v for k, v in r.items() if k != "curves"} for r in rows])
    if device is None:
        import jax

        device = jax.default_backend()
    base = out / f"reference-{device}-{stamp}"
    csv, md, png = (base.with_suffix(s) for s in (".csv", ".md", ".png"))
    atomic_write(csv, lambda p: table.to_csv(p, index=False))
    curves = pd.DataFrame(
        [
            {"env": r["env"], "seed": seed, "env_steps": x, "episode_return": y}
            for r in rows
            for seed, (steps, returns) in enumerate(r["curves"])
            for x, y in zip(steps, returns, strict=True)
        ]
    )
    curves_csv = base.with_name(base.name + "-curves.csv")
    atomic_write(curves_csv, lambda p: curves.to_csv(p, index=False))
    cells = [list(table.columns)] + [[str(v) for v in r] for r in table.itertuples(index=False)]
    lines = markdown_lines(cells)
    text = f"# Reference results ({stamp})\n\n{note}\n\n" + "\n".join(lines) + "\n"
    atomic_write(md, lambda p: Path(p).write_text(text))
    fig, axes = plt.subplots(1, len(rows), figsize=(5 * len(rows), 3.6), squeeze=False)
    for ax, row in zip(axes[0], rows, strict=True):
        for seed, (steps, returns) in enumerate(row["curves"]):
            ended = ~np.isnan(returns)  # updates where no episode ended are NaN: skip them
            ax.plot(steps[ended], returns[ended], lw=1, label=f"seed {seed}")
        published = PUBLISHED.get(row["env"].split(":", 1)[1])
        if published:
            mean, std, source = published
            ax.axhline(mean, color="k", ls="--", lw=1, label=f"{source.split(',')[0]}")
            ax.axhspan(mean - std, mean + std, color="k", alpha=0.1)
        ax.set_title(f"{row['env']} ({row['config']})")
        ax.set_xlabel("env steps")
        ax.set_ylabel("episode return")
        ax.legend(fontsize=7)
    fig.tight_layout()
    atomic_write(png, lambda p: fig.savefig(p, dpi=100, format="png"))
    return [csv, curves_csv, md, png]


def merge_parts(parts: Path) -> list[dict]:
    """Rows (one per env, seeds pooled) from the per-process results under `parts`
    (`benchmarks/gpu/mujoco_reference.sh`: one folder per env x seed)."""
    import pandas as pd

    from purejaxppo.drivers.report import iqm

    tables = [pd.read_csv(p) for p in sorted(parts.glob("*/reference-*[0-9].csv"))]
    curves = [pd.read_csv(p) for p in sorted(parts.glob("*/reference-*-curves.csv"))]
    if not tables:
        raise SystemExit(f"--merge {parts}: no reference-*.csv below it")
    table = pd.concat(tables, ignore_index=True)
    rows = []
    for env, group in table.groupby("env", sort=False):
        group = group.sort_values("seed_offset")
        finals = group["final_mean"].to_numpy(np.float64)
        greedy = (
            greedy_columns(
                [float(g) for text in group["greedy_finals"] for g in str(text).split()],
                int(group["greedy_episodes"].iloc[0]),
            )
            if "greedy_finals" in group and group["greedy_finals"].notna().all()
            else {}
        )
        env_curves = [
            (c["env_steps"].to_numpy(np.float64), c["episode_return"].to_numpy(np.float64))
            for t, c in zip(tables, curves, strict=True)
            if t["env"].iloc[0] == env
        ]
        rows.append(
            {
                "env": env,
                "config": group["config"].iloc[0],
                "env_steps": int(group["env_steps"].iloc[0]),
                "seeds": len(finals),
                "seed_offset": 0,
                "final_mean": round(float(np.mean(finals)), 1),
                "final_std": round(float(np.std(finals)), 1),
                "final_iqm": round(float(iqm(finals)), 1),
                "finals": " ".join(f"{f:.1f}" for f in finals),
                "published": group["published"].iloc[0],
                "wall_s": float(group["wall_s"].max()),
                "compile_s": round(float(group["compile_s"].mean()), 1),
                "env_steps_per_s": int(group["env_steps_per_s"].sum()),
                **greedy,
                "curves": env_curves,
            }
        )
    return rows


def config_changes(parser: argparse.ArgumentParser, config: Path, sets: list[str]) -> dict:
    """`--set FIELD=VALUE` as `{field: value}` (YAML values), checked against the config
    before anything trains: a malformed item, an unknown field or a bad value is a
    one-line parser error."""
    import yaml

    from purejaxppo.config import PPOConfig

    changes = {}
    for item in sets:
        field, sep, value = item.partition("=")
        if not sep or field not in PPOConfig.__dataclass_fields__:
            parser.error(f"--set {item!r}: expected FIELD=VALUE with a PPOConfig field")
        changes[field] = yaml.safe_load(value)
    try:
        PPOConfig.from_yaml(config, **changes)
    except (TypeError, ValueError) as err:
        parser.error(f"--set: {err}")
    return changes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", type=Path, default=ROOT / "configs" / "mujoco.yaml")
    parser.add_argument("--env", nargs="+", default=["HalfCheetah-v4"], help="EnvPool ids")
    parser.add_argument("--total-timesteps", type=int, default=1_000_000)
    parser.add_argument("--seeds", type=int, default=1)
    parser.add_argument(
        "--seed-offset", type=int, default=0, help="first seed (parallel processes)"
    )
    parser.add_argument(
        "--device", default=None, help="name in the results files (default: jax's backend)"
    )
    parser.add_argument(
        "--eval-episodes",
        type=int,
        default=0,
        metavar="N",
        help="also play each seed's final policy greedily for N episodes (RL Zoo's protocol)",
    )
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="FIELD=VALUE",
        help="a config field on top of --config (repeatable; YAML value, e.g. clip_vloss=false)",
    )
    parser.add_argument("--note", default="", help="a line for the .md (machine load, ...)")
    parser.add_argument("--out", type=Path, default=HERE / "results")
    parser.add_argument(
        "--env-only",
        type=int,
        nargs="*",
        metavar="N",
        help="measure env-only speed at these num_envs (direct EnvPool vs the adapter in jit)",
    )
    parser.add_argument(
        "--merge",
        type=Path,
        default=None,
        metavar="PARTS",
        help="pool the per-process results below PARTS (parallel seeds) into one table",
    )
    args = parser.parse_args()
    if args.merge is not None:
        rows = merge_parts(args.merge)
        stamp = time.strftime("%Y%m%d-%H%M%S")
        paths = write_results(rows, args.out, stamp, args.note, args.device)
        print(
            *(f"{r['env']}: {r['final_mean']} +- {r['final_std']} ({r['finals']})" for r in rows),
            sep="\n",
        )
        print("wrote", *paths)
        return
    if args.env_only:
        import pandas as pd

        table = pd.DataFrame([env_only(e, n, 2000) for e in args.env for n in args.env_only])
        args.out.mkdir(parents=True, exist_ok=True)
        path = args.out / f"reference-envonly-cpu-{time.strftime('%Y%m%d-%H%M%S')}.csv"
        atomic_write(path, lambda p: table.to_csv(p, index=False))
        print(table.to_string(index=False), "\nwrote", path)
        return
    if args.seeds < 1 or args.total_timesteps < 1 or args.seed_offset < 0:
        parser.error("--seeds and --total-timesteps must be >= 1, --seed-offset >= 0")
    if args.eval_episodes < 0:
        parser.error(f"--eval-episodes {args.eval_episodes}: must be >= 0")
    if not args.config.is_file():
        parser.error(f"--config {args.config}: no such file")
    changes = config_changes(parser, args.config, args.set)
    launch = time.perf_counter()
    rows = [
        train_env(
            args.config,
            env,
            args.total_timesteps,
            args.seeds,
            args.seed_offset,
            args.eval_episodes,
            changes,
        )
        for env in args.env
    ]
    stamp = time.strftime("%Y%m%d-%H%M%S")
    note = args.note + f" Launch to exit: {time.perf_counter() - launch:.0f} s."
    paths = write_results(rows, args.out, stamp, note.strip(), args.device)
    import pandas as pd

    print(pd.DataFrame([{k: v for k, v in r.items() if k != "curves"} for r in rows]))
    print("wrote", *paths)


if __name__ == "__main__":
    main()
