"""Shared pieces of the fault scripts (`faults.py`, `faults_stops.py`): the CLI
subprocesses, the outcome classes and the results table they append to."""

from __future__ import annotations

import csv
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
CLI = [sys.executable, "-m", "purejaxppo.cli"]
TINY = ["--num-envs", "4", "--num-steps", "16", "--hidden-sizes", "8", "--no-progress"]
N_LONG = 120  # updates of the runs that are killed or shared
LONG = [*TINY, "--total-timesteps", str(4 * 16 * N_LONG), "--save-freq", "10"]
SHORT = [*TINY, "--total-timesteps", str(4 * 16 * 6), "--save-freq", "2"]
RESULTS: list[dict[str, str]] = []
#: The checkout whose purejaxppo runs: the working directory of every CLI subprocess
#: (`python -m` puts it first on the module search path), set by --code.
CODE = [ROOT]
#: The scenarios' temporary folder, written `$T` in the results (set by faults.py).
TMP: list[str] = []


def cli(*args: str, timeout: int = 600) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*CLI, *args], capture_output=True, text=True, env=ENV, timeout=timeout, cwd=CODE[0]
    )


def start(*args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [*CLI, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=ENV,
        cwd=CODE[0],
    )


def error_lines(stderr: str) -> list[str]:
    """stderr without progress bars and purejaxppo's own warnings / notes."""
    keep = []
    for line in stderr.splitlines():
        if not line.strip() or "it/s]" in line or "update/s]" in line or "warnings.warn(" in line:
            continue
        notes = (
            "set aside",
            "--overwrite: removing",
            "purejaxppo: warning:",
            "resumed from",
            "purejaxppo: SIGINT:",
            "purejaxppo: SIGTERM:",
            "eval: update ",
            "sweep: ",
        )
        if "UserWarning" in line or line.startswith(notes):
            continue
        keep.append(line)
    return keep


def classify(rc: int, stderr: str, expected_rc: tuple[int, ...], data_ok: bool) -> str:
    if not data_ok:
        return "lost"
    lines = error_lines(stderr)
    if rc not in expected_rc or "Traceback" in stderr or len(lines) > 1:
        return "ugly"
    return "clean"


def record(name: str, outcome: str, rc: int | str, note: str) -> None:
    for folder in TMP:
        note = note.replace(folder, "$T")
    note = " ".join(note.split())[:160]
    RESULTS.append({"scenario": name, "outcome": outcome, "exit": str(rc), "note": note})
    print(f"{outcome:6} rc={rc!s:4} {name:44} {note[:100]}", flush=True)


def last_line(text: str) -> str:
    lines = error_lines(text) or text.strip().splitlines() or [""]
    return lines[-1]


def updates_ok(run_dir: Path, total: int | None = None) -> bool:
    """metrics.csv: one header, update numbers 1..n once each (n = total when given)."""
    path = run_dir / "metrics.csv"
    if not path.is_file():
        return False
    rows = list(csv.reader(path.open()))
    header, body = rows[0], rows[1:]
    if any(row == header for row in body):
        return False
    updates = [int(float(row[0])) for row in body]
    n = total if total is not None else len(updates)
    return updates == list(range(1, n + 1))


def wait_for_step(run_dir: Path, step: int, proc: subprocess.Popen) -> None:
    last = run_dir / "checkpoints" / "last"
    while proc.poll() is None:
        if last.is_dir() and any(p.name.isdigit() and int(p.name) >= step for p in last.iterdir()):
            return
        time.sleep(0.01)


def wait_for(found: Callable[[], bool], proc: subprocess.Popen, timeout: float) -> bool:
    """Polls `found()` while `proc` runs, at most `timeout` s; whether it became true."""
    deadline = time.monotonic() + timeout
    while proc.poll() is None and time.monotonic() < deadline:
        if found():
            return True
        time.sleep(0.01)
    return found()


def stop(proc: subprocess.Popen, timeout: float) -> tuple[int, str]:
    """Waits for `proc` at most `timeout` s (SIGKILL after); its exit code and stderr."""
    try:
        _, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate()
        err += f"\n(faults.py: killed after {timeout:.0f} s)"
    return proc.returncode, err
