"""`--resume` of a run whose checkpoint was written before a metric existed (the total
`loss` column, issue #26 item 4): the old updates get NaN in that column, the resumed
updates log it, and the run goes on exactly as the uninterrupted one.

The old checkpoint is made the way an old purejaxppo wrote it: the same state, with a
metrics history that has no `loss` (checked by hand against a checkpoint written by
commit a6a3b7a, which resumed the same way).
"""

import shutil

import numpy as np
import pandas as pd
import pytest

import purejaxppo as pjp
from purejaxppo.checkpoint import load_checkpoint, save_checkpoint
from purejaxppo.cli import main
from purejaxppo.drivers.single import train_and_log

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

# 16 updates of 4 envs x 32 steps, a checkpoint every 8.
CONFIG = pjp.PPOConfig(
    num_envs=4, num_steps=32, total_timesteps=2048, save_freq=8, save_minutes=0, log_freq=8
)


def test_resume_of_a_checkpoint_without_the_loss_metric(tmp_path, capsys):
    whole = tmp_path / "whole"
    train_and_log(CONFIG, whole, progress=False, plot=False)
    old = load_checkpoint(whole, CONFIG, step=8)
    assert "loss" in old.metrics  # today's checkpoints have it
    run_dir = tmp_path / "old"
    run_dir.mkdir()
    shutil.copy(whole / "config.yaml", run_dir / "config.yaml")
    history = {k: v for k, v in old.metrics.items() if k != "loss"}
    save_checkpoint(run_dir, old.runner_state, history, CONFIG, old.eval_history)
    capsys.readouterr()
    assert main(["train", "--resume", str(run_dir), "--no-progress"]) == 0
    assert "the checkpoint has no history of ['loss'] (NaN)" in capsys.readouterr().err
    table = pd.read_csv(run_dir / "metrics.csv")
    reference = pd.read_csv(whole / "metrics.csv")
    assert list(table["update"]) == list(range(1, 17))
    assert table["loss"].iloc[:8].isna().all() and np.isfinite(table["loss"].iloc[8:]).all()
    # The resumed updates are those of the uninterrupted run.
    np.testing.assert_array_equal(table["loss"].iloc[8:], reference["loss"].iloc[8:])
    np.testing.assert_array_equal(table["episode_return"], reference["episode_return"])
