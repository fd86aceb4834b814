"""Mutation testing of `purejaxppo check` and the learning gate: does each known PPO bug
turn them red?

A mutant is one named source edit (`Mutant`: the exact old text of one file, the new
text, and the target that should catch it). The runner copies the project (the files
`git ls-files` lists, tracked or untracked but not ignored; never .git or .venv) into a
temporary folder, applies ONE mutant there, and runs its target with that copy first on
`sys.path` (cwd = the copy, `PYTHONPATH` = the copy; the venv's editable install of this
checkout comes after it). The working tree is never written. Before the first mutant,
each target runs once on an unmutated copy (the baseline): kills are reported only when
every baseline is green.

Targets:
  a config (`configs/*.yaml`): `python -m purejaxppo.cli check --config C --json`; exit 1
    with a row whose "passed" is false = caught (the first such row is recorded);
  "gate": `python -m tools.learning_gate` ("gate:ROW,ROW": `--only ROW ROW`); exit 1 =
    caught (its last line, "RED: ...", is recorded).
Exit 0 = survived. Anything else (an exit 1 without red rows, a traceback, a signal, a
config refused with exit 2) is recorded as "crashed", a timeout as "timeout": the baseline
ran clean, so they are the mutant's doing, but they are not the check catching it.

Usage:
  python -m tools.mutants [--only NAME ...] [--list] [--target-cmd CMD] [--timeout S]
      [--check-args ARGS] [--no-write]
`--target-cmd` replaces every target's command (a stand-in such as
`python -m pytest -x -q tests/test_gae.py`; `{config}` in it becomes the mutant's target);
exit 1 = caught, 0 = survived. Writes benchmarks/results/mutants-cpu-YYYYMMDD-HHMMSS.csv
and .md (the kill table) and prints the table.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

from tools.mutant_list import MUTANTS, Mutant

ROOT = Path(__file__).resolve().parents[1]
RESULTS_DIR = ROOT / "benchmarks" / "results"
GATE = "gate"
#: Exit codes with a meaning of their own: 0 all rows pass, 1 a row failed.
PASSED, FAILED = 0, 1


class MutantError(ValueError):
    """A mutant whose old text does not occur exactly once (it rotted with the code)."""


class ImportFailed(RuntimeError):
    """The scratch copy's module could not be imported at all."""


class Outcome(NamedTuple):
    """What one run of a target did."""

    caught: str  # "yes", "no", "crashed", "timeout"
    first_red: str  # the first failing row (check) or the last line of output
    exit_code: int | None  # None: killed at the timeout
    seconds: float


def by_name(names: Sequence[str] | None = None) -> list[Mutant]:
    """The mutants named (all when `names` is empty or None), in `MUTANTS` order.

    Raises:
      ValueError: a name that is no mutant's.
    """
    known = {m.name: m for m in MUTANTS}
    unknown = [n for n in names or () if n not in known]
    if unknown:
        raise ValueError(f"--only {unknown}: no such mutant (known: {sorted(known)})")
    return [m for m in MUTANTS if not names or m.name in names]


def occurrences(root: Path, mutant: Mutant) -> int:
    """How often `mutant.old` occurs in its file under `root` (0 if the file is missing)."""
    path = root / mutant.file
    return path.read_text().count(mutant.old) if path.is_file() else 0


def check_applies(root: Path, mutant: Mutant) -> None:
    """Raises `MutantError` unless `mutant.old` occurs exactly once in its file."""
    count = occurrences(root, mutant)
    if count != 1:
        raise MutantError(
            f"mutant {mutant.name!r}: its old text occurs {count} times in {mutant.file} "
            "(must be exactly once): update the mutant to the code"
        )


def project_files(root: Path = ROOT) -> list[str]:
    """The repository's files (tracked, and untracked unless ignored) that exist."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=root,
        capture_output=True,
        check=True,
    ).stdout.decode()
    return sorted({f for f in listed.split("\0") if f and (root / f).is_file()})


def make_scratch(dest: Path, root: Path = ROOT) -> Path:
    """Copies the project's files (`project_files`) from `root` into `dest`; returns it."""
    for rel in project_files(root):
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(root / rel, target)
    return dest


