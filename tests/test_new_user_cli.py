"""The new user's command line, round four: `--import` finds a module in the working
directory and is recorded in the run, so `eval` and `--resume` name it again; `eval
--max-steps`; `pbt --resume OUT` alone; the sweep / PBT stop lines; an ETA that starts
after the compile."""

from __future__ import annotations

import sys
import textwrap

import pytest

from purejaxppo import rundir
from purejaxppo.cli import main

TINY = ["--num-envs", "4", "--num-steps", "16", "--hidden-sizes", "8", "--no-progress"]

GO_RIGHT = """
import gymnasium as gym
import numpy as np

class GoRight(gym.Env):
    observation_space = gym.spaces.Box(-1.0, 10.0, (1,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self.x = 0
        return np.zeros(1, np.float32), {}

    def step(self, action):
        self.x += int(action)
        return np.array([self.x], np.float32), float(action), self.x >= 5, False, {}

gym.register("GoRightCwd-v0", entry_point=GoRight, max_episode_steps=20)
gym.register("GoRightNoLimit-v0", entry_point=GoRight)  # no time limit
"""


@pytest.fixture()
def cwd_module(tmp_path, monkeypatch):
    """`gorightcwd.py` in the working directory, which is on no path (no PYTHONPATH=.)."""
    (tmp_path / "gorightcwd.py").write_text(textwrap.dedent(GO_RIGHT))
    monkeypatch.chdir(tmp_path)
    here = {"", str(tmp_path)}
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in here])
    yield "gorightcwd"
    sys.modules.pop("gorightcwd", None)
    rundir.set_imports([])


def _one_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    return err[0]


def test_import_finds_the_working_directory_and_is_recorded(cwd_module, tmp_path, capsys):
    run = tmp_path / "run"
    argv = ["train", *TINY, "--total-timesteps", "128", "--env-name", "gymnasium:GoRightCwd-v0"]
    assert main([*argv, "--import", cwd_module, "--run-dir", str(run)]) == 0
    assert rundir.read_marker(run)["imports"] == cwd_module
    capsys.readouterr()
    # eval and --resume of that run without the module: one line naming it, exit 2.
    for command, where in (
        (["eval", str(run)], f"eval {run}"),
        (["train", "--resume", str(run)], f"--resume {run}"),
    ):
        with pytest.raises(SystemExit) as refused:
            main(command)
        assert refused.value.code == 2
        assert _one_line(capsys) == (
            f"purejaxppo: error: {where}: it was written with --import {cwd_module}; pass "
            f"--import {cwd_module} again"
        )
    # With it: the eval runs (GoRight has a time limit), the resume keeps the record.
    assert main(["eval", str(run), "--episodes", "2", "--import", cwd_module]) == 0
    assert "2 episodes" in capsys.readouterr().out
    assert main(["train", "--resume", str(run), "--import", cwd_module, "--no-progress"]) == 0
    assert rundir.read_marker(run)["imports"] == cwd_module


def test_a_run_without_imports_records_none(tmp_path):
    rundir.set_imports([])
    rundir.write_marker(tmp_path, "run")
    assert rundir.read_marker(tmp_path) == {"format": str(rundir.FORMAT_VERSION), "kind": "run"}
    assert rundir.recorded_imports(tmp_path / "seed_0") == []
    rundir.set_imports(["a.b", "c"])
    rundir.write_marker(tmp_path, "run")
    rundir.set_imports(["d"])
    rundir.write_marker(tmp_path, "run", keep_imports=True)  # a resumed claim keeps its own
    assert rundir.recorded_imports(tmp_path / "seed_0") == ["a.b", "c", "d"]  # the root's
    rundir.write_marker(tmp_path, "run")  # a fresh (overwritten) one does not
    assert rundir.recorded_imports(tmp_path) == ["d"]
    rundir.set_imports([])


def test_eval_max_steps_plays_an_env_without_a_time_limit(cwd_module, tmp_path, capsys):
    run = tmp_path / "run"
    argv = ["train", *TINY, "--total-timesteps", "128", "--import", cwd_module]
    env = ["--env-name", "gymnasium:GoRightNoLimit-v0", "--run-dir", str(run)]
    assert main([*argv, *env]) == 0
    capsys.readouterr()
    evaluate = ["eval", str(run), "--import", cwd_module, "--episodes", "2", "--greedy"]
    # Without --max-steps: one line asking for it.
    with pytest.raises(SystemExit) as refused:
        main(evaluate)
    assert refused.value.code == 2
    line = _one_line(capsys)
    assert line.startswith("purejaxppo: error: ") and line.endswith("pass --max-steps N")
    # A bad value: one line naming it.
    with pytest.raises(SystemExit) as bad:
        main([*evaluate, "--max-steps", "0"])
    assert bad.value.code == 2
    assert _one_line(capsys) == "purejaxppo: error: --max-steps 0: must be an int >= 1"
    # With it: each episode ends by step 7 (GoRight ends at x = 5; a greedy policy that
    # never moves right is cut at 7 steps, return 0), and the printed lengths say so.
    assert main([*evaluate, "--max-steps", "7"]) == 0
    out = capsys.readouterr().out
    length = float(out.split("mean length ")[1].split()[0])
    assert 5.0 <= length <= 7.0, out


