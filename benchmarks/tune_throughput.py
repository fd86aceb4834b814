"""How fast is `purejaxppo tune`? The same search run by CleanRL's tuner, three ways.

Workload: CartPole-v1, 100k env steps per trial (`configs/cartpole.yaml`: CleanRL's ppo.py
defaults), `--trials` trials (default 64), one seed each, searching `SEARCH` (learning_rate
log-uniform, ent_coef, gae_lambda and clip_coef uniform) with Optuna's TPE sampler and no
pruner. Three arms, in this invocation on this machine, each a subprocess timed from its
start to its exit:

* `purejaxppo tune`: `--batch` trials (default 16, at most `--trials`) as the lanes of one
  `jit(vmap)` program, with an empty persistent compile cache (a cold compile);
* `cleanrl`: `cleanrl_utils.tuner.Tuner` (cleanrl 1.2.0) running CleanRL's `ppo.py` (torch),
  one trial after another in its process (`benchmarks.peers.cleanrl_tuner`);
* `cleanrl-train`: the same Tuner running `benchmarks/peers/purejaxppo_trial.py`, which
  trains each trial with `purejaxppo train` in its own process and hands the returns to
  the tuner as tensorboard scalars; the persistent compile cache on, empty at trial 1.

Best value: CleanRL's tuner averages the last 50 episodic returns of a trial; `purejaxppo
tune` the returns of the episodes ended in its last 10% of updates. The CleanRL arms need
a virtualenv with cleanrl (Python < 3.11) at the repository root (git ignores it); its gym
0.23 needs numpy < 2, and its tuner imports wandb (which needs setuptools' pkg_resources)
and rich:

    python3.10 -m venv cleanrl-venv
    cleanrl-venv/bin/pip install cleanrl==1.2.0 optuna torch gymnasium==0.28.1 tensorboard \
        "numpy<2" "setuptools<70" rich
    python -m benchmarks.tune_throughput --cleanrl-python cleanrl-venv/bin/python \
        --trials 64 --json benchmarks/results/tune-throughput-cpu-YYYYMMDD.json
    python -m benchmarks.tune_throughput --arms ours cleanrl-train --trials 4 \
        --total-timesteps 20000 --cleanrl-python ...        # smoke test, about 2 min

Prints a Markdown table (wall seconds, seconds per trial, best value, CleanRL's time over
ours). Not a test: nothing is asserted.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from benchmarks.harness import RESULTS, ROOT, machine, markdown_table, write_text

#: The searched fields, the same for every arm: PPOConfig field -> (kind, low, high).
SEARCH = {
    "learning_rate": ("log_uniform", 1e-4, 1e-2),
    "ent_coef": ("uniform", 0.0, 0.05),
    "gae_lambda": ("uniform", 0.8, 0.99),
    "clip_coef": ("uniform", 0.1, 0.3),
}
ARMS = ("ours", "cleanrl-train", "cleanrl")
PEERS = Path(__file__).resolve().parent / "peers"


def search_flags(search: dict = SEARCH) -> list[str]:
    """`purejaxppo tune`'s `--search FIELD=KIND:LOW:HIGH` arguments for `search`."""
    flags = []
    for field, (kind, low, high) in search.items():
        flags += ["--search", f"{field}={kind}:{low!r}:{high!r}"]
    return flags


def cleanrl_space(search: dict = SEARCH) -> list[list]:
    """The CleanRL tuner's space for `search`: `[flag, low, high, log]` per field, with
    ppo.py's flag names (`learning-rate`). Raises ValueError on a kind other than
    uniform / log_uniform."""
    space = []
    for field, (kind, low, high) in search.items():
        if kind not in ("uniform", "log_uniform"):
            raise ValueError(f"search[{field!r}]: kind {kind!r} is not uniform or log_uniform")
        space.append([field.replace("_", "-"), low, high, kind == "log_uniform"])
    return space


