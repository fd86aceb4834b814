"""`eval_splits` on another env id with the same spaces (issue #26 item 5)."""

from __future__ import annotations

import pandas as pd
import pytest

import purejaxppo as pjp
from purejaxppo.drivers.single import train_and_log

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def test_a_split_on_another_env_id_reports_its_own_return(tmp_path):
    # Trained on Probe4 (action 1 always pays +1); Probe5 (same spaces: Box (1,), 2
    # actions) pays +1 only when the action equals its 0/1 cue, so "always 1" scores
    # about (1 - 1) / 2 = 0 there, against +1 on the training env.
    config = pjp.PPOConfig(
        env_name="Probe4-v0", num_envs=8, num_steps=16, total_timesteps=8192,
        learning_rate=2.5e-3, eval_freq=16, eval_episodes=256, log_freq=16,
        eval_splits={"train": {}, "probe5": {"env_name": "Probe5-v0"}},
    )  # fmt: skip
    train_and_log(config, tmp_path / "run", progress=False, plot=False)
    table = pd.read_csv(tmp_path / "run" / "metrics.csv")
    train, other = table["eval/train/return"].dropna(), table["eval/probe5/return"].dropna()
    print(f"eval returns: train {train.to_list()}, probe5 {other.to_list()}")
    assert train.iloc[-1] > 0.95
    assert abs(other.iloc[-1]) < 0.25  # 256 episodes: std of the mean ~0.06


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
