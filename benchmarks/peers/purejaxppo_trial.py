"""One trial of CleanRL's tuner as `purejaxppo train`: the script that
`cleanrl_utils.tuner.Tuner` runs (with `runpy`, in its own process) in the second arm of
`benchmarks/tune_throughput.py`.

It takes the flags of CleanRL's `ppo.py` that the tuner passes (`--env-id --seed
--learning-rate --ent-coef --gae-lambda --clip-coef --total-timesteps --exp-name`, others
such as `--track` are ignored), trains `purejaxppo train --config CONFIG` with them in a
subprocess (as a user would, one process per trial; `--purejaxppo COMMAND` names the
command, default `purejaxppo`), then writes its returns as the tensorboard scalar
`charts/episodic_return` under `runs/<run_name>`, where the tuner reads it: each update's
mean return (metrics.csv's `episode_return`) once per episode that ended in that update
(`episode_count`), at that update's `env_steps`, so that the tuner's window counts
episodes as it does for ppo.py. Defines `run_name` at module level, as ppo.py does.

    python -m benchmarks.peers.purejaxppo_trial --learning-rate 0.001 --total-timesteps 100000

Imports neither purejaxppo nor JAX (the trial runs in the tuner's interpreter); writes
with tensorboardX, or else `torch.utils.tensorboard`.
"""

from __future__ import annotations

import argparse
import csv
import math
import shlex
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
METRIC = "charts/episodic_return"

#: ppo.py's flags that map onto PPOConfig fields (flag -> `purejaxppo train` option).
FIELDS = {
    "learning-rate": "learning_rate",
    "ent-coef": "ent_coef",
    "gae-lambda": "gae_lambda",
    "clip-coef": "clip_coef",
}


def parse_flags(argv: list[str]) -> argparse.Namespace:
    """The trial's flags (`--key=value` or `--key value`); flags it does not know are
    ignored. Raises SystemExit (argparse) on a malformed value."""
    parser = argparse.ArgumentParser(allow_abbrev=False)
    parser.add_argument("--env-id", default="CartPole-v1")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--exp-name", default="purejaxppo")
    parser.add_argument("--total-timesteps", type=int, default=500000)
    for flag in FIELDS:
        parser.add_argument(f"--{flag}", type=float, default=None)
    parser.add_argument("--config", type=Path, default=ROOT / "configs" / "cartpole.yaml")
    parser.add_argument("--purejaxppo", default="purejaxppo")
    args, _ = parser.parse_known_args(argv)
    return args


def train_command(args: argparse.Namespace, run_dir: Path) -> list[str]:
    """The `purejaxppo train` command line of the trial `args` into `run_dir`."""
    command = [*shlex.split(args.purejaxppo), "train", "--config", str(args.config)]
    command += ["--env-name", args.env_id, "--seed", str(args.seed)]
    command += ["--total-timesteps", str(args.total_timesteps)]
    for flag, field in FIELDS.items():
        value = getattr(args, field)
        if value is not None:
            command += [f"--{flag}", repr(value)]
    return [*command, "--run-dir", str(run_dir), "--no-progress", "--overwrite"]


def episodic_returns(metrics_csv: Path) -> list[tuple[int, float]]:
    """(env_steps, return) pairs from a run's metrics.csv: each update's mean
    `episode_return` repeated `episode_count` times; updates without a finished episode
    give none."""
    points = []
    with open(metrics_csv, newline="") as f:
        for row in csv.DictReader(f):
            count = int(float(row["episode_count"] or 0))
            value = float(row["episode_return"] or "nan")
            if count > 0 and math.isfinite(value):
                points += [(int(float(row["env_steps"])), value)] * count
    return points


def write_scalars(logdir: Path, points: list[tuple[int, float]], tag: str = METRIC) -> None:
    """Writes `points` ((step, value) pairs) as the tensorboard scalar `tag` in `logdir`."""
    try:
        from tensorboardX import SummaryWriter
    except ImportError:
        from torch.utils.tensorboard import SummaryWriter
    writer = SummaryWriter(str(logdir))
    for step, value in points:
        writer.add_scalar(tag, value, step)
    writer.close()


def main(argv: list[str]) -> str:
    """Trains the trial of `argv` and writes its scalars; returns its run name. Raises
    subprocess.CalledProcessError when the training fails."""
    args = parse_flags(argv)
    name = f"{args.env_id}__{args.exp_name}__{args.seed}__{int(time.time())}"
    logdir = Path("runs") / name
    subprocess.run(train_command(args, logdir / "train"), check=True, stdout=subprocess.DEVNULL)
    write_scalars(logdir, episodic_returns(logdir / "train" / "metrics.csv"))
    return name


if __name__ == "__main__":
    run_name = main(sys.argv[1:])
