"""Fault script: real CLI subprocesses on tiny CartPole runs, under faults.

Scenarios: two writers on one run dir (fresh + fresh, resume + resume); SIGKILL while a
checkpoint is being written (several timings), then `--resume`; damaged checkpoints
(truncated / zeroed / deleted files in the newest, then in all) then `--resume`, `eval`,
`export`; a small full disk (a 300 KiB tmpfs when run as root and `mount` works, else
skipped with the reason printed); unwritable and impossible paths (/proc/..., a path
under a file). Readers (`eval`, `eval --all-steps`, `export`) in a loop beside a
run that saves every update; SIGTERM to a chunked sweep, then `sweep --resume`; SIGTERM
to `collect` mid-way, then `load_episodes` of the partial dataset; a second SIGINT 1 s
after the first during training (exit 130 at once, one line); SIGTERM during `eval
--all-steps`; a second SIGINT during `export` (the stop scenarios: `faults_stops.py`;
shared helpers: `faults_common.py`).

Each outcome is classified:
  clean  a one-line error or a correct recovery, the documented exit code, no data lost;
  ugly   a traceback, a confusing message or an undocumented exit code;
  lost   data lost or a wrong result hidden (e.g. two writers both "succeed").

Usage:
  PYTHONPATH=$PWD python -m tools.probes.faults [--only GROUP] [--code CHECKOUT] [--tag T]
Prints a table and the counts; writes benchmarks/results/faults-<date>.csv and .md.
"""

from __future__ import annotations

import argparse
import csv
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from tools.probes.faults_common import (
    CODE,
    ENV,
    LONG,
    N_LONG,
    RESULTS,
    ROOT,
    SHORT,
    TINY,
    TMP,
    classify,
    cli,
    last_line,
    record,
    start,
    stop,
    updates_ok,
    wait_for,
    wait_for_step,
)
from tools.probes.faults_stops import STOP_SCENARIOS


# ----------------------------------------------------------------- two writers
def two_writers(tmp: Path) -> None:
    run_dir = tmp / "two-fresh"
    a, b = start("train", "--run-dir", str(run_dir), *LONG), None
    time.sleep(0.5)
    b = start("train", "--run-dir", str(run_dir), *LONG)
    (_, err_a), (_, err_b) = a.communicate(timeout=600), b.communicate(timeout=600)
    codes = sorted([a.returncode, b.returncode])
    refused = err_a if a.returncode else err_b
    ok = codes == [0, 2] and "in use by process" in refused and updates_ok(run_dir, N_LONG)
    lost = codes == [0, 0] or not updates_ok(run_dir)
    outcome = "lost" if lost else classify(2 if ok else 1, refused, (2,), True)
    record("two writers: fresh + fresh", outcome, codes, last_line(refused))
    # resume + resume of an interrupted run
    run_dir = tmp / "two-resume"
    proc = start("train", "--run-dir", str(run_dir), *LONG)
    wait_for_step(run_dir, 20, proc)
    proc.kill()
    proc.wait()
    a = start("train", "--resume", str(run_dir), "--no-progress")
    time.sleep(0.5)
    b = start("train", "--resume", str(run_dir), "--no-progress")
    (_, err_a), (_, err_b) = a.communicate(timeout=600), b.communicate(timeout=600)
    codes = sorted([a.returncode, b.returncode])
    refused = err_a if a.returncode else err_b
    lost = codes == [0, 0] or not updates_ok(run_dir, N_LONG)
    outcome = "lost" if lost else classify(codes[1], refused, (2,), "in use by" in refused)
    record("two writers: resume + resume", outcome, codes, last_line(refused))


