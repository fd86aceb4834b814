"""Config validation: unknown keys, wrong types and impossible sizes are ValueErrors."""

import jax
import numpy as np
import pytest

import purejaxppo as pjp
from purejaxppo.cli import _parse_value, load_config
from purejaxppo.config_yaml import load_yaml


def test_defaults_are_the_cleanrl_cartpole_ones():
    c = pjp.PPOConfig()
    assert (c.env_name, c.num_envs, c.num_steps, c.update_epochs, c.num_minibatches) == (
        "CartPole-v1",
        4,
        128,
        4,
        4,
    )
    assert (c.learning_rate, c.anneal_lr, c.gamma, c.gae_lambda, c.clip_coef) == (
        2.5e-4,
        True,
        0.99,
        0.95,
        0.2,
    )
    assert (c.ent_coef, c.vf_coef, c.max_grad_norm, c.hidden_sizes, c.activation) == (
        0.01,
        0.5,
        0.5,
        (64, 64),
        "tanh",
    )
    assert c.adam_eps == 1e-5 and c.end_learning_rate == 0.0 and c.target_kl is None
    assert c.batch_size == 512 and c.minibatch_size == 128 and c.num_updates == 1000


@pytest.mark.parametrize(
    "values, match",
    [
        ({"num_envs": 4, "num_steps": 10, "num_minibatches": 3}, "num_minibatches=3"),
        ({"num_envs": 0}, "num_envs=0"),
        ({"num_envs": 2.5}, "num_envs must be an integer, got 2.5"),
        ({"num_envs": True}, "num_envs must be an integer"),
        ({"learning_rate": "fast"}, "learning_rate must be a number, got 'fast'"),
        ({"learning_rate": -1.0}, "learning_rate=-1.0"),
        ({"gamma": 1.5}, "gamma=1.5"),
        ({"norm_adv": "yes"}, "norm_adv must be true or false"),
        ({"hidden_sizes": [64, 0]}, "hidden_sizes"),
        ({"hidden_sizes": "big"}, "hidden_sizes must be a list"),
        ({"activation": "tahn"}, "did you mean tanh"),
        ({"total_timesteps": 100}, "total_timesteps=100"),
        ({"target_kl": 0.0}, "target_kl=0.0"),
        ({"critic_pretrain_steps": 10_000}, "critic_pretrain_steps=10000"),
        ({"env_kwargs": [1, 2]}, "env_kwargs must be a mapping"),
        ({"learning_rate": float("nan")}, "learning_rate must be finite"),
        ({"seed": 2**64}, r"seed=18446744073709551616: must be in \[0, 2\*\*32\)"),
        ({"seed": -1}, "seed=-1"),
        ({"keep_checkpoints": 0}, "keep_checkpoints=0: must be >= 1"),
        ({"save_minutes": -1.0}, "save_minutes=-1.0"),
    ],
)
def test_bad_values_name_field_and_value(values, match):
    with pytest.raises(ValueError, match=match):
        pjp.PPOConfig.from_dict(values)


def test_unknown_key_suggests_close_match():
    with pytest.raises(ValueError, match=r"unknown config field 'num_env'.*num_envs"):
        pjp.PPOConfig.from_dict({"num_env": 8})


@pytest.mark.parametrize(
    "key, field, whose",
    [
        ("env_id", "env_name", "CleanRL's env_id"),  # difflib alone suggests nothing
        ("n_steps", "num_steps", "SB3's n_steps"),  # difflib alone puts n_step first
        ("batch_size", "num_minibatches", "SB3's batch_size, the minibatch size"),
        ("LR", "learning_rate", "PureJaxRL's LR"),
        ("NUM_ENVS", "num_envs", "field names are lower case here"),
        ("entropy_cost", "ent_coef", "Brax's entropy_cost"),
    ],
)
def test_another_librarys_name_gets_ours_and_whose_it_is(key, field, whose):
    hint = f"unknown field {key!r}; did you mean {field}? ({whose}"
    with pytest.raises(ValueError, match="unknown config field") as error:
        pjp.PPOConfig.from_dict({key: 8})  # a YAML file's keys, a sweep's grid
    assert hint.replace("field", "config field", 1) in str(error.value), str(error.value)
    with pytest.raises(TypeError) as error:
        pjp.PPOConfig(**{key: 8})
    assert hint in str(error.value), str(error.value)


