"""One data-parallel agent over processes vs devices: env steps/s on the standard workload.

Workload: CartPole-v1 as configs/cartpole.yaml (4 envs x 128 steps, 4 epochs x 4
minibatches, 64-64 tanh MLP), ONE agent data-parallel (`parallel.make_data_parallel_run`,
the program behind `purejaxppo train --coordinator ...`). Three topologies, each in its
own fresh processes on 127.0.0.1 (gloo collectives on CPU):

* 1 process x 1 device (the baseline),
* 1 process x 2 devices,
* 2 processes x 1 device.

Each cell compiles a segment of `--updates` updates, runs it once to warm up, then times
`--repeats` runs of it (the best is reported); env steps/s = updates x num_envs x 128 /
seconds. Ratios are against the 1 x 1 (`vs_1x1`) and 1 x 2 (`vs_1x2`) cells of the same
`num_envs`, measured in the same invocation. `psum_us` is the latency of one all-reduce
of 8 floats over the cell's devices (a loop of 200 inside one program): every update of
the standard workload waits on 23 of them (16 minibatch steps, 4 epochs' advantage
statistics, 3 of the update's statistics), so on CPU the cell's speed is set by that latency unless each
device has enough envs to compute between them (`--num-envs 4 64 256`).

    python -m benchmarks.multiprocess_scaling                 # 20 updates, 3 repeats
    python -m benchmarks.multiprocess_scaling --updates 50 --json /tmp/scaling.json
    python -m benchmarks.multiprocess_scaling --num-envs 4 64 256 --json /tmp/scaling.json

Keep it short on a shared machine: each cell is a few seconds after its compile.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import socket
import subprocess
import sys
import time
from pathlib import Path

from benchmarks.harness import machine, markdown_table, write_text

HERE = Path(__file__).resolve().parent
CONFIG = HERE.parent / "configs" / "cartpole.yaml"
#: (name, processes, devices per process)
TOPOLOGIES = (("1x1", 1, 1), ("1x2", 1, 2), ("2x1", 2, 1))


def worker(
    port: int,
    processes: int,
    process_id: int,
    devices: int,
    updates: int,
    repeats: int,
    num_envs: int,
):
    """One process of a cell: joins, compiles, times; process 0 prints a JSON line."""
    import purejaxppo as pjp  # before JAX work
    from purejaxppo import parallel
    from purejaxppo import processes as procs

    procs.initialize_distributed(
        f"127.0.0.1:{port}", processes, process_id, local_device_count=devices
    )
    import dataclasses

    import jax

    config = pjp.PPOConfig.from_yaml(CONFIG)
    if num_envs:
        config = dataclasses.replace(config, num_envs=num_envs)
    program = parallel.make_data_parallel_run(config)
    runner = program.init(jax.random.key(0))
    started = time.perf_counter()
    segment = program.segment(updates).lower(runner, program.hparams).compile()
    compile_s = time.perf_counter() - started
    runner, metrics = segment(runner, program.hparams)  # warm-up
    jax.block_until_ready((runner, metrics))
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        runner, metrics = segment(runner, program.hparams)
        parallel.to_host(metrics["loss"])  # waits for every device of every process
        times.append(time.perf_counter() - started)
    psum_s = psum_latency(program.mesh)
    if process_id == 0:
        best = min(times)
        row = {
            "num_envs": config.num_envs,
            "devices": jax.device_count(),
            "compile_s": round(compile_s, 2),
            "seconds": [round(t, 4) for t in times],
            "ms_per_update": round(1e3 * best / updates, 2),
            "psum_us": round(1e6 * psum_s, 1),
            "steps_per_s": updates * config.batch_size / best,
        }
        print(json.dumps(row), flush=True)


def psum_latency(mesh, count: int = 200, repeats: int = 3) -> float:
    """Seconds per all-reduce of 8 floats over `mesh` (best of `repeats` programs of
    `count` dependent all-reduces)."""
    import jax
    import numpy as np
    from jax.sharding import PartitionSpec as P

    from purejaxppo import parallel

    axis = mesh.axis_names[0]

    def chain(x):
        return jax.lax.fori_loop(0, count, lambda _, y: jax.lax.psum(y, axis) * 0.5, x)

    program = jax.jit(jax.shard_map(chain, mesh=mesh, in_specs=P(), out_specs=P()))
    x = parallel.to_global(np.ones(8, np.float32), mesh, P())
    parallel.to_host(program(x))
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        parallel.to_host(program(x))
        times.append(time.perf_counter() - started)
    return min(times) / count


def free_port() -> int:
    """A free port below Linux's ephemeral range (no outgoing connection takes it)."""
    while True:
        port = random.randrange(20000, 32768)
        with socket.socket(socket.AF_INET6) as sock, contextlib.suppress(OSError):
            sock.bind(("::", port))
            return port


