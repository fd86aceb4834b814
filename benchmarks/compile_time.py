"""Compile time as a metric: trace, lower, compile and warm-cache load per program kind,
each measurement in a fresh process.

Kinds (`KINDS`; `--kinds` picks some):

* `train:CONFIG/1`, `train:CONFIG/vmap8`: `make_train(PPOConfig.from_yaml(CONFIG))` under
  `jax.jit` at one agent, and `jax.jit(jax.vmap(train))` over 8 keys, for CartPole
  (`configs/cartpole.yaml`), a MinAtar CNN (`configs/breakout_minatar_cnn.yaml`), a GRU
  (`configs/memory_chain_gru.yaml`) and EnvPool MuJoCo (`configs/mujoco.yaml`, one agent;
  skipped without envpool). `trace_s`, `lower_s`, `compile_s`: `jit(...).trace(keys)`,
  `.lower()`, `.compile()` (nothing is run); `setup_s`: `make_train` (env construction);
  `lines`, `ops`: the lowered StableHLO text's size (`compile_child.program_size`,
  the measure `tests/test_program_size.py` pins).
* `runs_init:cartpole/once`, `runs_init:cartpole/default`: the init program of 4 runs
  that the drivers of many runs compile (`parallel.make_runs_program(..., once=True)`,
  on one device), timed as `train:` is, compiled with `compiled.ONCE_COMPILER_OPTIONS`
  (XLA's backend optimisation level 1, what the drivers do: bitwise the default's
  output, `tests/test_jit_once.py`) and with XLA's defaults.
* `dp_init:cartpole/once`, `dp_init:cartpole/default`: the init program of one CartPole
  run data-parallel over 2 CPU devices (`parallel.make_data_parallel_run`, what `train
  --coordinator` compiles), timed and compiled both ways as `runs_init:` is
  (bitwise the same output: `tests/test_parallel.py`).
* `check`: `pjp.check(cartpole, rows=<the probe battery's rows>, invariants=False)`, the
  battery program (`drivers/check/battery.py` `_train_battery`); `eval`: `pjp.evaluate` of
  an untrained CartPole `Policy` (100 episodes). Both are timed as whole calls (`wall_s`,
  which includes running) and split by JAX's own compile events (`jax.monitoring`), summed
  over every program the call compiles (`programs` of them).
* `seeds`, `sweep`, `tune`, `pbt`: the drivers of many runs on `configs/cartpole.yaml`
  cut to `compile_child.MANY_RUNS_UPDATES` updates, timed as whole calls as `check` is:
  `pjp.train_seeds` of 4 seeds (no plots), `pjp.sweep` of 2 learning rates x 2 seeds with
  progress (an init program, then segments: what `purejaxppo sweep` runs), `pjp.tune` of
  4 trials in lanes of 2 (in memory, one report) and `pjp.pbt` of 4 members, 2
  generations. Each compiles its runs' init (`parallel.make_runs_program(..., once=True)`)
  and its segment programs. `pbt_static`: the same `pjp.pbt` searching `hidden_sizes` too
  (choices 4 and 64-64), the groups of static-field PBT (`drivers/population/groups.py`):
  a program per group and padded size, generations run on the host.
* `...@optN`: the same kind with `XLA_FLAGS=--xla_backend_optimization_level=N` (any
  level the parent's environment set is dropped first). `import purejaxppo` sets level 2
  on a CPU-only install (`purejaxppo/_xla_flag.py`; XLA's default is 3), so `train:` kinds
  without a suffix compile at level 2, `@opt3` at XLA's default (what they did before
  level 2 was purejaxppo's) and `@opt1` at level 1. `rejax:...@opt2`: the peer at
  purejaxppo's level, like for like.
* `rejax:cartpole/1`, `rejax:cartpole/vmap8`: the peer, rejax 0.1.3's PPO on the same
  CartPole workload (`benchmarks/peers/rejax_ppo.py`), timed the same way in its own
  virtualenv (`benchmarks/peers/setup_rejax_venv.sh`; skipped without it), at XLA's
  default flags (plus the CPU-scheduler flag both libraries run with).
* `cli`: `purejaxppo train --config configs/cartpole.yaml --total-timesteps 512` (one
  update), launch to exit; `import`: `python -c 'import purejaxppo, jax'`; `import_train`:
  `python -c 'from purejaxppo import make_train'` (gymnax, flax, optax).
* `cli_seeds`: `purejaxppo train --config configs/cartpole.yaml --num-seeds 4
  --total-timesteps 4096 --no-progress`, and `cli_sweep`: `purejaxppo sweep --config
  configs/cartpole.yaml --seeds 4 --grid ent_coef=0,0.01 --total-timesteps 4096` (8 runs,
  with its progress bar), and `cli_tune`: `purejaxppo tune --config configs/cartpole.yaml
  --trials 8 --search learning_rate=log_uniform:1e-4:1e-2 --total-timesteps 4096
  --no-progress`, launch to exit: the many-runs commands, whose programs the command
  stores too (`stored_programs`).
* `first_update`: `purejaxppo train --config configs/cartpole.yaml --total-timesteps 20480`
  (40 updates): `first_update_s`, launch to the first update's row in the run's
  `metrics.csv` (read every 5 ms while the command runs: what a user watching the run sees
  first), and `process_s`, launch to exit.
* `first_update_split`: where `first_update`'s seconds go. The same `purejaxppo train`
  command run by the CLI's own `main` inside the child (`compile_child`; with the
  process's own arguments, so its programs are stored as the command's are,
  `stored_programs`), JAX's compile
  events summed until the first metrics row: `trace_s`, `lower_s` and `compile_s` (the
  cache load, warm) of every program before it, `first_update_s` timed by the parent as
  for `first_update` (its child also imports this package's `compile_child` and JAX's
  listeners first), and `other_s`, the rest: imports, env and config setup, Python
  between programs and the first segment's run.

Every kind runs twice per round, in two fresh processes sharing a fresh persistent
compile cache (`PUREJAXPPO_COMPILE_CACHE=<tmp>`, `purejaxppo.platform.enable_compile_cache`):
`cold` (an empty cache; its compile includes writing the entry, as the CLI's first run
does) and `warm` (the cache filled: `compile_s` is the load; JAX never caches trace and
lower, but `purejaxppo train`, `sweep` and `tune` load their runs' programs traced and
lowered from the cache's `programs/`, `stored_programs`). `process_s`: the child's launch to exit,
imports included. A program with a host callback (EnvPool) is not cached by JAX, so its
warm compile is a full one.

    python -m benchmarks.compile_time                  # every kind, one round (~13 min, busy 2-core CPU)
    python -m benchmarks.compile_time --rounds 3       # interleaved rounds; the table keeps each cell's best
    python -m benchmarks.compile_time --kinds train:cartpole/1 cli

Writes `benchmarks/results/compile-time-<platform>-<time>.{json,md}` (every round's rows
in the JSON; the Markdown table of each cell's minimum over rounds) and prints the table;
`--markdown-from RESULTS.json` regenerates the `.md` from a results file.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.compile_child import FIRST_UPDATE_ARGS, RUN_DIR_ENV, first_row_written, measure
from benchmarks.harness import (
    RESULTS,
    ROOT,
    machine,
    markdown_lines,
    run_json_process,
    stamp,
    write_results,
    write_text,
)

KINDS = (
    "import",
    "import_train",
    "train:cartpole/1",
    "train:cartpole/vmap8",
    "train:cartpole/1@opt1",
    "train:cartpole/vmap8@opt1",
    "train:cartpole/1@opt3",
    "train:cartpole/vmap8@opt3",
    "rejax:cartpole/1",
    "rejax:cartpole/vmap8",
    "rejax:cartpole/1@opt2",
    "rejax:cartpole/vmap8@opt2",
    "train:minatar_cnn/1",
    "train:minatar_cnn/vmap8",
    "train:gru/1",
    "train:gru/vmap8",
    "train:mujoco/1",
    "runs_init:cartpole/once",
    "runs_init:cartpole/default",
    "dp_init:cartpole/once",
    "dp_init:cartpole/default",
    "check",
    "eval",
    "seeds",
    "sweep",
    "tune",
    "pbt",
    "pbt_static",
    "cli",
    "cli_seeds",
    "cli_sweep",
    "cli_tune",
    "first_update",
    "first_update_split",
)
#: The peer's interpreter (`benchmarks/peers/setup_rejax_venv.sh`).
PEER_PYTHON = ROOT / "benchmarks" / ".venv-rejax" / "bin" / "python"
#: XLA's backend (LLVM) optimisation level flag, set by the `@optN` kinds.
LEVEL_FLAG = "--xla_backend_optimization_level"
#: `purejaxppo train` of CartPole for the `cli` kind (the run directory
#: is added per run).
TRAIN_CLI = [sys.executable, "-m", "purejaxppo.cli", "train", "--config", "configs/cartpole.yaml"]
#: Kinds run as a plain command, timed launch to exit by this process.
COMMANDS = {
    "import": [sys.executable, "-c", "import purejaxppo, jax"],
    "import_train": [sys.executable, "-c", "from purejaxppo import make_train"],
    "cli": [*TRAIN_CLI, "--total-timesteps", "512", "--no-progress"],
    "cli_seeds": [*TRAIN_CLI, "--num-seeds", "4", "--total-timesteps", "4096", "--no-progress"],
    "cli_sweep": [
        *[sys.executable, "-m", "purejaxppo.cli", "sweep", "--config", "configs/cartpole.yaml"],
        *["--seeds", "4", "--grid", "ent_coef=0,0.01", "--total-timesteps", "4096"],
    ],
    "cli_tune": [
        *[sys.executable, "-m", "purejaxppo.cli", "tune", "--config", "configs/cartpole.yaml"],
        *["--trials", "8", "--search", "learning_rate=log_uniform:1e-4:1e-2"],
        *["--total-timesteps", "4096", "--no-progress"],
    ],
    "first_update": [sys.executable, "-m", "purejaxppo.cli", *FIRST_UPDATE_ARGS],
}
#: How often `first_update` reads the run's metrics.csv (seconds).
POLL_S = 0.005
COLUMNS = (
    ("kind", "kind"),
    ("lines", "StableHLO lines"),
    ("ops", "ops"),
    ("cold.trace_s", "trace s"),
    ("cold.lower_s", "lower s"),
    ("cold.compile_s", "compile s (cold)"),
    ("warm.compile_s", "compile s (warm: cache load)"),
    ("warm.cache_hits", "cache hits (warm)"),
    ("cold.wall_s", "call s (cold)"),
    ("warm.wall_s", "call s (warm)"),
    ("cold.process_s", "process s (cold)"),
    ("warm.process_s", "process s (warm)"),
    ("cold.first_update_s", "first update s (cold)"),
    ("warm.first_update_s", "first update s (warm)"),
    ("cold.other_s", "other s (cold)"),
    ("warm.other_s", "other s (warm)"),
)


def check_kind(kind: str) -> None:
    """Raises ValueError unless `kind` is one of `KINDS` (nothing imported)."""
    if kind not in KINDS:
        raise ValueError(f"unknown kind {kind!r}; the kinds: {', '.join(KINDS)}")


# --- the parent --------------------------------------------------------------------------


def _skip_reason(kind: str) -> str | None:
    if kind.startswith("rejax:") and not PEER_PYTHON.exists():
        return f"no rejax venv at {PEER_PYTHON.relative_to(ROOT)} (setup_rejax_venv.sh)"
    if kind.startswith("train:mujoco"):
        import importlib.util

        if importlib.util.find_spec("envpool") is None:
            return "envpool is not installed"
    return None


def _child(kind: str, work: Path, timeout: float) -> dict:
    """`kind` once in a fresh process using the compile cache in `work/cache`."""
    env = {k: v for k, v in os.environ.items() if k != "PUREJAXPPO_NO_COMPILE_CACHE"}
    env["PUREJAXPPO_COMPILE_CACHE"] = str(work / "cache")
    env.pop("JAX_ENABLE_COMPILATION_CACHE", None)
    start = time.perf_counter()
    if kind == "first_update":
        return _first_update(work, env, timeout, COMMANDS[kind])
    if kind == "first_update_split":
        cmd = [sys.executable, "-m", "benchmarks.compile_time", "--child", kind]
        return _first_update(work, env, timeout, cmd, split=True)
    if kind in COMMANDS:
        cmd = list(COMMANDS[kind])
        if kind in ("cli", "cli_seeds", "cli_sweep", "cli_tune"):
            out_flag = "--out" if kind in ("cli_sweep", "cli_tune") else "--run-dir"
            cmd += [out_flag, str(Path(tempfile.mkdtemp(prefix="run-", dir=work)) / "run")]
        try:
            proc = subprocess.run(
                cmd, capture_output=True, text=True, env=env, timeout=timeout, cwd=ROOT
            )
        except subprocess.TimeoutExpired:
            return {"error": f"timeout after {timeout} s"}
        if proc.returncode != 0:
            return {"error": proc.stderr[-2000:]}
        out = {}
    else:
        python = PEER_PYTHON if kind.startswith("rejax:") else Path(sys.executable)
        cmd = [str(python), "-m", "benchmarks.compile_time", "--child", kind]
        variant = kind.partition("@")[2]
        if variant:  # "optN"
            flags = [f for f in env.get("XLA_FLAGS", "").split() if not f.startswith(LEVEL_FLAG)]
            env["XLA_FLAGS"] = " ".join([*flags, f"{LEVEL_FLAG}={variant.removeprefix('opt')}"])
        out = run_json_process(cmd, env=env, timeout=timeout)
    return {**out, "process_s": time.perf_counter() - start}


def _first_update(
    work: Path, env: dict, timeout: float, cmd: list[str], split: bool = False
) -> dict:
    """`cmd` (the `first_update` command, or the `first_update_split` child) once: launch
    to its first metrics row, and to exit; with `split`, the child's compile events (the
    JSON of its last stdout line) and `other_s`, what they leave of the first row's time."""
    run_dir = Path(tempfile.mkdtemp(prefix="run-", dir=work)) / "run"
    metrics = run_dir / "metrics.csv"
    start = time.perf_counter()
    proc = subprocess.Popen(
        cmd if split else [*cmd, "--run-dir", str(run_dir)],
        stdout=subprocess.PIPE if split else subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env={**env, RUN_DIR_ENV: str(run_dir)} if split else env,
        cwd=ROOT,
    )
    first = None
    while proc.poll() is None:
        now = time.perf_counter() - start
        if now > timeout:
            proc.kill()
            proc.communicate()
            return {"error": f"timeout after {timeout} s"}
        if first is None and first_row_written(metrics):
            first = now
        time.sleep(POLL_S)
    process_s = time.perf_counter() - start
    stdout, stderr = proc.communicate()
    if proc.returncode != 0:
        return {"error": stderr[-2000:]}
    if first is None:
        return {"error": "the run exited before its first metrics row was read"}
    out = {"first_update_s": first, "process_s": process_s}
    if split:
        events = json.loads(stdout.strip().splitlines()[-1])
        covered = events["trace_s"] + events["lower_s"] + events["compile_s"]
        out.update(events, other_s=first - covered)
    return out