def test_yaml_numbers_with_an_exponent_are_numbers(tmp_path):
    """PyYAML (YAML 1.1) reads `1e5` and `2.5e4` as strings; a config file means numbers
    (YAML 1.2), as the command line's `--total-timesteps 1e5` does."""
    path = tmp_path / "c.yaml"
    path.write_text("learning_rate: 3e-4\ntotal_timesteps: 1e5\nvf_coef: .5e0\nname: '1e5'\n")
    config = pjp.PPOConfig.from_yaml(path)
    assert config.learning_rate == 3e-4 and config.vf_coef == 0.5
    assert config.total_timesteps == 100_000 and isinstance(config.total_timesteps, int)
    assert config.name == "1e5"  # quoted: a string
    assert load_yaml("[2.5e4, -1_000E3, 1e, e5, 12]") == [25000.0, -1e6, "1e", "e5", 12]


def test_lossless_coercions():
    c = pjp.PPOConfig.from_dict({"total_timesteps": 1e6, "hidden_sizes": [32], "gamma": 1})
    assert c.total_timesteps == 1_000_000 and isinstance(c.total_timesteps, int)
    assert c.hidden_sizes == (32,) and c.gamma == 1.0 and isinstance(c.gamma, float)


def test_replace_and_round_trip():
    c = pjp.PPOConfig().replace(num_envs=8, target_kl=0.02)
    assert c.num_envs == 8 and c.target_kl == 0.02
    assert pjp.PPOConfig.from_dict(c.to_dict()) == c
    with pytest.raises(ValueError, match="num_minibatches"):
        c.replace(num_minibatches=7)


