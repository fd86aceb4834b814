"""Checkpoints: SIGKILL at random moments + resume equals the uninterrupted run bitwise."""

import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import jax
import numpy as np
import pandas as pd
import pytest

import purejaxppo as pjp
from purejaxppo.checkpoint import latest_checkpoint_step, load_checkpoint
from purejaxppo.drivers.single import train_and_log

EXE = os.path.join(os.path.dirname(sys.executable), "purejaxppo")
# 40 updates of 4 envs x 32 steps, a checkpoint after every update.
ARGS = [
    "--total-timesteps",
    "5120",
    "--num-steps",
    "32",
    "--save-freq",
    "1",
    "--log-freq",
    "1",
    "--seed",
    "3",
    "--no-progress",
]
CONFIG = pjp.PPOConfig(total_timesteps=5120, num_steps=32, save_freq=1, log_freq=1, seed=3)


def _steps_on_disk(run_dir: Path) -> list[int]:
    last = run_dir / "checkpoints" / "last"
    return sorted(int(p.name) for p in last.iterdir() if p.name.isdigit()) if last.is_dir() else []


@pytest.fixture(scope="module")
def uninterrupted():
    return jax.device_get(jax.jit(pjp.make_train(CONFIG))(jax.random.key(CONFIG.seed)))


def test_sigkill_at_random_moments_then_resume_is_bitwise_equal(tmp_path, uninterrupted):
    run_dir = tmp_path / "run"
    rng = random.Random(0)
    killed_at = []
    for _ in range(3):
        resuming = latest_checkpoint_step(run_dir) is not None
        cmd = (
            [EXE, "train", "--resume", str(run_dir)]
            if resuming
            else [EXE, "train", "--run-dir", str(run_dir), *ARGS]
        )
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        before = _steps_on_disk(run_dir)
        deadline = time.time() + 120
        # Wait until this process has written a new checkpoint, then kill it at a random
        # moment (with a checkpoint per update, often in the middle of a save).
        while _steps_on_disk(run_dir) == before and proc.poll() is None and time.time() < deadline:
            time.sleep(0.05)
        time.sleep(rng.uniform(0.0, 0.6))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        step = latest_checkpoint_step(run_dir)
        killed_at.append(step)
        assert step is not None  # the last complete checkpoint is loadable
        load_checkpoint(run_dir)
    assert any(0 < s < CONFIG.num_updates for s in killed_at), killed_at
    assert len(set(killed_at)) == 3, killed_at  # each resume made progress

    done = subprocess.run(
        [EXE, "train", "--resume", str(run_dir), "--no-progress"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    final = load_checkpoint(run_dir)
    assert final.update_step == CONFIG.num_updates
    jax.tree.map(
        np.testing.assert_array_equal,
        jax.device_get(final.runner_state.train_state.params),
        uninterrupted.train_state.params,
    )
    jax.tree.map(
        np.testing.assert_array_equal,
        jax.device_get(final.runner_state.train_state.opt_state),
        uninterrupted.train_state.opt_state,
    )
    for name in pjp.METRICS:
        np.testing.assert_array_equal(
            final.metrics[name], uninterrupted.metrics[name], err_msg=name
        )
    table = pd.read_csv(run_dir / "metrics.csv")
    assert list(table["update"]) == list(range(1, CONFIG.num_updates + 1))
    np.testing.assert_array_equal(table["env_steps"], uninterrupted.metrics["env_steps"])


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("done")
    config = CONFIG.replace(total_timesteps=3 * 128, save_freq=0)
    train_and_log(config, run_dir, progress=False, plot=False)
    return run_dir, config


def test_load_rejects_a_different_config(finished_run):
    run_dir, config = finished_run
    with pytest.raises(
        ValueError, match=r"different config \(learning_rate: saved 0.00025 vs given 0.001"
    ):
        load_checkpoint(run_dir, config.replace(learning_rate=1e-3))
    with pytest.raises(ValueError, match=r"hidden_sizes: saved \[64, 64\] vs given \[32\]"):
        load_checkpoint(run_dir, config.replace(hidden_sizes=(32,)))
    # Logging cadence may change on resume.
    assert load_checkpoint(run_dir, config.replace(log_freq=5)).update_step == 3


def test_load_rejects_an_incompatible_network(finished_run, tmp_path):
    run_dir, config = finished_run
    env, env_params = pjp.make_env("Acrobot-v1")  # 6-dim observations, 3 actions
    with pytest.raises(ValueError, match="does not match|has shape"):
        load_checkpoint(run_dir, config, env=env, env_params=env_params)


def test_load_rejects_a_corrupt_checkpoint(finished_run, tmp_path):
    run_dir, _ = finished_run
    copy = tmp_path / "corrupt"
    shutil.copytree(run_dir, copy)
    state_dir = copy / "checkpoints" / "last" / "3" / "state"
    for path in state_dir.rglob("*"):
        if path.is_file() and path.stat().st_size > 0:
            path.write_bytes(b"\0garbage" * 8)
    with pytest.raises(ValueError, match="corrupt|unreadable"):
        load_checkpoint(copy)


def test_resume_without_checkpoint_is_a_clear_error(tmp_path):
    with pytest.raises(ValueError, match="no complete checkpoint"):
        load_checkpoint(tmp_path)
