"""SIGTERM to a sweep right after a chunk file appears: does every try stop with 143?

    python -m benchmarks.stop_race --tries 20 [--json FILE]

Each try starts `purejaxppo sweep` on a tiny CartPole grid (6 runs, one per chunk, about a
second each, `--no-progress`), waits for the first chunk file under OUT/chunks, sends
SIGTERM at once, and records the exit code, the chunk files kept and whether the stop
line names the resume command. The stop protocol (`purejaxppo.signals`) promises exit 143
with the finished chunks kept, whenever the request lands; a try that exits 0 (every chunk
run) or hangs is a lost request. Prints a table; `--json` writes the rows and the machine.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ARGS = [
    "sweep",
    "--seeds",
    "3",
    "--grid",
    "ent_coef=0,0.01",
    "--max-runs-per-chunk",
    "1",
    "--num-envs",
    "4",
    "--num-steps",
    "16",
    "--hidden-sizes",
    "8",
    "--no-progress",
    "--total-timesteps",
    str(64 * 300),
]


def one_try(tmp: Path, index: int, cache: Path) -> dict:
    """One sweep, SIGTERM after its first chunk file; the outcome as a row."""
    out = tmp / f"sweep{index}"
    env = {**os.environ, "PUREJAXPPO_COMPILE_CACHE": str(cache)}
    exe = [sys.executable, "-m", "purejaxppo.cli"]
    proc = subprocess.Popen(
        [*exe, *ARGS, "--out", str(out)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    chunks, deadline = out / "chunks", time.time() + 180
    while proc.poll() is None and time.time() < deadline:
        if chunks.is_dir() and any(p.suffix == ".npz" for p in chunks.iterdir()):
            break
        time.sleep(0.005)
    sent = proc.poll() is None
    if sent:
        proc.send_signal(signal.SIGTERM)
    try:
        _, err = proc.communicate(timeout=180)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate()
    kept = len(list(chunks.glob("*.npz"))) if chunks.is_dir() else 0
    return {
        "try": index,
        "signal_sent": sent,
        "exit_code": proc.returncode,
        "chunks_kept": kept,
        "hint": f"sweep --resume {out}" in err,
        "ok": sent and proc.returncode == 143 and 1 <= kept < 6,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tries", type=int, default=20)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for index in range(args.tries):
            rows.append(one_try(Path(tmp), index, Path(tmp) / "cache"))
            row = rows[-1]
            print(
                f"try {index:2d}: exit {row['exit_code']}, {row['chunks_kept']} of 6 chunks "
                f"kept, resume hint {'yes' if row['hint'] else 'no'}",
                flush=True,
            )
    stops = sum(row["ok"] for row in rows)
    print(f"\n{stops} of {len(rows)} tries stopped with exit 143 between chunks")
    if args.json is not None:
        from benchmarks.harness import machine, write_text

        payload = {"machine": machine(), "argv": ARGS, "rows": rows, "stops": stops}
        write_text(args.json, json.dumps(payload, indent=1) + "\n")
    sys.exit(0 if stops == len(rows) else 1)


if __name__ == "__main__":
    main()
