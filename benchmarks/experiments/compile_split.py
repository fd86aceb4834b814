"""Where the compile time of the training program goes: tracing, lowering, XLA's HLO
passes and its backend (LLVM code generation; on a GPU also PTX assembly), per loop layout.

The target is a cold compile no longer than rejax's. `bench_cartpole.py` times
`lower().compile()` as one number; this script splits it, one fresh process per cell (no
compile cache, no warm XLA), for the standard CartPole program of `bench_cartpole.py`
(`jax.jit(jax.vmap(make_train(PPOConfig())))` over `--agents` keys):

* `trace_s`, `lower_s`: `jit(...).trace(keys)` and `.lower()`, Python and JAX;
* `compile_s`: `.compile()`, XLA;
* `hlo_passes_s`, `backend_s`: XLA's own timers inside that compile (its VLOG
  `XLA_SCOPED_LOGGING_TIMER`s, read from the process's log): on a CPU "Running HLO passes"
  and "Compiling ... using JIT" (LLVM); on a GPU every timer is kept in `timers` (labels
  vary with the XLA version) and the two columns are filled from the ones named
  "RunHloPasses" and "RunBackend" when present;
* `top_passes`: the five HLO passes that took longest.

A cell is a loop layout (`PPOConfig.loop_layout`) and a `benchmarks/experiments/variants.py`
variant, written `LAYOUT/VARIANT` (`unrolled/ru=4`, `compact/base`), or `rejax` for the peer
(rejax 0.1.3 in its own virtualenv, `benchmarks/peers/setup_rejax_venv.sh`; skipped when the
virtualenv is missing, unless `--peer-python` names an interpreter).

    python -m benchmarks.experiments.compile_split                     # the default cells
    python -m benchmarks.experiments.compile_split --cells compact/base unrolled/base rejax \\
        --json benchmarks/results/compile-split-cpu-<time>.json

Prints one row per cell and writes `--json` (never overwriting a file); `--jsonl` appends
each row as it is measured (a GPU call cut short keeps the rows so far). A cell that fails
is printed with its traceback and makes the exit status 1. On a GPU:
`benchmarks/gpu/compile_split.sh`.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.harness import (
    atomic_write,
    env_with_pythonpath,
    machine,
    run_json_process,
)

HERE = Path(__file__).resolve().parent
BENCHMARKS = HERE.parent

PEER_VENV_PYTHON = BENCHMARKS / ".venv-rejax" / "bin" / "python"
#: The cells run without `--cells`: the two layouts, the unrolled layout's knobs one at a
#: time (rollout unroll, values placement, the epochs not unrolled), and the peer.
DEFAULT_CELLS = (
    "compact/base",
    "unrolled/base",
    "unrolled/ru=1",
    "unrolled/ru=2",
    "unrolled/ru=4",
    "unrolled/values=loop",
    "unrolled/ru=1+eu=1",
    "rejax",
)
#: XLA source files whose VLOG(1) timers and pass times the cell's log keeps.
VMODULE = "hlo_pass_pipeline=1,cpu_compiler=1,gpu_compiler=1,nvptx_compiler=1"
_START, _END = "=== compile_split: compile start", "=== compile_split: compile end"
_TIMER = re.compile(r"\] (?P<label>.+?) time: (?P<value>[\d.]+) (?P<unit>us|ms|s) \(")
_PASS = re.compile(r"HLO pass: (?P<label>\S+) time: (?P<value>[\d.]+) (?P<unit>us|ms|s) \(")
_UNIT = {"us": 1e-6, "ms": 1e-3, "s": 1.0}


def parse_log(text: str) -> dict:
    """XLA's timers between the compile markers of a cell's log.

    Returns `{"timers": {label: s}, "passes": {pass: s}, "hlo_passes_s", "backend_s"}`;
    labels summed over repeats. The HLO-pass lines ("HLO pass: NAME time: ...") go to
    `passes`, every other timer line to `timers`. Times in seconds; a label's time is None
    in `hlo_passes_s` / `backend_s` when XLA printed no such timer.

    Raises:
      ValueError: `text` lacks the compile start / end markers that `run_cell` writes.
    """
    start, end = text.find(_START), text.find(_END)
    if start < 0 or end < 0:
        raise ValueError("the cell's log lacks its compile markers")
    timers: dict[str, float] = {}
    passes: dict[str, float] = {}
    for line in text[start:end].splitlines():
        found = _PASS.search(line)
        target = passes
        if found is None:
            found, target = _TIMER.search(line), timers
        if found is None:
            continue
        seconds = float(found["value"]) * _UNIT[found["unit"]]
        target[found["label"]] = target.get(found["label"], 0.0) + seconds

    def pick(*needles: str) -> float | None:
        hits = [s for label, s in timers.items() if any(n in label for n in needles)]
        return max(hits) if hits else None

    return {
        "timers": timers,
        "passes": passes,
        "hlo_passes_s": pick("Running HLO passes on", "RunHloPasses"),
        "backend_s": pick("for CPU using JIT", "RunBackend"),
    }


def check_cell(cell: str) -> None:
    """Raises ValueError unless `cell` is 'rejax' or LAYOUT/VARIANT with a layout of
    `purejaxppo.loops.LAYOUTS` and a variant `variants.parse` takes (no JAX started)."""
    if cell == "rejax":
        return
    from benchmarks.experiments import variants
    from purejaxppo.loops import LAYOUTS

    layout, slash, variant = cell.partition("/")
    if not slash or layout not in LAYOUTS:
        raise ValueError(f"write LAYOUT/VARIANT with LAYOUT one of {LAYOUTS}, or 'rejax'")
    variants.parse(variant)


def _program(cell: str, agents: int):
    """`(jit of the vmapped training function, keys)` for one cell, in this process."""
    import jax

    if cell == "rejax":
        from benchmarks.peers.rejax_ppo import make_algo, training_only

        algo = training_only(make_algo(500_000)[0])
        keys = jax.random.split(jax.random.PRNGKey(0), agents)
        return jax.jit(jax.vmap(algo.train)), keys

    from benchmarks.experiments import variants

    layout, _, variant = cell.partition("/")
    import purejaxppo as pjp

    variants.apply(variant)
    config = pjp.PPOConfig(total_timesteps=500_000, loop_layout=layout)
    keys = jax.random.split(jax.random.key(0), agents)
    return jax.jit(jax.vmap(pjp.make_train(config))), keys


def run_cell(cell: str, agents: int) -> dict:
    """Measures one cell in this process; its stderr (XLA's log) goes to a temporary file
    read back at the end. Call before JAX starts, with TF_CPP_VMODULE set (`main` does)."""
    log = tempfile.NamedTemporaryFile("w+", suffix=".log", delete=False)
    os.dup2(log.fileno(), sys.stderr.fileno())
    if cell != "rejax":
        from benchmarks.experiments import variants

        variants.set_xla_flags(cell.partition("/")[2], os.environ)
    train, keys = _program(cell, agents)
    import jax

    start = time.perf_counter()
    traced = train.trace(keys)
    trace_s = time.perf_counter() - start
    start = time.perf_counter()
    lowered = traced.lower()
    lower_s = time.perf_counter() - start
    print(_START, file=sys.stderr, flush=True)
    start = time.perf_counter()
    lowered.compile()
    compile_s = time.perf_counter() - start
    print(_END, file=sys.stderr, flush=True)
    text = Path(log.name).read_text(errors="replace")
    os.unlink(log.name)
    parsed = parse_log(text)
    top = sorted(parsed["passes"].items(), key=lambda kv: -kv[1])[:5]
    return {
        "cell": cell,
        "agents": agents,
        "platform": jax.default_backend(),
        "device": jax.devices()[0].device_kind,
        "trace_s": trace_s,
        "lower_s": lower_s,
        "compile_s": compile_s,
        "hlo_passes_s": parsed["hlo_passes_s"],
        "backend_s": parsed["backend_s"],
        "top_passes": [[name, seconds] for name, seconds in top],
        "timers": parsed["timers"],
        "stablehlo_lines": lowered.as_text().count("\n"),
        # the cell's XLA options: a child inherits the parent's XLA_FLAGS, which `import
        # purejaxppo` sets (level 2 on a CPU-only install), so rejax's cell runs at them too
        "xla_flags": os.environ.get("XLA_FLAGS", ""),
    }


def _child(cell: str, agents: int, python: str, pythonpath: str | None, timeout: float) -> dict:
    """One cell in a fresh process: `{"error": ...}` on failure."""
    env = env_with_pythonpath(pythonpath)
    env["TF_CPP_MIN_LOG_LEVEL"] = "0"
    env["TF_CPP_VMODULE"] = VMODULE
    env["JAX_ENABLE_COMPILATION_CACHE"] = "false"
    env["PUREJAXPPO_NO_COMPILE_CACHE"] = "1"
    cmd = [python, "-m", "benchmarks.experiments.compile_split", "--cell", cell]
    cmd += ["--agents", str(agents)]
    out = run_json_process(cmd, env=env, timeout=timeout)
    return {"cell": cell, "agents": agents, **out}


def _fmt(value) -> str:
    return "" if value is None else f"{value:.2f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cells", nargs="+", default=list(DEFAULT_CELLS))
    parser.add_argument("--agents", type=int, default=1, help="vmapped agents per program")
    parser.add_argument("--peer-python", default=None, help="interpreter for the rejax cell")
    parser.add_argument("--peer-pythonpath", default=None, help="PYTHONPATH of the rejax cell")
    parser.add_argument("--ours-pythonpath", default=None, help="PYTHONPATH of purejaxppo's")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per cell")
    parser.add_argument("--json", type=Path, default=None, help="results file to write")
    parser.add_argument(
        "--jsonl", type=Path, default=None, help="also append each row here as it is measured"
    )
    parser.add_argument("--cell", default=None, help=argparse.SUPPRESS)  # the child process
    args = parser.parse_args()
    if args.agents < 1:
        parser.error(f"--agents {args.agents}: must be at least 1")
    if args.cell is not None:
        json_out = os.fdopen(os.dup(sys.stdout.fileno()), "w")
        try:
            row = run_cell(args.cell, args.agents)
        except Exception as error:  # this process's stderr is XLA's log: report it in the row
            import traceback

            row = {"error": "".join(traceback.format_exception(error))[-2000:]}
        print(json.dumps(row), file=json_out, flush=True)
        return 0
    if args.json is not None and args.json.exists():
        parser.error(f"--json {args.json} exists; not overwriting it")
    for cell in args.cells:
        try:
            check_cell(cell)
        except ValueError as error:
            parser.error(f"--cells {cell!r}: {error}")
    peer = args.peer_python or (str(PEER_VENV_PYTHON) if PEER_VENV_PYTHON.exists() else None)
    rows = []
    print(
        f"{'cell':<24} {'trace s':>7} {'lower s':>7} {'compile s':>9} "
        f"{'HLO passes s':>12} {'backend s':>9}"
    )
    for cell in args.cells:
        if cell == "rejax" and peer is None:
            print(f"{cell:<24} skipped: no peer virtualenv ({PEER_VENV_PYTHON})")
            continue
        if cell == "rejax":
            python, pythonpath = peer, args.peer_pythonpath
        else:
            python, pythonpath = sys.executable, args.ours_pythonpath
        row = _child(cell, args.agents, python, pythonpath, args.timeout)
        rows.append(row)
        if args.jsonl is not None:
            with args.jsonl.open("a") as f:
                f.write(json.dumps(row) + "\n")
        if "error" in row:
            print(f"{cell:<24} failed: {row['error'][-300:]}")
            continue
        print(
            f"{cell:<24} {row['trace_s']:>7.2f} {row['lower_s']:>7.2f} "
            f"{row['compile_s']:>9.2f} {_fmt(row['hlo_passes_s']):>12} "
            f"{_fmt(row['backend_s']):>9}",
            flush=True,
        )
    if args.json is not None:
        record = {**machine(), "what": __doc__.split("\n")[0], "rows": rows}
        atomic_write(args.json, lambda p: Path(p).write_text(json.dumps(record, indent=1)))
        print(f"wrote {args.json}")
    return 0 if all("error" not in r for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
