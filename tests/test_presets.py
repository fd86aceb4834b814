"""configs/presets/*.yaml: other libraries' PPO defaults in PPOConfig field names, loaded
the way `purejaxppo train --config` loads them (`cli.values.load_config`)."""

import re
from pathlib import Path

import jax
import pytest

import purejaxppo as pjp
from purejaxppo.cli import main
from purejaxppo.cli.values import load_config

PRESETS = Path(__file__).resolve().parent.parent / "configs" / "presets"

# Values read off each library's API page (each preset cites the library's field).
EXPECTED = {
    "duo_ai": {
        "gamma": 0.999,
        "gae_lambda": 0.95,
        "learning_rate": 5e-4,
        "update_epochs": 3,
        "num_steps": 256,
        "num_minibatches": 8,
        "anneal_lr": False,
        "total_timesteps": 1_500_000,
        "clip_coef": 0.2,
        "ent_coef": 0.01,
    },
    "agilerl": {
        "num_envs": 1,
        "num_steps": 2048,  # learn_step
        "learning_rate": 1e-4,
        "update_epochs": 4,
        "gamma": 0.99,
        "log_std_init": 0.0,  # action_std_init
        "share_encoder": False,
        "target_kl": None,
    },
    "metabox": {
        "advantage_estimator": "n_step",
        "n_step": 10,
        "num_steps": 10,
        "update_epochs": 3,  # K_epochs
        "clip_coef": 0.1,  # eps_clip
        "max_grad_norm": 0.1,
        "gamma": 0.999,
        "ent_coef": 0.0,
        "norm_adv": False,
    },
}


def test_every_preset_is_checked():
    assert sorted(p.stem for p in PRESETS.glob("*.yaml")) == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_preset_loads_like_the_cli_and_builds(name):
    config = load_config(PRESETS / f"{name}.yaml", {})
    for field, value in EXPECTED[name].items():
        assert getattr(config, field) == value, (name, field)
    # Command-line overrides win over the preset, as for any --config file.
    assert load_config(PRESETS / f"{name}.yaml", {"gamma": 0.5}).gamma == 0.5
    # Builds the env and networks of the default env (no training).
    runner = jax.eval_shape(pjp.make_train_fns(config).init, jax.random.key(0))
    assert runner.update_step.shape == ()


def test_agilerl_minibatch_is_its_batch_size():
    config = load_config(PRESETS / "agilerl.yaml", {})
    # batch_size 64 = num_envs * num_steps / num_minibatches = 1 * 2048 / 32
    assert config.batch_size // config.num_minibatches == 64


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_every_value_cites_its_source(name):
    lines = (PRESETS / f"{name}.yaml").read_text().splitlines()
    for i, line in enumerate(lines):
        if re.match(r"^\w+:", line):
            comment = "#" in line or lines[i - 1].startswith("#")
            assert comment, f"{name}.yaml line {i + 1}: {line!r} has no source comment"


def test_cli_trains_with_a_preset(tmp_path, capsys):
    run_dir = tmp_path / "run"
    # 2 updates of duo_ai's 4 envs x 256 steps.
    argv = ["--config", str(PRESETS / "duo_ai.yaml"), "--total-timesteps", "2048"]
    assert main(["train", "--run-dir", str(run_dir), "--no-progress", *argv]) == 0
    saved = pjp.PPOConfig.from_yaml(run_dir / "config.yaml")
    assert (saved.gamma, saved.update_epochs, saved.num_minibatches) == (0.999, 3, 8)
    assert "final mean episode_return" in capsys.readouterr().out
