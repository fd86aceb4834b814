"""Where a training program's device time goes, kernel by kernel, read from a profiler trace.

`profile_update.py` times the phases of an update as separate programs; this script traces
the whole compiled training program (`jit(vmap(train))` over agents, the standard CartPole
workload of `bench_cartpole.py`) for purejaxppo or rejax 0.1.3, and charges every kernel's
device time to the source line of the HLO instruction that launched it (the `metadata`
of the compiled HLO: `source_file` / `source_line`), so the two libraries' programs can be
compared by what their time is spent on: env steps, sampling, GAE, the loss, Adam.

    python -m benchmarks.trace_update --library ours --agents 4096 --total-timesteps 5120
    python -m benchmarks.trace_update --library rejax ...  # with rejax 0.1.3 importable

Writes into `--out`: `trace-<library>-<agents>.json` (the summary: device busy time per
update, per source group and the top instructions), `hlo-<library>-<agents>.txt.gz` (the
compiled HLO) and the raw `perfetto-<library>-<agents>.json.gz`, so the summary can be
recomputed on another machine with `--summarize PERFETTO HLO`. On a CPU the trace holds
host events only: the summary is then mostly empty (the script is tested there).
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
import shutil
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


_INSTRUCTION = re.compile(r"^\s*(?:ROOT\s+)?%?([\w.\-]+)\s*=\s*(.*)$")
_OP_NAME = re.compile(r"metadata=\{op_name=\"([^\"]*)\"")
_FRAME = re.compile(r"stack_frame_id=(\d+)")
_CALLS = re.compile(r"\b(?:calls|to_apply)=%?([\w.\-]+)")
_HEADER = re.compile(r"^(?:ENTRY\s+)?%?([\w.\-]+)\s+\(.*\{\s*$")
_TABLE_ROW = re.compile(r"^(\d+) (.*)$")
_FIELDS = re.compile(r"(\w+)=(\d+)")

#: The phase of an update an instruction belongs to: the first rule one frame of its call
#: stack matches, as (phase, file substring, function-name substring).
PHASES = (
    ("bootstrap", "purejaxppo/rollout.py", "next_values"),
    ("rollout", "purejaxppo/rollout.py", ""),
    ("GAE", "purejaxppo/gae.py", ""),
    ("epochs", "purejaxppo/update.py", ""),
    ("epochs", "purejaxppo/losses.py", ""),
    ("rollout", "rejax/", "collect_trajectories"),
    ("GAE", "rejax/", "calculate_gae"),
    ("epochs", "rejax/", "update"),
)
#: What an instruction computes: the first component one file of its stack matches.
COMPONENTS = (
    ("env", "gymnax/"),
    ("distribution", "distrax/"),
    ("optimizer", "optax/"),
    ("keys", "jax/_src/random"),
    ("keys", "jax/_src/prng"),
    ("network", "flax/"),
    ("network", "purejaxppo/networks/"),
)


def norm(name: str) -> str:
    """Kernel and instruction names compare equal after this ('.' and '-' become '_')."""
    return re.sub(r"[.\-]", "_", name)


def _tables(text: str) -> dict[str, dict[int, str]]:
    """The module's FileNames / FunctionNames / FileLocations / StackFrames tables."""
    tables: dict[str, dict[int, str]] = {}
    current = None
    for line in text.splitlines():
        if line in ("FileNames", "FunctionNames", "FileLocations", "StackFrames"):
            current = tables.setdefault(line, {})
            continue
        row = _TABLE_ROW.match(line) if current is not None else None
        if row:
            current[int(row.group(1))] = row.group(2).strip('"')
        elif line.strip() and current is not None and not line[0].isdigit():
            current = None
    return tables


def _stack(frame: int, tables: dict[str, dict[int, str]]) -> list[tuple[str, int, str]]:
    """`[(file, line, function), ...]` of a stack frame id, innermost first."""
    files, functions = tables.get("FileNames", {}), tables.get("FunctionNames", {})
    locations, frames = tables.get("FileLocations", {}), tables.get("StackFrames", {})
    out, seen = [], set()
    while frame in frames and frame not in seen:
        seen.add(frame)
        fields = dict((k, int(v)) for k, v in _FIELDS.findall(frames[frame]))
        loc = dict(
            (k, int(v)) for k, v in _FIELDS.findall(locations.get(fields["file_location_id"], ""))
        )
        out.append(
            (
                files.get(loc.get("file_name_id", 0), "?"),
                loc.get("line", 0),
                functions.get(loc.get("function_name_id", 0), "?"),
            )
        )
        # The text prints a frame's parent as the parent's id + 1 (1 = no parent), as
        # read off jax 0.10 / XLA modules: a Dense layer's frame N has parent N + 1 - 1.
        frame = fields.get("parent_frame_id", 0) - 1
    return out


