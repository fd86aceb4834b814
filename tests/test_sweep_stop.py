"""A sweep stops once per SIGTERM / SIGINT: after the running chunk (saved), exit 143 / 130,
with the command that continues it; and its chunk size fits the device's free memory."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import purejaxppo as pjp
from purejaxppo import memory
from purejaxppo.drivers.sweeps import groups as sweep_groups
from purejaxppo.signals import TrainingInterrupted

REPO = Path(__file__).resolve().parents[1]
EXE = os.path.join(os.path.dirname(sys.executable), "purejaxppo")
TINY = ["--num-envs", "4", "--num-steps", "16", "--hidden-sizes", "8", "--no-progress"]
CONFIG = pjp.PPOConfig(num_envs=4, num_steps=16, hidden_sizes=(8,), total_timesteps=64 * 8)


def test_runs_per_chunk_fits_one_run_times_the_runs_per_device_in_free_memory():
    # 70% of (10 GB - 2 GB) / 300 MB = 18.7 -> 18 runs per device, x 4 devices = 72.
    assert memory.runs_per_chunk(300e6, 10e9, 2e9, num_runs=100, num_devices=4) == 72
    # The memory in use counts: with none in use, 70% of 10 GB / 300 MB -> 23 per device.
    assert memory.runs_per_chunk(300e6, 10e9, 0, num_runs=100, num_devices=4) == 92
    # Never more than the (padded) runs there are, never less than one run per device.
    assert memory.runs_per_chunk(1e6, 10e9, 0, num_runs=13, num_devices=4) == 16
    assert memory.runs_per_chunk(50e9, 10e9, 0, num_runs=13, num_devices=2) == 2
    assert memory.runs_per_chunk(1e6, 10e9, 12e9, num_runs=13, num_devices=2) == 2  # full
    assert memory.runs_per_chunk(100.0, 1000.0, 0, num_runs=99, num_devices=1, fraction=1.0) == 10
    for kwargs, field in [
        ({"bytes_per_run": 0}, "bytes_per_run=0"),
        ({"bytes_limit": -1}, "bytes_limit=-1"),
        ({"bytes_in_use": -5}, "bytes_in_use=-5"),
        ({"num_runs": 0}, "num_runs=0"),
        ({"num_devices": 0}, "num_devices=0"),
        ({"fraction": 1.5}, "fraction=1.5"),
    ]:
        args = {
            "bytes_per_run": 1e6,
            "bytes_limit": 1e9,
            "bytes_in_use": 0,
            "num_runs": 4,
            "num_devices": 1,
            **kwargs,
        }
        with pytest.raises(ValueError, match=field):
            memory.runs_per_chunk(**args)


def test_free_bytes_from_memory_stats():
    assert memory.free_bytes({"bytes_limit": 80, "bytes_in_use": 30}) == 50
    assert memory.free_bytes({"bytes_limit": 80}) == 80
    assert memory.free_bytes({}) is None  # CPU: no stats, the sweep runs every run at once


def test_chunk_size_measures_and_subtracts_memory_in_use(monkeypatch, capsys):
    # A device that reports 1 GB with 400 MB in use: the measured run's memory decides.
    from purejaxppo import parallel
    from purejaxppo.drivers.sweeps import program

    monkeypatch.setattr(parallel, "device_bytes_limit", lambda mesh: 10**9)
    monkeypatch.setattr(memory, "memory_stats", lambda device: {"bytes_in_use": 4 * 10**8})
    seen = {}

    def runs_per_chunk(per_run, limit, in_use, num_runs, num_devices):
        seen.update(per_run=per_run, limit=limit, in_use=in_use, num_runs=num_runs)
        return 2

    monkeypatch.setattr(memory, "runs_per_chunk", runs_per_chunk)
    result = pjp.sweep(CONFIG, seeds=4, devices=1)
    assert len(result.runs) == 4
    # The sweep ran in chunks of 2 (what the rule said) after measuring one run.
    assert seen["limit"] == 10**9 and seen["in_use"] == 4 * 10**8 and seen["num_runs"] == 4
    assert seen["per_run"] > 10_000
    err = capsys.readouterr().err
    assert "group of 4 runs in chunks of 2 (one run needs about" in err
    assert "0.56 GiB of 0.93 GiB free per device" in err
    lines = []
    # With at most one run per device nothing is measured.
    seen.clear()
    one = dict(mesh=None, fns=None, config=CONFIG, key_data=None, hparams=None, init=None)
    assert program.chunk_size(1, 1, None, **one, report=lines.append) == 1
    assert seen == {} and lines == []


def _signal_after_first_chunk(monkeypatch, signum=signal.SIGTERM):
    """Sends `signum` to this process right after the first chunk file is saved."""
    real_save = sweep_groups.save_chunk
    saved = []

    def save_then_signal(path, *args):
        real_save(path, *args)
        saved.append(path)
        if len(saved) == 1:
            os.kill(os.getpid(), signum)

    monkeypatch.setattr(sweep_groups, "save_chunk", save_then_signal)
    return saved


def test_sigint_stops_the_sweep_after_the_running_chunk(tmp_path, monkeypatch, capsys):
    handler = signal.getsignal(signal.SIGINT)
    saved = _signal_after_first_chunk(monkeypatch, signal.SIGINT)
    progress_dir = tmp_path / "chunks"
    with pytest.raises(TrainingInterrupted) as stop:
        pjp.sweep(CONFIG, seeds=4, max_runs_per_chunk=1, devices=1, progress_dir=progress_dir)
    assert stop.value.exit_code == 130 and stop.value.signal_name == "SIGINT"
    assert len(saved) == 1 == len(list(progress_dir.glob("*.npz")))  # not every chunk ran
    assert stop.value.resume_hint.endswith(f"progress_dir={str(progress_dir)!r}")
    assert "sweep: stopped by SIGINT: 1 of 4 runs finished" in capsys.readouterr().err
    assert signal.getsignal(signal.SIGINT) is handler  # the sweep's handler is gone
    monkeypatch.undo()
    result = pjp.sweep(CONFIG, seeds=4, max_runs_per_chunk=1, devices=1, progress_dir=progress_dir)
    assert len(result.runs) == 4 and len(list(progress_dir.glob("*.npz"))) == 4


def test_stop_with_a_progress_bar_ends_the_running_chunk_after_its_segment(
    tmp_path, monkeypatch, capsys
):
    # The request comes in the first chunk's first segment: that chunk is not saved.
    real_collect = sweep_groups.collect_chunk
    calls = []

    def collect_then_signal(*args):
        calls.append(1)
        if len(calls) == 1:
            os.kill(os.getpid(), signal.SIGTERM)
        return real_collect(*args)

    monkeypatch.setattr(sweep_groups, "collect_chunk", collect_then_signal)
    with pytest.raises(TrainingInterrupted) as stop:
        pjp.sweep(
            CONFIG,
            seeds=2,
            max_runs_per_chunk=1,
            devices=1,
            progress=True,
            progress_dir=tmp_path / "chunks",
        )
    assert stop.value.exit_code == 143 and len(calls) == 1 < CONFIG.num_updates
    assert not list((tmp_path / "chunks").glob("*.npz"))
    err = capsys.readouterr().err
    assert "0 of 2 runs finished, nothing saved yet; all 2 run when the sweep continues" in err
    assert "(the running chunk's 1 from the start: they had reached update 1 of 8)" in err
    assert "not saved" not in err


def test_cli_sweep_sigterm_stops_after_a_chunk_exits_143_and_resumes(tmp_path):
    # 6 runs, one per chunk, each chunk a few hundred updates (about a second).
    out = tmp_path / "sweep"
    args = [
        "sweep",
        "--seeds",
        "3",
        "--grid",
        "ent_coef=0,0.01",
        "--max-runs-per-chunk",
        "1",
        *TINY,
        "--total-timesteps",
        str(64 * 300),
        "--out",
        str(out),
    ]
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    proc = subprocess.Popen(
        [EXE, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )
    chunks = out / "chunks"
    deadline = time.time() + 120
    while proc.poll() is None and time.time() < deadline:
        if chunks.is_dir() and any(p.suffix == ".npz" for p in chunks.iterdir()):
            break
        time.sleep(0.01)
    assert proc.poll() is None, "the sweep ended before its first chunk file was seen"
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 143, err
    done = {p.name: p.read_bytes() for p in chunks.glob("*.npz")}
    assert 1 <= len(done) < 6, sorted(done)  # stopped between chunks, not at the end
    assert not (out / "runs.csv").exists()
    assert f"{len(done)} of 6 runs finished, their results saved in {chunks}" in err
    assert f"stopped by SIGTERM; continue with: purejaxppo sweep --resume {out}" in err
    assert "not saved" not in err and "writes no checkpoints" not in err

    resumed = subprocess.run(
        [EXE, "sweep", "--resume", str(out), "--no-progress"],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert resumed.returncode == 0, resumed.stderr
    assert len(list(chunks.glob("*.npz"))) == 6
    assert all((chunks / name).read_bytes() == data for name, data in done.items())  # kept
    runs = (out / "runs.csv").read_text().splitlines()
    assert len(runs) == 1 + 6
