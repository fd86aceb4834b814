"""`purejaxppo sweep` on a host env (gymnasium, issue #37): its (setting x seed) runs train
one after another, each exactly its `purejaxppo train` run, into the JAX sweep's files; a
SIGTERM stops it between runs (exit 143, the resume line) and `--resume` finishes it.
`pbt` stays refused, in one line naming the operation, the kind and the alternative."""

from __future__ import annotations

import os
import signal

import numpy as np
import pandas as pd
import pytest

import purejaxppo as pjp
from purejaxppo.cli import main
from purejaxppo.drivers.segments import TrainingInterrupted
from purejaxppo.drivers.sweeps import host

GYM = "gymnasium:CartPole-v1"
#: 3 updates of 2 envs x 16 steps per run.
TINY = ["--env-name", GYM, "--num-envs", "2", "--num-steps", "16", "--total-timesteps", "96"]
TINY += ["--no-progress"]


def test_gymnasium_sweep_stops_resumes_and_each_run_is_its_train_run(tmp_path, monkeypatch, capsys):
    out = tmp_path / "sweep"
    real_save, saved = host.save_chunk, []

    def save_then_signal(path, *args):  # SIGTERM once the first run's chunk is saved
        real_save(path, *args)
        saved.append(path.name)
        if len(saved) == 1:
            os.kill(os.getpid(), signal.SIGTERM)

    monkeypatch.setattr(host, "save_chunk", save_then_signal)
    grid = ["--seeds", "2", "--grid", "learning_rate=0.001,0.0003", "--out", str(out)]
    with pytest.raises(SystemExit) as stop:
        main(["sweep", *TINY, *grid])
    assert stop.value.code == 143
    err = capsys.readouterr().err
    assert "4 runs = 2 setting(s) x 2 seed(s) of a host env, one after another" in err
    assert f"sweep: stopped by SIGTERM: 1 of 4 runs finished, their results saved in {out}" in err
    assert f"saved; continue with: purejaxppo sweep --resume {out}" in err
    assert saved == ["group000-chunk00000.0-of-1.npz"] and not (out / "runs.csv").exists()
    first = (out / "chunks" / saved[0]).read_bytes()

    monkeypatch.undo()
    assert main(["sweep", "--resume", str(out), "--no-progress"]) == 0
    assert (out / "chunks" / saved[0]).read_bytes() == first  # loaded, not trained again
    assert len(list((out / "chunks").glob("*.npz"))) == 4
    runs = pd.read_csv(out / "runs.csv")
    assert runs[["run", "setting", "seed"]].values.tolist() == [
        [0, 0, 0],
        [1, 0, 1],
        [2, 1, 0],
        [3, 1, 1],
    ]
    assert runs["diverged"].eq(0).all() and len(pd.read_csv(out / "summary.csv")) == 2
    assert (out / "learning_curves.png").is_file() and (out / "sweep.yaml").is_file()

    # Run (setting s, seed k) is bitwise `purejaxppo train --seed k` with setting s.
    table = pd.read_csv(out / "table.csv")
    for setting, seed, lr in [(1, 1, "0.0003"), (0, 0, "0.001")]:
        single = tmp_path / f"single-{setting}-{seed}"
        args = ["train", *TINY, "--seed", str(seed), "--learning-rate", lr]
        assert main([*args, "--run-dir", str(single)]) == 0
        expected = pd.read_csv(single / "metrics.csv")
        expected["env_steps"] = expected["env_steps"].astype(np.int64)
        rows = table[(table["setting"] == setting) & (table["seed"] == seed)]
        got = rows[expected.columns].reset_index(drop=True)
        pd.testing.assert_frame_equal(got, expected, check_exact=True)


def test_a_stop_inside_a_gymnasium_run_drops_that_run(tmp_path, monkeypatch, capsys):
    """A SIGTERM during a run's first segment (of 3, one update each): the sweep stops
    after that segment, and the run is neither saved nor counted."""

    class SignalledRuns(host.HostRuns):
        def run(self, length):
            os.kill(os.getpid(), signal.SIGTERM)
            return super().run(length)

    monkeypatch.setattr(host, "HostRuns", SignalledRuns)
    config = pjp.PPOConfig(env_name=GYM, num_envs=2, num_steps=16, total_timesteps=96)
    with pytest.raises(TrainingInterrupted) as stop:
        pjp.sweep(config, seeds=1, progress_dir=tmp_path / "chunks")
    assert stop.value.exit_code == 143 and stop.value.done == 1
    assert not list((tmp_path / "chunks").glob("*.npz"))
    err = capsys.readouterr().err
    assert "0 of 1 runs finished" in err and "stopped after update 1 of 3, not saved" in err


def test_gymnasium_refusals_are_one_line_naming_operation_kind_and_alternative(tmp_path, capsys):
    # pbt: a population steps in one compiled program.
    out = tmp_path / "pbt"
    search = ["--search", "learning_rate=log_uniform:1e-5:1e-2", "--out", str(out)]
    with pytest.raises(SystemExit) as refused:
        main(["pbt", *TINY, *search])
    assert refused.value.code == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "Traceback" not in err
    assert f"env_name='{GYM}' (host env (gymnasium))" in err
    assert "population-based training (`purejaxppo pbt`) is not supported" in err
    assert err.endswith("use a JAX env, or `purejaxppo sweep` (its runs one after another)")
    assert not out.exists()  # refused before --out is claimed
    # sweep on several devices: refused before its directory is made.
    out = tmp_path / "sweep"
    with pytest.raises(SystemExit) as refused:
        main(["sweep", *TINY, "--seeds", "2", "--devices", "2", "--out", str(out)])
    assert refused.value.code == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "batched runs split over several devices" in err
    assert err.endswith("one after another on the host: use one device (asked for 2 devices)")
    assert not out.exists()


@pytest.mark.parametrize(
    ("env_name", "line"),
    [
        ("CartPole-v1", "{n} CPU devices (one per core"),  # a JAX env: split over the cores
        (GYM, "{n} CPU devices; this env's runs use one of them"),  # a host env: one device
    ],
    ids=["jax", "gymnasium"],
)
def test_a_sweep_sets_its_cpu_devices_before_the_env_kind_starts_jax(env_name, line, tmp_path):
    """Validating the env's kind imports gymnax, which starts JAX's backend: the CPU device
    count must be set before it (a sweep otherwise ran on one device, silently). The
    subprocess reports 2 usable cores, so the check does not depend on the machine."""
    import subprocess
    import sys

    argv = [*TINY[:-1], "--env-name", env_name, "--seeds", "1", "--out", str(tmp_path / "s")]
    code = (
        "import sys; import purejaxppo.platform as p; p.usable_cores = lambda: 2; "
        "from purejaxppo.cli import main; sys.exit(main(sys.argv[1:]))"
    )
    env = {k: v for k, v in os.environ.items() if k != "JAX_NUM_CPU_DEVICES"}
    command = [sys.executable, "-c", code, "sweep", *argv]
    proc = subprocess.run(command, capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert line.format(n=2) in proc.stderr, proc.stderr[-2000:]