def _short_path(path: str) -> str:
    """A source file's path from its package on (`purejaxppo/gae.py`, `rejax/algos/ppo.py`),
    wherever the checkout or site-packages lies (the innermost package folder wins: a
    virtualenv inside a checkout named purejaxppo); other files after `site-packages/`."""
    at = max(path.rfind("/" + package) for package in ("purejaxppo/", "rejax/"))
    return path[at + 1 :] if at >= 0 else path.split("/site-packages/")[-1]


def hlo_sources(text: str) -> dict[str, tuple[str, str]]:
    """`{norm(instruction): ("phase: component", "file:line function")}` of an HLO module.

    Phase and component are the first of `PHASES` / `COMPONENTS` matched by the
    instruction's call stack (the module's StackFrames table); the place is the innermost
    frame in purejaxppo or rejax. A fusion gets its fused computation's root's stack.
    """
    tables = _tables(text)
    stacks: dict[int, tuple[str, str]] = {}

    def attribute(frame: int) -> tuple[str, str]:
        if frame not in stacks:
            stack = _stack(frame, tables)
            files = [f for f, _, _ in stack]
            phase = next(
                (
                    name
                    for name, file, function in PHASES
                    if any(file in f and function in fn for f, _, fn in stack)
                ),
                "other",
            )
            component = next(
                (name for name, needle in COMPONENTS if any(needle in f for f in files)), "glue"
            )
            group = f"{phase}: {component}"
            ours = [s for s in stack if "purejaxppo/" in s[0] or "rejax/" in s[0]]
            f, line, fn = (ours or stack or [("", 0, "")])[0]
            stacks[frame] = (group, f"{_short_path(f)}:{line} {fn}")
        return stacks[frame]

    sources: dict[str, tuple[str, str]] = {}
    calls: dict[str, str] = {}
    roots: dict[str, tuple[str, str]] = {}
    computation = None
    for line in text.splitlines():
        header = _HEADER.match(line)
        if header:
            computation = header.group(1)
            continue
        match = _INSTRUCTION.match(line)
        if not match:
            continue
        name, rhs = norm(match.group(1)), match.group(2)
        frame = _FRAME.search(rhs)
        if frame:
            sources[name] = attribute(int(frame.group(1)))
            if line.lstrip().startswith("ROOT") and computation:
                roots[computation] = sources[name]
        call = _CALLS.search(rhs)
        if call:
            calls[name] = call.group(1)
    for name, computation in calls.items():
        if computation in roots and (name not in sources or sources[name][0].startswith("other")):
            sources[name] = roots[computation]
    return sources


def loop_phases(text: str) -> list[dict[str, Any]]:
    """The program's loops below the outermost (per-update) loop: kernels per update and
    the phase most of their body's instructions belong to (`hlo_sources`)."""
    from benchmarks import hlo_ops

    sources = hlo_sources(text)
    computations, _ = hlo_ops.parse_hlo(text)
    loops = hlo_ops.count_ops(text)["loops"]
    out = []
    for loop in loops:
        if loop["depth"] == 0:
            continue
        trips, parent = loop["trip_count"] or 1, loop["parent"]
        while parent is not None and loops[parent]["depth"] > 0:
            trips *= loops[parent]["trip_count"] or 1
            parent = loops[parent]["parent"]
        phases = Counter()
        for opcode, line in computations.get(loop["body"], []):
            name = _INSTRUCTION.match(line)
            if name and opcode not in hlo_ops.STRUCTURAL:
                phases[sources.get(norm(name.group(1)), ("other",))[0].split(":")[0]] += 1
        out.append(
            {
                "body": loop["body"],
                "kernels_per_update": trips * loop["kernels"],
                "phase": phases.most_common(1)[0][0] if phases else "other",
            }
        )
    return out


def phase_of(kernels_per_update: float, loops: list[dict[str, Any]]) -> str | None:
    """The phase of the loop whose kernels per update are nearest (within 25%), or None.

    On a GPU, XLA runs a loop body as one command buffer (a CUDA graph): the trace names
    its kernels after the buffer, not the instructions, so a buffer is matched to the loop
    that launches as many kernels per update."""
    best = min(
        loops, key=lambda loop: abs(loop["kernels_per_update"] - kernels_per_update), default=None
    )
    if best and abs(best["kernels_per_update"] - kernels_per_update) <= 0.25 * kernels_per_update:
        return best["phase"]
    return None


