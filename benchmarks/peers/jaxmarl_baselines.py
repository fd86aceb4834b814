"""Same-machine peer: JaxMARL's OWN IPPO / MAPPO baseline scripts at their budget.

JaxMARL (Rutherford et al. 2024, arXiv:2311.10090) publishes MPE / SMAX results as curves
only, so benchmarks/marl.py has no number to compare with. This script runs JaxMARL's own
baseline code (not ours, not a port) in its own virtualenv (setup_jaxmarl_venv.sh) on the
same machine, and scores it exactly like marl.py: "final" = per seed, the mean of the last
10% of updates of the metric; then mean / min / max over seeds.

Tasks (files of a FLAIROx/JaxMARL checkout, `--baselines-dir`; the pinned versions are the
ones setup_jaxmarl_venv.sh checks out):
  mpe-ippo      baselines/IPPO/ippo_ff_mpe.py (commit 014b4f0af877856dc0a90437596a23a31153e303)
                + baselines/IPPO/config/ippo_ff_mpe.yaml (commit 1daff54ad0c8c7055168a2ac6158f89366a16abc).
                Score: `returned_episode_returns` of MPELogWrapper (every agent's reward times
                num_agents, averaged over agents = the team return), which the script returns
                already averaged over the update's NUM_STEPS x NUM_ACTORS entries: metrics [seeds, updates].
  mpe-mappo     baselines/MAPPO/mappo_rnn_mpe.py (commit 014b4f0...) + config
                mappo_homogenous_rnn_mpe.yaml (commit bd9f7011d0ce290df03ba2d2e3ed3357672402a1:
                NUM_ENVS 16, TOTAL_TIMESTEPS 1e7; later versions say 128 envs / 2e6 steps).
                The script returns no metrics (only `runner_state`); its per-update numbers
                exist only as what its io_callback hands to `wandb.log`, so the module's `wandb`
                is wrapped by a recorder (it still forwards to the disabled wandb run). Score:
                the logged "returns" = `returned_episode_returns[-1, :].mean()`, the team return
                of the last finished episode per actor at the rollout's last step.
  smax3m-mappo  baselines/MAPPO/mappo_rnn_smax.py (commit 014b4f0...) + config
                mappo_homogenous_rnn_smax.yaml (commit ea4733c755cf907e55488bdff111c8a180dc9db1)
                with MAP_NAME=3m (their file says 2s3z). Also metrics only via wandb.log; score:
                the logged "win_rate" = SMAXLogWrapper `returned_won_episode` over the episodes
                that ended in the update (NaN-aware mean over updates, as marl.py).
Overrides, nothing else: NUM_SEEDS = `--seeds`, SEED = `--seed` (if given), TOTAL_TIMESTEPS = `--total-timesteps` (as an
int: their float 1e7 is the same number), WANDB_MODE = disabled, SMAX MAP_NAME = 3m.

Seeds run as their IPPO main does: keys = split(PRNGKey(config SEED), seeds) and
`jax.vmap(jax.jit(make_train(config)))(keys)`, here wrapped in one outer `jax.jit` so the
ahead-of-time compile (`lower().compile()`, `compile_s`) is timed apart from the run (`run_s`).
Under vmap their unordered io_callback is run seed after seed for every update (jax's
batching rule maps over the batch), so logged record i belongs to seed i % seeds; the script
checks that every group of `seeds` consecutive records has the same env_step.
The XLA flag purejaxppo sets on import (--xla_cpu_enable_concurrency_optimized_scheduler=false,
a CPU deadlock workaround for vmapped programs on jax 0.10.x) is set here too, so both run
under the same XLA flags.

Usage (the JaxMARL venv, from the repository root: it runs as a module of the `benchmarks`
package, for `benchmarks/harness.py`; the checkout on PYTHONPATH, where the baseline script
imports from as `baselines.IPPO.ippo_ff_mpe`):
  bash benchmarks/peers/setup_jaxmarl_venv.sh /tmp/jaxmarl-venv /tmp/JaxMARL
  PYTHONPATH=/tmp/JaxMARL /tmp/jaxmarl-venv/bin/python -m benchmarks.peers.jaxmarl_baselines \\
      --baselines-dir /tmp/JaxMARL --task mpe-ippo --seeds 3 --total-timesteps 1e7 [--stamp S]
Appends a row to benchmarks/results/marl-jaxmarl-peer-cpu-<stamp>.{csv,md} (one stamp for
the three tasks gives one table). Progress goes to stderr.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import threading
import time
from pathlib import Path

_CPU_SCHEDULER_FLAG = "--xla_cpu_enable_concurrency_optimized_scheduler"
if _CPU_SCHEDULER_FLAG not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = (
        os.environ.get("XLA_FLAGS", "") + f" {_CPU_SCHEDULER_FLAG}=false"
    ).strip()

from benchmarks.harness import atomic_write  # noqa: E402  (after XLA_FLAGS, like the rest)

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]

SCRIPT_COMMIT = "014b4f0af877856dc0a90437596a23a31153e303"
#: task -> (script, config, config commit, score source, score key, overrides)
TASKS = {
    "mpe-ippo": (
        "baselines/IPPO/ippo_ff_mpe.py",
        "baselines/IPPO/config/ippo_ff_mpe.yaml",
        "1daff54ad0c8c7055168a2ac6158f89366a16abc",
        "metrics",
        "returned_episode_returns",
        {},
    ),
    "mpe-mappo": (
        "baselines/MAPPO/mappo_rnn_mpe.py",
        "baselines/MAPPO/config/mappo_homogenous_rnn_mpe.yaml",
        "bd9f7011d0ce290df03ba2d2e3ed3357672402a1",
        "wandb",
        "returns",
        {},
    ),
    "smax3m-mappo": (
        "baselines/MAPPO/mappo_rnn_smax.py",
        "baselines/MAPPO/config/mappo_homogenous_rnn_smax.yaml",
        "ea4733c755cf907e55488bdff111c8a180dc9db1",
        "wandb",
        "win_rate",
        {"MAP_NAME": "3m"},
    ),
}
#: ours (benchmarks/marl.py, same machine, 3 seeds, 1e7 env steps): final mean, source file
OURS = {
    "mpe-ippo": (-39.5, "marl-cpu-20261125-185445"),
    "mpe-mappo": (-25.1, "marl-cpu-20261125-194535"),
    "smax3m-mappo": (0.916, "marl-cpu-20261125-200903"),
}


class Recorder:
    """Stands in for the baseline module's `wandb`: keeps every `log` call, forwards it."""

    def __init__(self, wandb, every: int, seeds: int, label: str):
        self._wandb = wandb
        self._lock = threading.Lock()
        self.records: list[dict] = []
        self._every, self._seeds, self._label = every, seeds, label
        self._start = time.perf_counter()

    def log(self, data, *args, **kwargs):
        row = {}
        for key, value in data.items():
            try:
                row[key] = float(value)
            except (TypeError, ValueError):
                pass
        with self._lock:
            self.records.append(row)
            count = len(self.records)
        if count % (self._every * self._seeds) == 0:
            shown = {k: round(v, 4) for k, v in row.items() if k in ("returns", "win_rate")}
            shown.update(
                {
                    k: round(v, 4)
                    for k, v in row.items()
                    if k == "returned_episode_returns" or k == "returned_won_episode"
                }
            )
            print(
                f"[{self._label}] {time.perf_counter() - self._start:7.0f}s "
                f"update {count // self._seeds} env_step {row.get('env_step', '?')} {shown}",
                file=sys.stderr,
                flush=True,
            )
        return self._wandb.log(data, *args, **kwargs)

    def __getattr__(self, name):
        return getattr(self._wandb, name)