PBT = ["pbt", "--population", "2", "--ready-every", "2", "--devices", "1", "--no-progress"]
PBT += ["--search", "learning_rate=log_uniform:1e-4:1e-2", *TINY[:6]]
PBT += ["--total-timesteps", str(4 * 16 * 6)]


def test_pbt_resume_out_alone_continues_with_the_recorded_arguments(tmp_path, capsys):
    out = tmp_path / "pbt"
    assert main([*PBT, "--out", str(out)]) == 0
    assert (out / "request.yaml").is_file()
    lineage = (out / "lineage.csv").read_bytes()
    capsys.readouterr()
    # Other arguments with --resume OUT: one line naming them; no pbt there: one line.
    for argv, line in (
        (
            ["pbt", "--resume", str(out), "--population", "4", "--gamma", "0.9"],
            f"--resume {out} takes the pbt's arguments from {out}/request.yaml; drop "
            "--population, --gamma",
        ),
        (
            ["pbt", "--resume", str(tmp_path)],
            f"--resume {tmp_path}: no pbt there (no request.yaml)",
        ),
        (["pbt", "--resume"], "--resume needs OUT: --resume OUT, or --resume --out OUT with "),
    ):
        with pytest.raises(SystemExit) as refused:
            main(argv)
        assert refused.value.code == 2
        assert _one_line(capsys).startswith(f"purejaxppo: error: {line}")
    # Killed after its next-to-last checkpoint: --resume OUT alone continues it bitwise.
    for name in ("pbt.yaml", "lineage.csv", "summary.csv"):
        (out / name).unlink()
    population = out / "checkpoints" / "population"
    for path in (population / "3").rglob("*"):
        if path.is_file() and path.stat().st_size > 0:
            path.write_bytes(b"damaged")
    assert main(["pbt", "--resume", str(out), "--no-progress"]) == 0
    assert "resuming from generation 2" in capsys.readouterr().err
    assert (out / "lineage.csv").read_bytes() == lineage


class _Clock:
    """A fake clock for tqdm: `advance` moves it; the segments' hooks spend its time."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _bar_after(clock, monkeypatch, *, prepare: bool):
    """A bar after 10 segments of 1 update that run 1 s each, the first compiling 600 s
    (in `prepare`, or, without it, in the first `run`)."""
    import tqdm.std

    from purejaxppo.drivers.segments import (
        SegmentHooks,
        SegmentOptions,
        progress_bar,
        run_segments,
    )

    monkeypatch.setattr(tqdm.std, "time", clock)
    compiled = set()

    def compile_once(done, length):
        if length not in compiled:
            compiled.add(length)
            clock.now += 600.0

    def run(done, length):
        if not prepare:
            compile_once(done, length)
        clock.now += 1.0 * length

    hooks = SegmentHooks(
        length=lambda done: 1,
        run=run,
        process=lambda done, length, fetched: None,
        prepare=compile_once if prepare else None,
        fetch=lambda x: x,
    )
    bar = progress_bar(100, unit="update", desc="train", enabled=True)
    bar.mininterval = 0  # every update prints (a segment is seconds long)
    options = SegmentOptions(stop_on_signals=False, seconds=0)
    run_segments(10, 0, hooks, bar=bar, options=options)
    return bar


@pytest.mark.parametrize("prepare", [True, False])
def test_the_eta_leaves_out_the_first_compile(prepare, monkeypatch):
    clock = _Clock()
    bar = _bar_after(clock, monkeypatch, prepare=prepare)
    meter = bar.format_dict
    # 1 update/s: 90 updates left take 90 s, not ~ (600 + 10) / 10 * 90 = 5490 s.
    assert bar.n == 10 and meter["rate"] == pytest.approx(1.0)
    remaining = (meter["total"] - meter["n"]) / meter["rate"]
    assert remaining == pytest.approx(90.0)
    # the elapsed time shown is the running: 10 s (prepared) or the 9 s after the first
    assert meter["elapsed"] == pytest.approx(10.0 if prepare else 9.0)
    bar.close()


def test_the_sweep_stop_line_counts_what_is_saved_and_what_is_left(tmp_path):
    from purejaxppo.drivers.sweeps.driver import _Stop

    chunks = tmp_path / "chunks"
    stop = _Stop(["SIGTERM"], chunks, 12)
    # Nothing finished: nothing saved, all 12 left (the running 4 among them, not extra).
    assert stop.stopped_line(4, "update 5 of 20") == (
        "sweep: stopped by SIGTERM: 0 of 12 runs finished, nothing saved yet; all 12 run "
        "when the sweep continues (the running chunk's 4 from the start: they had reached "
        "update 5 of 20)"
    )
    stop.chunk_finished(4, 20)
    assert stop.stopped_line() == (
        f"sweep: stopped by SIGTERM: 4 of 12 runs finished, their results saved in {chunks}; "
        "the other 8 run when the sweep continues"
    )
    unsaved = _Stop(["SIGINT"], None, 12)
    unsaved.chunk_finished(4, 20)
    assert unsaved.stopped_line() == (
        "sweep: stopped by SIGINT: 4 of 12 runs finished, not saved (no progress_dir): a new "
        "sweep runs all again"
    )
