"""Does `purejaxppo tune` find better settings than RL Zoo's and CleanRL's tuners in the
same wall time? Three tuners, one search space, one budget per study, each winner rerun
with fresh seeds in its own library.

Tasks (`--task`, `TASKS`): Acrobot-v1 with `configs/acrobot.yaml`'s settings in every
library (16 envs x 128 steps, 4 epochs of 4 minibatches, the learning rate annealed, gamma
0.99, 64-64 tanh actor and critic, no normalisation), and Pendulum-v1 with
`configs/pendulum_normalized.yaml`'s (32 envs x 64 steps, 4 epochs of 8 minibatches, gamma
0.9, observations and rewards normalised, as CleanRL's `ppo_continuous_action.py` always
does), and Hopper-v4 with `configs/mujoco.yaml`'s (32 envs x 64 steps, 10 epochs of 32
minibatches, gamma 0.99, normalised; EnvPool's `envpool:Hopper-v4` for purejaxppo,
gymnasium's MuJoCo Hopper-v4 for SB3 and CleanRL); `--updates` updates per trial (default
25: 51,200 env steps), searching
`benchmarks.tune_quality.SEARCH` (learning_rate log-uniform over four decades, ent_coef,
gae_lambda and clip_coef uniform). Each study gets `--budget` seconds of wall time
(default 180), in a fresh process with a cold start; `--reps` studies per tuner (default
3), study r seeded with r. The arms, each with its own objective:

* `ours`: `purejaxppo tune --timeout BUDGET --seeds-per-trial 2 --objective eval_return:10
  --pruner median --no-enqueue-base` (TPE; each trial's value the mean over its 2 seeds of
  10 greedy episodes at each of 5 reports; `--objective episode_return:0.4` scores trials
  as the reruns are scored instead; an empty compile cache, so the compile is inside the
  budget);
* `rlzoo`: RL Zoo's `train.py --optimize` (rl-zoo3 2.9.2, SB3 PPO, TPE with 10 start-up
  trials and its default median pruner, 10 deterministic evaluation episodes at each of 5
  evaluations), its sampler swapped for the same space and settings
  (`benchmarks.peers.rlzoo_tuner --space TASK`; VecNormalize off on Acrobot, on for
  Pendulum);
* `cleanrl`: CleanRL's `Tuner` running CleanRL's `ppo.py` (`ppo_continuous_action.py` on
  Pendulum; TPE, one seed per trial, the mean of its last 50 training episode returns;
  `benchmarks.peers.cleanrl_tuner`), the config's settings passed as its flags.

The peers' tuners have no time budget of their own: Optuna's `timeout` is passed to their
`optimize` (`benchmarks.peers.optuna_budget`), which starts no trial after the budget and
lets the running one finish, so a peer's study may run up to one trial past it (the wall
column says how long each really took). `tune --timeout` stops its running trials at the
budget. Only completed trials count.

Each study's best completed trial is rerun with `--rerun-seeds` (default 100-104) in its
own library at the same env steps, and every library's run is scored alike: its
`final_return`, the mean training episode return over the last 10 updates' env steps
(`pjp.sweep`'s `final_return`; for SB3 and CleanRL the episodes that end in that last
fraction of the run, `benchmarks.peers.sb3_rerun`, ppo.py's own printed returns). The
trials' own values are of three kinds and are not compared across tuners.

The peers need their virtualenvs at the repository root (recipes in
`benchmarks.tune_throughput` and `benchmarks.tune_host_throughput`; the Hopper task also
needs MuJoCo in CleanRL's, the version its own `mujoco` extra pins for gymnasium 0.28.1:
`cleanrl-venv/bin/pip install mujoco==2.3.3`):

    python -m benchmarks.tune_peers_quality --rlzoo-python rlzoo-venv/bin/python \
        --cleanrl-python cleanrl-venv/bin/python          # about 50 min on 2 CPU cores
    python -m benchmarks.tune_peers_quality --task pendulum --rlzoo-python ... \
        --cleanrl-python ...
    python -m benchmarks.tune_peers_quality --task hopper --rlzoo-python ... \
        --cleanrl-python ...                              # about 45 min on 2 CPU cores
    python -m benchmarks.tune_peers_quality --rlzoo-python ... --cleanrl-python ... \
        --budget 60 --reps 1 --rerun-seeds 100 --json /tmp/s.json --figure /tmp/s.png  # ~6 min

Prints the table and writes `benchmarks/results/tune-peers-quality[-TASK]-cpu-<date>.json`
(or `--json`) and the guide's figure `docs/figures/tune-peers-quality[-TASK].png` (or `--figure`;
`--plot RESULTS...` redraws it from results files, a column per tuner of each). Not a
test: nothing is asserted.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import yaml

from benchmarks.harness import RESULTS, ROOT, machine, markdown_table, write_text
from benchmarks.tune_quality import SEARCH
from benchmarks.tune_throughput import cleanrl_space, last_json_line, search_flags, time_arm
from purejaxppo.config import PPOConfig

ARMS = ("ours", "rlzoo", "cleanrl")


@dataclass(frozen=True)
class Task:
    """One task of the study: its gymnasium id, the config whose settings every library
    uses, RL Zoo's sampler (`rlzoo_tuner --space`) and extra `--hyperparams`, the CleanRL
    script (a file of the installed `cleanrl` package) that trains it, and the env name
    purejaxppo trains when it is not the config's own (EnvPool's copy of a MuJoCo task)."""

    env_id: str
    config: str  # repo-relative
    space: str
    rlzoo_hyperparams: tuple[str, ...]
    cleanrl_script: str
    ours_env: str | None = None

    def settings(self) -> PPOConfig:
        config = PPOConfig.from_yaml(ROOT / self.config)
        return config.replace(env_name=self.ours_env) if self.ours_env else config

    @property
    def steps_per_update(self) -> int:
        config = self.settings()
        return config.num_envs * config.num_steps

    def cleanrl_flags(self) -> dict:
        """The config's fixed settings as CleanRL's flags (its scripts' own defaults for
        Acrobot: `ppo.py`'s 128 steps, 4 minibatches, 4 epochs, gamma 0.99)."""
        c = self.settings()
        return {
            "num-envs": c.num_envs,
            "num-steps": c.num_steps,
            "num-minibatches": c.num_minibatches,
            "update-epochs": c.update_epochs,
            "gamma": c.gamma,
            "vf-coef": c.vf_coef,
            "max-grad-norm": c.max_grad_norm,
            "clip-vloss": c.clip_vloss,
            "anneal-lr": c.anneal_lr,
        }


#: `--task` -> Task. CleanRL's `ppo_continuous_action.py` always normalises observations
#: and rewards (gymnasium wrappers, clipped at 10), so Pendulum's config normalises in
#: every library (`configs/pendulum_normalized.yaml`, RL Zoo's VecNormalize).
TASKS = {
    "acrobot": Task(
        "Acrobot-v1", "configs/acrobot.yaml", "acrobot", ("normalize:False",), "ppo.py"
    ),
    "pendulum": Task(
        "Pendulum-v1",
        "configs/pendulum_normalized.yaml",
        "pendulum",
        ("n_envs:32", "normalize:True"),
        "ppo_continuous_action.py",
    ),
    "hopper": Task(
        "Hopper-v4",
        "configs/mujoco.yaml",
        "hopper",
        ("n_envs:32", "normalize:True", "gamma:0.99"),
        "ppo_continuous_action.py",
        ours_env="envpool:Hopper-v4",
    ),
}
#: Updates whose episodes score a run (`pjp.sweep`'s `final_return` window).
WINDOW_UPDATES = 10
REPORTS = 5  # ours' reports and RL Zoo's evaluations per trial
EVAL_EPISODES = 10
MAX_TRIALS = 5000  # the trial budget every arm is given: the time budget ends a study first
FIGURE = ROOT / "docs" / "figures" / "tune-peers-quality.png"


def total_steps(args: argparse.Namespace) -> int:
    """Env steps per trial (and per rerun seed): `--updates` of the task's batch."""
    return args.updates * TASKS[args.task].steps_per_update


def ours_command(args: argparse.Namespace, out: Path, rep: int) -> list[str]:
    """The `purejaxppo tune` command line of study `rep`, writing to `out`."""
    task = TASKS[args.task]
    env = ["--env-name", task.ours_env] if task.ours_env else []
    return [
        *[str(Path(sys.executable).with_name("purejaxppo")), "tune"],
        *["--config", str(ROOT / task.config), *env],
        *["--total-timesteps", str(total_steps(args)), *search_flags(SEARCH)],
        *["--trials", str(MAX_TRIALS), "--timeout", str(args.budget), "--seed", str(rep)],
        *["--seeds-per-trial", "2", "--objective", args.objective],
        *["--reports", str(REPORTS), "--pruner", "median", "--no-enqueue-base"],
        *["--out", str(out), "--no-progress"],
        *[flag for field, value in args.ours_set.items() for flag in _flag(field, value)],
    ]


def ours_settings(args: argparse.Namespace) -> PPOConfig:
    """The task's config with `--ours-set`'s fields (YAML values, as the command's flags
    parse them): what ours' reruns train."""
    config = TASKS[args.task].settings()
    changes = {field: yaml.safe_load(value) for field, value in args.ours_set.items()}
    return PPOConfig.from_dict({**config.to_dict(), **changes}) if changes else config


def _flag(field: str, value: str) -> list[str]:
    """`--ours-set FIELD=VALUE` as the command's config flag."""
    return ["--" + field.replace("_", "-"), value]


def _ours_set(text: str) -> tuple[str, str]:
    """`FIELD=VALUE` of `--ours-set` (a `PPOConfig` field)."""
    field, sep, value = text.partition("=")
    if not sep or field not in PPOConfig.__dataclass_fields__:
        raise argparse.ArgumentTypeError(f"expected FIELD=VALUE with a PPOConfig field: {text!r}")
    return field, value


def rlzoo_command(args: argparse.Namespace, out: Path, rep: int) -> list[str]:
    """RL Zoo's tuner (`benchmarks.peers.rlzoo_tuner`) for study `rep`."""
    task = TASKS[args.task]
    return [
        *[str(args.rlzoo_python), "-m", "benchmarks.peers.rlzoo_tuner", "--env", task.env_id],
        *["--space", task.space, "--hyperparams", *task.rlzoo_hyperparams, "--pruner", "median"],
        *["--trials", str(MAX_TRIALS), "--n-timesteps", str(total_steps(args))],
        *["--n-evaluations", str(REPORTS), "--eval-episodes", str(EVAL_EPISODES)],
        *["--timeout", str(args.budget), "--seed", str(rep), "--workdir", str(out)],
    ]


def cleanrl_command(args: argparse.Namespace, out: Path, rep: int) -> list[str]:
    """CleanRL's tuner (`benchmarks.peers.cleanrl_tuner`) for study `rep`."""
    task = TASKS[args.task]
    fixed = {
        "env-id": task.env_id,
        **task.cleanrl_flags(),
        "total-timesteps": total_steps(args),
        "cuda": False,
    }
    command = [str(args.cleanrl_python), "-m", "benchmarks.peers.cleanrl_tuner"]
    command += ["--space", json.dumps(cleanrl_space(SEARCH)), "--trials", str(MAX_TRIALS)]
    command += ["--script", task.cleanrl_script]
    for key, value in fixed.items():
        command += ["--fixed", f"{key}={value}"]
    command += ["--env-id", task.env_id, "--sampler-seed", str(rep), "--timeout", str(args.budget)]
    return [*command, "--workdir", str(out)]


def ours_study(out: Path) -> dict:
    """best_value, best_params, completed and pruned of a `tune` study's trials.csv."""
    with open(out / "trials.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    column = next(c for c in rows[0] if c.startswith("value"))
    done = [r for r in rows if r["state"] == "COMPLETE" and math.isfinite(float(r[column]))]
    best = max(done, key=lambda r: float(r[column])) if done else None
    params = {k[len("params_") :]: float(v) for k, v in (best or {}).items() if k[:7] == "params_"}
    return {
        "best_value": float(best[column]) if best else float("nan"),
        "best_params": params,
        "completed": len(done),
        "pruned": sum(r["state"] == "PRUNED" for r in rows),
    }


def peer_study(stdout: str) -> dict:
    """The same fields from a peer driver's last JSON line (CleanRL's flag names mapped to
    purejaxppo's field names)."""
    record = last_json_line(stdout)
    params = {k.replace("-", "_"): v for k, v in record["best_params"].items()}
    return {
        "best_value": float(record["best_value"]),
        "best_params": {k: float(v) for k, v in params.items() if k in SEARCH},
        "completed": len(record["values"]),
        "pruned": int(record.get("pruned", 0)),
    }


def run_study(args: argparse.Namespace, arm: str, rep: int, scratch: Path) -> dict:
    """One study of `arm` (`tune_throughput.time_arm`: wall and CPU seconds, load)."""
    out = scratch / f"{arm}-{rep}"
    command = {"ours": ours_command, "rlzoo": rlzoo_command, "cleanrl": cleanrl_command}[arm]

    def read(stdout: str) -> dict:
        found = ours_study(out) if arm == "ours" else peer_study(stdout)
        return {**found, "best": found["best_value"]}

    cache_home = scratch / f"cache-{rep}"  # each study's compile cache empty at its start
    cache_home.mkdir(exist_ok=True)
    row = time_arm(arm, command(args, out, rep), cache_home, MAX_TRIALS, read)
    row.pop("s_per_trial")
    row.pop("trials")
    if row["error"]:  # a failed study: nothing found
        row.update(best_value=math.nan, best_params={}, completed=0, pruned=0)
    return {"arm": arm, "rep": rep, **row}


def cleanrl_final_return(stdout: str, total: int, window: float) -> float:
    """The mean of ppo.py's printed `episodic_return`s whose `global_step` falls in the
    last `window` fraction of `total` steps (NaN when none)."""
    pattern = r"global_step=(\d+), episodic_return=\[?(-?[\d.e+-]+)\]?"
    found = [(int(s), float(r)) for s, r in re.findall(pattern, stdout)]
    tail = [r for s, r in found if s > (1.0 - window) * total]
    return float(np.mean(tail)) if tail else float("nan")


def rerun(args: argparse.Namespace, arm: str, params: dict, scratch: Path) -> list[float]:
    """`final_return` of `params` trained with each rerun seed in `arm`'s own library."""
    task, total = TASKS[args.task], total_steps(args)
    window = WINDOW_UPDATES / args.updates
    if arm == "ours":
        import purejaxppo as pjp

        config = ours_settings(args).replace(total_timesteps=total)
        grid = {field: [value] for field, value in params.items()}
        sweep = pjp.sweep(config, seeds=args.rerun_seeds, grid=grid, verbose=False)
        return [float(v) for v in sweep.runs["final_return"]]
    if arm == "rlzoo":
        command = [str(args.rlzoo_python), "-m", "benchmarks.peers.sb3_rerun"]
        command += ["--env", task.env_id, "--space", task.space, "--params", json.dumps(params)]
        command += ["--total-timesteps", str(total), "--window", str(window)]
        command += ["--seeds", *map(str, args.rerun_seeds)]
        done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, check=True)
        return [float(v) for v in last_json_line(done.stdout)["final_returns"]]
    finals = []
    module = "cleanrl." + Path(task.cleanrl_script).stem
    for seed in args.rerun_seeds:
        command = [str(args.cleanrl_python), "-m", module, "--env-id", task.env_id]
        flags = {**task.cleanrl_flags(), "total-timesteps": total, "cuda": False, "seed": seed}
        command += [f"--{flag}={value}" for flag, value in flags.items()]
        for field, value in params.items():
            command += [f"--{field.replace('_', '-')}", repr(value)]
        done = subprocess.run(command, capture_output=True, text=True, cwd=scratch, check=True)
        finals.append(cleanrl_final_return(done.stdout, total, window))
    return finals


def summarize(rows: list[dict]) -> list[dict]:
    """One row per tuner: its studies' rerun scores (mean, std and worst over studies),
    completed and pruned trials and wall seconds per study (means)."""
    table = []
    for arm in ARMS:
        mine = [r for r in rows if r["arm"] == arm and r["rerun"]]
        if not mine:
            continue
        scores = np.array([r["rerun_mean"] for r in mine], np.float64)
        table.append(
            {
                "tuner": arm,
                "studies": len(mine),
                "rerun_mean": float(scores.mean()),
                "rerun_std": float(scores.std()),
                "rerun_worst": float(scores.min()),
                "completed": float(np.mean([r["completed"] for r in mine])),
                "pruned": float(np.mean([r["pruned"] for r in mine])),
                "wall_s": float(np.mean([r["wall_s"] for r in mine])),
            }
        )
    return table


LABELS = {"ours": "purejaxppo tune", "rlzoo": "RL Zoo's tuner", "cleanrl": "CleanRL's tuner"}


def figure_columns(records: list[dict]) -> list[tuple[str, str, list[dict]]]:
    """The figure's `(arm, label, studies)` columns: one per tuner (ours: per objective,
    labelled with it), in the order first met, each from the last of `records` that ran
    it (a later file of ours' arm alone replaces an earlier file's column)."""
    found = {}
    for record in records:
        objective = record.get("ours_objective", f"eval_return:{EVAL_EPISODES}")
        changes = "".join(f"\n{k}: {v}" for k, v in record.get("ours_set", {}).items())
        for arm in ARMS:
            studies = [r for r in record["studies"] if r["arm"] == arm and r["rerun"]]
            if studies:
                label = LABELS[arm] + (f"\n({objective}){changes}" if arm == "ours" else "")
                found[label] = (arm, label, studies)
    return list(found.values())


def plot(records: list[dict], path: Path) -> None:
    """Every rerun seed's final return, per tuner and study, with each study's mean, in
    the columns of `figure_columns(records)`."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    columns = figure_columns(records)
    colors = {"ours": "tab:red", "rlzoo": "tab:blue", "cleanrl": "tab:green"}
    fig, ax = plt.subplots(figsize=(2.2 * max(len(columns), 3), 4))
    for i, (arm, _, studies) in enumerate(columns):
        reps = max(r["rep"] for r in studies) + 1
        for row in studies:
            x = i + (row["rep"] - (reps - 1) / 2) * 0.22
            ax.scatter([x] * len(row["rerun"]), row["rerun"], s=14, color=colors[arm], alpha=0.6)
            ax.hlines(np.mean(row["rerun"]), x - 0.08, x + 0.08, colors="k")
    ax.set_xticks(range(len(columns)), [label for _, label, _ in columns], fontsize=8)
    ax.set_ylabel("final return of a rerun seed")
    first = records[0]
    ax.set_title(
        f"{first['task']}, {first['budget_s']:.0f} s per study: each study's best setting "
        f"rerun with {len(first['rerun_seeds'])} fresh seeds",
        fontsize=10,
    )
    ax.grid(alpha=0.3, axis="y")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rlzoo-python", type=Path, help="the RL Zoo virtualenv's python")
    parser.add_argument("--cleanrl-python", type=Path, help="the CleanRL virtualenv's python")
    parser.add_argument("--task", choices=TASKS, default="acrobot")
    parser.add_argument("--budget", type=float, default=180.0, help="wall seconds per study")
    parser.add_argument("--reps", type=int, default=3, help="studies per tuner")
    parser.add_argument("--updates", type=int, default=25, help="updates per trial")
    parser.add_argument("--rerun-seeds", type=int, nargs="+", default=[100, 101, 102, 103, 104])
    parser.add_argument("--arms", nargs="+", choices=ARMS, default=list(ARMS))
    parser.add_argument(
        "--objective",
        default=f"eval_return:{EVAL_EPISODES}",
        help="ours' tune --objective (episode_return:0.4: the reruns' own score)",
    )
    parser.add_argument(
        "--ours-set",
        type=_ours_set,
        action="append",
        default=[],
        metavar="FIELD=VALUE",
        help="a config field of ours' arm, in its studies and its reruns (repeatable; e.g. "
        "normalize_timing=step)",
    )
    parser.add_argument("--json", type=Path, help="results file (default: results/...)")
    parser.add_argument("--figure", type=Path, help="the guide's figure (default: per task)")
    parser.add_argument(
        "--plot", type=Path, nargs="+", help="draw the figure of these results files, exit"
    )
    argv = sys.argv[1:] if argv is None else argv
    args = parser.parse_args(argv)
    args.ours_set = dict(args.ours_set)
    if args.figure is None:
        suffix = "" if args.task == "acrobot" else f"-{args.task}"
        args.figure = FIGURE.with_name(f"tune-peers-quality{suffix}.png")
    if args.plot:
        plot([json.loads(path.read_text()) for path in args.plot], args.figure)
        return
    for arm in ("rlzoo", "cleanrl"):
        python = getattr(args, f"{arm}_python")
        if arm in args.arms and python is None:
            parser.error(f"--{arm}-python is required for the {arm} arm")
        if python is not None:  # absolute (reruns run elsewhere), the venv's link kept
            setattr(args, f"{arm}_python", Path(os.path.abspath(python)))
    if args.budget <= 0 or args.reps < 1 or args.updates <= WINDOW_UPDATES:
        parser.error(f"--budget > 0, --reps >= 1, --updates > {WINDOW_UPDATES}: {vars(args)}")

    rows = []
    with tempfile.TemporaryDirectory(prefix="tune-peers-quality-") as scratch:
        for rep in range(args.reps):
            for arm in args.arms:
                row = run_study(args, arm, rep, Path(scratch))
                params = row.get("best_params") or {}
                row["rerun"] = rerun(args, arm, params, Path(scratch)) if params else []
                row["rerun_mean"] = float(np.mean(row["rerun"])) if row["rerun"] else math.nan
                rows.append(row)
                print(f"study {rep} {arm}: rerun {row['rerun_mean']:.1f}", flush=True)
    table = summarize(rows)
    print("\n".join(markdown_table(table, list(table[0]) if table else [], ".1f")))
    record = {
        "command": "python -m benchmarks.tune_peers_quality " + " ".join(argv),
        "task": TASKS[args.task].env_id,
        "config": TASKS[args.task].config,
        "env_steps_per_trial": total_steps(args),
        "budget_s": args.budget,
        "ours_objective": args.objective,
        "ours_set": args.ours_set,
        "search": {k: list(v) for k, v in SEARCH.items()},
        "rerun_seeds": args.rerun_seeds,
        "rows": table,
        "studies": rows,
        "machine": machine(("purejaxppo", "jax", "jaxlib", "optuna")),
    }
    stem = "tune-peers-quality" + ("" if args.task == "acrobot" else f"-{args.task}")
    path = args.json or RESULTS / f"{stem}-cpu-{time.strftime('%Y%m%d')}.json"
    write_text(path, json.dumps(record, indent=1, default=float) + "\n")
    plot([record], args.figure)
    print(f"wrote {path} and {args.figure}")


if __name__ == "__main__":
    main()
