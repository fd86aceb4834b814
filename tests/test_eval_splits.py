"""`eval_splits` on another env id with the same spaces (issue #26 item 5)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import purejaxppo as pjp
from purejaxppo.drivers.single import train_and_log

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def best_steps(column: pd.Series, updates: pd.Series) -> list[int]:
    """The updates at which `column` (one eval split's returns) reached its running max:
    where `checkpoints/best` is written (ties count, as `>=` in the driver)."""
    steps, best = [], -np.inf
    for update, value in zip(updates, column, strict=True):
        if not np.isnan(value) and value >= best:
            steps.append(int(update))
            best = value
    return steps


def test_a_split_on_another_env_id_reports_its_own_return(tmp_path):
    # Trained on Probe4 (action 1 always pays +1); Probe5 (same spaces: Box (1,), 2
    # actions) pays +1 only when the action equals its 0/1 cue, so "always 1" scores
    # about (1 - 1) / 2 = 0 there, against +1 on the training env.
    # `best_split: probe5` keeps as best/ the checkpoints of probe5's running max.
    config = pjp.PPOConfig(
        env_name="Probe4-v0", num_envs=8, num_steps=16, total_timesteps=8192,
        learning_rate=2.5e-3, eval_freq=8, eval_episodes=256, log_freq=8,
        eval_splits={"train": {}, "probe5": {"env_name": "Probe5-v0"}},
        best_split="probe5", keep_checkpoints="all",
    )  # fmt: skip
    run_dir = tmp_path / "run"
    train_and_log(config, run_dir, progress=False, plot=False)
    table = pd.read_csv(run_dir / "metrics.csv")
    train, other = table["eval/train/return"].dropna(), table["eval/probe5/return"].dropna()
    print(f"eval returns: train {train.to_list()}, probe5 {other.to_list()}")
    assert train.iloc[-1] > 0.95
    assert abs(other.iloc[-1]) < 0.25  # 256 episodes: std of the mean ~0.06
    kept = sorted(int(p.name) for p in (run_dir / "checkpoints" / "best").iterdir())
    by_probe5 = best_steps(table["eval/probe5/return"], table["update"])
    by_train = best_steps(table["eval/train/return"], table["update"])
    print(f"best/ steps: kept {kept}, by probe5 {by_probe5}, by train {by_train}")
    assert kept == by_probe5


def test_best_split_must_name_a_split():
    splits = {"train": {}, "probe5": {"env_name": "Probe5-v0"}}
    with pytest.raises(ValueError, match=r"best_split='prob5': not an eval split; the "
                       r"splits are \['train', 'probe5'\].*did you mean probe5"):  # fmt: skip
        pjp.PPOConfig(eval_splits=splits, best_split="prob5")
    with pytest.raises(ValueError, match=r"best_split='test'.*\['train'\]"):
        pjp.PPOConfig(best_split="test")
    assert pjp.PPOConfig(best_split="train").best_split == "train"  # the default split


def test_a_split_env_with_other_spaces_names_both():
    config = pjp.PPOConfig(eval_freq=1, eval_splits={"acro": {"env_name": "Acrobot-v1"}})
    with pytest.raises(ValueError, match=r"Acrobot-v1.*Box\(\(6,\), float32\).*Box\(\(4,\)"):
        _evaluators(config)


def _evaluators(config):
    from purejaxppo.acting import make_evaluators

    return make_evaluators(config)


def test_split_env_name_must_be_a_string():
    with pytest.raises(ValueError, match="env_name must be an env id"):
        pjp.PPOConfig(eval_splits={"x": {"env_name": 3}})
