"""The quality study's winners scored by greedy evaluation as well: each study's best
setting of `benchmarks.tune_peers_quality`, rerun with fresh seeds in its own library,
every rerun scored twice on the same trained model.

`benchmarks.tune_peers_quality` scores a rerun by its training returns (the mean episode
return of the last 10 updates' env steps, sampled actions). `purejaxppo tune
--objective eval_return` and RL Zoo's tuner choose their settings by greedy
(deterministic) evaluation episodes instead, so a setting that explores much can win a
study and rerun poorly on training returns. This script asks the other question: by the
measure these two tuners optimise, whose settings are better? For every source study it
retrains the study's best setting with `--rerun-seeds` and scores each trained model by

* `train`: its training returns, as `tune_peers_quality` scores a rerun;
* `greedy`: the mean return of `--episodes` greedy episodes of the final policy on fresh
  envs (ours: `pjp.evaluate(..., greedy=True)`, key `seed + 1000`, the observation
  statistics the run's own; SB3: `evaluate_policy(..., deterministic=True)` on one env
  seeded `seed + 1000` under a frozen copy of the training VecNormalize,
  `benchmarks.peers.sb3_rerun --greedy-episodes`, as RL Zoo evaluates).

CleanRL's tuner scores training returns, so its settings are not rerun here. A source is
`KEY=FILE:ARM`: a results file of `tune_peers_quality` and the arm (`ours` or `rlzoo`)
whose studies to rerun; ours' reruns use the file's `ours_set` fields. The peer needs the
RL Zoo virtualenv (`benchmarks.peers.rlzoo_tuner`'s recipe):

    python -m benchmarks.experiments.greedy_reruns --task hopper \\
        --rlzoo-python rlzoo-venv/bin/python \\
        --source v=benchmarks/results/tune-peers-quality-hopper-cpu-20261203-eval-ends.json:ours \\
        --source p=benchmarks/results/tune-peers-quality-hopper-cpu-20261203.json:rlzoo

Prints a table (one row per source: the mean over its studies of each study's mean over
seeds, the std and the worst study, for both scores) and writes
`benchmarks/results/tune-greedy-reruns-TASK-cpu-<date>.json` (or `--json`). Not a test:
nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks.harness import RESULTS, ROOT, machine, markdown_table, write_text
from benchmarks.tune_peers_quality import TASKS, WINDOW_UPDATES, ours_settings
from benchmarks.tune_throughput import last_json_line


def window_return(returns: np.ndarray, counts: np.ndarray, updates: int) -> float:
    """The episode-weighted mean of the per-update `returns` `[U]` over the last `updates`
    updates (`counts` `[U]`: episodes that ended in each), as `pjp.sweep`'s
    `final_return`; NaN when no episode ended there."""
    r, n = np.asarray(returns[-updates:], np.float64), np.asarray(counts[-updates:], np.float64)
    keep = (n > 0) & np.isfinite(r)
    return float((r[keep] * n[keep]).sum() / n[keep].sum()) if keep.any() else math.nan


def rerun_ours(args, record: dict, params: dict, scratch: Path) -> dict:
    """Ours: one program over the rerun seeds (`pjp.train_seeds`), then each seed's final
    policy evaluated greedily."""
    import jax

    import purejaxppo as pjp

    namespace = argparse.Namespace(task=args.task, ours_set=record.get("ours_set", {}))
    config = ours_settings(namespace).replace(
        total_timesteps=record["env_steps_per_trial"], seed=args.rerun_seeds[0], **params
    )
    seeds = args.rerun_seeds
    if list(seeds) != list(range(seeds[0], seeds[0] + len(seeds))):
        raise SystemExit(f"--rerun-seeds must be consecutive for ours' arm: {seeds}")
    out = pjp.train_seeds(
        config,
        scratch / "ours",
        len(seeds),
        progress=False,
        plot=False,
        verbose=False,
        overwrite=True,
    )
    updates = record["env_steps_per_trial"] // (config.num_envs * config.num_steps)
    train, greedy = [], []
    for i, seed in enumerate(out.seeds):
        rows = out.metrics[out.metrics["seed"] == seed].sort_values("update")
        train.append(
            window_return(
                rows["episode_return"].to_numpy(),
                rows["episode_count"].to_numpy(),
                min(WINDOW_UPDATES, updates),
            )
        )
        state = jax.tree.map(lambda x, i=i: x[i], out.runner_state).train_state
        result = pjp.evaluate(
            state,
            config=config,
            num_episodes=args.episodes,
            greedy=True,
            key=jax.random.key(seed + 1000),
        )
        greedy.append(float(np.mean(result.returns)))
    return {"train": train, "greedy": greedy}


def rerun_rlzoo(args, record: dict, params: dict) -> dict:
    """SB3 (RL Zoo's library): `benchmarks.peers.sb3_rerun --greedy-episodes`."""
    task = TASKS[args.task]
    total = record["env_steps_per_trial"]
    updates = total // task.steps_per_update
    command = [str(args.rlzoo_python), "-m", "benchmarks.peers.sb3_rerun", "--env", task.env_id]
    command += ["--space", task.space, "--params", json.dumps(params)]
    command += ["--total-timesteps", str(total), "--window", str(WINDOW_UPDATES / updates)]
    command += ["--greedy-episodes", str(args.episodes)]
    command += ["--seeds", *map(str, args.rerun_seeds)]
    done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, check=True)
    found = last_json_line(done.stdout)
    return {"train": found["final_returns"], "greedy": found["greedy_returns"]}


