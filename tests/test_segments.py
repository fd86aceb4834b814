"""Segments sized in seconds (`SegmentSizer`): the bar says "compiling" while a new
segment length's program compiles, and `--num-seeds` runs are sized as single runs,
with the same numbers bitwise (CPU)."""

from __future__ import annotations

import jax
import numpy as np
import pandas as pd
import pytest

import purejaxppo as pjp
from purejaxppo.cli import main
from purejaxppo.drivers import seeds, segments, single

#: 7 updates of 4 envs x 16 steps, logged every 3: segments 3, 3, 1 uncapped.
TINY = ["--num-envs", "4", "--num-steps", "16", "--hidden-sizes", "8", "--no-progress"]
TINY += ["--total-timesteps", "448", "--log-freq", "3", "--no-compile-cache"]


class Bar:
    """A progress bar that keeps its description (`segments.progress_bar`'s stand-in)."""

    def __init__(self, total, *, unit, desc, initial=0, enabled=True):
        self.desc = desc

    def set_description(self, desc, refresh=True):
        self.desc = desc

    def set_postfix(self, **postfix):
        self.postfix = dict(postfix)

    def update(self, n):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def test_the_bar_says_compiling_while_a_new_length_compiles():
    bar, seen, compiled = Bar(7, unit="update", desc=segments.compiling("Env")), [], set()

    def prepare(done, length):
        seen.append((length, length not in compiled, bar.desc))
        compiled.add(length)

    hooks = segments.SegmentHooks(
        length=lambda done: segments.segment_length(done, 7, 3),
        run=lambda done, length: None,
        process=lambda done, length, fetched: None,
        prepare=prepare,
        fetch=lambda x: x,
    )
    # Capped at 1 update after the first segment (any time is over 2e-12 s): 3, 1, 1, 1, 1.
    options = segments.SegmentOptions(stop_on_signals=False, seconds=1e-12)
    segments.run_segments(7, 0, hooks, bar=bar, options=options, label="Env")
    assert seen == [
        (3, True, "Env (compiling)"),
        (1, True, "Env (compiling)"),  # the capped program: compiling again
        (1, False, "Env"),
        (1, False, "Env"),
        (1, False, "Env"),
    ]
    assert bar.desc == "Env"


def test_the_bar_keeps_the_newest_return_through_segments_where_none_ended():
    """EnvPool MuJoCo: the envs' 1000-step episodes end together, in few segments; the
    others report "ret=n/a", and the bar keeps the newest return instead."""
    shown = []

    class Shown(Bar):
        def set_postfix(self, refresh=True, **postfix):
            shown.append(dict(postfix))

    rets = ["n/a", "-303.2", "n/a", "n/a", "-372.5"]

    def process(done, length, fetched):
        return {"env_steps": f"{done + length}", "ret": rets[done]}

    hooks = segments.SegmentHooks(
        length=lambda done: 1, run=lambda done, length: None, process=process, fetch=lambda x: x
    )
    bar = Shown(5, unit="update", desc="Env")
    options = segments.SegmentOptions(stop_on_signals=False)
    segments.run_segments(5, 0, hooks, bar=bar, options=options)
    assert [p["ret"] for p in shown] == ["n/a", "-303.2", "-303.2", "-303.2", "-372.5"]
    assert shown[3] == {"env_steps": "4", "ret": "-303.2"}


def test_a_bar_that_writes_to_a_log_prints_a_frame_every_30_s_and_its_last(monkeypatch, capsys):
    """Under pytest stderr is no terminal, as in a log file or SLURM's `.out`. 100 segments
    of 1 s (a fake clock) print the opening frames, one every 30 s and the last: 7 frames,
    where tqdm's 0.1 s printed one or two per segment (233 in a 10-second CartPole run)."""
    import tqdm.std

    clock = [1000.0]
    monkeypatch.setattr(tqdm.std, "time", lambda: clock[0])

    def run(done, length):
        clock[0] += 1.0 * length

    hooks = segments.SegmentHooks(
        length=lambda done: 1,
        run=run,
        process=lambda done, length, fetched: {"ret": f"{done + length}.0"},
        prepare=lambda done, length: None,
        fetch=lambda x: x,
    )
    bar = segments.progress_bar(100, unit="update", desc=segments.compiling("Env"))
    assert bar.mininterval == segments.LOG_MININTERVAL_S == 30.0
    options = segments.SegmentOptions(stop_on_signals=False, seconds=0)
    with bar:
        segments.run_segments(100, 0, hooks, bar=bar, options=options, label="Env")
    frames = [f.strip() for f in capsys.readouterr().err.split("\r") if f.strip()]
    # created, compiling, compiled (the descriptions), at 30, 60 and 90 s, and the last
    assert len(frames) == 7, frames
    assert [f.split("|")[2].split()[0] for f in frames[3:6]] == ["30/100", "60/100", "90/100"]
    assert "100/100" in frames[-1] and "ret=100.0" in frames[-1]