def apply_mutant(scratch: Path, mutant: Mutant) -> None:
    """Writes `mutant` into the scratch copy `scratch` (never the working tree).

    Raises:
      MutantError: the old text does not occur exactly once.
      ValueError: `scratch` is this checkout.
    """
    if scratch.resolve() == ROOT:
        raise ValueError("apply_mutant: refusing to edit the working tree; pass a scratch copy")
    check_applies(scratch, mutant)
    path = scratch / mutant.file
    path.write_text(path.read_text().replace(mutant.old, mutant.new, 1))


def scratch_env(scratch: Path) -> dict[str, str]:
    """The environment of a run in `scratch`: the copy first on `sys.path`, no bytecode
    written, CPU unless `JAX_PLATFORMS` says otherwise."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(scratch), env.get("PYTHONPATH", "")]).rstrip(
        os.pathsep
    )
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env.setdefault("JAX_PLATFORMS", "cpu")
    return env


def module_of(file: str) -> str:
    """The module of a repository file: purejaxppo/networks/factory.py ->
    purejaxppo.networks.factory."""
    parts = Path(file).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_file(scratch: Path, module: str = "purejaxppo") -> Path:
    """The file `module` is imported from by a run in `scratch` (as the targets run).

    Raises:
      ImportFailed: the import raised.
    """
    code = f"import importlib; print(importlib.import_module({module!r}).__file__)"
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=scratch,
        env=scratch_env(scratch),
        capture_output=True,
        text=True,
        timeout=300,
    )
    if out.returncode != 0:
        raise ImportFailed(f"importing {module} failed: {last_line(out.stderr)}")
    return Path(out.stdout.strip().splitlines()[-1])


def verify_import(scratch: Path, module: str = "purejaxppo") -> Path:
    """`imported_file`, checked to lie inside `scratch`.

    Raises:
      RuntimeError: the run imports `module` from elsewhere (e.g. the editable install).
      ImportFailed: the import raised.
    """
    file = imported_file(scratch, module)
    if not file.resolve().is_relative_to(scratch.resolve()):
        raise RuntimeError(f"{module} is imported from {file}, not from the scratch {scratch}")
    return file


def target_command(target: str, target_cmd: str | None, check_args: str = "") -> list[str]:
    """The argv that runs `target` (a config or "gate"), or `target_cmd` with `{config}`
    replaced by the target; a leading `python` is this interpreter, a leading relative
    path to a file of this checkout (`.venv/bin/pytest`) is made absolute."""
    if target_cmd:
        argv = shlex.split(target_cmd.replace("{config}", target))
        if argv and argv[0] == "python":
            argv[0] = sys.executable
        elif argv and not Path(argv[0]).is_absolute() and (ROOT / argv[0]).is_file():
            argv[0] = str(ROOT / argv[0])
        return argv
    if target == GATE or target.startswith(GATE + ":"):
        rows = target.split(":", 1)[1].split(",") if ":" in target else []
        return [sys.executable, "-m", "tools.learning_gate", *(["--only", *rows] if rows else [])]
    check = [sys.executable, "-m", "purejaxppo.cli", "check", "--config", target, "--json"]
    check.append("--no-progress")
    return check + shlex.split(check_args)


def parse_rows(stdout: str) -> list[dict] | None:
    """The rows `check --json` printed, or None: the last JSON value on stdout that is
    a list of row objects or an object with one under "rows" (`CheckReport.to_json`)."""
    decoder = json.JSONDecoder()
    found = None
    for match in re.finditer(r"^\s*[\[{]", stdout, flags=re.MULTILINE):
        try:
            value, _ = decoder.raw_decode(stdout, match.end() - 1)
        except json.JSONDecodeError:
            continue
        rows = value.get("rows") if isinstance(value, dict) else value
        if isinstance(rows, list) and all(isinstance(r, dict) for r in rows):
            found = rows
    return found


def last_line(*texts: str) -> str:
    """The last non-empty line of the first text that has one."""
    for text in texts:
        lines = [line.strip() for line in text.splitlines() if line.strip()]
        if lines:
            return lines[-1][:200]
    return ""


def _crashed(stderr: str) -> bool:
    """Whether stderr ends with an uncaught Python exception."""
    return "Traceback (most recent call last)" in stderr and bool(
        re.match(r"^[\w.]+(Error|Exception|Interrupt|Exit)\b", last_line(stderr))
    )


def classify(is_check: bool, code: int, stdout: str, stderr: str) -> tuple[str, str]:
    """`(caught, first_red)` of a finished run (see the module docstring): for `check`
    the first red row as "row (points_to)"; otherwise pytest's first FAILED line, or the
    last line of output."""
    if is_check:
        rows = parse_rows(stdout)
        red = [r for r in rows or () if r.get("passed") is False]
        if code == FAILED and red:
            row = red[0]
            measured = f"; measured {row['measured']}" if row.get("measured") is not None else ""
            return "yes", f"{row.get('row', '?')} ({row.get('points_to', '?')}{measured})"
        if code == PASSED and rows is not None and not red:
            return "no", ""
        if code == PASSED:
            return "no", "exit 0 but " + ("no JSON rows" if rows is None else f"{len(red)} red")
        return "crashed", last_line(stderr, stdout)
    if code == PASSED:
        return "no", last_line(stdout, stderr)
    if code == FAILED and not _crashed(stderr):
        failed = [line for line in stdout.splitlines() if line.startswith("FAILED ")]
        return "yes", failed[0][:200] if failed else last_line(stdout, stderr)
    return "crashed", last_line(stderr, stdout)


def run_target(scratch: Path, argv: list[str], is_check: bool, timeout: float) -> Outcome:
    """Runs `argv` in `scratch` (`scratch_env`) and classifies what it did."""
    start = time.monotonic()
    try:
        done = subprocess.run(
            argv,
            cwd=scratch,
            env=scratch_env(scratch),
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired:
        return Outcome("timeout", f"no result in {timeout:.0f} s", None, time.monotonic() - start)
    caught, first_red = classify(is_check, done.returncode, done.stdout, done.stderr)
    return Outcome(caught, first_red, done.returncode, time.monotonic() - start)


def run_one(mutant: Mutant | None, target: str, argv: list[str], timeout: float) -> Outcome:
    """Copies the project, applies `mutant` (None: the clean baseline), checks that the
    copy is what gets imported, and runs `argv` there."""
    with tempfile.TemporaryDirectory(prefix="purejaxppo-mutant-") as tmp:
        scratch = make_scratch(Path(tmp))
        module = "purejaxppo"
        if mutant is not None:
            apply_mutant(scratch, mutant)
            module = module_of(mutant.file)
        try:
            file = verify_import(scratch, module)
        except ImportFailed as err:
            if mutant is None:
                raise
            return Outcome("crashed", str(err), None, 0.0)
        print(f"  {mutant.name if mutant else 'baseline'}: {module} from {file}", flush=True)
        return run_target(scratch, argv, is_check_command(argv), timeout)


def is_check_command(argv: list[str]) -> bool:
    """Whether `argv` is the `check` command (its JSON rows are parsed)."""
    return argv[1:4] == ["-m", "purejaxppo.cli", "check"]


FIELDS = ["mutant", "target", "caught", "first_red", "exit", "seconds", "file", "description"]


def write_results(rows: list[dict], baselines: list[dict], command: str) -> Path:
    """Writes the CSV and the Markdown kill table; returns the Markdown path."""
    platform = os.environ.get("JAX_PLATFORMS", "cpu") or "cpu"
    stem = f"mutants-{platform}-{time.strftime('%Y%m%d-%H%M%S')}"
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    with (RESULTS_DIR / f"{stem}.csv").open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=FIELDS)
        writer.writeheader()
        writer.writerows(rows)
    md = RESULTS_DIR / f"{stem}.md"
    md.write_text(table(rows, baselines, command))
    return md


def summary(rows: list[dict]) -> str:
    """ "k of n caught (c crashed, t timed out)"."""
    count = {k: sum(r["caught"] == k for r in rows) for k in ("yes", "crashed", "timeout")}
    return (
        f"{count['yes']} of {len(rows)} caught by a red row"
        f" ({count['crashed']} crashed, {count['timeout']} timed out)"
    )


def table(rows: list[dict], baselines: list[dict], command: str) -> str:
    """The Markdown kill table."""
    greens = ", ".join(
        f"{b['target']} {'green' if b['caught'] == 'no' else 'RED'} ({b['seconds']} s)"
        for b in baselines
    )
    lines = [
        f"# Mutants ({time.strftime('%Y-%m-%d %H:%M')}): {summary(rows)}",
        "",
        f"Command: `{command}` (a 2-core CPU machine shared with other jobs). Baselines (no "
        f"edit): {greens}. caught: yes = exit 1 with a red row; crashed / timeout = the "
        "mutant broke the run instead; no = survived. Mutants: `tools/mutant_list.py`.",
        "",
        "| mutant | target | caught | first red row | exit | s | file | bug |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        cells = [r[k] for k in FIELDS]
        lines.append("| " + " | ".join(str(c).replace("|", "/") for c in cells) + " |")
    return "\n".join(lines) + "\n"


def _row(mutant: Mutant | None, target: str, outcome: Outcome) -> dict:
    return {
        "mutant": mutant.name if mutant else "(baseline)",
        "target": target,
        "caught": outcome.caught,
        "first_red": outcome.first_red,
        "exit": "" if outcome.exit_code is None else outcome.exit_code,
        "seconds": round(outcome.seconds, 1),
        "file": mutant.file if mutant else "",
        "description": mutant.description if mutant else "",
    }


def list_mutants(mutants: Sequence[Mutant]) -> int:
    """Prints the mutants, each checked against the working tree; 1 if any is stale."""
    stale = 0
    for m in mutants:
        count = occurrences(ROOT, m)
        stale += count != 1
        status = "ok" if count == 1 else f"STALE (old text found {count} times)"
        print(f"{m.name:28s} {m.target:34s} {m.file:32s} {status}\n    {m.description}")
    print(f"{len(mutants)} mutants, {stale} stale")
    return 1 if stale else 0


def main(argv: Sequence[str] | None = None) -> int:
    """The command line (see the module docstring); returns the exit code."""
    parser = argparse.ArgumentParser(prog="python -m tools.mutants", description=__doc__)
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.add_argument("--only", nargs="+", metavar="NAME", help="run only these mutants")
    parser.add_argument("--list", action="store_true", help="list the mutants and exit")
    parser.add_argument("--target-cmd", help="a command to run instead of each target")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds per run")
    parser.add_argument("--check-args", default="", help="extra arguments for `check`")
    parser.add_argument("--no-write", action="store_true", help="print only, write no files")
    args = parser.parse_args(argv)
    try:
        mutants = by_name(args.only)
    except ValueError as err:
        parser.error(str(err))
    if args.list:
        return list_mutants(mutants)
    for m in mutants:  # fail before any run, not after an hour
        check_applies(ROOT, m)
    command = "python -m tools.mutants " + " ".join(shlex.quote(a) for a in (argv or sys.argv[1:]))

    def command_of(target: str) -> list[str]:
        return target_command(target, args.target_cmd, args.check_args)

    baselines = []
    # One baseline per distinct command (a stand-in without {config} runs once).
    firsts = {tuple(command_of(m.target)): m.target for m in reversed(mutants)}
    for target in dict.fromkeys(firsts[tuple(command_of(m.target))] for m in mutants):
        outcome = run_one(None, target, command_of(target), args.timeout)
        baselines.append(_row(None, target, outcome))
        state = "green" if outcome.caught == "no" else f"RED ({outcome.caught})"
        print(f"baseline {target}: {state} in {outcome.seconds:.0f} s {outcome.first_red}")
        if outcome.caught != "no":
            print(
                f"mutants: the baseline of {target} is not green (exit {outcome.exit_code}: "
                f"{outcome.first_red}); no kills reported",
                file=sys.stderr,
            )
            return 2
    rows = []
    for m in mutants:
        outcome = run_one(m, m.target, command_of(m.target), args.timeout)
        rows.append(_row(m, m.target, outcome))
        print(f"{m.name}: caught={outcome.caught} in {outcome.seconds:.0f} s {outcome.first_red}")
    print()
    print(table(rows, baselines, command))
    if not args.no_write:
        print(f"wrote {write_results(rows, baselines, command).with_suffix('')}.csv and .md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