def peer_versions(python: Path | None) -> dict[str, str]:
    """The RL Zoo virtualenv's versions of the packages its reruns depend on."""
    if python is None:
        return {}
    names = ["stable-baselines3", "rl-zoo3", "gymnasium", "mujoco", "torch"]
    code = "import json, importlib.metadata as m; print(json.dumps({n: m.version(n) for n in %r}))"
    done = subprocess.run([str(python), "-c", code % names], capture_output=True, text=True)
    return json.loads(done.stdout) if done.returncode == 0 else {}


def summary(key: str, arm: str, objective: str, studies: list[dict]) -> dict:
    """A source's row: over its studies, the mean, std and worst of each study's mean."""
    row = {"source": key, "tuner": arm, "objective": objective, "studies": len(studies)}
    row["seeds"] = len(studies[0]["train"]) if studies else 0  # rerun seeds per study
    for score in ("greedy", "train"):
        means = np.array([np.nanmean(s[score]) for s in studies], np.float64)
        row |= {
            f"{score}_mean": float(means.mean()),
            f"{score}_std": float(means.std()),
            f"{score}_worst": float(means.min()),
        }
    return row


def _source(text: str) -> tuple[str, Path, str]:
    key, sep, rest = text.partition("=")
    path, _, arm = rest.rpartition(":")
    if not sep or arm not in ("ours", "rlzoo") or not Path(path).is_file():
        raise argparse.ArgumentTypeError(f"expected KEY=FILE:ours|rlzoo with a file: {text!r}")
    return key, Path(path), arm


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", choices=TASKS, required=True)
    parser.add_argument("--source", type=_source, action="append", required=True)
    parser.add_argument("--rlzoo-python", type=Path)
    parser.add_argument("--episodes", type=int, default=10, help="greedy episodes per model")
    parser.add_argument("--rerun-seeds", type=int, nargs="+", default=[100, 101, 102, 103, 104])
    parser.add_argument("--json", type=Path, help="results file (default: results/...)")
    args = parser.parse_args(argv)
    if any(arm == "rlzoo" for _, _, arm in args.source) and args.rlzoo_python is None:
        parser.error("--rlzoo-python is required for an rlzoo source")
    if args.rlzoo_python is not None:
        args.rlzoo_python = args.rlzoo_python.absolute()
    rows, studies = [], []
    for key, path, arm in args.source:
        record = json.loads(path.read_text())
        objective = record.get("ours_objective", "") if arm == "ours" else "rlzoo"
        mine = sorted(
            (s for s in record["studies"] if s["arm"] == arm and s.get("best_params")),
            key=lambda s: s["rep"],
        )
        done = []
        for study in mine:
            start = time.perf_counter()
            with tempfile.TemporaryDirectory(prefix="greedy-reruns-") as scratch:
                if arm == "ours":
                    scores = rerun_ours(args, record, study["best_params"], Path(scratch))
                else:
                    scores = rerun_rlzoo(args, record, study["best_params"])
            done.append(
                {
                    "source": key,
                    "arm": arm,
                    "rep": study["rep"],
                    "params": study["best_params"],
                    **scores,
                    "seconds": time.perf_counter() - start,
                }
            )
            print(
                f"{key} {arm} study {study['rep']}: greedy "
                f"{np.nanmean(scores['greedy']):.1f}, train {np.nanmean(scores['train']):.1f}",
                flush=True,
            )
        rows.append(summary(key, arm, objective, done))
        studies += done
    print("\n".join(markdown_table(rows, list(rows[0]), ".1f")))
    record = {
        "command": "python -m benchmarks.experiments.greedy_reruns "
        + " ".join(sys.argv[1:] if argv is None else argv),
        "task": TASKS[args.task].env_id,
        "sources": {key: {"file": path.as_posix(), "arm": arm} for key, path, arm in args.source},
        "episodes": args.episodes,
        "rerun_seeds": args.rerun_seeds,
        "rows": rows,
        "studies": studies,
        "machine": machine(("purejaxppo", "jax", "jaxlib", "envpool")),
        "peer_versions": peer_versions(args.rlzoo_python),
    }
    path = (
        args.json or RESULTS / f"tune-greedy-reruns-{args.task}-cpu-{time.strftime('%Y%m%d')}.json"
    )
    write_text(path, json.dumps(record, indent=1, default=float) + "\n")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