def import_script(baselines_dir: Path, script: str):
    """JaxMARL's baseline `script` (a path in the checkout `baselines_dir`, which must be
    on PYTHONPATH) imported by its module name (`baselines.IPPO.ippo_ff_mpe`).

    Raises ValueError when the name does not import or imports another checkout's file.
    """
    name = script.removesuffix(".py").replace("/", ".")
    try:
        module = importlib.import_module(name)
    except ModuleNotFoundError as error:
        if error.name is None or not name.startswith(error.name):
            raise  # a module the script itself imports is missing
        raise ValueError(
            f"--baselines-dir {baselines_dir}: {name} does not import; put the checkout on "
            f"PYTHONPATH (PYTHONPATH={baselines_dir})"
        ) from error
    found, expected = Path(module.__file__).resolve(), (baselines_dir / script).resolve()
    if found != expected:
        raise ValueError(
            f"--baselines-dir {baselines_dir}: {name} imports {found}, not {expected}; "
            "put that checkout first on PYTHONPATH"
        )
    return module


def per_seed(records: list[dict], key: str, seeds: int, updates: int, step_size: int):
    """[seeds, updates] from the logged records (record i is seed i % seeds)."""
    import numpy as np

    if len(records) != seeds * updates:
        raise RuntimeError(f"{len(records)} logged records, expected {seeds} x {updates}")
    steps = np.array([r["env_step"] for r in records]).reshape(updates, seeds)
    expected = (np.arange(updates) * step_size)[:, None]
    if not (steps == expected).all():
        raise RuntimeError("logged records are not in update-major, seed-minor order")
    return np.array([r[key] for r in records]).reshape(updates, seeds).T