# ----------------------------------------------------------------- kill at checkpoint writes
def kill_at_checkpoint(tmp: Path) -> None:
    """SIGKILL when the k-th temporary checkpoint folder appears (+ a delay), then resume."""
    for k, delay in [(1, 0.0), (2, 0.01), (4, 0.05)]:
        run_dir = tmp / f"kill-{k}-{delay}"
        proc = start("train", "--run-dir", str(run_dir), *LONG)
        last, seen, killed = run_dir / "checkpoints" / "last", set(), False
        while proc.poll() is None and not killed:
            if last.is_dir():
                for entry in os.scandir(last):
                    if "tmp" in entry.name and entry.name not in seen:
                        seen.add(entry.name)
                        if len(seen) == k:
                            time.sleep(delay)
                            proc.send_signal(signal.SIGKILL)
                            killed = True
                            break
            time.sleep(0.002)
        proc.wait()
        name = f"SIGKILL at checkpoint write #{k} +{delay}s, --resume"
        if not killed:
            record(name, "clean", proc.returncode, "finished before the kill (no tmp seen)")
            continue
        done = cli("train", "--resume", str(run_dir), "--no-progress")
        if done.returncode == 2 and "nothing to resume" in done.stderr:
            outcome = classify(2, done.stderr, (2,), True)
        else:
            outcome = classify(done.returncode, done.stderr, (0,), updates_ok(run_dir, N_LONG))
        record(name, outcome, done.returncode, last_line(done.stderr or done.stdout))