def run_cell(
    processes: int, devices: int, updates: int, repeats: int, num_envs: int, timeout: float
) -> dict:
    """Starts the cell's processes, returns process 0's row (or {"error": ...})."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    env["JAX_PLATFORMS"] = "cpu"
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "benchmarks.multiprocess_scaling", "worker", str(port), str(processes), str(i), str(devices),
             str(updates), str(repeats), str(num_envs)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            cwd=HERE.parent,
            start_new_session=True,
        )
        for i in range(processes)
    ]  # fmt: skip
    outputs = []
    try:
        for proc in procs:
            outputs.append(proc.communicate(timeout=timeout))
    except subprocess.TimeoutExpired:
        return {"error": f"timeout after {timeout} s"}
    finally:
        for proc in procs:
            proc.kill()
    if any(proc.returncode for proc in procs):
        return {"error": " | ".join(err.strip().splitlines()[-1] for _, err in outputs if err)}
    return json.loads(outputs[0][0].strip().splitlines()[-1])


def add_ratios(cells: list[dict]) -> None:
    """Adds `vs_1x1` and `vs_1x2` (env steps/s over those cells') to the rows of one
    `num_envs`."""
    speed = {row["topology"]: row.get("steps_per_s") for row in cells}
    for row in cells:
        for name in ("1x1", "1x2"):
            if speed.get(name) and "steps_per_s" in row:
                row[f"vs_{name}"] = row["steps_per_s"] / speed[name]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--updates", type=int, default=20, help="updates per timed segment")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per cell")
    parser.add_argument(
        "--num-envs",
        type=int,
        nargs="+",
        default=[0],
        help="total envs of the agent, one set of cells each (default: the config's, 4)",
    )
    parser.add_argument("--json", type=Path, help="write the rows and the machine here")
    args = parser.parse_args()
    load_before = [round(x, 2) for x in os.getloadavg()]
    rows = []
    for num_envs in args.num_envs:
        cells = []
        for name, processes, devices in TOPOLOGIES:
            row = {"topology": name, "processes": processes, "devices_per_process": devices}
            row.update(
                run_cell(processes, devices, args.updates, args.repeats, num_envs, args.timeout)
            )
            cells.append(row)
        add_ratios(cells)
        rows.extend(cells)
    cols = ["num_envs", "topology", "steps_per_s", "vs_1x1", "vs_1x2", "ms_per_update"]
    cols += ["psum_us", "compile_s"]
    print("\n".join(markdown_table([{c: r.get(c, "-") for c in cols} for r in rows], cols)))
    for row in rows:
        if "error" in row:
            print(f"{row['topology']}: {row['error']}", file=sys.stderr)
    if args.json is not None:
        record = {"workload": str(CONFIG.name), "updates": args.updates, "rows": rows}
        record["load_average_before"] = load_before
        record["machine"] = machine()
        write_text(args.json, json.dumps(record, indent=1))
        print(f"wrote {args.json}")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "worker":
        worker(*map(int, sys.argv[2:9]))
    else:
        main()