def test_yaml_and_overrides(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("env_name: Acrobot-v1\nnum_envs: 8\nhidden_sizes: [32, 32]\n")
    c = load_config(path, {"num_envs": 16})
    assert c.env_name == "Acrobot-v1" and c.num_envs == 16 and c.hidden_sizes == (32, 32)
    path.write_text("num_envz: 8\n")
    with pytest.raises(ValueError, match="num_envz"):
        load_config(path, {})
    with pytest.raises(ValueError, match="no such file"):
        load_config(tmp_path / "missing.yaml", {})


def test_a_config_file_that_is_not_utf8_is_named(tmp_path, capsys):
    from purejaxppo.cli import main

    path = tmp_path / "c.yaml"
    path.write_bytes(b"num_envs: 4\nname: \xff\xfe\x00bad\n")
    with pytest.raises(ValueError, match=f"{path}: not a UTF-8 text file .byte 0xff"):
        pjp.PPOConfig.from_yaml(path)
    run_dir = tmp_path / "run"
    with pytest.raises(SystemExit) as exit_info:
        main(["train", "--run-dir", str(run_dir), "--no-progress", "--config", str(path)])
    assert exit_info.value.code == 2
    assert f"purejaxppo: error: {path}: not a UTF-8 text file" in capsys.readouterr().err
    assert not run_dir.exists()


def test_cli_value_parsing():
    assert _parse_value("1e6") == 1e6
    assert _parse_value("64,64") == [64, 64]
    assert _parse_value("[32, 32]") == [32, 32]
    assert _parse_value("true") is True
    assert _parse_value("null") is None
    assert _parse_value("{max_steps_in_episode: 50}") == {"max_steps_in_episode": 50}
    assert _parse_value("CartPole-v1") == "CartPole-v1"


def test_hyperparams_from_config():
    hp = pjp.Hyperparams.from_config(pjp.PPOConfig(learning_rate=1e-3))
    assert hp.learning_rate.dtype == np.float32 and float(hp.learning_rate) == np.float32(1e-3)
    assert np.isinf(hp.target_kl)
    stacked = pjp.Hyperparams.stack([hp, hp.replace(ent_coef=jax.numpy.float32(0.1))])
    assert stacked.ent_coef.shape == (2,)
    np.testing.assert_allclose(stacked.ent_coef, [0.01, 0.1])


def test_unknown_env_lists_close_matches():
    with pytest.raises(ValueError, match=r"CartPol-v1.*Close matches: CartPole-v1"):
        pjp.make_env("CartPol-v1")


def test_env_kwargs_split_between_params_and_constructor():
    env, params = pjp.make_env("CartPole-v1", {"max_steps_in_episode": 50})
    assert params.max_steps_in_episode == 50
    env, params = pjp.make_env("MemoryChain-bsuite", {"num_bits": 2, "memory_length": 7})
    assert env.num_bits == 2 and params.memory_length == 7
    with pytest.raises(ValueError, match="bogus"):
        pjp.make_env("CartPole-v1", {"bogus": 1})


def test_traced_is_declared_once_on_the_field():
    import dataclasses

    from purejaxppo.config import DRIVER_FIELDS, FIELD_GROUPS, field_group, is_traced

    traced = [f.name for f in dataclasses.fields(pjp.PPOConfig) if f.metadata.get("traced")]
    assert pjp.TRACED_FIELDS == tuple(traced) and len(traced) == 11
    assert [f.name for f in dataclasses.fields(pjp.Hyperparams)] == traced
    assert is_traced("learning_rate") and not is_traced("num_envs")
    assert field_group("log_freq") == "driver" and "log_freq" in DRIVER_FIELDS
    grouped = [name for names in FIELD_GROUPS.values() for name in names]
    assert sorted(grouped) == sorted(f.name for f in dataclasses.fields(pjp.PPOConfig))
    hparams = pjp.Hyperparams.from_config(pjp.PPOConfig(target_kl=None))
    assert np.isinf(hparams.target_kl) and np.isnan(hparams.actor_learning_rate)


def test_unknown_keyword_names_the_closest_fields():
    with pytest.raises(TypeError, match="'learning_rat'; did you mean learning_rate"):
        pjp.PPOConfig(learning_rat=1e-3)
    with pytest.raises(TypeError, match="did you mean num_envs"):
        pjp.PPOConfig(num_env=8)


def test_default_total_timesteps_is_whole_updates():
    """`purejaxppo train` with no arguments: no partial update, so no warning and no
    second compiled program for a tail (512,000 = 1000 updates of 4*128 steps)."""
    c = pjp.PPOConfig()
    assert c.total_timesteps == 512_000 and c.total_timesteps % c.batch_size == 0


def test_mujoco_config_keeps_cleanrl_batch_and_one_segment_program():
    # configs/mujoco.yaml trades CleanRL's 1 env x 2048 steps for more envs with fewer
    # steps (issue #22 allows it at about 2048 steps per update): 32 x 64 = 2048 samples,
    # 32 minibatches of 2048 / 32 = 64 (CleanRL's), 10 epochs. log_freq divides the
    # 1M-step run's 1_000_000 // 2048 = 488 updates (488 = 8 * 61), so `purejaxppo
    # train` compiles one segment program, not a second one for a shorter last segment.
    from pathlib import Path

    c = pjp.PPOConfig.from_yaml(Path(__file__).parent.parent / "configs" / "mujoco.yaml")
    assert c.num_envs * c.num_steps == 2048
    assert (c.batch_size // c.num_minibatches, c.update_epochs) == (64, 10)
    assert c.num_updates == 488
    assert c.num_updates % c.log_freq == 0