# ----------------------------------------------------------------- damaged checkpoints
def damage(path: Path, how: str) -> None:
    files = sorted(p for p in path.rglob("*") if p.is_file())
    for file in files:
        if how == "truncate":
            file.write_bytes(file.read_bytes()[: file.stat().st_size // 2])
        elif how == "zero":
            file.write_bytes(b"\0" * file.stat().st_size)
        else:
            file.unlink()


def damaged_checkpoints(tmp: Path) -> None:
    base = tmp / "damaged-base"
    done = cli("train", "--run-dir", str(base), *SHORT)
    assert done.returncode == 0, done.stderr
    cases = [
        ("truncate", "newest", ("resume", "export")),
        ("truncate", "all", ("resume", "export")),
        ("zero", "newest", ("resume",)),
        ("delete", "all", ("eval",)),
    ]
    for how, scope, commands in cases:
        last = base / "checkpoints" / "last"
        steps = sorted(int(p.name) for p in last.iterdir() if p.name.isdigit())
        targets = steps[-1:] if scope == "newest" else steps
        for command in commands:
            run_dir = tmp / f"damaged-{how}-{scope}-{command}"
            shutil.copytree(base, run_dir)
            for step in targets:
                damage(run_dir / "checkpoints" / "last" / str(step), how)
            if command == "resume":
                out = cli("train", "--resume", str(run_dir), "--no-progress")
            elif command == "eval":
                out = cli("eval", str(run_dir), "--episodes", "2")
            else:
                out = cli("export", str(run_dir), "--to", str(run_dir / "p.onnx"))
            expected = (0,) if scope == "newest" else (2,)
            data_ok = not (scope == "all" and out.returncode == 0)  # hidden wrong result
            if command == "resume" and out.returncode == 0:
                data_ok = data_ok and updates_ok(run_dir, 6)
            outcome = classify(out.returncode, out.stderr, expected, data_ok)
            name = f"damaged ({how}, {scope}) then {command}"
            record(name, outcome, out.returncode, last_line(out.stderr or out.stdout))


# ----------------------------------------------------------------- full disk
def full_disk(tmp: Path) -> None:
    mount = tmp / "small-disk"
    mount.mkdir()
    if os.geteuid() != 0:
        record("full disk", "skip", "-", "not root: cannot mount a small tmpfs")
        return
    made = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=300k", "tmpfs", str(mount)],
        capture_output=True,
        text=True,
    )
    if made.returncode != 0:
        record("full disk", "skip", "-", f"mount failed: {made.stderr.strip()}")
        return
    try:
        big = ["--hidden-sizes", "256,256", "--num-envs", "4", "--num-steps", "16"]
        out = cli(
            "train",
            "--run-dir",
            str(mount / "run"),
            *big,
            "--no-progress",
            "--total-timesteps",
            "256",
            "--save-freq",
            "1",
        )
        record(
            "full disk: train checkpoint",
            classify(out.returncode, out.stderr, (4,), True),
            out.returncode,
            last_line(out.stderr),
        )
        shutil.rmtree(mount / "run", ignore_errors=True)
        filler = mount / "filler"
        with filler.open("wb") as f:  # leave about 20 KiB: metrics fit, a checkpoint not
            f.write(b"\0" * (300 * 1024 - 20 * 1024))
        out = cli("train", "--run-dir", str(mount / "run2"), *SHORT)
        record(
            "full disk: small train (20 KiB free)",
            classify(out.returncode, out.stderr, (4,), True),
            out.returncode,
            last_line(out.stderr),
        )
        src = tmp / "disk-src"
        assert cli("train", "--run-dir", str(src), *SHORT).returncode == 0
        with filler.open("ab") as f:
            with_free = shutil.disk_usage(mount).free
            f.write(b"\0" * max(0, with_free - 2048))
        for name, args, code in [
            ("export --to", ["export", str(src), "--to", str(mount / "p.pt")], (4,)),
            (
                "collect --out",
                ["collect", str(src), "--episodes", "20", "--out", str(mount / "ds")],
                (4,),
            ),
        ]:
            out = cli(*args)
            record(
                f"full disk: {name}",
                classify(out.returncode, out.stderr, code, True),
                out.returncode,
                last_line(out.stderr),
            )
    finally:
        subprocess.run(["umount", str(mount)], capture_output=True)


# ----------------------------------------------------------------- unwritable paths
def unwritable(tmp: Path) -> None:
    src = tmp / "unwritable-src"
    assert cli("train", "--run-dir", str(src), *SHORT).returncode == 0
    a_file = tmp / "a-file"
    a_file.write_text("x")
    cases = [
        (
            "eval --video /proc/x.gif",
            ["eval", str(src), "--episodes", "1", "--video", "/proc/x.gif"],
        ),
        ("export --to /proc/p.pt", ["export", str(src), "--to", "/proc/p.pt"]),
        ("collect --out /proc/ds", ["collect", str(src), "--episodes", "1", "--out", "/proc/ds"]),
        ("export --to file/p.pt", ["export", str(src), "--to", f"{a_file}/p.pt"]),
        ("train --run-dir /proc/run", ["train", "--run-dir", "/proc/run", *SHORT]),
        ("train --run-dir file/run", ["train", "--run-dir", f"{a_file}/run", *SHORT]),
        ("sweep --out /proc/s", ["sweep", "--out", "/proc/s", "--grid", "gamma=0.9,0.99", *SHORT]),
    ]
    for name, args in cases:
        out = cli(*args)
        names_path = any(p in out.stderr for p in ("/proc", str(a_file)))
        outcome = classify(out.returncode, out.stderr, (2,), True)
        if outcome == "clean" and not names_path:
            outcome = "ugly"
        record(f"unwritable: {name}", outcome, out.returncode, last_line(out.stderr))


# ------------------------------------------------------ readers beside a writer
def reader_beside_writer(tmp: Path) -> None:
    """`eval`, `eval --all-steps` and `export` in a loop beside a run saving every update:
    the readers must leave the writer's in-progress `*.orbax-checkpoint-tmp` folders alone."""
    run_dir = tmp / "reader-writer"
    args = [*TINY, "--total-timesteps", str(4 * 16 * N_LONG), "--save-freq", "1"]
    proc = start("train", "--run-dir", str(run_dir), *args)
    wait_for_step(run_dir, 1, proc)
    readers = [
        ["eval", str(run_dir), "--episodes", "1"],
        ["eval", str(run_dir), "--episodes", "1", "--all-steps", "--overwrite"],
        ["export", str(run_dir), "--to", str(tmp / "reader-writer.pt"), "--overwrite"],
    ]
    codes, refused, ugly = [], [], []
    deadline = time.monotonic() + 540
    while proc.poll() is None and time.monotonic() < deadline:
        reader = readers[len(codes) % len(readers)]
        out = cli(*reader, timeout=120)
        codes.append(out.returncode)
        # A reader may be refused in one line (exit 2: e.g. its checkpoint was rotated
        # away by the writer's keep_checkpoints); anything else is ugly.
        if out.returncode != 0:
            one_line = classify(out.returncode, out.stderr, (2,), True) == "clean"
            (refused if one_line else ugly).append(f"{reader[0]}: {last_line(out.stderr)}")
    rc, err = stop(proc, 60)
    data_ok = rc == 0 and updates_ok(run_dir, N_LONG)
    outcome = classify(rc, err, (0,), data_ok)
    if outcome == "clean" and (ugly or not codes):
        outcome = "ugly"
    note = (
        f"writer exit {rc}, {'all' if data_ok else 'NOT all'} {N_LONG} updates; "
        f"{len(codes)} reads beside it, exits {sorted(set(codes))}; "
        + "; ".join((ugly + refused)[:2])
    )
    record("reader (eval / --all-steps / export) beside a writer", outcome, rc, note)


def sweep_sigterm(tmp: Path) -> None:
    """SIGTERM once the first chunk file is on disk, then `sweep --resume`."""
    out = tmp / "sweep-term"
    runs = 6  # 3 seeds x 2 settings, one run per chunk
    proc = start(
        "sweep",
        "--out",
        str(out),
        "--grid",
        "gamma=0.9,0.99",
        "--seeds",
        "3",
        "--max-runs-per-chunk",
        "1",
        *TINY,
        "--total-timesteps",
        str(4 * 16 * N_LONG),
    )

    def chunk_files() -> list[Path]:
        return sorted((out / "chunks").glob("group*-chunk*.npz"))

    if not wait_for(lambda: bool(chunk_files()), proc, 300):
        rc, err = stop(proc, 60)
        record("sweep: SIGTERM after the first chunk", "ugly", rc, "no chunk file appeared")
        return
    proc.send_signal(signal.SIGTERM)
    rc, err = stop(proc, 120)
    saved = len(chunk_files())
    outcome = classify(rc, err, (143,), 0 < saved < runs)
    record(
        "sweep: SIGTERM after the first chunk",
        outcome,
        rc,
        f"{saved} of {runs} chunk files saved; {last_line(err)}",
    )
    done = cli("sweep", "--resume", str(out), "--no-progress", timeout=300)
    data_ok = done.returncode != 0 or len(chunk_files()) == runs
    outcome = classify(done.returncode, done.stderr, (0,), data_ok)
    record(
        "sweep: --resume after SIGTERM",
        outcome,
        done.returncode,
        f"{len(chunk_files())} of {runs} chunk files; "
        f"{last_line(done.stderr) or last_line(done.stdout)}",
    )


SCENARIOS: dict[str, Callable[[Path], None]] = {
    "unwritable": unwritable,
    "full_disk": full_disk,
    "damaged_checkpoints": damaged_checkpoints,
    "kill_at_checkpoint": kill_at_checkpoint,
    "two_writers": two_writers,
    "reader_beside_writer": reader_beside_writer,
    "sweep_sigterm": sweep_sigterm,
    **STOP_SCENARIOS,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help="run the scenario groups with this in the name")
    parser.add_argument("--tag", default="", help="suffix of the results file names")
    parser.add_argument(
        "--code", type=Path, default=ROOT, help="checkout whose purejaxppo runs (default: this one)"
    )
    args = parser.parse_args()
    CODE[0] = args.code.resolve()
    ENV["PYTHONPATH"] = f"{args.code.resolve()}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"
    start_time = time.time()
    with tempfile.TemporaryDirectory(prefix="purejaxppo-faults-") as tmp:
        TMP[:] = [tmp]
        for name, scenario in SCENARIOS.items():
            if any(part in name for part in args.only.split(",")):
                print(f"== {name}", flush=True)
                scenario(Path(tmp))
    counts = {k: sum(r["outcome"] == k for r in RESULTS) for k in ("clean", "ugly", "lost", "skip")}
    summary = ", ".join(f"{v} {k}" for k, v in counts.items())
    print(f"\n{len(RESULTS)} scenarios: {summary} ({time.time() - start_time:.0f} s)")
    out_dir = ROOT / "benchmarks" / "results"
    stem = f"faults-{time.strftime('%Y-%m-%d')}{args.tag}"
    with (out_dir / f"{stem}.csv").open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=["scenario", "outcome", "exit", "note"])
        writer.writeheader()
        writer.writerows(RESULTS)
    lines = [
        f"# Fault script ({time.strftime('%Y-%m-%d')}): {summary}",
        "",
        f"Command: `PYTHONPATH=$PWD python -m tools.probes.faults {' '.join(sys.argv[1:])}`"
        " (a 2-core machine shared with other jobs). `$T` is the script's temporary folder.",
        "",
        "| scenario | outcome | exit | note |",
        "| --- | --- | --- | --- |",
    ]
    lines += [
        f"| {r['scenario']} | {r['outcome']} | {r['exit']} | {r['note'].replace('|', '/')} |"
        for r in RESULTS
    ]
    (out_dir / f"{stem}.md").write_text("\n".join(lines) + "\n")
    print(f"wrote {out_dir / stem}.csv and .md")


if __name__ == "__main__":
    main()
