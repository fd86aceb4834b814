"""Fault script (issue #24): real CLI subprocesses on tiny CartPole runs, under faults.

Scenarios: two writers on one run dir (fresh + fresh, resume + resume); SIGKILL while a
checkpoint is being written (several timings), then `--resume`; damaged checkpoints
(truncated / zeroed / deleted files in the newest, then in all) then `--resume`, `eval`,
`export`; a small full disk (a 300 KiB tmpfs when run as root and `mount` works, else
skipped with the reason printed); unwritable and impossible paths (/proc/..., a path
under a file).

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
    return subprocess.run([*CLI, *args], capture_output=True, text=True, env=ENV,
                          timeout=timeout, cwd=CODE[0])  # fmt: skip


def start(*args: str) -> subprocess.Popen:
    return subprocess.Popen([*CLI, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=ENV, cwd=CODE[0])  # fmt: skip


def error_lines(stderr: str) -> list[str]:
    """stderr without progress bars and purejaxppo's own warnings / notes."""
    keep = []
    for line in stderr.splitlines():
        if not line.strip() or "it/s]" in line or "update/s]" in line or "warnings.warn(" in line:
            continue
        notes = ("set aside", "--overwrite: removing", "purejaxppo: warning:", "resumed from")
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
    cases = [("truncate", "newest", ("resume", "export")), ("truncate", "all", ("resume", "export")),
             ("zero", "newest", ("resume",)), ("delete", "all", ("eval",))]  # fmt: skip
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
    made = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=300k", "tmpfs", str(mount)],
                          capture_output=True, text=True)  # fmt: skip
    if made.returncode != 0:
        record("full disk", "skip", "-", f"mount failed: {made.stderr.strip()}")
        return
    try:
        big = ["--hidden-sizes", "256,256", "--num-envs", "4", "--num-steps", "16"]
        out = cli("train", "--run-dir", str(mount / "run"), *big, "--no-progress",
                  "--total-timesteps", "256", "--save-freq", "1")  # fmt: skip
        record("full disk: train checkpoint", classify(out.returncode, out.stderr, (4,), True),
               out.returncode, last_line(out.stderr))  # fmt: skip
        shutil.rmtree(mount / "run", ignore_errors=True)
        filler = mount / "filler"
        with filler.open("wb") as f:  # leave about 20 KiB: metrics fit, a checkpoint not
            f.write(b"\0" * (300 * 1024 - 20 * 1024))
        out = cli("train", "--run-dir", str(mount / "run2"), *SHORT)
        record("full disk: small train (20 KiB free)",
               classify(out.returncode, out.stderr, (4,), True), out.returncode,
               last_line(out.stderr))  # fmt: skip
        src = tmp / "disk-src"
        assert cli("train", "--run-dir", str(src), *SHORT).returncode == 0
        with filler.open("ab") as f:
            with_free = shutil.disk_usage(mount).free
            f.write(b"\0" * max(0, with_free - 2048))
        for name, args, code in [
            ("export --to", ["export", str(src), "--to", str(mount / "p.pt")], (4,)),
            ("collect --out", ["collect", str(src), "--episodes", "20", "--out",
                               str(mount / "ds")], (4,)),
        ]:  # fmt: skip
            out = cli(*args)
            record(f"full disk: {name}", classify(out.returncode, out.stderr, code, True),
                   out.returncode, last_line(out.stderr))  # fmt: skip
    finally:
        subprocess.run(["umount", str(mount)], capture_output=True)


# ----------------------------------------------------------------- unwritable paths
def unwritable(tmp: Path) -> None:
    src = tmp / "unwritable-src"
    assert cli("train", "--run-dir", str(src), *SHORT).returncode == 0
    a_file = tmp / "a-file"
    a_file.write_text("x")
    cases = [
        ("eval --video /proc/x.gif", ["eval", str(src), "--episodes", "1", "--video",
                                      "/proc/x.gif"]),
        ("export --to /proc/p.pt", ["export", str(src), "--to", "/proc/p.pt"]),
        ("collect --out /proc/ds", ["collect", str(src), "--episodes", "1", "--out", "/proc/ds"]),
        ("export --to file/p.pt", ["export", str(src), "--to", f"{a_file}/p.pt"]),
        ("train --run-dir /proc/run", ["train", "--run-dir", "/proc/run", *SHORT]),
        ("train --run-dir file/run", ["train", "--run-dir", f"{a_file}/run", *SHORT]),
        ("sweep --out /proc/s", ["sweep", "--out", "/proc/s", "--grid", "gamma=0.9,0.99",
                                 *SHORT]),
    ]  # fmt: skip
    for name, args in cases:
        out = cli(*args)
        names_path = any(p in out.stderr for p in ("/proc", str(a_file)))
        outcome = classify(out.returncode, out.stderr, (2,), True)
        if outcome == "clean" and not names_path:
            outcome = "ugly"
        record(f"unwritable: {name}", outcome, out.returncode, last_line(out.stderr))


SCENARIOS: dict[str, Callable[[Path], None]] = {
    "unwritable": unwritable,
    "full_disk": full_disk,
    "damaged_checkpoints": damaged_checkpoints,
    "kill_at_checkpoint": kill_at_checkpoint,
    "two_writers": two_writers,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help="run the scenario groups with this in the name")
    parser.add_argument("--tag", default="", help="suffix of the results file names")
    parser.add_argument("--code", type=Path, default=ROOT,
                        help="checkout whose purejaxppo runs (default: this one)")  # fmt: skip
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
    lines = [f"# Fault script ({time.strftime('%Y-%m-%d')}): {summary}", "",
             f"Command: `PYTHONPATH=$PWD python benchmarks/faults.py {' '.join(sys.argv[1:])}`"
             " (a 2-core machine shared with other jobs)", "",
             "| scenario | outcome | exit | note |", "| --- | --- | --- | --- |"]  # fmt: skip
    lines += [f"| {r['scenario']} | {r['outcome']} | {r['exit']} | "
              f"{r['note'].replace('|', '/')} |" for r in RESULTS]  # fmt: skip
    (out_dir / f"{stem}.md").write_text("\n".join(lines) + "\n")
    print(f"wrote {out_dir / stem}.csv and .md")


if __name__ == "__main__":
    main()
