"""benchmarks/gridworld_reference.py (issue #41 item 2): the Navix configs load and match
the published rejax settings, the published curve is read at the right step, and the row
builder's target check on fake evaluation returns. No training (a few seconds)."""

from __future__ import annotations

import importlib
from pathlib import Path

import numpy as np
import pytest

import purejaxppo as pjp

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def gridworld():
    return importlib.import_module("benchmarks.gridworld_reference")


def test_configs_load_with_the_published_settings(gridworld):
    # The values of baselines/rejax/configs/navix_<env>_1m.yaml, section `ppo:`.
    published = {
        "navix-empty-6x6": dict(
            num_envs=16,
            num_steps=256,
            update_epochs=4,
            num_minibatches=16,
            gamma=0.99,
            gae_lambda=0.9,
            activation="relu",
        ),
        "navix-empty-random-8x8": dict(
            num_envs=64,
            num_steps=128,
            update_epochs=8,
            num_minibatches=1,
            gamma=0.99,
            gae_lambda=0.8,
            activation="silu",  # rejax's swish
            max_grad_norm=10.0,
            normalize_observations=True,
        ),
        "navix-doorkey-8x8": dict(
            num_envs=16,
            num_steps=128,
            update_epochs=2,
            num_minibatches=1,
            gamma=0.95,
            gae_lambda=0.9,
            activation="tanh",
            normalize_observations=False,
        ),
    }
    published["navix-empty-6x6"]["normalize_observations"] = True
    # The "-anneal" row changes one setting: the learning rate is annealed (else constant).
    published["navix-empty-6x6-anneal"] = published["navix-empty-6x6"]
    for name, ref in gridworld.REFERENCES.items():
        config = pjp.PPOConfig.from_yaml(ROOT / "configs" / ref.config)
        assert config.env_name == ref.env
        assert config.total_timesteps == ref.curve[-1][0] == 1_048_576
        anneal = name.endswith("-anneal")
        assert (config.learning_rate, config.anneal_lr) == (3e-4, anneal)
        assert config.hidden_sizes == (64, 64) and not config.shares_encoder
        for field, value in {"max_grad_norm": 1.0, **published[name]}.items():
            assert getattr(config, field) == value, (name, field)
        # 1,048,576 / (N * T) updates: 256 (16 x 256), 512 (16 x 128), 128 (64 x 128).
        assert config.num_updates == 1_048_576 // (config.num_envs * config.num_steps)


def test_published_at_reads_the_last_point_not_above(gridworld):
    curve = gridworld.REFERENCES["navix-doorkey-8x8"].curve
    assert gridworld.published_at(curve, 1_048_576) == (1_048_576, 0.96, 0.037)
    assert gridworld.published_at(curve, 524_287) == (262_144, 0.77, 0.081)
    with pytest.raises(ValueError, match="env_steps=-1"):
        gridworld.published_at(curve, -1)


def test_summarize_target(gridworld):
    ref = gridworld.REFERENCES["navix-doorkey-8x8"]
    # 3 seeds x 4 episodes of 0/1 returns: seed means 1.0, 1.0, 0.75 -> mean 0.9167 < 0.96.
    returns = np.array([[1, 1, 1, 1], [1, 1, 1, 1], [1, 1, 1, 0]], np.float64)
    row = gridworld.summarize("navix-doorkey-8x8", ref, returns, np.ones(3), 1_048_576)
    assert row["final_mean"] == pytest.approx(0.917, abs=1e-3)
    assert row["final_min"] == 0.75 and row["min_floor"] == pytest.approx(0.923)
    assert row["final_iqm"] == 1.0  # middle 6 of the 12 sorted returns are all 1
    assert not row["met"] and row["budget_fraction"] == 1.0
    # All episodes succeed: mean 1 >= 0.96, min 1 >= 0.923.
    row = gridworld.summarize("navix-doorkey-8x8", ref, np.ones((3, 4)), np.ones(3), 1_048_576)
    assert row["met"] and row["ratio"] == pytest.approx(1 / 0.96, abs=1e-3)
    # Half the budget reads the published curve at 524,288: 0.89 ± 0.086.
    row = gridworld.summarize("navix-doorkey-8x8", ref, np.ones((3, 4)), np.ones(3), 524_288)
    assert (row["published"], row["published_at_steps"], row["budget_fraction"]) == (
        0.89,
        524_288,
        0.5,
    )
