"""Standard-workload speed benchmark: purejaxppo vs rejax 0.1.3, side by side, same machine.

Workload (issue "Speed"): CartPole-v1, 4 envs x 128 steps, 500,000 env steps per agent,
4 epochs x 4 minibatches, 64-64 tanh MLP, lr 2.5e-4 annealed; agents are independent
seeds under one `jax.vmap`. Each (library, agents) cell runs in its own fresh process, so
compile caches and peak memory do not leak between cells.

    python benchmarks/bench_cartpole.py                      # CPU default: 1 and 8 agents
    python benchmarks/bench_cartpole.py --agents 1 8 64 1024 --repeats 3
    python benchmarks/bench_cartpole.py --no-peer            # purejaxppo only
    python benchmarks/bench_cartpole.py --variants base u_gae=128+cmdbuf   # speed experiments

    # GPU machine with a preinstalled jax and no virtualenvs: two pip --target site dirs
    python benchmarks/bench_cartpole.py --agents 1 8 64 1024 4096 16384 \
        --ours-pythonpath /tmp/site_ours --peer-python python3 --peer-pythonpath /tmp/site_rejax

The peer runs in its own virtualenv (rejax needs gymnax 0.0.9); the script creates it with
`benchmarks/peers/setup_rejax_venv.sh` on first use, unless `--peer-python` names another
interpreter (with `--peer-pythonpath` prepended to its PYTHONPATH, e.g. a `pip install
--target` dir holding rejax 0.1.3 and gymnax 0.0.9). `--variants` runs purejaxppo once
per variant of `experiments/variants.py` (scan unroll, XLA flags, matmul precision),
patched from outside the library; ratios are given for every variant. Results: a table on stdout and
`benchmarks/results/cartpole-<device>-<time>.json` / `.csv` with machine, jax version
and device. Ratios are ours / peer, measured in the same invocation.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
PEER_VENV = HERE / ".venv-rejax"


def run_ours(
    agents: int,
    total_timesteps: int,
    repeats: int,
    variant: str = "base",
    repeat_budget_s: float = float("inf"),
) -> dict:
    """One cell, in this process: compile once, run `repeats` times, report the best.

    Stops repeating once the runs so far took `repeat_budget_s` seconds (large batches).
    """
    import resource

    sys.path.insert(0, str(HERE))
    from experiments import variants

    variants.set_xla_flags(variant, os.environ)

    import jax
    import numpy as np

    import purejaxppo as pjp

    variants.apply(variant)

    config = pjp.PPOConfig(total_timesteps=total_timesteps)
    train = jax.jit(jax.vmap(pjp.make_train(config)))
    keys = jax.random.split(jax.random.key(0), agents)
    start = time.perf_counter()
    compiled = train.lower(keys).compile()
    compile_s = time.perf_counter() - start
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        out = jax.block_until_ready(compiled(keys))
        times.append(time.perf_counter() - start)
        print(f"purejaxppo[{variant}] agents={agents}: {times[-1]:.3f} s", file=sys.stderr)
        if sum(times) >= repeat_budget_s:
            break
    run_s = min(times)
    returns = np.asarray(out.metrics["episode_return"])
    final = float(np.nanmean(np.nanmean(returns[:, -10:], axis=1)))
    device = jax.devices()[0]
    stats = device.memory_stats() if device.platform != "cpu" else None
    peak = (
        stats.get("peak_bytes_in_use")
        if stats
        else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    )
    return {
        "library": "purejaxppo" if variant == "base" else f"purejaxppo[{variant}]",
        "variant": variant,
        "version": pjp.__version__,
        "jax": jax.__version__,
        "device": getattr(device, "device_kind", device.platform),
        "platform": device.platform,
        "agents": agents,
        "total_timesteps": config.num_updates * config.batch_size,
        "num_updates": config.num_updates,
        "compile_s": compile_s,
        "run_s": run_s,
        "run_s_all": times,
        "ms_per_update": 1e3 * run_s / config.num_updates,
        "env_steps_per_s": agents * config.num_updates * config.batch_size / run_s,
        "peak_memory_bytes": peak,
        "peak_memory_kind": "device peak_bytes_in_use" if stats else "process max RSS",
        "final_return": final,
        "final_return_source": "mean episode_return over the last 10 updates, mean over agents",
        "final_return_min_agent": float(np.nanmin(np.nanmean(returns[:, -10:], axis=1))),
        "xla_flags": os.environ.get("XLA_FLAGS", ""),
        "purejaxppo_file": pjp.__file__,
    }


def _env_with_pythonpath(pythonpath: str | None) -> dict:
    env = dict(os.environ)
    if pythonpath:
        env["PYTHONPATH"] = os.pathsep.join(p for p in (pythonpath, env.get("PYTHONPATH")) if p)
    return env


def run_cell(library: str, agents: int, args: argparse.Namespace, variant: str = "base") -> dict:
    """Runs one cell in a fresh process and parses its JSON line."""
    if library == "purejaxppo":
        cmd = [sys.executable, __file__, "--worker", "--agents", str(agents), "--variants", variant]
        cmd += ["--repeat-budget-s", str(args.repeat_budget_s)]
        env = _env_with_pythonpath(args.ours_pythonpath)
    else:
        cmd = [
            args.peer_python or str(PEER_VENV / "bin" / "python"),
            str(HERE / "peers" / "rejax_ppo.py"),
            "--agents",
            str(agents),
            "--repeat-budget-s",
            str(args.repeat_budget_s),
        ]
        env = _env_with_pythonpath(args.peer_pythonpath)
    cmd += ["--total-timesteps", str(args.total_timesteps), "--repeats", str(args.repeats)]
    try:
        proc = subprocess.run(
            cmd, capture_output=True, text=True, env=env, timeout=args.cell_timeout
        )
    except subprocess.TimeoutExpired as e:
        err = e.stderr.decode() if isinstance(e.stderr, bytes) else (e.stderr or "")
        return {
            "library": library,
            "variant": variant,
            "agents": agents,
            "error": f"timeout after {args.cell_timeout} s; " + err[-1500:],
        }
    if proc.returncode != 0:
        return {
            "library": library,
            "variant": variant,
            "agents": agents,
            "error": proc.stderr[-2000:],
        }
    return json.loads(proc.stdout.strip().splitlines()[-1])


def ensure_peer_venv(args: argparse.Namespace) -> bool:
    if args.peer_python:
        return True
    if (PEER_VENV / "bin" / "python").exists():
        return True
    print(f"creating the rejax virtualenv at {PEER_VENV} ...", file=sys.stderr)
    script = HERE / "peers" / "setup_rejax_venv.sh"
    return subprocess.run(["bash", str(script), str(PEER_VENV)]).returncode == 0


def _nvidia_smi() -> str | None:
    try:
        out = subprocess.run(
            [
                "nvidia-smi",
                "--query-gpu=name,driver_version,memory.total,clocks.max.sm",
                "--format=csv,noheader",
            ],
            capture_output=True,
            text=True,
            timeout=30,
        )
        return out.stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--total-timesteps", type=int, default=500_000)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument(
        "--repeat-budget-s",
        type=float,
        default=float("inf"),
        help="stop repeating a cell once its runs took this many seconds",
    )
    parser.add_argument(
        "--cell-timeout",
        type=float,
        default=None,
        help="seconds before a cell's process is killed (row gets an error)",
    )
    parser.add_argument("--no-peer", action="store_true")
    parser.add_argument(
        "--peer-only-agents",
        type=int,
        nargs="*",
        default=None,
        help="run the peer only at these agent counts (default: all)",
    )
    parser.add_argument(
        "--peer-python",
        default=None,
        help="interpreter for the peer (default: the rejax virtualenv)",
    )
    parser.add_argument(
        "--peer-pythonpath", default=None, help="prepended to PYTHONPATH for the peer's process"
    )
    parser.add_argument(
        "--ours-pythonpath", default=None, help="prepended to PYTHONPATH for purejaxppo's processes"
    )
    parser.add_argument(
        "--variants",
        nargs="+",
        default=["base"],
        help="purejaxppo variants (benchmarks/experiments/variants.py)",
    )
    parser.add_argument(
        "--jsonl",
        type=Path,
        default=None,
        help="also append each row to this file as soon as it is measured",
    )
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--out-dir", type=Path, default=HERE / "results")
    args = parser.parse_args()

    if args.worker:
        row = run_ours(
            args.agents[0],
            args.total_timesteps,
            args.repeats,
            args.variants[0],
            args.repeat_budget_s,
        )
        print(json.dumps(row))
        return 0

    import pandas as pd

    peer = not args.no_peer and ensure_peer_venv(args)
    if args.jsonl:
        args.jsonl.parent.mkdir(parents=True, exist_ok=True)
    rows = []
    for agents in args.agents:
        cells = [("purejaxppo", v) for v in args.variants]
        if peer and (args.peer_only_agents is None or agents in args.peer_only_agents):
            cells.append(("rejax", "base"))
        for library, variant in cells:
            row = run_cell(library, agents, args, variant)
            print(json.dumps(row), file=sys.stderr, flush=True)
            if args.jsonl:
                with open(args.jsonl, "a") as f:
                    f.write(json.dumps(row, default=str) + "\n")
            rows.append(row)
    table = pd.DataFrame(rows)
    if "variant" not in table:
        table["variant"] = "base"
    table["variant"] = table["variant"].fillna("base")
    if peer and "env_steps_per_s" in table and (table.library == "rejax").any():
        theirs = table[table.library == "rejax"].set_index("agents")["env_steps_per_s"]
        table["speedup_vs_rejax"] = [
            row.env_steps_per_s / theirs.get(row.agents, float("nan"))
            if row.library != "rejax"
            else float("nan")
            for row in table.itertuples()
        ]
    columns = [
        c
        for c in [
            "library",
            "agents",
            "compile_s",
            "run_s",
            "ms_per_update",
            "env_steps_per_s",
            "peak_memory_bytes",
            "final_return",
            "speedup_vs_rejax",
            "error",
        ]
        if c in table
    ]
    import importlib.metadata as md

    versions = {}
    for package in ("jax", "jaxlib", "flax", "optax", "chex", "gymnax", "distrax"):
        try:
            versions[package] = md.version(package)
        except md.PackageNotFoundError:
            pass
    machine = {
        "machine": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "cpu_count": os.cpu_count(),
        "python": platform.python_version(),
        "date": time.strftime("%Y-%m-%d %H:%M:%S"),
        "jax": next(iter(table["jax"].dropna()), None) if "jax" in table else None,
        "device": next(iter(table["device"].dropna()), None) if "device" in table else None,
        "driver_versions": versions,
        "gpu": _nvidia_smi(),
    }
    print(json.dumps(machine))
    with pd.option_context("display.width", 200, "display.float_format", "{:,.3f}".format):
        print(table[columns].to_string(index=False))
    args.out_dir.mkdir(parents=True, exist_ok=True)
    kind = str(table["platform"].dropna().iloc[0]) if "platform" in table else "unknown"
    stem = args.out_dir / f"cartpole-{kind}-{time.strftime('%Y%m%d-%H%M%S')}"
    table.to_csv(stem.with_suffix(".csv"), index=False)
    stem.with_suffix(".json").write_text(
        json.dumps({**machine, "rows": table.to_dict(orient="records")}, indent=1, default=str)
    )
    print(f"wrote {stem}.json and .csv")
    return 0


if __name__ == "__main__":
    sys.exit(main())
