"""MinAtar reference rows: gymnax's Breakout, Asterix, SpaceInvaders and
Freeway `-MinAtar` against gymnax-blines' PPO.

For each `--env`, trains `--config` (default configs/minatar.yaml, gymnax-blines' PPO
settings) with `--seeds` seeds vmapped in ONE compiled program (`jit(vmap(make_train))` over
the seeds' keys) for `--total-timesteps` env steps per seed. Reported per env: the final
return of each seed (mean training-episode return over the last `--tail` updates in which
an episode ended, sampled actions; Freeway: the last 2, see `TAIL`), mean ± std across
seeds, the IQM of the pooled seeds x tail per-update returns (with 3 seeds an IQM across
seeds would be their mean), the published number, ours / published, env steps per seed and
their fraction of the published budget, wall time (compile included, and apart) and env
steps/s of all seeds together (compile excluded).

    python -m benchmarks.minatar_reference                           # the four envs
    python -m benchmarks.minatar_reference --env Breakout-MinAtar --total-timesteps 200000

Published numbers: gymnax's README ("Implemented Accelerated Environments", column
"Ckpt (Return)") gives one return per env for the gymnax-blines PPO checkpoints, trained
with agents/<env>/ppo.yaml (10M env steps, one run, no spread given) and evaluated on 164
test rollouts. At a budget below 10M they are a reference, not a pass mark: the row says
the fraction of the budget it had.

Writes `benchmarks/results/minatar-reference-cpu-<time>.{csv,json}` (one row per env; the
JSON adds the machine record and the config) and `...-curves.csv` (per-update return of
every seed), rewritten after each env so an interrupted run keeps the envs it finished, and
prints the table. Not a test: nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from benchmarks.harness import (
    RESULTS,
    ROOT,
    atomic_write,
    machine,
    markdown_table,
    stamp,
    write_text,
)

ENVS = ("Breakout-MinAtar", "Asterix-MinAtar", "SpaceInvaders-MinAtar", "Freeway-MinAtar")

#: Where the published numbers come from (gymnax's README table, gymnax-blines' configs).
SOURCE = (
    "gymnax README.md (github.com/RobertTLange/gymnax), table 'Implemented Accelerated "
    "Environments', column 'Ckpt (Return)': gymnax-blines PPO checkpoint trained with "
    "agents/{env}/ppo.yaml (num_train_steps 10M), one run"
)

#: env -> (published return, env-step budget of that run).
PUBLISHED = {
    "Asterix-MinAtar": (15.0, 10_000_000),
    "Breakout-MinAtar": (28.0, 10_000_000),
    "Freeway-MinAtar": (58.0, 10_000_000),
    "SpaceInvaders-MinAtar": (131.0, 10_000_000),
}


#: env -> updates in the final window where `--tail` does not fit: Freeway's episodes last
#: 2500 steps (time limit) and its 64 envs end them together, once every ~20 updates of 128
#: steps, so its window is its last 2 episode ends (the last 5000 steps of every env).
TAIL = {"Freeway-MinAtar": 2}


def train_env(config_path: Path, env: str, total_timesteps: int, seeds: int, tail: int) -> dict:
    """Trains seeds 0 .. seeds-1 of the config on `env` in one `jit(vmap(make_train))`
    program; returns the summary row, with the per-update curves under "curves"."""
    import jax

    import purejaxppo as pjp
    from purejaxppo.drivers.report import iqm

    config = pjp.PPOConfig.from_yaml(config_path, env_name=env, total_timesteps=total_timesteps)
    train = jax.jit(jax.vmap(pjp.make_train(config)))
    keys = jax.vmap(jax.random.key)(np.arange(seeds))
    start = time.perf_counter()
    compiled = train.lower(keys).compile()
    compile_s = time.perf_counter() - start
    run_start = time.perf_counter()
    metrics = jax.device_get(jax.block_until_ready(compiled(keys)).metrics)
    run_s = time.perf_counter() - run_start
    wall_s = time.perf_counter() - start
    returns = np.asarray(metrics["episode_return"], np.float64)  # [S, num_updates]
    steps = np.asarray(metrics["env_steps"], np.float64)  # [S, num_updates]
    tail = TAIL.get(env, tail)
    # Per seed, the last `tail` updates in which an episode ended (the others are NaN).
    ended = [np.flatnonzero(~np.isnan(r))[-tail:] for r in returns]
    if any(len(idx) < tail for idx in ended):
        print(f"WARNING {env}: fewer than {tail} updates ended an episode", flush=True)
    window = [r[idx] for r, idx in zip(returns, ended, strict=True)]  # S x [<= tail]
    finals = np.array([w.mean() if w.size else np.nan for w in window])  # [S]
    env_steps = int(steps[0, -1])
    published, budget = PUBLISHED.get(env, (float("nan"), 0))
    mean = float(np.mean(finals))
    row = {
        "env": env,
        "config": config_path.name,
        "seeds": seeds,
        "env_steps": env_steps,
        "tail_updates": tail,
        "tail_from_env_steps": int(
            min(steps[k, idx[0] - 1] if idx.size and idx[0] else 0 for k, idx in enumerate(ended))
        ),
        "final_mean": round(mean, 2),
        "final_std": round(float(np.std(finals)), 2),
        "final_iqm": round(iqm(np.concatenate(window)), 2),
        "final_min": round(float(np.min(finals)), 2),
        "finals": " ".join(f"{f:.2f}" for f in finals),
        "published": published,
        "published_env_steps": budget,
        "published_source": SOURCE.format(env=env) if env in PUBLISHED else "none found",
        "ratio": round(mean / published, 3) if env in PUBLISHED else float("nan"),
        "budget_fraction": round(env_steps / budget, 4) if budget else float("nan"),
        "wall_s": round(wall_s, 1),
        "compile_s": round(compile_s, 1),
        "run_s": round(run_s, 1),
        "env_steps_per_s": round(seeds * env_steps / run_s),
        "curves": (steps, returns),
    }
    print(
        f"{env}: {row['final_mean']} ± {row['final_std']} (seeds {row['finals']}), "
        f"published {published} at {budget / 1e6:g}M; {env_steps / 1e6:.2f}M steps per seed, "
        f"{run_s:.0f} s (+ {compile_s:.0f} s compile)",
        flush=True,
    )
    return row


def write_results(rows: list[dict], base: Path, record: dict) -> list[Path]:
    """`base`.csv / .json (one row per env) and `base`-curves.csv (env, seed, env_steps,
    episode_return per update; rows with a "row" name add it first, to tell apart rows of
    one env)."""
    import pandas as pd

    summary = [{k: v for k, v in r.items() if k != "curves"} for r in rows]
    csv, js = base.with_suffix(".csv"), base.with_suffix(".json")
    atomic_write(csv, lambda p: pd.DataFrame(summary).to_csv(p, index=False))
    write_text(js, json.dumps({**record, "rows": summary}, indent=1, default=str))
    curves = pd.DataFrame(
        [
            {
                **({"row": r["row"]} if "row" in r else {}),
                "env": r["env"],
                "seed": seed,
                "env_steps": x,
                "episode_return": y,
            }
            for r in rows
            for seed, (xs, ys) in enumerate(zip(*r["curves"], strict=True))
            for x, y in zip(xs, ys, strict=True)
        ]
    )
    curves_csv = base.with_name(base.name + "-curves.csv")
    atomic_write(curves_csv, lambda p: curves.to_csv(p, index=False))
    return [csv, js, curves_csv]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", type=Path, default=ROOT / "configs" / "minatar.yaml")
    parser.add_argument("--env", nargs="+", default=list(ENVS), help="gymnax env ids")
    parser.add_argument("--total-timesteps", type=int, default=1_146_880, help="env steps per seed")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument(
        "--tail",
        type=int,
        default=10,
        help="updates (with an episode end) averaged for the final return",
    )
    parser.add_argument("--note", default="", help="stored in the JSON (machine load, ...)")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    if args.seeds < 1 or args.total_timesteps < 1 or args.tail < 1:
        parser.error("--seeds, --total-timesteps and --tail must be >= 1")
    if not args.config.is_file():
        parser.error(f"--config {args.config}: no such file")

    import jax
    import yaml

    args.out.mkdir(parents=True, exist_ok=True)
    base = args.out / f"minatar-reference-{jax.default_backend()}-{stamp()}"
    record = machine(
        device=jax.devices()[0].device_kind,
        note=args.note,
        config=yaml.safe_load(args.config.read_text()),
        final_return=f"mean episode_return over the last {args.tail} updates with an episode end "
        f"per seed ({TAIL} for the envs named)",
        final_iqm="IQM of the seeds x last-tail-updates episode returns, pooled",
    )
    launch = time.perf_counter()
    rows = []
    for env in args.env:
        rows.append(train_env(args.config, env, args.total_timesteps, args.seeds, args.tail))
        paths = write_results(
            rows, base, {**record, "launch_to_now_s": round(time.perf_counter() - launch)}
        )
    cols = [
        "env",
        "env_steps",
        "final_mean",
        "final_std",
        "final_iqm",
        "final_min",
        "published",
        "ratio",
        "budget_fraction",
        "wall_s",
        "env_steps_per_s",
    ]
    print("\n".join(markdown_table([{k: r[k] for k in cols} for r in rows], cols)))
    print(f"launch to exit: {time.perf_counter() - launch:.0f} s; wrote", *paths)


if __name__ == "__main__":
    main()
