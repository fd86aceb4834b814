"""Atari learning runs on the CPU: summarise `purejaxppo train` run directories
of `configs/atari.yaml` against the CPU targets and the published 10M-step numbers.

The runs themselves take hours on 2 cores (~2.4 s per 1024-step update: see
`benchmarks/atari_cpu.py`), so they are ordinary CLI runs, checkpointed and resumable
after an interruption, not a program this script trains:

    purejaxppo train --config configs/atari.yaml --env-name envpool:Pong-v5 \\
        --total-timesteps 3000000 --log-freq 29 --save-minutes 15 --run-dir runs/pong-3m
    purejaxppo train --resume runs/pong-3m          # after an interruption
    python -m benchmarks.atari_learning runs/pong-3m [runs/breakout-3m ...]

Per run: the full-game return (all lives, unclipped: `info/game_over_return /
info/game_over`, which the config logs; the training signal itself is per life and
clipped) of each update's finished games, its moving mean over the last `--window` updates with ended games, the
final return (mean over the last 5% of updates, at least 3, with finished games), the
first env step at which the moving mean reached the target, and the numbers it is judged
against:

  target     the CPU target at 3M env steps: Pong >= 0; Breakout "well above
             random", taken here as >= 10x the random score
  random     uniform random play (Mnih et al. 2015, Nature, Extended Data Table 2:
             Pong -20.7, Breakout 1.7, BeamRider 363.9)
  published  CleanRL ppo_atari.py at 10M steps (mean +- std over 3 seeds; Huang et al.
             2022, CleanRL's PPO benchmark): Pong 20.36 +- 0.20, Breakout 414.66 +- 28.09

Steps are agent steps (4 emulator frames each), as CleanRL counts them. Writes
`benchmarks/results/atari-learning-<time>.{csv,md,png}` (the PNG: each run's per-update
returns, their moving mean, the target, random and the published 10M number). Not a test.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from benchmarks.harness import atomic_write, portable
from benchmarks.reference import PUBLISHED

HERE = Path(__file__).resolve().parent

#: Uniform random play, Mnih et al. 2015 (Nature), Extended Data Table 2.
RANDOM = {"Pong-v5": -20.7, "Breakout-v5": 1.7, "BeamRider-v5": 363.9}


def target(task_id: str) -> float | None:
    """The CPU target for `task_id` at 3M steps (None: no target for that game)."""
    if task_id == "Pong-v5":
        return 0.0
    if task_id == "Breakout-v5":
        return 10 * RANDOM["Breakout-v5"]
    return None


def load_run(run_dir: Path):
    """(task id, per-update DataFrame with env_steps and game_return) of one CLI run.

    Raises:
      ValueError: `run_dir` has no metrics.csv / config.yaml, is not an EnvPool Atari run,
        or did not log `info/game_over_return` and `info/game_over`.
    """
    import pandas as pd
    import yaml

    metrics, config = run_dir / "metrics.csv", run_dir / "config.yaml"
    for path in (metrics, config):
        if not path.is_file():
            raise ValueError(f"{run_dir}: no {path.name} (is it a purejaxppo train run dir?)")
    env_name = str(yaml.safe_load(config.read_text()).get("env_name", ""))
    if not env_name.startswith("envpool:") or not env_name.endswith("-v5"):
        raise ValueError(f"{run_dir}: env_name {env_name!r} is not an EnvPool Atari id")
    frame = pd.read_csv(metrics)
    needed = ["info/game_over_return", "info/game_over"]
    missing = [c for c in needed if c not in frame.columns]
    if missing:
        raise ValueError(f"{run_dir}: metrics.csv lacks {missing} (info_metrics of atari.yaml)")
    # A resumed run re-logs the updates after its last checkpoint: keep the latest rows.
    frame = frame.drop_duplicates("update", keep="last").sort_values("update")
    over = frame["info/game_over"].to_numpy(dtype=float)
    with np.errstate(invalid="ignore", divide="ignore"):
        game = frame["info/game_over_return"].to_numpy(dtype=float) / over
    game[~(over > 0)] = np.nan  # no game ended in that update
    out = pd.DataFrame({"env_steps": frame["env_steps"].to_numpy(), "game_return": game})
    return env_name.split(":", 1)[1], out


def summarise(run_dir: Path, window: int) -> dict:
    """The table row of one run (see the module docstring), plus `curve`: (env steps [U],
    full-game return per update [U] (NaN where no game ended), its moving mean [U], the
    published 10M mean). Returns are game points; steps are agent steps.

    Raises:
      ValueError: from `load_run`.
    """
    task_id, frame = load_run(run_dir)
    game = frame["game_return"]
    # Over the last `window` updates in which games ended (long games leave most updates
    # without one), aligned back onto every update.
    ended = game.dropna()
    moving = ended.rolling(window, min_periods=max(1, window // 5)).mean().reindex(game.index)
    moving = moving.ffill()
    tail = max(3, int(round(0.05 * len(frame))))
    final = float(np.nanmean(game.to_numpy()[-tail:])) if len(frame) else float("nan")
    goal = target(task_id)
    reached = None
    if goal is not None:
        hits = np.flatnonzero(moving.to_numpy() >= goal)
        reached = int(frame["env_steps"].iloc[hits[0]]) if hits.size else None
    mean, std, source = PUBLISHED.get(task_id, (float("nan"), float("nan"), ""))
    return {
        "run": portable(run_dir),
        "env": task_id,
        "env_steps": int(frame["env_steps"].iloc[-1]) if len(frame) else 0,
        "updates": len(frame),
        "final_return": final,
        "final_updates": tail,
        "target": goal,
        "met": bool(goal is not None and final >= goal),
        "first_step_moving_mean_at_target": reached,
        "random": RANDOM.get(task_id, float("nan")),
        "published_10M": f"{mean} +- {std} ({source})",
        "curve": (frame["env_steps"].to_numpy(), game.to_numpy(), moving.to_numpy(), mean),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", type=Path, help="purejaxppo train run dirs")
    parser.add_argument(
        "--window", type=int, default=100, help="moving mean, in updates with ended games"
    )
    parser.add_argument("--note", default="", help="a line for the .md (machine, load, ...)")
    parser.add_argument("--out", type=Path, default=HERE / "results")
    args = parser.parse_args()
    if args.window < 1:
        parser.error(f"--window must be >= 1, got {args.window}")
    try:
        rows = [summarise(run, args.window) for run in args.runs]
    except ValueError as err:
        parser.error(str(err))

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import pandas as pd

    stamp = time.strftime("%Y%m%d-%H%M%S")
    args.out.mkdir(parents=True, exist_ok=True)
    table = pd.DataFrame([{k: v for k, v in r.items() if k != "curve"} for r in rows])
    md = "\n".join(
        [
            f"# Atari learning runs on the CPU (configs/atari.yaml), moving mean over "
            f"{args.window} updates",
            "",
            args.note,
            "",
            "| " + " | ".join(table.columns) + " |",
            "|" + "---|" * len(table.columns),
            *(
                "| " + " | ".join(f"{v:.4g}" if isinstance(v, float) else str(v) for v in r) + " |"
                for r in table.itertuples(index=False)
            ),
            "",
        ]
    )
    fig, axes = plt.subplots(1, len(rows), figsize=(5.5 * len(rows), 4), squeeze=False)
    for ax, row in zip(axes[0], rows, strict=True):
        steps, game, moving, published = row["curve"]
        ax.plot(steps, game, ".", ms=2, alpha=0.3, label="full-game return per update")
        ax.plot(steps, moving, lw=2, label=f"moving mean ({args.window} updates with games)")
        if row["target"] is not None:
            ax.axhline(row["target"], color="green", ls="--", label="CPU target at 3M")
        ax.axhline(row["random"], color="grey", ls=":", label="random")
        if np.isfinite(published):
            ax.axhline(published, color="red", ls="-.", label="CleanRL at 10M")
        ax.set(title=row["env"], xlabel="env steps (agent steps)", ylabel="game return")
        ax.legend(fontsize=7)
    fig.tight_layout()
    base = args.out / f"atari-learning-{stamp}"
    atomic_write(base.with_suffix(".csv"), lambda p: table.to_csv(p, index=False))
    atomic_write(base.with_suffix(".md"), lambda p: Path(p).write_text(md))
    atomic_write(base.with_suffix(".png"), lambda p: fig.savefig(p, dpi=110, format="png"))
    print(md, "wrote", base.with_suffix(".md"))


if __name__ == "__main__":
    main()
