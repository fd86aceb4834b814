"""configs/brax_*.yaml follow Brax's published PPO recipe (issue #22).

Brax's `ppo.train` consumes `batch_size x num_minibatches x unroll_length` env steps per
update (from `num_envs` envs, several unrolls each) and runs `num_updates_per_batch` epochs of
`num_minibatches` minibatches over them. Our configs must give the same data per update,
the same minibatch count and size, epochs, discount, entropy bonus, clip range and learning
rate as Brax's recipe in `benchmarks/brax_peer.py` (`RECIPES`, from the Brax training colab),
on the same env with the same episode length, or the benchmark compares different
algorithms. Configs only: nothing compiles here.
"""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

from purejaxppo.config import PPOConfig

ROOT = Path(__file__).resolve().parents[1]


def recipes() -> dict:
    # benchmarks/brax_peer.py imports numpy only at module level
    return importlib.import_module("benchmarks.brax_peer").RECIPES


@pytest.mark.parametrize("env", ["inverted_pendulum", "hopper", "halfcheetah"])
def test_config_matches_brax_recipe(env):
    recipe = recipes()[env]
    config = PPOConfig.from_yaml(ROOT / "configs" / f"brax_{env}.yaml")
    assert config.env_name == f"brax:{env}"
    assert config.env_kwargs["episode_length"] == recipe["episode_length"] == 1000
    per_update = recipe["batch_size"] * recipe["num_minibatches"] * recipe["unroll_length"]
    assert config.num_envs == recipe["num_envs"]
    assert config.num_envs * config.num_steps == per_update
    assert config.num_minibatches == recipe["num_minibatches"]
    assert config.update_epochs == recipe["num_updates_per_batch"]
    assert config.gamma == recipe["discounting"]
    assert config.ent_coef == recipe["entropy_cost"]
    assert config.learning_rate == recipe["learning_rate"]
    assert config.anneal_lr is False  # Brax's learning rate is constant
    assert config.clip_coef == 0.3  # ppo.train's clipping_epsilon default
    assert config.gae_lambda == 0.95
    assert config.normalize_observations is recipe["normalize_observations"] is True
    # reward_scaling is not mapped: with separate actor / critic, Adam, normalised
    # advantages and no value clipping, a constant reward scale changes nothing.
    assert config.share_encoder is False and config.norm_adv and not config.clip_vloss
    assert not config.normalize_rewards


def test_inverted_pendulum_budget_is_brax_updates():
    """2M steps are Brax's 12 updates of 163,840 steps (2M // 163,840)."""
    config = PPOConfig.from_yaml(ROOT / "configs" / "brax_inverted_pendulum.yaml")
    assert config.total_timesteps == 2_000_000
    assert config.num_updates == 2_000_000 // 163_840 == 12
