"""Fault scenarios of stop requests, run by `faults.py`: a second SIGINT
during training; SIGTERM to `collect` mid-way, then `load_episodes`; SIGTERM during `eval
--all-steps`; a second Ctrl-C during `export`. Each is a real CLI subprocess on a tiny
CartPole run, classified as in `faults.py` (clean / ugly / lost)."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

from tools.probes.faults_common import (
    CODE,
    ENV,
    TINY,
    classify,
    cli,
    last_line,
    record,
    start,
    stop,
    wait_for,
)


def second_sigint(tmp: Path) -> None:
    """SIGINT during a long segment, a second SIGINT 1 s later: exit 130 at once, no traceback."""
    run_dir = tmp / "second-sigint"
    # Segments of 200 updates of 2,048 steps: several seconds each, longer than the 1 s gap.
    proc = start(
        "train",
        "--run-dir",
        str(run_dir),
        "--num-envs",
        "16",
        "--num-steps",
        "128",
        "--hidden-sizes",
        "64,64",
        "--log-freq",
        "200",
        "--no-progress",
        "--total-timesteps",
        str(16 * 128 * 5000),
    )
    metrics = run_dir / "metrics.csv"

    def size() -> int:
        return metrics.stat().st_size if metrics.is_file() else 0

    # Time the second segment (the first compiles), then signal a quarter into the third.
    if not wait_for(lambda: size() > 0, proc, 300):
        rc, err = stop(proc, 60)
        record("second SIGINT during training", "ugly", rc, f"no segment ran; {last_line(err)}")
        return
    first, began = size(), time.monotonic()
    wait_for(lambda: size() > first, proc, 300)
    segment = time.monotonic() - began
    time.sleep(segment / 4)
    proc.send_signal(signal.SIGINT)
    time.sleep(1.0)
    if proc.poll() is not None:  # the first SIGINT's segment ended within the second
        rc, err = stop(proc, 10)
        record("second SIGINT during training", "skip", rc, "exited before the second SIGINT")
        return
    proc.send_signal(signal.SIGINT)
    second = time.monotonic()
    rc, err = stop(proc, 30)
    after = time.monotonic() - second
    said = "stopped at once by a second SIGINT" in err
    outcome = classify(rc, err, (130,), True)
    if outcome == "clean" and not (said and after <= 2.5):
        outcome = "ugly"
    line = next((x for x in err.splitlines() if "second SIGINT" in x), last_line(err))
    note = f"segments of {segment:.1f} s; exit {after:.1f} s after the second; {line}"
    record("second SIGINT during training", outcome, rc, note)


def kept_run(tmp: Path) -> Path:
    """A tiny run with 8 kept checkpoints (trained once, shared by the scenarios)."""
    src = tmp / "stops-src"
    if not (src / "checkpoints").is_dir():
        args = [*TINY, "--total-timesteps", str(4 * 16 * 8), "--save-freq", "1"]
        made = cli("train", "--run-dir", str(src), *args, "--keep-checkpoints", "all")
        assert made.returncode == 0, made.stderr
    return src


def collect_interrupted(tmp: Path) -> None:
    """SIGTERM to `collect` once its first `episodes_*.npz` is written, then `load_episodes`:
    exit 143 with one line naming the partial dataset and how to redo it, and a one-line
    ValueError from `load_episodes`, not a silent partial read."""
    src = kept_run(tmp)
    dataset = tmp / "collect-partial"
    # CartPole episodes of this barely trained policy are ~20 steps; a chunk file holds
    # 100,000 steps (`collect`'s flush_steps), so 200,000 episodes are dozens of files.
    proc = start("collect", str(src), "--episodes", "200000", "--out", str(dataset))
    if not wait_for(lambda: any(dataset.glob("episodes_*.npz")), proc, 300):
        rc, err = stop(proc, 60)
        record(
            "collect: SIGTERM mid-way, load_episodes",
            "ugly",
            rc,
            f"no episodes_*.npz appeared; {last_line(err)}",
        )
        return
    proc.send_signal(signal.SIGTERM)
    rc, err = stop(proc, 60)
    files = len(list(dataset.glob("episodes_*.npz")))
    load = subprocess.run(
        [sys.executable, "-c", f"import purejaxppo as pjp; pjp.load_episodes({str(dataset)!r})"],
        capture_output=True,
        text=True,
        env=ENV,
        timeout=120,
        cwd=CODE[0],
    )
    # `python -c` prints the uncaught error's traceback; its message is the last line.
    message = load.stderr.strip().splitlines()[-1] if load.stderr.strip() else ""
    partial = message.startswith("ValueError: ") and "partial dataset" in message
    no_meta = not (dataset / "metadata.json").exists()
    said = "partial dataset" in last_line(err) and "rerun" in last_line(err)
    stopped = classify(rc, err, (143,), True) == "clean" and said
    outcome = "clean" if stopped and partial and no_meta and load.returncode == 1 else "ugly"
    if load.returncode == 0:
        outcome = "lost"  # a partial dataset read silently
    record(
        "collect: SIGTERM mid-way, load_episodes",
        outcome,
        f"{rc}/{load.returncode}",
        f"{files} chunk file(s) left; {last_line(err)}; {message}",
    )


def eval_steps_interrupted(tmp: Path) -> None:
    """SIGTERM during `eval --all-steps` once its first step is done: exit 143, one line,
    and eval_steps.csv holding the finished steps' rows (fewer than the 8 kept)."""
    src = kept_run(tmp)
    proc = start("eval", str(src), "--all-steps", "--episodes", "64", "--overwrite")
    lines: list[str] = []

    def first_step() -> bool:  # stderr is read line by line: "eval: update 1: ..."
        lines.append(proc.stderr.readline())
        return lines[-1].startswith("eval: update ")

    name = "eval --all-steps: SIGTERM after a step"
    if not wait_for(first_step, proc, 300):
        rc, err = stop(proc, 60)
        record(name, "ugly", rc, f"no step finished; {last_line(''.join(lines) + err)}")
        return
    proc.send_signal(signal.SIGTERM)
    rc, err = stop(proc, 60)
    csv_path = src / "eval_steps.csv"
    rows = len(csv_path.read_text().splitlines()) - 1 if csv_path.is_file() else 0
    outcome = classify(rc, err, (143,), 1 <= rows < 8)
    if outcome == "clean" and "--overwrite" not in last_line(err):
        outcome = "ugly"  # the line must say how to finish
    record(name, outcome, rc, f"{rows} of 8 rows written; {last_line(err)}")


