"""One export signature: `export_torch` and `export_onnx` take `ExportRequest`'s
arguments, checked before torch is imported."""

from __future__ import annotations

import inspect
import os
import signal
from pathlib import Path

import pytest

import purejaxppo as pjp
from purejaxppo.export import ExportRequest
from purejaxppo.export.request import commit


def test_exporters_share_the_request_signature():
    signature = inspect.signature(pjp.export_torch)
    assert signature == inspect.signature(pjp.export_onnx)
    assert list(signature.parameters) == [
        f.name for f in ExportRequest.__dataclass_fields__.values() if f.name != "_"
    ]
    keyword_only = [n for n, p in signature.parameters.items() if p.kind is p.KEYWORD_ONLY]
    assert keyword_only == ["index", "overwrite", "networks"]
    assert pjp.export_torch.__name__ == "export_torch" and "overwrite" in pjp.export_onnx.__doc__


def test_bad_arguments_fail_like_a_plain_function():
    with pytest.raises(TypeError, match=r"export_torch\(\): too many positional"):
        pjp.export_torch({}, pjp.PPOConfig(), "p.pt", None, None, 0)  # index is keyword-only
    with pytest.raises(TypeError, match=r"export_onnx\(\): .*'bogus'"):
        pjp.export_onnx({}, pjp.PPOConfig(), "p.onnx", bogus=1)


# ------------------------------------------------ the commit: one step, never mixed
def _old_export(folder):
    """An older export's files (a TorchScript file the new one does not write included),
    the new one's staged files in `stage`, and the targets, the manifest last."""
    targets = [folder / n for n in ("policy.pt", "policy.pt2", "policy.module.py", "policy.json")]
    for path in targets:
        path.write_text(f"old {path.name}")
    stage = folder / "stage"
    stage.mkdir()
    staged = {}
    for path in targets[1:]:  # no TorchScript this time
        staged[path] = stage / path.name
        staged[path].write_text(f"new {path.name}")
    return targets, staged


def _files(folder):
    return {p.name: p.read_text() for p in folder.iterdir() if p.is_file()}


def test_a_failing_commit_at_any_rename_leaves_the_old_export_whole(tmp_path, monkeypatch):
    targets, staged = _old_export(tmp_path)
    old = _files(tmp_path)
    replace, calls = os.replace, []

    def failing(k):
        def fake(src, dst):
            calls.append((src, dst))
            if len(calls) == k:
                raise OSError(f"rename {k} fails")
            replace(src, dst)

        return fake

    # 4 old files aside (manifest first) + 3 new in (manifest last) = 7 renames.
    for k in range(1, 8):
        calls.clear()
        monkeypatch.setattr(os, "replace", failing(k))
        with pytest.raises(OSError, match=f"rename {k} fails"):
            commit(staged, targets, overwrite=True)
        monkeypatch.setattr(os, "replace", replace)
        assert _files(tmp_path) == old, k  # every old file back, byte for byte
        assert [p.name for p in tmp_path.iterdir() if p.is_dir()] == ["stage"], k
        assert all(f.read_text().startswith("new") for f in staged.values()), k
    assert [Path(dst).name for _, dst in calls[:1]] == ["0_policy.json"]  # manifest out first
    commit(staged, targets, overwrite=True)
    assert _files(tmp_path) == {t.name: f"new {t.name}" for t in targets[1:]}  # stale .pt gone
    assert not list((tmp_path / "stage").iterdir())
    assert [p.name for p in tmp_path.iterdir() if p.is_dir()] == ["stage"]  # no tmp* left