def device_events(trace: dict | list) -> list[dict[str, Any]]:
    """Complete events ('X') on device (GPU / TPU) timelines, not host threads."""
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    names = {
        e["pid"]: e.get("args", {}).get("name", "")
        for e in events
        if e.get("ph") == "M" and e.get("name") == "process_name"
    }
    devices = {pid for pid, name in names.items() if "/device:" in name}
    threads = {
        (e["pid"], e.get("tid")): e.get("args", {}).get("name", "")
        for e in events
        if e.get("ph") == "M" and e.get("name") == "thread_name"
    }
    out = []
    for e in events:
        if e.get("ph") != "X" or e.get("pid") not in devices:
            continue
        thread = threads.get((e["pid"], e.get("tid")), "")
        if "Stream" not in thread and "stream" not in thread:
            continue  # derived lines (XLA Modules / Ops / Steps) repeat the kernels
        out.append(e)
    return out


def summarize(trace: dict | list, hlo_text: str, num_updates: int, top: int = 30) -> dict:
    """Device time per update: total, per source group, per top instruction (ms)."""
    sources = hlo_sources(hlo_text)
    per_group: dict[str, float] = defaultdict(float)
    per_phase: dict[str, float] = defaultdict(float)
    per_op: dict[str, list] = {}
    events = device_events(trace)
    busy_us, start, end = 0.0, float("inf"), 0.0
    for e in events:
        args = e.get("args") or {}
        name = norm(str(args.get("hlo_op") or e.get("name", "")))
        group, where = sources.get(name, ("unattributed", ""))
        dur = float(e.get("dur", 0.0))
        busy_us += dur
        start, end = min(start, float(e["ts"])), max(end, float(e["ts"]) + dur)
        per_group[group] += dur
        per_phase[group.split(":")[0]] += dur
        entry = per_op.setdefault(name, [0.0, 0, group, where])
        entry[0] += dur
        entry[1] += 1
    scale = 1e-3 / max(num_updates, 1)  # us -> ms per update
    buffers = {n: v for n, v in per_op.items() if n.startswith("command_buffer")}
    if buffers:
        loops = loop_phases(hlo_text)
        for entry in buffers.values():
            phase = phase_of(entry[1] / max(num_updates, 1), loops)
            if phase is not None:
                entry[2] = f"{phase}: command buffer"
                per_group["unattributed"] -= entry[0]
                per_group[entry[2]] += entry[0]
                per_phase["unattributed"] -= entry[0]
                per_phase[phase] += entry[0]
    ops = sorted(per_op.items(), key=lambda item: -item[1][0])[:top]
    return {
        "num_updates": num_updates,
        "kernels": len(events),
        "kernels_per_update": len(events) / max(num_updates, 1),
        "device_busy_ms_per_update": busy_us * scale,
        "device_span_ms_per_update": (end - start) * scale if events else 0.0,
        "phases_ms_per_update": {
            g: round(us * scale, 4)
            for g, us in sorted(per_phase.items(), key=lambda i: -i[1])
            if abs(us * scale) >= 1e-4
        },
        "groups_ms_per_update": {
            g: round(us * scale, 4)
            for g, us in sorted(per_group.items(), key=lambda i: -i[1])
            if abs(us * scale) >= 1e-4
        },
        "top_ops": [
            {
                "op": name,
                "ms_per_update": round(v[0] * scale, 4),
                "launches_per_update": v[1] / max(num_updates, 1),
                "group": v[2],
                "source": v[3],
            }
            for name, v in ops
        ],
    }


_LOG_LINE = re.compile(r"^\s*([\d.]+) ms x\s*([\d.]+) (\S+)")


def summarize_log(lines: list[str], hlo_text: str) -> dict[str, Any]:
    """Phases from a printed summary (`print_summary`'s "<ms> ms x<kernels> <op>" lines,
    per update) when the raw trace did not come back: the same buffer-to-loop matching."""
    loops = loop_phases(hlo_text)
    sources = hlo_sources(hlo_text)
    phases: dict[str, float] = defaultdict(float)
    for line in lines:
        match = _LOG_LINE.match(line)
        if not match:
            continue
        ms, kernels, name = float(match.group(1)), float(match.group(2)), norm(match.group(3))
        if name.startswith("command_buffer"):
            phase = phase_of(kernels, loops) or "unattributed"
        else:
            phase = sources.get(name, ("unattributed",))[0].split(":")[0]
        phases[phase] += ms
    return {"phases_ms_per_update": dict(phases), "device_busy_ms_per_update": sum(phases.values())}