def write_row(row: dict, stamp: str, out: Path) -> list[Path]:
    import pandas as pd

    out.mkdir(parents=True, exist_ok=True)
    base = out / f"marl-jaxmarl-peer-cpu-{stamp}"
    csv = base.with_suffix(".csv")
    table = pd.DataFrame([row])
    if csv.exists():
        table = pd.concat([pd.read_csv(csv), table], ignore_index=True)
    atomic_write(csv, lambda tmp: table.to_csv(tmp, index=False))
    cells = [
        [f"{v:.3g}" if isinstance(v, float) else str(v) for v in values]
        for values in table.astype(object).values
    ]
    lines = ["| " + " | ".join(map(str, table.columns)) + " |"]
    lines.append("|" + "---|" * len(table.columns))
    lines += ["| " + " | ".join(r) + " |" for r in cells]
    md = base.with_suffix(".md")
    atomic_write(md, lambda tmp: Path(tmp).write_text("\n".join(lines) + "\n"))
    return [csv, md]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baselines-dir", type=Path, required=True, help="a JaxMARL checkout")
    parser.add_argument("--task", choices=sorted(TASKS), required=True)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--total-timesteps", type=float, default=1e7)
    parser.add_argument("--stamp", default=time.strftime("%Y%m%d-%H%M%S", time.gmtime()))
    parser.add_argument("--note", default="")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results")
    parser.add_argument(
        "--seed", type=int, default=None, help="their config's SEED (default: their yaml's)"
    )
    parser.add_argument("--no-write", action="store_true", help="print the row only")
    args = parser.parse_args()

    import jax
    import numpy as np
    import wandb
    from omegaconf import OmegaConf

    script, config_file, config_commit, source, key, overrides = TASKS[args.task]
    module = import_script(args.baselines_dir, script)
    # Their main: config = OmegaConf.to_container(hydra config) (OmegaConf parses 1e7 as a float).
    config = OmegaConf.to_container(OmegaConf.load(args.baselines_dir / config_file))
    config.update(overrides)
    config["NUM_SEEDS"] = args.seeds
    if args.seed is not None:
        config["SEED"] = args.seed
    config["TOTAL_TIMESTEPS"] = int(args.total_timesteps)
    config["WANDB_MODE"] = "disabled"
    wandb.init(mode="disabled", config=config)

    train = module.make_train(config)  # fills NUM_UPDATES, NUM_ACTORS, ... into config
    updates = int(config["NUM_UPDATES"])
    step_size = config["NUM_ENVS"] * config["NUM_STEPS"]
    env_steps = updates * step_size
    recorder = Recorder(wandb, max(1, updates // 20), args.seeds, args.task)
    module.wandb = recorder

    keys = jax.random.split(jax.random.PRNGKey(config["SEED"]), args.seeds)
    program = jax.jit(jax.vmap(jax.jit(train)))
    load_before = os.getloadavg()
    print(
        f"[{args.task}] {script} seeds={args.seeds} updates={updates} env_steps/seed={env_steps} "
        f"load={load_before}",
        file=sys.stderr,
        flush=True,
    )
    start = time.perf_counter()
    compiled = program.lower(keys).compile()
    compile_s = time.perf_counter() - start
    print(f"[{args.task}] compiled in {compile_s:.1f}s", file=sys.stderr, flush=True)
    recorder.records.clear()
    start = time.perf_counter()
    out = jax.block_until_ready(compiled(keys))
    run_s = time.perf_counter() - start

    if source == "metrics":
        values = np.asarray(out["metrics"][key])  # [seeds, updates]: averaged inside the script
    else:
        values = per_seed(recorder.records, key, args.seeds, updates, step_size)
    if values.shape != (args.seeds, updates):
        raise RuntimeError(f"{key}: shape {values.shape}, expected {(args.seeds, updates)}")
    tail = max(1, updates // 10)
    finals = np.nanmean(values[:, -tail:], axis=1)
    ours, ours_source = OURS[args.task]
    row = {
        "task": args.task,
        "peer_script": f"{script}@{SCRIPT_COMMIT[:7]}",
        "peer_config": f"{Path(config_file).name}@{config_commit[:7]}",
        "score": key,
        "seeds": args.seeds,
        "env_steps": env_steps,
        "final_mean": float(finals.mean()),
        "final_min": float(finals.min()),
        "final_max": float(finals.max()),
        "ours_final_mean": ours,
        "ours_source": ours_source,
        "compile_s": compile_s,
        "run_s": run_s,
        "env_steps_per_s": args.seeds * env_steps / run_s,
        "load_before": " ".join(f"{x:.2f}" for x in load_before),
        "note": args.note,
    }
    print(f"[{args.task}] per-seed final {key}: {finals.tolist()}", file=sys.stderr, flush=True)
    print(row, flush=True)
    if not args.no_write:
        for path in write_row(row, args.stamp, args.out):
            print(f"wrote {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