def export_second_sigint(tmp: Path) -> None:
    """Two SIGINTs 0.3 s apart once `export` stages its files: exit 130 at once, one line,
    no file and no staging directory (`tmp*`) left beside the target."""
    src = kept_run(tmp)
    target = tmp / "export-stopped" / "policy.pt"
    target.parent.mkdir()
    proc = start("export", str(src), "--to", str(target))
    name = "export: a second SIGINT while staging"
    if not wait_for(lambda: any(target.parent.glob("tmp*")), proc, 300):
        rc, err = stop(proc, 60)
        record(name, "skip", rc, f"no staging directory seen; {last_line(err)}")
        return
    proc.send_signal(signal.SIGINT)
    time.sleep(0.3)
    proc.send_signal(signal.SIGINT)
    rc, err = stop(proc, 30)
    left = sorted(p.name for p in target.parent.iterdir())
    outcome = classify(rc, err, (130,), not left)
    if outcome == "clean" and "second SIGINT" not in last_line(err):
        outcome = "ugly"
    record(name, outcome, rc, f"left {left or 'nothing'}; {last_line(err)}")


#: The scenarios of this module, in `faults.py`'s table.
STOP_SCENARIOS = {
    "collect_interrupted": collect_interrupted,
    "second_sigint": second_sigint,
    "eval_steps_interrupted": eval_steps_interrupted,
    "export_second_sigint": export_second_sigint,
}
