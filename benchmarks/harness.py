"""The benchmarks' shared code: timing, peer processes run in the same
invocation, atomic writes, Markdown tables and the record that goes with every result
(machine, package versions, device, command). The files, Markdown and child-process
helpers are `tools.common`'s (the tools write results files too), handed on here.

Imported, never run. Every script of `benchmarks/` runs as a module from the repository
root (`python -m benchmarks.bench_cartpole`, `python -m benchmarks.experiments.values_ab`)
and imports it as `from benchmarks.harness import ...`. It imports only the standard
library and `tools.common` (standard library only too) at module level, so a peer's own
virtualenv can use it too.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import platform
import re
import shlex
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from tools.common import (
    RESULTS,
    ROOT,
    atomic_write,
    env_with_pythonpath,
    markdown_lines,
    markdown_table,
    stamp,
    write_text,
)

__all__ = [
    "HERE",
    "PACKAGES",
    "RESULTS",
    "ROOT",
    "atomic_write",
    "best_of",
    "command",
    "device_name",
    "env_with_pythonpath",
    "machine",
    "markdown_lines",
    "markdown_table",
    "nvidia_smi",
    "portable",
    "run_json_process",
    "stamp",
    "time_call",
    "versions",
    "write_results",
    "write_text",
]

HERE = Path(__file__).resolve().parent

#: Packages whose versions `versions()` records by default.
PACKAGES = ("purejaxppo", "jax", "jaxlib", "flax", "optax", "chex", "gymnax", "distrax", "numpy")


# --- timing ------------------------------------------------------------------------------


def time_call(call: Callable[[], object]) -> tuple[float, object]:
    """(wall seconds, result) of one `call()`; block on JAX results inside `call`."""
    start = time.perf_counter()
    out = call()
    return time.perf_counter() - start, out


def best_of(
    call: Callable[[], object], repeats: int, budget_s: float = float("inf")
) -> tuple[list[float], object]:
    """Runs `call` up to `repeats` times, stopping early once the runs so far took
    `budget_s` seconds; returns (every run's wall seconds, the last result). Report
    `min(times)` as the speed and say how many runs it is the best of."""
    times, out = [], None
    for _ in range(max(1, repeats)):
        seconds, out = time_call(call)
        times.append(seconds)
        if sum(times) >= budget_s:
            break
    return times, out


# --- peer processes (same invocation) ----------------------------------------------------


def run_json_process(
    cmd: Sequence[str],
    env: dict | None = None,
    timeout: float | None = None,
    cwd: Path | None = ROOT,
) -> dict:
    """Runs one measurement in a fresh process (ours or a peer's, in this invocation, so
    both see the same machine and load) and returns the JSON object its last stdout line
    prints; on a failure or timeout, `{"error": <the end of its stderr>}`. `cwd`: the
    repository root by default, where `python -m benchmarks.NAME` finds the package."""
    try:
        proc = subprocess.run(
            list(cmd), capture_output=True, text=True, env=env, timeout=timeout, cwd=cwd
        )
    except subprocess.TimeoutExpired as e:
        err = e.stderr.decode() if isinstance(e.stderr, bytes) else (e.stderr or "")
        return {"error": f"timeout after {timeout} s; " + err[-1500:]}
    if proc.returncode != 0:
        return {"error": proc.stderr[-2000:]}
    lines = proc.stdout.strip().splitlines()
    if not lines:
        return {"error": "no output; " + proc.stderr[-1500:]}
    return json.loads(lines[-1])


# --- the record that goes with a result --------------------------------------------------


def nvidia_smi() -> str | None:
    """The GPUs' name, driver, memory and max SM clock (None without `nvidia-smi`)."""
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


def versions(packages: Iterable[str] = PACKAGES) -> dict:
    """{package: installed version} of those of `packages` that are installed."""
    out = {}
    for package in packages:
        try:
            out[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            pass
    return out


def device_name() -> dict:
    """{"device": the first JAX device's kind, "platform": cpu / gpu / tpu} (imports jax)."""
    import jax

    device = jax.devices()[0]
    return {"device": getattr(device, "device_kind", device.platform), "platform": device.platform}


def portable(text: object) -> str:
    """`text` (a path, an argument, a command line) without the folders of the machine it
    ran on: a path inside the repository becomes repository-relative (the root itself
    `.`), the temporary folder `$TMP` and the home folder `~`. Results files record paths
    through it."""
    text = str(text)
    for folder, name in ((ROOT, "."), (Path(tempfile.gettempdir()), "$TMP"), (Path.home(), "~")):
        folder = str(folder)
        if folder in ("", os.sep):
            continue
        text = re.sub(re.escape(folder + os.sep), "" if name == "." else name + os.sep, text)
        text = re.sub(re.escape(folder) + r"(?![\w.-])", name, text)
    return text


def command() -> str:
    """The command line that started this process, as a shell would take it
    (`python -m benchmarks.NAME ...` for a module run), its paths `portable`."""
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    script = ["-m", spec.name] if spec is not None else sys.argv[:1]
    return portable(shlex.join([Path(sys.executable).name, *script, *sys.argv[1:]]))


def machine(packages: Iterable[str] = PACKAGES, **extra) -> dict:
    """The record every results file carries: machine, processor, cores, load average,
    Python, date, package versions, GPU (nvidia-smi) and the command; `extra` (device,
    notes, ...) is added last. Does not import jax (see `device_name`)."""
    try:
        load = [round(x, 2) for x in os.getloadavg()]
    except OSError:
        load = None
    return {
        "machine": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "cpu_count": os.cpu_count(),
        "load_average": load,
        "python": platform.python_version(),
        "date": time.strftime("%Y-%m-%d %H:%M:%S"),
        "versions": versions(packages),
        "gpu": nvidia_smi(),
        "command": command(),
        **extra,
    }


def write_results(out: Path, record: dict, markdown: Callable[[dict], str]) -> None:
    """Closes a results `record` (`machine()`'s, with its rows) with the load average at
    the end, writes it to `out.json` and `markdown(record)` to `out.md` (each atomically),
    then prints the Markdown and both paths."""
    record["load_average_end"] = machine()["load_average"]
    write_text(out.with_suffix(".json"), json.dumps(record, indent=1))
    text = markdown(record)
    write_text(out.with_suffix(".md"), text)
    print(text, end="")
    print(f"wrote {out.with_suffix('.json')} and {out.with_suffix('.md')}")