def ours_command(args: argparse.Namespace, out: Path) -> list[str]:
    """The `purejaxppo tune` command line of the first arm, writing to `out`."""
    return [
        *[str(Path(sys.executable).with_name("purejaxppo")), "tune"],
        *["--config", str(args.config), "--total-timesteps", str(args.total_timesteps)],
        *search_flags(),
        *["--trials", str(args.trials), "--batch", str(min(args.batch, args.trials))],
        *["--sampler", "tpe", "--pruner", "none", "--out", str(out), "--no-progress"],
    ]


def cleanrl_command(args: argparse.Namespace, arm: str, workdir: Path) -> list[str]:
    """The peer driver's command line for `arm` ("cleanrl" or "cleanrl-train")."""
    command = [str(args.cleanrl_python), "-m", "benchmarks.peers.cleanrl_tuner"]
    command += ["--space", json.dumps(cleanrl_space()), "--trials", str(args.trials)]
    command += ["--fixed", f"total-timesteps={args.total_timesteps}"]
    command += ["--window", str(args.window), "--workdir", str(workdir)]
    if arm == "cleanrl-train":
        command += ["--script", str(PEERS / "purejaxppo_trial.py")]
        command += ["--fixed", f"config={args.config}"]
        command += ["--fixed", f"purejaxppo={Path(sys.executable).with_name('purejaxppo')}"]
    return command


def best_of_trials(trials_csv: Path) -> tuple[float, int]:
    """(best value, completed trials) of a `purejaxppo tune` trials.csv (maximize). The
    value's column is `value`, or `value_<metric>` where the study names its metric (Optuna's
    `set_metric_names`, as `tune` does)."""
    with open(trials_csv, newline="") as f:
        rows = [r for r in csv.DictReader(f) if r["state"] == "COMPLETE"]
    column = next((c for c in (rows[0] if rows else {}) if c.startswith("value")), "value")
    values = [float(r[column]) for r in rows if r[column] and math.isfinite(float(r[column]))]
    return (max(values) if values else float("nan")), len(rows)


