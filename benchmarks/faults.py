"""Fault script (issue #24): real CLI subprocesses on tiny CartPole runs, under faults.

Scenarios: two writers on one run dir (fresh + fresh, resume + resume); SIGKILL while a
checkpoint is being written (several timings), then `--resume`; damaged checkpoints
(truncated / zeroed / deleted files in the newest, then in all) then `--resume`, `eval`,
`export`; a small full disk (a 300 KiB tmpfs when run as root and `mount` works, else
skipped with the reason printed); unwritable and impossible paths (/proc/..., a path
under a file). Issue #38: readers (`eval`, `eval --all-steps`, `export`) in a loop beside a
run that saves every update; SIGTERM to a chunked sweep, then `sweep --resume`; SIGTERM
to `collect` mid-way, then `load_episodes` of the partial dataset; a second SIGINT 1 s
after the first during training (exit 130 at once, one line).

Each outcome is classified:
  clean  a one-line error or a correct recovery, the documented exit code, no data lost;
  ugly   a traceback, a confusing message or an undocumented exit code;
  lost   data lost or a wrong result hidden (e.g. two writers both "succeed").

Usage:
  PYTHONPATH=$PWD python benchmarks/faults.py [--only GROUP] [--code CHECKOUT] [--tag T]
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

ROOT = Path(__file__).resolve().parents[1]
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


def wait_for_step(run_dir: Path, step: int, proc: subprocess.Popen) -> None:
    last = run_dir / "checkpoints" / "last"
    while proc.poll() is None:
        if last.is_dir() and any(p.name.isdigit() and int(p.name) >= step for p in last.iterdir()):
            return
        time.sleep(0.01)


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


# ----------------------------------------------------------------- issue #38
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


def collect_interrupted(tmp: Path) -> None:
    """SIGTERM to `collect` once its first `episodes_*.npz` is written, then `load_episodes`:
    a one-line ValueError naming the partial dataset, not a silent partial read."""
    src = tmp / "collect-src"
    made = cli("train", "--run-dir", str(src), *SHORT)
    assert made.returncode == 0, made.stderr
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
    rc, _ = stop(proc, 60)
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
    outcome = "clean" if partial and no_meta and load.returncode == 1 else "ugly"
    if load.returncode == 0:
        outcome = "lost"  # a partial dataset read silently
    record(
        "collect: SIGTERM mid-way, load_episodes",
        outcome,
        f"{rc}/{load.returncode}",
        f"{files} chunk file(s) left; {message}",
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


SCENARIOS: dict[str, Callable[[Path], None]] = {
    "unwritable": unwritable,
    "full_disk": full_disk,
    "damaged_checkpoints": damaged_checkpoints,
    "kill_at_checkpoint": kill_at_checkpoint,
    "two_writers": two_writers,
    "reader_beside_writer": reader_beside_writer,
    "sweep_sigterm": sweep_sigterm,
    "collect_interrupted": collect_interrupted,
    "second_sigint": second_sigint,
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
        f"Command: `PYTHONPATH=$PWD python benchmarks/faults.py {' '.join(sys.argv[1:])}`"
        " (a 2-core machine shared with other jobs)",
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
