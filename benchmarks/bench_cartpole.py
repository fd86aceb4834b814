"""Standard-workload speed benchmark: purejaxppo vs rejax 0.1.3, side by side, same machine.

Workload (the "Speed" target): CartPole-v1, 4 envs x 128 steps, 500,000 env steps per agent,
4 epochs x 4 minibatches, 64-64 tanh MLP, lr 2.5e-4 annealed; agents are independent
seeds under one `jax.vmap`. Each (library, agents) cell runs in its own fresh process, so
compile caches and peak memory do not leak between cells.

    python -m benchmarks.bench_cartpole                      # CPU default: 1 and 8 agents
    python -m benchmarks.bench_cartpole --agents 1 8 64 1024 --repeats 3
    python -m benchmarks.bench_cartpole --no-peer            # purejaxppo only
    python -m benchmarks.bench_cartpole --variants base u_gae=128+cmdbuf   # speed experiments

    # GPU machine with a preinstalled jax and no virtualenvs: two pip --target site dirs
    python -m benchmarks.bench_cartpole --agents 1 8 64 1024 4096 16384 \
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
import subprocess
import sys
import time
from pathlib import Path

from benchmarks.harness import (
    atomic_write,
    env_with_pythonpath,
    machine,
    portable,
    run_json_process,
    versions,
    write_text,
)

HERE = Path(__file__).resolve().parent
PEER_VENV = HERE / ".venv-rejax"


def _program(pjp, config, agents: int, cpu_devices: int):
    """(compile thunk, call thunk, parallel mode) for one cell of purejaxppo.

    One device: `jit(vmap(make_train(config)))` over `[S]` keys (S = agents). Several CPU
    devices: S > 1 agents are split over the devices along the runs axis
    (`parallel.make_runs_program` + `batch_runs`, S / D agents vmapped per device); one
    agent is split data-parallel (`make_data_parallel_train`, num_envs / D envs per device,
    gradients pmean'd). Each call returns the `[S, num_updates]` episode returns.
    """
    import jax
    import numpy as np
    from jax.sharding import PartitionSpec as P

    from purejaxppo import parallel

    keys = jax.random.split(jax.random.key(0), agents)
    if cpu_devices == 1:
        train = jax.jit(jax.vmap(pjp.make_train(config)))
        state = {}

        def compile_():
            state["compiled"] = train.lower(keys).compile()

        def call():
            return jax.block_until_ready(state["compiled"](keys).metrics["episode_return"])

        return compile_, call, "vmap"

    if agents == 1:
        train = pjp.make_data_parallel_train(config, devices=cpu_devices)
        key = keys[0]

        def call():
            return jax.block_until_ready(train(key).metrics["episode_return"])[None]

        return None, call, "data"

    if agents % cpu_devices:
        raise ValueError(f"agents={agents} must be a multiple of cpu_devices={cpu_devices}")
    mesh = parallel.make_mesh(cpu_devices, parallel.RUNS_AXIS)
    fns = pjp.make_train_fns(config)
    num_updates = config.num_updates
    program = parallel.make_runs_program(
        parallel.batch_runs(fns.init, lambda runner, hp: fns.run(runner, hp, num_updates)[1]),
        mesh,
    )
    hparams = jax.tree.map(
        lambda x: np.repeat(np.asarray(x)[None], agents, axis=0),
        pjp.Hyperparams.from_config(config),
    )
    inputs = parallel.to_global(
        (np.asarray(jax.random.key_data(keys)), hparams), mesh, P(parallel.RUNS_AXIS)
    )
    state = {}

    def compile_():
        state["compiled"] = program.lower(*inputs).compile()

    def call():
        return jax.block_until_ready(state["compiled"](*inputs)["episode_return"])

    return compile_, call, "runs"


def run_ours(
    agents: int,
    total_timesteps: int,
    repeats: int,
    variant: str = "base",
    repeat_budget_s: float = float("inf"),
    cpu_devices: int = 1,
) -> dict:
    """One cell, in this process: compile once, run `repeats` times, report the best.

    Stops repeating once the runs so far took `repeat_budget_s` seconds (large batches).
    `cpu_devices` > 1 sets `jax_num_cpu_devices` and splits the work over that many CPU
    devices (see `_program`); the data-parallel program (1 agent) is compiled by its first
    call, whose time minus the best later run is reported as compile time.
    """
    import resource

    from benchmarks.experiments import variants

    variants.set_xla_flags(variant, os.environ)

    import jax
    import numpy as np

    if cpu_devices > 1:
        jax.config.update("jax_num_cpu_devices", cpu_devices)

    import purejaxppo as pjp

    variants.apply(variant)

    config = pjp.PPOConfig(total_timesteps=total_timesteps)
    compile_, call, mode = _program(pjp, config, agents, cpu_devices)
    first_call_s = None
    start = time.perf_counter()
    if compile_ is not None:
        compile_()
    else:
        call()
        first_call_s = time.perf_counter() - start
    compile_s = time.perf_counter() - start
    times, cpu_times = [], []
    for _ in range(repeats):
        cpu_start = time.process_time()
        start = time.perf_counter()
        returns = call()
        times.append(time.perf_counter() - start)
        cpu_times.append(time.process_time() - cpu_start)
        print(
            f"purejaxppo[{variant}] agents={agents} cpu_devices={cpu_devices}: {times[-1]:.3f} s",
            file=sys.stderr,
        )
        if sum(times) >= repeat_budget_s:
            break
    run_s = min(times)
    if first_call_s is not None:
        compile_s = first_call_s - run_s
    returns = np.asarray(returns)  # [S, num_updates]; one process: every shard is local
    device = jax.devices()[0]
    stats = device.memory_stats() if device.platform != "cpu" else None
    final_mean = np.nanmean(returns[:, -10:], axis=1)
    final = float(np.nanmean(final_mean))
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
        # CPU seconds of this process (all threads) per wall second of the best run: how
        # many cores it kept busy.
        "cores_busy": cpu_times[times.index(run_s)] / run_s,
        "env_steps_per_s": agents * config.num_updates * config.batch_size / run_s,
        "peak_memory_bytes": peak,
        "peak_memory_kind": "device peak_bytes_in_use" if stats else "process max RSS",
        "final_return": final,
        "final_return_source": "mean episode_return over the last 10 updates, mean over agents",
        "final_return_min_agent": float(np.nanmin(final_mean)),
        "cpu_devices": cpu_devices,
        "parallel": mode,
        "compile_s_source": "lower().compile()"
        if first_call_s is None
        else ("first call minus best run"),
        "xla_flags": os.environ.get("XLA_FLAGS", ""),
        "purejaxppo_file": portable(pjp.__file__),
    }


def run_cell(
    library: str,
    agents: int,
    args: argparse.Namespace,
    variant: str = "base",
    cpu_devices: int = 1,
) -> dict:
    """Runs one cell in a fresh process and parses its JSON line."""
    if library == "purejaxppo":
        cmd = [sys.executable, "-m", "benchmarks.bench_cartpole", "--worker"]
        cmd += ["--agents", str(agents), "--variants", variant]
        cmd += ["--repeat-budget-s", str(args.repeat_budget_s)]
        cmd += ["--cpu-devices", str(cpu_devices)]
        env = env_with_pythonpath(args.ours_pythonpath, args.xla_flags)
    else:
        cmd = [
            args.peer_python or str(PEER_VENV / "bin" / "python"),
            "-m",
            "benchmarks.peers.rejax_ppo",
            "--agents",
            str(agents),
            "--repeat-budget-s",
            str(args.repeat_budget_s),
        ]
        env = env_with_pythonpath(args.peer_pythonpath, args.xla_flags)
    cmd += ["--total-timesteps", str(args.total_timesteps), "--repeats", str(args.repeats)]
    cell = {"library": library, "variant": variant, "agents": agents, "cpu_devices": cpu_devices}
    row = run_json_process(cmd, env, args.cell_timeout)
    if "error" in row:
        return {**cell, **row}
    # The peer's process runs on one device whatever --cpu-devices says; record its flags.
    row.setdefault("cpu_devices", cpu_devices)
    row.setdefault("xla_flags", env.get("XLA_FLAGS", ""))
    return row


def ensure_peer_venv(args: argparse.Namespace) -> bool:
    if args.peer_python:
        return True
    if (PEER_VENV / "bin" / "python").exists():
        return True
    print(f"creating the rejax virtualenv at {PEER_VENV} ...", file=sys.stderr)
    script = HERE / "peers" / "setup_rejax_venv.sh"
    return subprocess.run(["bash", str(script), str(PEER_VENV)]).returncode == 0


def measure(args: argparse.Namespace) -> tuple[list[dict], bool]:
    """Runs every cell (each in a fresh process); returns the rows and whether the peer ran."""
    peer = not args.no_peer and ensure_peer_venv(args)
    if args.jsonl:
        args.jsonl.parent.mkdir(parents=True, exist_ok=True)
    rows = []
    for round_ in range(args.rounds):
        for agents in args.agents:
            cells = [
                ("purejaxppo", v, d)
                for v in args.variants
                for d in args.cpu_devices
                if d == 1 or agents == 1 or agents % d == 0
            ]
            if peer and (args.peer_only_agents is None or agents in args.peer_only_agents):
                cells.append(("rejax", "base", 1))
            for library, variant, cpu_devices in cells:
                row = run_cell(library, agents, args, variant, cpu_devices)
                row["round"] = round_
                if agents >= 8 and "final_return" in row:
                    row["return_ok"] = bool(row["final_return"] >= args.min_return)
                print(json.dumps(row), file=sys.stderr, flush=True)
                if args.jsonl:
                    with open(args.jsonl, "a") as f:
                        f.write(json.dumps(row, default=str) + "\n")
                rows.append(row)
    return rows, peer


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
    parser.add_argument(
        "--cpu-devices",
        type=int,
        nargs="+",
        default=[1],
        help="purejaxppo cells once per value D: D > 1 sets jax_num_cpu_devices=D and splits "
        "agents over the devices (runs axis), or one agent's envs (data-parallel); "
        "the peer always runs on one device",
    )
    parser.add_argument(
        "--xla-flags",
        default="",
        help="appended to XLA_FLAGS for every cell, ours and the peer's",
    )
    parser.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="run the whole grid of cells this many times, interleaved; the table keeps "
        "each cell's best round, the results files every row",
    )
    parser.add_argument(
        "--min-return",
        type=float,
        default=490.0,
        help="a row with >= 8 agents whose final return is below this is flagged",
    )
    parser.add_argument(
        "--from-jsonl",
        type=Path,
        default=None,
        help="measure nothing: build the table and results file from rows a --jsonl wrote",
    )
    parser.add_argument("--note", default=None, help="a note stored in the results file")
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
            args.cpu_devices[0],
        )
        print(json.dumps(row))
        return 0

    import pandas as pd

    if args.from_jsonl:
        # Rows measured by an earlier invocation (e.g. one cut short by a time limit
        # before it wrote its table): the table and record are built from them alone.
        lines = args.from_jsonl.read_text().splitlines()
        rows = [json.loads(line) for line in lines if line.strip()]
        peer = any(row.get("library") == "rejax" for row in rows)
    else:
        rows, peer = measure(args)
    all_rows = pd.DataFrame(rows)
    if "variant" not in all_rows:
        all_rows["variant"] = "base"
    all_rows["variant"] = all_rows["variant"].fillna("base")
    all_rows["cpu_devices"] = all_rows["cpu_devices"].fillna(1).astype(int)
    cell_keys = ["library", "variant", "cpu_devices", "agents"]
    # Each cell's best round, in the order the cells ran (a cell's error row only where it
    # has no successful round).
    run_s = all_rows["run_s"] if "run_s" in all_rows else pd.Series(float("nan"), all_rows.index)
    best = all_rows.assign(_t=run_s.fillna(float("inf"))).sort_values("_t", kind="stable")
    table = best.drop_duplicates(cell_keys).sort_index().drop(columns="_t")
    if peer and "env_steps_per_s" in table and (table.library == "rejax").any():
        theirs = table[table.library == "rejax"].set_index("agents")["env_steps_per_s"]
        table["speedup_vs_rejax"] = [
            row.env_steps_per_s / theirs.get(row.agents, float("nan"))
            if row.library != "rejax"
            else float("nan")
            for row in table.itertuples()
        ]
    if "return_ok" in table and (table["return_ok"] == False).any():  # noqa: E712
        bad = table[table["return_ok"] == False]  # noqa: E712
        print(
            f"WARNING: final return below {args.min_return} in rows:\n"
            + bad[cell_keys + ["final_return"]].to_string(index=False),
            file=sys.stderr,
        )
    columns = [
        c
        for c in [
            "library",
            "cpu_devices",
            "agents",
            "compile_s",
            "run_s",
            "ms_per_update",
            "env_steps_per_s",
            "cores_busy",
            "peak_memory_bytes",
            "final_return",
            "speedup_vs_rejax",
            "error",
        ]
        if c in table
    ]
    device_info = {
        "jax": next(iter(table["jax"].dropna()), None) if "jax" in table else None,
        "device": next(iter(table["device"].dropna()), None) if "device" in table else None,
    }
    if args.from_jsonl:  # not this machine's record: only what the rows say
        record = {"assembled_from": portable(args.from_jsonl), "note": args.note, **device_info}
    else:
        record = machine(
            **device_info,
            # The versions of this (the driver's) process; each row has its cell's own.
            driver_versions=versions(
                ("jax", "jaxlib", "flax", "optax", "chex", "gymnax", "distrax")
            ),
            note=args.note,
        )
    print(json.dumps(record))
    with pd.option_context("display.width", 200, "display.float_format", "{:,.3f}".format):
        print(table[columns].to_string(index=False))
    args.out_dir.mkdir(parents=True, exist_ok=True)
    kind = str(table["platform"].dropna().iloc[0]) if "platform" in table else "unknown"
    stem = args.out_dir / f"cartpole-{kind}-{time.strftime('%Y%m%d-%H%M%S')}"
    atomic_write(stem.with_suffix(".csv"), lambda p: table.to_csv(p, index=False))
    record = {**record, "xla_flags": args.xla_flags, "rows": table.to_dict(orient="records")}
    if args.rounds > 1:
        record["all_rounds"] = all_rows.to_dict(orient="records")
    write_text(stem.with_suffix(".json"), json.dumps(record, indent=1, default=str))
    print(f"wrote {stem}.json and .csv")
    return 0


if __name__ == "__main__":
    sys.exit(main())