def children_cpu_s() -> float:
    """CPU seconds (user + system) of every finished, waited-for descendant process: an
    arm's processes and theirs (a tuner's trial subprocesses) count once they exit."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def time_arm(
    arm: str, command: list[str], scratch: Path, trials: int, read: Callable[[str], dict]
) -> dict:
    """Runs one arm's `command` as a subprocess (a compile cache of its own, empty at the
    start); returns its row: wall_s, cpu_s (its processes' and theirs, once they exit), the
    1-minute load average at its start and end (the machine may be shared), error, and
    `read(stdout)`'s best and completed (NaN and 0 for a failed arm)."""
    env = dict(os.environ, PUREJAXPPO_COMPILE_CACHE=str(scratch / f"{arm}-jax-cache"))
    env.pop("PUREJAXPPO_NO_COMPILE_CACHE", None)
    load_start, cpu_start = os.getloadavg()[0], children_cpu_s()
    start = time.perf_counter()
    proc = subprocess.run(command, capture_output=True, text=True, env=env, cwd=ROOT)
    wall = time.perf_counter() - start
    row = {"arm": arm, "wall_s": wall, "trials": trials, "error": ""}
    row.update(cpu_s=children_cpu_s() - cpu_start, load_start=load_start)
    row["load_end"] = os.getloadavg()[0]
    if proc.returncode != 0:
        row.update(best=float("nan"), completed=0, error=proc.stderr[-1500:])
    else:
        row.update(read(proc.stdout))
    row["s_per_trial"] = wall / trials
    print(f"{arm}: {wall:.1f} s, best {row['best']:.4g} {row['error'][-300:]}", flush=True)
    return row


def last_json_line(stdout: str) -> dict:
    """The JSON object a peer driver prints as its last line of output."""
    return json.loads(stdout.strip().splitlines()[-1])


def ours_reader(out: Path) -> Callable[[str], dict]:
    """`time_arm`'s reader for `purejaxppo tune --out out`: its trials.csv's best value and
    completed trials."""

    def read(stdout: str) -> dict:
        best, completed = best_of_trials(out / "trials.csv")
        return {"best": best, "completed": completed}

    return read


def run_arm(args: argparse.Namespace, arm: str, scratch: Path) -> dict:
    """Runs one arm (`time_arm`), writing to `scratch / arm`."""
    out = scratch / arm
    if arm == "ours":
        return time_arm(arm, ours_command(args, out), scratch, args.trials, ours_reader(out))

    def read(stdout: str) -> dict:
        record = last_json_line(stdout)
        return {"best": record["best_value"], "completed": len(record["values"])}

    return time_arm(arm, cleanrl_command(args, arm, out), scratch, args.trials, read)


def peer_versions(python: Path | None) -> dict:
    """{package: version} of cleanrl, torch, optuna, gym and tensorboard in `python`'s
    environment ({} without one)."""
    if python is None:
        return {}
    code = (
        "import importlib.metadata as m, json; print(json.dumps({p: m.version(p) for p in "
        "('cleanrl', 'torch', 'optuna', 'gym', 'tensorboard', 'numpy')}))"
    )
    proc = subprocess.run([str(python), "-c", code], capture_output=True, text=True)
    return json.loads(proc.stdout) if proc.returncode == 0 else {"error": proc.stderr[-500:]}


def add_ratios(rows: list[dict]) -> None:
    """Adds `x_ours` (this arm's wall time over ours) and `x_ours_cpu` (its CPU seconds over
    ours: less sensitive to other jobs on a shared machine) to every row."""
    ours = next((r for r in rows if r["arm"] == "ours"), None)
    for row in rows:
        row["x_ours"] = row["wall_s"] / ours["wall_s"] if ours else float("nan")
        cpu = ours.get("cpu_s") if ours else None
        row["x_ours_cpu"] = row["cpu_s"] / cpu if cpu and "cpu_s" in row else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cleanrl-python", type=Path, help="the cleanrl virtualenv's python")
    parser.add_argument("--trials", type=int, default=64, help="trials per arm")
    parser.add_argument("--batch", type=int, default=16, help="purejaxppo tune --batch")
    parser.add_argument("--total-timesteps", type=int, default=100_000, help="per trial")
    parser.add_argument("--config", type=Path, default=ROOT / "configs" / "cartpole.yaml")
    parser.add_argument("--window", type=int, default=50, help="CleanRL's last-n window")
    parser.add_argument("--arms", nargs="+", choices=ARMS, default=list(ARMS))
    parser.add_argument("--json", type=Path, help="results file (default: results/...)")
    args = parser.parse_args()
    if args.trials < 1:
        raise ValueError(f"--trials must be >= 1, got {args.trials}")
    if args.cleanrl_python is None and set(args.arms) - {"ours"}:
        raise ValueError(f"--cleanrl-python is required for the arms {args.arms}")

    with tempfile.TemporaryDirectory(prefix="tune-throughput-") as scratch:
        rows = [run_arm(args, arm, Path(scratch)) for arm in args.arms]
    add_ratios(rows)
    cols = ["arm", "trials", "completed", "wall_s", "s_per_trial", "best", "x_ours"]
    cols += ["cpu_s", "x_ours_cpu", "load_start", "load_end"]
    lines = markdown_table(rows, cols, float_format=".3g")
    note = f"{args.trials} trials of {args.total_timesteps} env steps per arm" + (
        "" if args.trials == 64 else " (not 64: batching favours ours more at 64)"
    )
    print("\n".join([*lines, "", note]))
    record = {
        "trials": args.trials,
        "total_timesteps": args.total_timesteps,
        "batch": min(args.batch, args.trials),
        "search": {k: list(v) for k, v in SEARCH.items()},
        "cleanrl_window": args.window,
        "note": note,
        "compile_cache": "ours: empty at start (cold compile); cleanrl-train: on, empty at "
        "trial 1, one process per trial",
        "rows": rows,
        "cleanrl_venv": peer_versions(args.cleanrl_python),
        "machine": machine(("purejaxppo", "jax", "jaxlib", "optuna")),
    }
    path = args.json or RESULTS / f"tune-throughput-cpu-{time.strftime('%Y%m%d')}.json"
    write_text(path, json.dumps(record, indent=1) + "\n")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