def test_a_signal_during_the_commit_is_handled_after_it(tmp_path, monkeypatch):
    targets, staged = _old_export(tmp_path)
    replace, seen = os.replace, []

    def interrupted(src, dst):  # Ctrl-C, then SIGTERM, between two renames
        replace(src, dst)
        if Path(dst).name in ("policy.pt2", "policy.module.py"):
            signal.raise_signal(signal.SIGINT if Path(dst).suffix == ".pt2" else signal.SIGTERM)

    def handler(signum, frame):
        seen.append((signal.Signals(signum).name, _files(tmp_path)))

    previous = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        monkeypatch.setattr(os, "replace", interrupted)
        commit(staged, targets, overwrite=True)
    finally:
        for s, h in previous.items():
            signal.signal(s, h)
    new = {t.name: f"new {t.name}" for t in targets[1:]}
    assert seen == [("SIGINT", new), ("SIGTERM", new)]  # in order, once all is committed
    assert signal.getsignal(signal.SIGINT) is previous[signal.SIGINT]
    # Python's default SIGINT handler: KeyboardInterrupt, raised after the commit. Set here,
    # since a process started in the background (`nohup pytest &`) ignores SIGINT; SIGTERM
    # is recorded (its default would end the test process).
    (tmp_path / "b").mkdir()
    targets, staged = _old_export(tmp_path / "b")
    previous = {
        signal.SIGINT: signal.signal(signal.SIGINT, signal.default_int_handler),
        signal.SIGTERM: signal.signal(signal.SIGTERM, handler),
    }
    try:
        with pytest.raises(KeyboardInterrupt):
            commit(staged, targets, overwrite=True)
    finally:
        for s, h in previous.items():
            signal.signal(s, h)
    assert _files(tmp_path / "b") == {t.name: f"new {t.name}" for t in targets[1:]}


def test_commit_refuses_existing_files_and_folders_before_moving_anything(tmp_path):
    targets, staged = _old_export(tmp_path)
    old = _files(tmp_path)
    with pytest.raises(FileExistsError, match="policy.pt exists; pass overwrite=True"):
        commit(staged, targets, overwrite=False)  # made by another writer since the check
    targets[1].unlink()
    targets[1].mkdir()
    with pytest.raises(FileExistsError, match="policy.pt2 is a folder; an export never"):
        commit(staged, targets, overwrite=True)
    assert _files(tmp_path) == {k: v for k, v in old.items() if k != "policy.pt2"}
    assert {p.name for p in tmp_path.iterdir() if p.is_dir()} == {"stage", "policy.pt2"}


def test_a_failed_rollback_names_the_folder_that_keeps_the_old_files(tmp_path, monkeypatch):
    targets, staged = _old_export(tmp_path)
    replace, calls = os.replace, []

    def fake(src, dst):
        calls.append(dst)
        if len(calls) >= 6:  # the 2nd new file in fails, and so does every rename back
            raise OSError("disk gone")
        replace(src, dst)

    monkeypatch.setattr(os, "replace", fake)
    with pytest.raises(OSError, match=r"so did restoring the old files \(disk gone\); they are in"):
        commit(staged, targets, overwrite=True)
    (aside,) = [p for p in tmp_path.iterdir() if p.name.startswith("tmp")]
    kept = sorted(p.name for p in aside.iterdir())
    assert kept == ["0_policy.json", "1_policy.pt", "2_policy.pt2", "3_policy.module.py"]


def test_a_second_signal_says_whether_the_commit_came_first(tmp_path, monkeypatch, capsys):
    from purejaxppo.cli.policy_commands import _abandon_export

    def exit_(code):
        raise SystemExit(code)

    monkeypatch.setattr(os, "_exit", exit_)
    manifest = tmp_path / "policy.json"
    manifest.write_text("old")
    abandon = _abandon_export(tmp_path, manifest)
    (tmp_path / "tmp_staging").mkdir()
    with pytest.raises(SystemExit, match="130"):
        abandon("SIGINT")  # before the commit
    assert "second SIGINT; nothing written" in capsys.readouterr().err
    assert not (tmp_path / "tmp_staging").exists()
    (tmp_path / "new").write_text("new")
    os.replace(tmp_path / "new", manifest)  # the commit's last rename
    with pytest.raises(SystemExit, match="143"):
        abandon("SIGTERM")  # deferred by the commit, handled after it
    assert "second SIGTERM; the export was written in full first" in capsys.readouterr().err