def build(library: str, agents: int, total: int, layout: str):
    """`(compiled, keys, num_updates)` of `jit(vmap(train))` over `agents` keys."""
    import jax

    if library == "rejax":
        from benchmarks.peers import rejax_ppo as peer

        algo, _, num_updates = peer.make_algo(total)
        algo = peer.training_only(algo)
        train = algo.train
    else:
        import purejaxppo as pjp

        config = pjp.PPOConfig(total_timesteps=total, loop_layout=layout)
        num_updates, train = config.num_updates, pjp.make_train(config)
    keys = jax.random.split(jax.random.key(0), agents)
    if library == "rejax":
        keys = jax.random.split(jax.random.PRNGKey(0), agents)
    return jax.jit(jax.vmap(train)).lower(keys).compile(), keys, num_updates


def trace_cell(library: str, agents: int, total: int, layout: str, out: Path) -> dict:
    import jax

    start = time.perf_counter()
    compiled, keys, num_updates = build(library, agents, total, layout)
    compile_s = time.perf_counter() - start
    jax.block_until_ready(compiled(keys))  # warm
    start = time.perf_counter()
    jax.block_until_ready(compiled(keys))
    run_s = time.perf_counter() - start
    tag = f"{library}-{agents}" + (f"-{layout}" if library == "ours" else "")
    log_dir = out / f"trace-{tag}-raw"
    with jax.profiler.trace(str(log_dir), create_perfetto_trace=True):
        jax.block_until_ready(compiled(keys))
    found = sorted(log_dir.rglob("perfetto_trace.json.gz"))
    text = compiled.as_text()
    with gzip.open(out / f"hlo-{tag}.txt.gz", "wt") as f:
        f.write(text)
    summary: dict[str, Any] = {"library": library, "agents": agents, "layout": layout}
    summary |= {"compile_s": compile_s, "run_s": run_s, "ms_per_update": 1e3 * run_s / num_updates}
    if found:
        shutil.copy(found[-1], out / f"perfetto-{tag}.json.gz")
        with gzip.open(found[-1], "rt") as f:
            summary |= summarize(json.load(f), text, num_updates)
    shutil.rmtree(log_dir, ignore_errors=True)
    device = jax.devices()[0]
    summary |= {"device": getattr(device, "device_kind", device.platform), "jax": jax.__version__}
    (out / f"trace-{tag}.json").write_text(json.dumps(summary, indent=1))
    return summary


def print_summary(s: dict) -> None:
    print(
        f"{s.get('library')} agents={s.get('agents')} {s.get('layout', '')}: "
        f"{s.get('ms_per_update', float('nan')):.2f} ms/update wall, device busy "
        f"{s.get('device_busy_ms_per_update', 0):.2f} ms, "
        f"{s.get('kernels_per_update', 0):.0f} kernels/update"
    )
    for phase, ms in s.get("phases_ms_per_update", {}).items():
        print(f"  {phase:32s} {ms:8.3f} ms")
    for group, ms in s.get("groups_ms_per_update", {}).items():
        print(f"  {group:32s} {ms:8.3f} ms")
    for op in s.get("top_ops", [])[:15]:
        print(
            f"    {op['ms_per_update']:7.3f} ms x{op['launches_per_update']:6.1f} "
            f"{op['op'][:40]:40s} {op['source'][-50:]}"
        )


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--library", choices=("ours", "rejax"), default="ours")
    parser.add_argument("--agents", type=int, nargs="+", default=[1])
    parser.add_argument("--total-timesteps", type=int, default=5120)
    parser.add_argument("--loop-layout", default="auto", help="purejaxppo's loop_layout")
    parser.add_argument("--out", type=Path, default=Path("/tmp/trace_update"))
    parser.add_argument(
        "--summarize",
        nargs=3,
        metavar=("PERFETTO", "HLO", "UPDATES"),
        help="summarize saved files (.json.gz, .txt.gz, updates traced) and exit",
    )
    args = parser.parse_args(argv)
    if args.summarize:
        trace_path, hlo_path, updates = args.summarize
        with gzip.open(trace_path, "rt") as f, gzip.open(hlo_path, "rt") as g:
            summary = summarize(json.load(f), g.read(), int(updates))
        print_summary(summary)
        return [summary]
    args.out.mkdir(parents=True, exist_ok=True)
    rows = []
    for agents in args.agents:
        summary = trace_cell(args.library, agents, args.total_timesteps, args.loop_layout, args.out)
        print_summary(summary)
        sys.stdout.flush()
        rows.append(summary)
    return rows


if __name__ == "__main__":
    main()
