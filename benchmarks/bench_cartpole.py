"""Standard-workload speed benchmark: purejaxppo vs rejax 0.1.3, side by side, same machine.

Workload (issue "Speed"): CartPole-v1, 4 envs x 128 steps, 500,000 env steps per agent,
4 epochs x 4 minibatches, 64-64 tanh MLP, lr 2.5e-4 annealed; agents are independent
seeds under one `jax.vmap`. Each (library, agents) cell runs in its own fresh process, so
compile caches and peak memory do not leak between cells.

    python benchmarks/bench_cartpole.py                      # CPU default: 1 and 8 agents
    python benchmarks/bench_cartpole.py --agents 1 8 64 1024 --repeats 3
    python benchmarks/bench_cartpole.py --no-peer            # purejaxppo only

The peer runs in its own virtualenv (rejax needs gymnax 0.0.9); the script creates it with
`benchmarks/peers/setup_rejax_venv.sh` on first use. Results: a table on stdout and
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


def run_ours(agents: int, total_timesteps: int, repeats: int) -> dict:
    """One cell, in this process: compile once, run `repeats` times, report the best."""
    import resource

    import jax
    import numpy as np

    import purejaxppo as pjp

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
        "library": "purejaxppo",
        "version": pjp.__version__,
        "jax": jax.__version__,
        "device": getattr(device, "device_kind", device.platform),
        "agents": agents,
        "total_timesteps": config.num_updates * config.batch_size,
        "compile_s": compile_s,
        "run_s": run_s,
        "env_steps_per_s": agents * config.num_updates * config.batch_size / run_s,
        "peak_memory_bytes": peak,
        "peak_memory_kind": "device peak_bytes_in_use" if stats else "process max RSS",
        "final_return": final,
        "final_return_source": "mean episode_return over the last 10 updates, mean over agents",
    }


def run_cell(library: str, agents: int, total_timesteps: int, repeats: int) -> dict:
    """Runs one cell in a fresh process and parses its JSON line."""
    if library == "purejaxppo":
        cmd = [sys.executable, __file__, "--worker", "--agents", str(agents)]
    else:
        cmd = [
            str(PEER_VENV / "bin" / "python"),
            str(HERE / "peers" / "rejax_ppo.py"),
            "--agents",
            str(agents),
        ]
    cmd += ["--total-timesteps", str(total_timesteps), "--repeats", str(repeats)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        return {"library": library, "agents": agents, "error": proc.stderr[-2000:]}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def ensure_peer_venv() -> bool:
    if (PEER_VENV / "bin" / "python").exists():
        return True
    print(f"creating the rejax virtualenv at {PEER_VENV} ...", file=sys.stderr)
    script = HERE / "peers" / "setup_rejax_venv.sh"
    return subprocess.run(["bash", str(script), str(PEER_VENV)]).returncode == 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--total-timesteps", type=int, default=500_000)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--no-peer", action="store_true")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--out-dir", type=Path, default=HERE / "results")
    args = parser.parse_args()

    if args.worker:
        print(json.dumps(run_ours(args.agents[0], args.total_timesteps, args.repeats)))
        return 0

    import pandas as pd

    peer = not args.no_peer and ensure_peer_venv()
    rows = []
    for agents in args.agents:
        for library in ["purejaxppo"] + (["rejax"] if peer else []):
            row = run_cell(library, agents, args.total_timesteps, args.repeats)
            print(json.dumps(row), file=sys.stderr)
            rows.append(row)
    table = pd.DataFrame(rows)
    if peer and "env_steps_per_s" in table:
        ours = table[table.library == "purejaxppo"].set_index("agents")
        theirs = table[table.library == "rejax"].set_index("agents")
        ratio = (ours["env_steps_per_s"] / theirs["env_steps_per_s"]).rename("speedup_vs_rejax")
        table = table.merge(ratio, left_on="agents", right_index=True, how="left")
        table.loc[table.library != "purejaxppo", "speedup_vs_rejax"] = float("nan")
    columns = [
        c
        for c in [
            "library",
            "agents",
            "compile_s",
            "run_s",
            "env_steps_per_s",
            "peak_memory_bytes",
            "final_return",
            "speedup_vs_rejax",
            "error",
        ]
        if c in table
    ]
    machine = {
        "machine": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "cpu_count": os.cpu_count(),
        "python": platform.python_version(),
        "date": time.strftime("%Y-%m-%d %H:%M:%S"),
    }
    print(json.dumps(machine))
    with pd.option_context("display.width", 200, "display.float_format", "{:,.3f}".format):
        print(table[columns].to_string(index=False))
    args.out_dir.mkdir(parents=True, exist_ok=True)
    device = str(table["device"].dropna().iloc[0]) if "device" in table else "unknown"
    stem = args.out_dir / f"cartpole-{device.replace(' ', '_')}-{time.strftime('%Y%m%d-%H%M%S')}"
    table.to_csv(stem.with_suffix(".csv"), index=False)
    stem.with_suffix(".json").write_text(
        json.dumps({**machine, "rows": table.to_dict(orient="records")}, indent=1, default=str)
    )
    print(f"wrote {stem}.json and .csv")
    return 0


if __name__ == "__main__":
    sys.exit(main())