def run_round(kinds: list[str], round_index: int, timeout: float) -> list[dict]:
    """One row per kind: its cold and its warm process."""
    rows = []
    for kind in kinds:
        reason = _skip_reason(kind)
        if reason is not None:
            rows.append({"kind": kind, "round": round_index, "skipped": reason})
            print(f"{kind:<26} skipped: {reason}", flush=True)
            continue
        with tempfile.TemporaryDirectory(prefix="compile-time-") as work:
            cold = _child(kind, Path(work), timeout)
            warm = _child(kind, Path(work), timeout) if "error" not in cold else {}
        row = {"kind": kind, "round": round_index, "cold": cold, "warm": warm}
        for count in ("lines", "ops"):
            if count in cold:
                row[count] = cold[count]
        rows.append(row)
        if "error" in cold or "error" in warm:
            print(f"{kind:<26} failed: {(cold.get('error') or warm['error'])[-400:]}")
        else:
            print(f"{kind:<26} cold {_summary(cold)}; warm {_summary(warm)}", flush=True)
    return rows


def _summary(run: dict) -> str:
    compile_s = f"{run['compile_s']:.2f} s compile, " if "compile_s" in run else ""
    first = f"{run['first_update_s']:.2f} s first update, " if "first_update_s" in run else ""
    return f"{compile_s}{first}{run['process_s']:.2f} s process"


