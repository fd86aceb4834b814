"""How fast is `purejaxppo tune` on an env stepped on the host? The same MuJoCo study run by
RL Zoo's tuner, in this invocation on this machine.

Workload: Hopper-v4, `--trials` trials (default 32) of `--total-timesteps` env steps each
(default 20480: 10 updates of 2048), one seed each, searching `--search ppo-default`
(RL Zoo's PPO ranges over learning rate, entropy coefficient, clip range, max grad norm,
gamma, GAE lambda) with Optuna's TPE sampler (10 random start-up trials) and no pruner;
every other setting `configs/mujoco.yaml`'s (2048 steps per update, 10 epochs of batch 64,
64-64 tanh actor and critic, observation and reward normalisation). Each trial is scored
on `--eval-episodes` deterministic evaluation episodes at each of `--reports` points, the
last one its value. Two arms, each a subprocess timed from its start to its exit:

* `ours`: `purejaxppo tune --env-name envpool:Hopper-v4 --objective eval_return:E
  --reports R`: the trials one at a time (a host env's pool is one trial's), 32 envs in
  one EnvPool pool, compiled once, with an empty persistent compile cache;
* `rlzoo`: `rl_zoo3.train --optimize` (rl-zoo3 2.9.2, stable-baselines3 PPO, torch) on
  gymnasium's `Hopper-v4` with `--eval-episodes E --n-evaluations R`, its sampler swapped
  for the same distributions and its other settings fixed as ours
  (`benchmarks.peers.rlzoo_tuner`: RL Zoo's own sampler also draws n_steps, batch size,
  epochs and the network, which would change a trial's cost).

RL Zoo needs a virtualenv of its own at the repository root (git ignores it):

    python3 -m venv rlzoo-venv
    rlzoo-venv/bin/pip install torch==2.13.0 rl-zoo3==2.9.2 "gymnasium[mujoco]" pandas
    python -m benchmarks.tune_host_throughput --rlzoo-python rlzoo-venv/bin/python
    python -m benchmarks.tune_host_throughput --rlzoo-python rlzoo-venv/bin/python \
        --trials 2 --total-timesteps 4096 --json /tmp/smoke.json   # smoke test, ~1 min

Prints a Markdown table (wall and CPU seconds, seconds per trial, best value, RL Zoo's
time over ours) and writes a results file. Not a test: nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.harness import RESULTS, ROOT, machine, markdown_table, write_text
from benchmarks.tune_throughput import add_ratios, last_json_line, ours_reader, time_arm

ARMS = ("ours", "rlzoo")
#: The EnvPool id of ours and the gymnasium id of RL Zoo's (the same MuJoCo model).
ENVS = {"ours": "envpool:Hopper-v4", "rlzoo": "Hopper-v4"}


def ours_command(args: argparse.Namespace, out: Path) -> list[str]:
    """The `purejaxppo tune` command line of the first arm, writing to `out`."""
    return [
        *[str(Path(sys.executable).with_name("purejaxppo")), "tune"],
        *["--config", str(ROOT / "configs" / "mujoco.yaml"), "--env-name", ENVS["ours"]],
        *["--total-timesteps", str(args.total_timesteps), "--search", "ppo-default"],
        *["--trials", str(args.trials), "--sampler", "tpe", "--pruner", "none"],
        *["--objective", f"eval_return:{args.eval_episodes}", "--reports", str(args.reports)],
        *["--out", str(out), "--no-progress"],
    ]


def rlzoo_command(args: argparse.Namespace, workdir: Path) -> list[str]:
    """The peer driver's command line (`benchmarks.peers.rlzoo_tuner`)."""
    return [
        *[str(args.rlzoo_python), "-m", "benchmarks.peers.rlzoo_tuner", "--env", ENVS["rlzoo"]],
        *["--trials", str(args.trials), "--n-timesteps", str(args.total_timesteps)],
        *["--n-evaluations", str(args.reports), "--eval-episodes", str(args.eval_episodes)],
        *["--workdir", str(workdir)],
    ]


def run_arm(args: argparse.Namespace, arm: str, scratch: Path) -> dict:
    """Runs one arm (`tune_throughput.time_arm`), writing to `scratch / arm`."""
    out = scratch / arm
    if arm == "ours":
        row = time_arm(arm, ours_command(args, out), scratch, args.trials, ours_reader(out))
        return {"env": ENVS[arm], **row}

    def read(stdout: str) -> dict:
        record = last_json_line(stdout)
        keys = ("completed", "versions")
        return {"best": record["best_value"], **{key: record[key] for key in keys}}

    row = time_arm(arm, rlzoo_command(args, out), scratch, args.trials, read)
    return {"env": ENVS[arm], **row}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rlzoo-python", type=Path, help="the RL Zoo virtualenv's python")
    parser.add_argument("--trials", type=int, default=32, help="trials per arm")
    parser.add_argument("--total-timesteps", type=int, default=20480, help="per trial")
    parser.add_argument("--reports", type=int, default=2, help="evaluations per trial")
    parser.add_argument("--eval-episodes", type=int, default=5, help="per evaluation")
    parser.add_argument("--arms", nargs="+", choices=ARMS, default=list(ARMS))
    parser.add_argument("--json", type=Path, help="results file (default: results/...)")
    args = parser.parse_args()
    if args.trials < 1 or args.total_timesteps < 2048:
        parser.error(f"--trials >= 1 and --total-timesteps >= 2048, got {vars(args)}")
    if args.rlzoo_python is None and "rlzoo" in args.arms:
        parser.error("--rlzoo-python is required for the rlzoo arm")

    with tempfile.TemporaryDirectory(prefix="tune-host-throughput-") as scratch:
        rows = [run_arm(args, arm, Path(scratch)) for arm in args.arms]
    add_ratios(rows)
    cols = ["arm", "env", "trials", "completed", "wall_s", "s_per_trial", "best", "x_ours"]
    cols += ["cpu_s", "x_ours_cpu", "load_start", "load_end"]
    note = (
        f"{args.trials} trials of {args.total_timesteps} env steps per arm, each scored on "
        f"{args.eval_episodes} greedy episodes at {args.reports} points; x_ours: the arm's "
        "time over ours"
    )
    print("\n".join([*markdown_table(rows, cols, float_format=".3g"), "", note]))
    record = {
        "trials": args.trials,
        "total_timesteps": args.total_timesteps,
        "reports": args.reports,
        "eval_episodes": args.eval_episodes,
        "search": "ppo-default (purejaxppo.drivers.tune.space.PPO_DEFAULT)",
        "note": note,
        "compile_cache": "ours: empty at start (cold compile)",
        "rows": rows,
        "machine": machine(("purejaxppo", "jax", "jaxlib", "optuna", "envpool")),
    }
    path = args.json or RESULTS / f"tune-host-throughput-cpu-{time.strftime('%Y%m%d')}.json"
    write_text(path, json.dumps(record, indent=1) + "\n")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