def test_a_bar_in_a_jupyter_kernel_or_a_terminal_is_not_throttled(monkeypatch):
    """A kernel's stderr shows each frame as it comes (also the text frames tqdm falls
    back to without ipywidgets), as a terminal does: tqdm's own 0.1 s."""
    import io
    import sys

    class OutStream(io.StringIO):  # ipykernel.iostream.OutStream's module, not its code
        pass

    OutStream.__module__ = "ipykernel.iostream"
    monkeypatch.setattr(sys, "stderr", OutStream())
    assert segments.progress_bar(10, unit="update", desc="Env").mininterval == 0.1

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    monkeypatch.setattr(sys, "stderr", Terminal())
    assert segments.progress_bar(10, unit="update", desc="Env").mininterval == 0.1


@pytest.fixture
def bars(monkeypatch):
    """The bars the drivers make, kept; segments capped at 1 update after the first."""
    made = []

    def progress_bar(*args, **kwargs):
        made.append(Bar(*args, **kwargs))
        return made[-1]

    monkeypatch.setattr(single, "progress_bar", progress_bar)
    monkeypatch.setattr(seeds, "progress_bar", progress_bar)
    monkeypatch.setattr(segments, "SEGMENT_SECONDS", 1e-12)
    return made


def test_a_single_run_says_compiling_for_its_capped_program(tmp_path, monkeypatch, bars):
    seen, prepare = [], single._SingleRun.prepare

    def spy(run, done, length):
        seen.append((length, length not in run.programs, bars[0].desc))
        prepare(run, done, length)

    monkeypatch.setattr(single._SingleRun, "prepare", spy)
    assert main(["train", *TINY, "--run-dir", str(tmp_path / "run")]) == 0
    compiling, label = "CartPole-v1 (compiling)", "CartPole-v1"
    assert seen[:2] == [(3, True, compiling), (1, True, compiling)]
    assert seen[2:] == [(1, False, label)] * 3 and bars[0].desc == label


def test_seeds_are_sized_in_seconds_and_keep_their_numbers_bitwise(tmp_path, monkeypatch):
    config = pjp.PPOConfig(
        num_envs=4, num_steps=16, total_timesteps=4 * 16 * 6, log_freq=3, hidden_sizes=(8,)
    )
    straight = seeds.train_seeds(config, tmp_path / "straight", 2, progress=False, plot=False)
    lengths, run = [], seeds._SeedsRun.run

    def spy(self, done, length):
        lengths.append(length)
        return run(self, done, length)

    monkeypatch.setattr(seeds._SeedsRun, "run", spy)
    monkeypatch.setattr(segments, "SEGMENT_SECONDS", 1e-12)
    sized = seeds.train_seeds(config, tmp_path / "sized", 2, progress=False, plot=False)
    assert lengths == [3, 1, 1, 1]  # uncapped: 3, 3
    for name in ("metrics.csv", "summary.csv", "seed_0/metrics.csv", "seed_1/metrics.csv"):
        a, b = ((tmp_path / d / name).read_text() for d in ("straight", "sized"))
        assert a == b, name  # bitwise (CPU)
    pd.testing.assert_frame_equal(straight.metrics, sized.metrics, check_exact=True)
    states = [r.runner_state for r in (straight, sized)]
    states = [s.replace(key=jax.random.key_data(s.key)) for s in states]
    jax.tree.map(np.testing.assert_array_equal, *states)  # every seed's final state
    for seed in (0, 1):
        a, b = (pjp.Policy.load(tmp_path / d / f"seed_{seed}") for d in ("straight", "sized"))
        jax.tree.map(np.testing.assert_array_equal, a.get_params(), b.get_params())
