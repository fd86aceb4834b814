"""Bad-input probes of the command line: 240 misuses of `train`, `eval`,
`export`, `collect`, `sweep`, `pbt` and of config files (unknown or mistyped fields,
wrong types, out-of-range values, bad env ids and env kwargs, bad grids and
distributions, paths that are files, missing, under a file, in /proc, a symlink loop,
damaged run directories, outputs that exist), each a real CLI subprocess (its own
process group, killed after --timeout seconds) in its own temporary folder, which is
also its working directory (so a default `runs/`, `sweeps/` or `pbt/` would show).

Each probe is classified:
  clean  refused with exit 2 and at most 3 lines of stderr (argparse's leading usage
         block not counted), the last `purejaxppo[ CMD]: error: ...` naming the bad
         field / value, no traceback, and the probe's folder byte-identical afterwards
         (nothing created, an existing run / output untouched); or, where the input
         is fine (marked so), a correct success leaving the inputs it reads untouched;
  ugly   a traceback, more lines, a message that does not name the field / value, an
         exit code other than 2, a timeout; or a refusal that leaves only an empty lock
         file behind in an existing folder;
  lost   data changed or deleted, a folder / files created for a refused input, or a
         bad value silently accepted (exit 0).
  skip   an unreadable file (chmod 000) when run as root, who reads it anyway.
`eval`, `export` and `collect` read the config saved in the checkpoint, not config.yaml:
with a damaged config.yaml either a success or a clean refusal is right.

Usage (from the repository root; a shared machine: nice):
  PYTHONPATH=$PWD nice -n 10 python -m tools.probes.input_probes [--only TEXT] [--timeout S]
Prints a table and the counts; writes benchmarks/results/input-probes-<stamp>.csv and .md.
The probes are rows in `input_probe_cases.py` (the commands that read), `input_probe_outputs.py`
(those that write an output) and `input_probe_values.py` (values checked, not only names),
added in that order; `Probe`, the folder setups and `table` are in `input_probe_kit.py`.
With --list it only prints the probes, one a line (group | name | argv | setup | names |
expect | intact), and runs nothing.
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from tools.common import (
    RESULTS,
    ROOT,
    atomic_write,
    env_with_pythonpath,
    markdown_table,
    stamp,
)
from tools.probes.input_probe_cases import BASE_ARGS
from tools.probes.input_probe_kit import PROBES, Probe
from tools.probes.input_probe_outputs import PBT  # noqa: F401  (registers its rows)
from tools.probes.input_probe_values import MPE  # noqa: F401  (registers its rows, last)

#: A JAX CPU deadlock workaround, for every subprocess.
XLA = "--xla_cpu_enable_concurrency_optimized_scheduler=false"
ENV = env_with_pythonpath(str(ROOT), xla_flags=XLA)
CLI = [sys.executable, "-m", "purejaxppo.cli"]

#: The last line of a refusal: ours or argparse's (`purejaxppo train: error: ...`).
ERROR_LINE = re.compile(r"^purejaxppo( \w+)?: error: ")
#: Files a claim of a folder (`rundir.claim`) leaves behind.
LOCK_FILES = (".purejaxppo-lock", ".purejaxppo-pid")


# ----------------------------------------------------------------- running
def snapshot(root: Path) -> dict[str, str]:
    """relative path -> "dir", "link:<target>" or the sha256 of the file (no links followed)."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = Path(dirpath, name)
            rel = str(path.relative_to(root))
            if path.is_symlink():
                out[rel] = "link:" + os.readlink(path)
            elif path.is_dir():
                out[rel] = "dir"
            else:
                try:
                    out[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
                except OSError as err:
                    out[rel] = f"unreadable:{err.errno}"
    return out


def changes(before: dict[str, str], after: dict[str, str], under: Sequence[str] = ()) -> list[str]:
    """'+new', '-gone', '~changed' entries (only those under `under`, when given)."""

    def keep(rel: str) -> bool:
        return not under or any(rel == u or rel.startswith(u + "/") for u in under)

    out = [f"+{p}" for p in sorted(set(after) - set(before)) if keep(p)]
    out += [f"-{p}" for p in sorted(set(before) - set(after)) if keep(p)]
    out += [f"~{p}" for p in sorted(set(before) & set(after)) if before[p] != after[p] and keep(p)]
    return out


def stderr_lines(stderr: str) -> tuple[list[str], int]:
    """The non-empty stderr lines but progress bars and argparse's leading usage block;
    the number of usage lines dropped."""
    lines = [ln for ln in stderr.splitlines() if ln.strip() and "it/s]" not in ln]
    usage = 0
    if lines and lines[0].startswith("usage:"):
        usage = 1
        while usage < len(lines) and lines[usage].startswith(" "):
            usage += 1
    return lines[usage:], usage


def norm(text: str) -> str:
    return text.lower().replace("-", "_")


def classify(p: Probe, rc: int | None, stderr: str, diff: list[str], broken: list[str]) -> tuple:
    """(outcome, why) of a finished probe (rc None: it timed out)."""
    if rc is None:
        return "ugly", "timed out (killed)"
    lines, _ = stderr_lines(stderr)
    last = lines[-1] if lines else ""
    if rc == 0 and p.expect in ("ok", "either"):
        if broken:
            return "lost", "changed its inputs: " + " ".join(broken[:4])
        if "Traceback" in stderr:
            return "ugly", "succeeded, with a traceback on stderr"
        return "clean", "fine input, accepted" if p.expect == "ok" else "accepted (right too)"
    if rc == 0:
        return "lost", "bad input accepted (exit 0)" + (
            f"; wrote {' '.join(diff[:3])}" if diff else ""
        )
    if diff:
        only_locks = all(c.startswith("+") and Path(c[1:]).name in LOCK_FILES for c in diff)
        if not only_locks:
            return "lost", "refused, but changed " + " ".join(diff[:4])
    problems = []
    if p.expect == "ok":
        problems.append("fine input refused")
    if "Traceback" in stderr:
        problems.append("traceback")
    if rc != 2:
        problems.append(f"exit {rc}")
    if len(lines) > 3:
        problems.append(f"{len(lines)} lines")
    if not ERROR_LINE.match(last):
        problems.append("last line is no 'purejaxppo: error:'")
    if p.names and not any(norm(n) in norm(last) for n in p.names):
        problems.append(f"names none of {', '.join(p.names)}")
    if diff:
        problems.append("left " + " ".join(diff[:2]))
    return ("ugly" if problems else "clean"), "; ".join(problems)


def run_probe(p: Probe, d: Path, base: Path, timeout: float) -> dict[str, str]:
    d.mkdir()
    if any("{run}" in a for a in p.argv):
        shutil.copytree(base, d / "run", symlinks=True)
    if p.setup is not None:
        p.setup(d)
    argv = [a.replace("{run}", str(d / "run")).replace("{d}", str(d)) for a in p.argv]
    before = snapshot(d)
    start = time.monotonic()
    proc = subprocess.Popen(
        [*CLI, *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        errors="replace",
        env=ENV,
        cwd=d,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=timeout)
        rc = proc.returncode
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        rc = None
    seconds = time.monotonic() - start
    after = snapshot(d)
    diff = changes(before, after)
    broken = changes(before, after, p.intact) if p.intact else []
    if os.geteuid() == 0 and "chmod 000" in p.name:
        outcome, why = "skip", "run as root: chmod 000 does not stop reading"
    else:
        outcome, why = classify(p, rc, err, diff, broken)
    lines, usage = stderr_lines(err)
    lines = [line.replace(str(d), "$T") for line in lines]
    note = lines[-1] if lines else (out.strip().splitlines() or [""])[-1].replace(str(d), "$T")
    shown = [a.replace(str(d), "$T") for a in argv]
    return {
        "group": p.group,
        "probe": p.name,
        "argv": shlex.join(shown),
        "outcome": outcome,
        "exit": "timeout" if rc is None else str(rc),
        "seconds": f"{seconds:.1f}",
        "note": " ".join(note.split())[:160],
        "why": why.replace(str(d), "$T"),
        "first": " ".join((lines[0] if lines else "").split())[:200],
        "lines": f"{len(lines)}" + (f" (+{usage} usage)" if usage else ""),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help="the probes whose group or name holds this")
    parser.add_argument("--timeout", type=float, default=120, help="seconds per probe")
    parser.add_argument("--list", action="store_true", help="print the probes; run nothing")
    args = parser.parse_args()
    probes = [p for p in PROBES if args.only in p.group or args.only in p.name]
    if args.list:
        for p in probes:
            print(p.group, p.name, p.argv, p.setup, p.names, p.expect, p.intact, sep=" | ")
        return
    started = time.time()
    rows = []
    with tempfile.TemporaryDirectory(prefix="purejaxppo-input-probes-") as tmp:
        base = Path(tmp) / "base"
        made = subprocess.run(
            [*CLI, "train", "--run-dir", str(base), *BASE_ARGS],
            capture_output=True,
            text=True,
            env=ENV,
            cwd=tmp,
            timeout=600,
        )
        if made.returncode != 0:
            sys.exit(f"input_probes: the base run failed:\n{made.stderr[-2000:]}")
        for i, p in enumerate(probes):
            row = run_probe(p, Path(tmp) / f"p{i:03d}", base, args.timeout)
            rows.append(row)
            print(
                f"{row['outcome']:5} {row['exit']:>7} {row['seconds']:>5}s  "
                f"{p.group:7} {p.name[:40]:40} {row['note'][:90]}",
                flush=True,
            )
    counts = {k: sum(r["outcome"] == k for r in rows) for k in ("clean", "ugly", "lost", "skip")}
    summary = ", ".join(f"{v} {k}" for k, v in counts.items())
    print(f"\n{len(rows)} probes: {summary} ({time.time() - started:.0f} s)")
    bad = [r for r in rows if r["outcome"] in ("ugly", "lost")]
    for r in bad:
        print(f"\n[{r['outcome']}] {r['group']}: {r['probe']} (exit {r['exit']}; {r['why']})")
        print(f"  purejaxppo {r['argv']}\n  first: {r['first']}\n  last:  {r['note']}")

    cols = ["group", "probe", "argv", "outcome", "exit", "note", "why", "first", "lines"]
    name = f"input-probes-{stamp()}"

    def write_csv(path: str) -> None:
        with open(path, "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=cols + ["seconds"])
            writer.writeheader()
            writer.writerows(rows)

    atomic_write(RESULTS / f"{name}.csv", write_csv)
    cell = [{k: str(v).replace("|", "/").replace("`", "'") for k, v in r.items()} for r in rows]
    for r in cell:
        r["argv"] = f"`{r['argv'][:140]}`"
    lines = [
        f"# Bad-input probes of the command line ({time.strftime('%Y-%m-%d')}): {summary}",
        "",
        "Command: `PYTHONPATH=$PWD nice -n 10 python -m tools.probes.input_probes "
        f"{' '.join(sys.argv[1:])}` (a 2-core machine shared with other jobs; "
        f"{time.time() - started:.0f} s). `$T` is the probe's temporary folder; "
        "the classes are in the docstring of `tools/probes/input_probes.py`.",
        "",
        *markdown_table(cell, ["group", "probe", "argv", "outcome", "exit", "note"]),
    ]
    if bad:
        lines += ["", "## Ugly and lost", ""]
        lines += markdown_table(
            [r for r in cell if r["outcome"] in ("ugly", "lost")],
            ["group", "probe", "outcome", "exit", "why", "first"],
        )
    atomic_write(RESULTS / f"{name}.md", lambda p: Path(p).write_text("\n".join(lines) + "\n"))
    print(f"wrote {RESULTS / name}.csv and .md")


if __name__ == "__main__":
    main()
