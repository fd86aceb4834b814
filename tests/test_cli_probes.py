"""tools/probes/: the CLI probes' tables and their classification, without starting a process.

The probes themselves (`python -m tools.probes.input_probes`, `python -m tools.probes.faults`)
run real CLI subprocesses for minutes and are not part of the suite (docs/testing.md); these
tests keep what decides their verdicts honest: the battery's rows, in their order, and the
clean / ugly / lost rules on hand-made outcomes.
"""

from __future__ import annotations

import itertools
from pathlib import Path

from tools.probes import faults_common, input_probes
from tools.probes.input_probe_kit import PROBES, Probe

USAGE = "usage: purejaxppo train [-h] [--config CONFIG]\n                        [--seed SEED]\n"


def test_the_battery_holds_240_probes_in_table_order():
    assert len(PROBES) == 240
    assert len({(p.group, p.name) for p in PROBES}) == 240  # no row twice
    # the rows of input_probe_cases, then input_probe_outputs, then input_probe_values
    groups = [group for group, _ in itertools.groupby(p.group for p in PROBES)]
    assert groups == [
        *("cli", "train", "env", "train", "config", "eval"),
        *("export", "collect", "sweep", "pbt"),
        "values",
    ]
    assert (PROBES[0].name, PROBES[-1].name) == ("no subcommand", "tune --objective eval_return:0")
    assert {p.expect for p in PROBES} == {"error", "ok", "either"}
    # a refusal must name something; a fine input names nothing
    assert [p.name for p in PROBES if p.expect == "error" and not p.names] == []
    assert [p.name for p in PROBES if p.expect == "ok" and p.names] == []


def test_a_one_line_refusal_naming_the_field_is_clean():
    probe = Probe("train", "--num-envs 0", ["train"], names=("num_envs",))
    stderr = USAGE + "purejaxppo train: error: num_envs=0: must be >= 1\n"
    # argparse's two usage lines are not counted: 1 line left
    assert input_probes.stderr_lines(stderr) == (
        ["purejaxppo train: error: num_envs=0: must be >= 1"],
        2,
    )
    assert input_probes.classify(probe, 2, stderr, [], []) == ("clean", "")


def test_tracebacks_silence_and_leftovers_are_named():
    probe = Probe("train", "--num-envs 0", ["train"], names=("num_envs",))
    traceback = "Traceback (most recent call last):\n  File x\nValueError: bad\n"
    assert input_probes.classify(probe, 1, traceback, [], []) == (
        "ugly",
        "traceback; exit 1; last line is no 'purejaxppo: error:'; names none of num_envs",
    )
    assert input_probes.classify(probe, None, "", [], []) == ("ugly", "timed out (killed)")
    assert input_probes.classify(probe, 0, "", ["+new/config.yaml"], []) == (
        "lost",
        "bad input accepted (exit 0); wrote +new/config.yaml",
    )
    error = "purejaxppo: error: num_envs=0\n"
    assert input_probes.classify(probe, 2, error, ["+new", "+new/config.yaml"], []) == (
        "lost",
        "refused, but changed +new +new/config.yaml",
    )
    # only a lock file left in an existing folder: ugly, not lost
    assert input_probes.classify(probe, 2, error, ["+mine/.purejaxppo-lock"], []) == (
        "ugly",
        "left +mine/.purejaxppo-lock",
    )


def test_a_fine_input_must_succeed_and_leave_its_inputs_alone():
    probe = Probe("eval", "3 episodes (fine)", ["eval"], expect="ok", intact=("run",))
    assert input_probes.classify(probe, 0, "", ["+run/eval.csv"], []) == (
        "clean",
        "fine input, accepted",
    )
    assert input_probes.classify(probe, 0, "", [], ["~run/config.yaml"]) == (
        "lost",
        "changed its inputs: ~run/config.yaml",
    )
    refused = input_probes.classify(probe, 2, "purejaxppo: error: x\n", [], [])
    assert refused == ("ugly", "fine input refused")


def test_snapshot_and_changes_see_new_gone_changed_and_links(tmp_path):
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "a.txt").write_text("a")
    (tmp_path / "run" / "b.txt").write_text("b")
    (tmp_path / "loop").symlink_to("loop")
    before = input_probes.snapshot(tmp_path)
    assert before["loop"] == "link:loop" and before["run"] == "dir"
    (tmp_path / "run" / "a.txt").write_text("changed")
    (tmp_path / "run" / "b.txt").unlink()
    (tmp_path / "new").mkdir()
    after = input_probes.snapshot(tmp_path)
    assert input_probes.changes(before, after) == ["+new", "-run/b.txt", "~run/a.txt"]
    assert input_probes.changes(before, after, ("run",)) == ["-run/b.txt", "~run/a.txt"]


def test_faults_classify_counts_error_lines_without_notes():
    notes = "purejaxppo: warning: slow disk\nresumed from step 20\n"
    assert faults_common.error_lines(notes + "purejaxppo: error: in use\n") == [
        "purejaxppo: error: in use"
    ]
    assert faults_common.classify(2, notes + "purejaxppo: error: in use\n", (2,), True) == "clean"
    assert faults_common.classify(1, "purejaxppo: error: in use\n", (2,), True) == "ugly"
    assert faults_common.classify(2, "Traceback (most recent call last):\n", (2,), True) == "ugly"
    assert faults_common.classify(0, "", (0,), False) == "lost"


def test_faults_updates_ok_wants_each_update_once(tmp_path):
    metrics = tmp_path / "metrics.csv"
    metrics.write_text("update,return\n1,9.0\n2,10.0\n3,11.0\n")
    assert faults_common.updates_ok(tmp_path) and faults_common.updates_ok(tmp_path, 3)
    assert not faults_common.updates_ok(tmp_path, 4)  # a run cut short
    metrics.write_text("update,return\n1,9.0\n2,10.0\nupdate,return\n2,10.0\n")
    assert not faults_common.updates_ok(tmp_path)  # two writers: a second header


def test_both_write_to_the_repositorys_results_folder():
    root = Path(__file__).resolve().parents[1]
    # faults.py writes to ROOT / "benchmarks" / "results", input_probes.py to RESULTS
    assert faults_common.ROOT == root
    assert input_probes.RESULTS == root / "benchmarks" / "results"