def _get(row: dict, path: str):
    for part in path.split("."):
        row = row.get(part) if isinstance(row, dict) else None
    return row


def _fmt(value) -> str:
    if value is None:
        return ""
    return f"{value:.2f}" if isinstance(value, float) else str(value)


def table(rows: list[dict]) -> list[str]:
    """Markdown lines: one row per kind, each timing the minimum over its rounds."""
    cells = [[header for _, header in COLUMNS]]
    for kind in dict.fromkeys(r["kind"] for r in rows):
        mine = [r for r in rows if r["kind"] == kind]
        if any("skipped" in r for r in mine):
            cells.append([kind, f"skipped: {mine[0]['skipped']}"] + [""] * (len(COLUMNS) - 2))
            continue
        ok = [r for r in mine if "error" not in r["cold"] and "error" not in r["warm"]]
        if not ok:
            cells.append([kind, "failed"] + [""] * (len(COLUMNS) - 2))
            continue
        line = [kind]
        for path, _ in COLUMNS[1:]:
            values = [v for v in (_get(r, path) for r in ok) if v is not None]
            line.append(_fmt(min(values)) if values else "")
        cells.append(line)
    align = ["---"] + ["--:"] * (len(COLUMNS) - 1)
    return markdown_lines(cells, align)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=1, help="interleaved rounds of every kind")
    parser.add_argument("--kinds", nargs="+", default=list(KINDS), help=f"of {', '.join(KINDS)}")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per process")
    parser.add_argument("--out", type=Path, default=None, help="results path without suffix")
    parser.add_argument(
        "--markdown-from", type=Path, default=None, help="only rewrite this results JSON's .md"
    )
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        print(json.dumps(measure(args.child)), flush=True)
        return 0
    if args.markdown_from is not None:
        rewrite_markdown(args.markdown_from)
        return 0
    if args.rounds < 1:
        parser.error(f"--rounds {args.rounds}: must be at least 1")
    for kind in args.kinds:
        try:
            check_kind(kind)
        except ValueError as error:
            parser.error(f"--kinds: {error}")
    record = machine()
    rows = []
    for round_index in range(args.rounds):
        rows += run_round(args.kinds, round_index, args.timeout)
    import jax

    platform = jax.default_backend()
    out = args.out or RESULTS / f"compile-time-{platform}-{stamp()}"
    record.update(what=__doc__.split("\n")[0], rounds=args.rounds, platform=platform)
    record["rows"] = rows
    write_results(out, record, markdown)
    return 0 if all("error" not in r.get("cold", {}) | r.get("warm", {}) for r in rows) else 1


def markdown(record: dict) -> str:
    """The Markdown of a results record: how it was measured, then `table` of its rows (no
    heading: docs/benchmarks.md includes the file)."""
    loads = f"load average {record['load_average']} at the start, {record['load_average_end']}"
    lines = [
        f"`{record['command']}` on {record['date']}: {record['platform']}, "
        f"{record['cpu_count']} cores, jax {record['versions'].get('jax')}, {loads} at the "
        f"end. Seconds, each cell the minimum over {record['rounds']} round(s); cold: a "
        "fresh process and an empty compile cache, warm: a fresh process and the cache the "
        "cold one filled.",
        *([f"Measured on: {record['note']}."] if record.get("note") else []),
        "",
        *table(record["rows"]),
    ]
    return "\n".join(lines) + "\n"


def rewrite_markdown(path: Path) -> None:
    """Regenerates the `.md` beside a results `.json` from it (`--markdown-from`)."""
    write_text(path.with_suffix(".md"), markdown(json.loads(path.read_text())))


if __name__ == "__main__":
    sys.exit(main())
