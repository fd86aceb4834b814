"""tools/mutants.py: every mutant applies, only ever to a scratch copy that is what the
target imports, and the runner tells caught from survived from crashed (no training:
stand-in targets that read the mutated source)."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest

from tools import mutants
from tools.mutants import MUTANTS, Mutant, MutantError

ROOT = Path(__file__).resolve().parents[1]

#: The ten bugs the brief (issue #66) names, each a mutant.
REQUIRED = {
    "adv-sign-flipped",
    "gae-bootstrap-from-v-s",
    "truncation-as-termination",
    "termination-as-truncation",
    "gae-no-discount",
    "rnn-no-reset-in-rollout",
    "logprob-of-clipped-action",
    "mask-ignored-when-sampling",
    "vloss-to-old-values",
    "obs-norm-not-when-acting",
}


def git_status() -> str:
    return subprocess.run(
        ["git", "status", "--porcelain"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout


def test_every_mutant_applies_exactly_once_and_compiles():
    names = [m.name for m in MUTANTS]
    assert len(names) == len(set(names)) >= 12
    assert REQUIRED <= set(names)
    for m in MUTANTS:
        text = (ROOT / m.file).read_text()
        assert text.count(m.old) == 1, m.name
        assert m.old != m.new, m.name
        assert m.target.split(":")[0] == mutants.GATE or (ROOT / m.target).is_file(), m.name
        mutated = text.replace(m.old, m.new, 1)
        compile(mutated, m.file, "exec")  # the edit is still Python


def test_a_rotted_mutant_fails_loudly(tmp_path):
    (tmp_path / "f.py").write_text("x = 1\nx = 1\n")
    twice = Mutant("twice", "", "f.py", "x = 1\n", "x = 2\n", "gate")
    missing = Mutant("missing", "", "f.py", "y = 1\n", "y = 2\n", "gate")
    with pytest.raises(MutantError, match="occurs 2 times"):
        mutants.apply_mutant(tmp_path, twice)
    with pytest.raises(MutantError, match="occurs 0 times"):
        mutants.apply_mutant(tmp_path, missing)
    assert (tmp_path / "f.py").read_text() == "x = 1\nx = 1\n"


def test_apply_in_scratch_leaves_the_working_tree_untouched(tmp_path):
    mutant = mutants.by_name(["gae-no-discount"])[0]
    original = (ROOT / mutant.file).read_bytes()
    before = git_status()
    scratch = mutants.make_scratch(tmp_path)
    mutants.apply_mutant(scratch, mutant)
    assert git_status() == before
    assert (ROOT / mutant.file).read_bytes() == original
    changed = (scratch / mutant.file).read_text()
    assert changed != original.decode()
    assert mutant.new in changed and mutant.old not in changed
    assert not (scratch / ".git").exists() and not (scratch / ".venv").exists()
    assert (scratch / "tools" / "mutants.py").is_file()
    with pytest.raises(ValueError, match="working tree"):
        mutants.apply_mutant(ROOT, mutant)


def test_the_scratch_copy_is_what_the_target_imports(tmp_path):
    scratch = mutants.make_scratch(tmp_path / "scratch")
    assert mutants.verify_import(scratch, "purejaxppo.gae") == scratch / "purejaxppo" / "gae.py"
    # Where the folder has no purejaxppo, the venv's editable install of this checkout
    # answers: verify_import must see that.
    empty = tmp_path / "empty"
    empty.mkdir()
    assert mutants.imported_file(empty) == ROOT / "purejaxppo" / "__init__.py"
    with pytest.raises(RuntimeError, match="not from the scratch"):
        mutants.verify_import(empty)


def test_list_names_every_mutant_and_its_target():
    out = subprocess.run(
        [sys.executable, "-m", "tools.mutants", "--list"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    for m in MUTANTS:
        assert m.name in out.stdout and m.target in out.stdout
    assert f"{len(MUTANTS)} mutants, 0 stale" in out.stdout


def test_target_commands():
    python = sys.executable
    check = mutants.target_command("configs/cartpole.yaml", None, "--seeds 2")
    assert check[:4] == [python, "-m", "purejaxppo.cli", "check"]
    assert check[4:] == [
        "--config",
        "configs/cartpole.yaml",
        "--json",
        "--no-progress",
        "--seeds",
        "2",
    ]
    assert mutants.target_command("gate", None) == [python, "-m", "tools.learning_gate"]
    only = mutants.target_command("gate:learn:cartpole,check:pendulum", None)
    assert only[3:] == ["--only", "learn:cartpole", "check:pendulum"]
    stand_in = mutants.target_command("configs/x.yaml", ".venv/bin/pytest -k '{config}'")
    assert stand_in == [str(ROOT / ".venv/bin/pytest"), "-k", "configs/x.yaml"]


def test_classify_check_json_rows():
    rows = [
        {"row": "probe1 value", "passed": True, "points_to": "value loss"},
        {"row": "probe2 discount", "passed": False, "points_to": "GAE discount"},
        {"row": "probe3 advantage", "passed": False, "points_to": "advantage sign"},
    ]
    stdout = "compiling...\n" + json.dumps(rows, indent=1) + "\n"
    assert mutants.classify(True, 1, stdout, "") == ("yes", "probe2 discount (GAE discount)")
    # CheckReport.to_json: an object with the rows under "rows".
    report = json.dumps({"passed": False, "rows": [{**rows[1], "measured": 0.5}]}, indent=2)
    assert (
        mutants.classify(True, 1, report, "")[1] == "probe2 discount (GAE discount; measured 0.5)"
    )
    green = json.dumps([{**r, "passed": True} for r in rows])
    assert mutants.classify(True, 0, green, "") == ("no", "")
    traceback = "Traceback (most recent call last):\n  ...\nFloatingPointError: nan\n"
    assert mutants.classify(True, 1, "", traceback) == ("crashed", "FloatingPointError: nan")
    assert mutants.classify(True, 2, "", "purejaxppo: error: gamma=2.0\n")[0] == "crashed"
    # Another target: exit 1 is caught unless it is an uncaught exception.
    assert mutants.classify(False, 1, "red: probe2\n", "") == ("yes", "red: probe2")
    assert mutants.classify(False, 1, "", traceback)[0] == "crashed"
    assert mutants.classify(False, -9, "", "")[0] == "crashed"


# A stand-in for `check`: reads the GAE source it imports, red (exit 1) if the discount
# was dropped from the TD error.
STAND_IN = (
    'python -c "import inspect, sys, purejaxppo.gae as g; '
    "bad = 'reward_t + not_terminated * next_value_t' in inspect.getsource(g); "
    "print('red: discount dropped' if bad else 'green'); sys.exit(int(bad))\""
)


def test_runner_end_to_end_with_a_stand_in_target(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(mutants, "RESULTS_DIR", tmp_path)
    args = ["--only", "gae-no-discount", "lambda-ignored", "--target-cmd", STAND_IN]
    assert mutants.main(args) == 0
    (csv_file,) = tmp_path.glob("mutants-*.csv")
    assert csv_file.with_suffix(".md").is_file()
    rows = {r["mutant"]: r for r in csv.DictReader(csv_file.open())}
    assert rows["gae-no-discount"]["caught"] == "yes"
    assert rows["gae-no-discount"]["first_red"] == "red: discount dropped"
    assert rows["gae-no-discount"]["exit"] == "1"
    assert rows["lambda-ignored"]["caught"] == "no"  # learning.py: the stand-in sees nothing
    out = capsys.readouterr().out
    assert "| gae-no-discount | configs/cartpole.yaml | yes |" in out
    assert "1 of 2 caught" in out


def test_runner_refuses_kills_when_the_baseline_is_red(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(mutants, "RESULTS_DIR", tmp_path)
    red = "python -c \"import sys; print('always red'); sys.exit(1)\""
    assert mutants.main(["--only", "gae-no-discount", "--target-cmd", red]) == 2
    assert "not green" in capsys.readouterr().err
    assert not list(tmp_path.iterdir())


def test_a_mutant_that_breaks_the_import_is_recorded_as_crashed():
    broken = Mutant(
        "broken-import",
        "a syntax error",
        "purejaxppo/gae.py",
        mutants.by_name(["gae-no-discount"])[0].old,
        "    delta_t = (\n",
        "gate",
    )
    outcome = mutants.run_one(broken, "gate", ["false"], timeout=60)
    assert outcome.caught == "crashed" and "SyntaxError" in outcome.first_red


def test_the_readme_states_the_committed_results_and_they_cover_every_mutant():
    """README.md's "catches: all N of our list" is the mutants claim's results file
    (benchmarks/claims.yaml), and that file has a row for every mutant of `MUTANTS`."""
    import yaml

    claims = yaml.safe_load((ROOT / "benchmarks" / "claims.yaml").read_text())["tables"]
    [results] = claims["mutants"]["results"].values()
    with open(ROOT / results, newline="") as f:
        rows = list(csv.DictReader(f))
    assert {row["mutant"] for row in rows} == {m.name for m in MUTANTS}, results
    caught = sum(row["caught"] == "yes" for row in rows)
    stated = f"all {caught} of our list" if caught == len(rows) else f"{caught} of our {len(rows)}"
    readme = (ROOT / "README.md").read_text()
    assert f"it catches: {stated}." in " ".join(readme.split()), (results, stated)
