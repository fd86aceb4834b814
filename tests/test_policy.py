"""Policy API and evaluation: load, act (batched / unbatched, temperature), evaluate, CLI."""

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd
import pytest

import purejaxppo as pjp
from purejaxppo.checkpoint import load_checkpoint
from purejaxppo.cli import main
from purejaxppo.drivers.single import train_and_log
from purejaxppo.policy import make_act

# Enough CartPole training that greedy play clearly beats random (~20).
CONFIG = pjp.PPOConfig(total_timesteps=60 * 512, log_freq=30)


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    path = tmp_path_factory.mktemp("run")
    train_and_log(CONFIG, path, progress=False, plot=False)
    return path


def test_load_act_batched_and_unbatched(run_dir):
    policy = pjp.Policy.load(run_dir)
    assert policy.config == CONFIG
    obs = jax.random.normal(jax.random.key(0), (16, 4)) * 0.05
    greedy = policy.act(obs, jax.random.key(1), temperature=0.0)
    assert greedy.shape == (16,) and greedy.dtype == jnp.int32
    result = policy.act(obs, jax.random.key(1), temperature=0.0, return_model_output=True)
    assert isinstance(result, pjp.ActResult) and result.model_output is result[1]
    action, out = result
    np.testing.assert_array_equal(greedy, jnp.argmax(out["logits"], -1))
    assert out["value"].shape == (16,)
    one = policy.act(obs[3], jax.random.key(1), temperature=0.0)
    assert one.shape == () and int(one) == int(greedy[3])
    # Sampling at temperature 1 follows the softmax: frequencies match probabilities.
    probs = jax.nn.softmax(out["logits"][0])
    keys = jax.random.split(jax.random.key(2), 4000)
    act = make_act(policy.networks)
    no_reset = jnp.zeros((1,), bool)
    samples = jax.vmap(lambda k: act(policy.get_params(), (), obs[:1], no_reset, k, 1.0)[1][0])(
        keys
    )
    np.testing.assert_allclose(np.mean(samples == 1), probs[1], atol=0.03)
    policy.reset(jnp.array([True]))  # feed-forward: a no-op
    with pytest.raises(ValueError, match="obs shape"):
        policy.act(jnp.zeros((3, 5)), jax.random.key(0))
    with pytest.raises(ValueError, match="temperature"):
        policy.act(obs, jax.random.key(0), temperature=-1.0)


def test_get_set_params(run_dir):
    policy = pjp.Policy.load(run_dir)
    zeros = jax.tree.map(jnp.zeros_like, policy.get_params())
    policy.set_params(zeros)
    _, out = policy.act(jnp.ones((2, 4)), jax.random.key(0), return_model_output=True)
    np.testing.assert_allclose(out["logits"], np.log(0.5))  # normalised: log-probabilities
    with pytest.raises(ValueError, match="do not match"):
        policy.set_params({"params": {}})


def test_continuous_policy_temperature_zero_is_the_clipped_mean():
    config = pjp.PPOConfig(env_name="Pendulum-v1", hidden_sizes=(8,))
    env, env_params = pjp.make_env("Pendulum-v1")
    _nets = pjp.make_networks(config, env, env_params)
    init, _ = _nets.init, _nets.apply
    params = init(jax.random.key(0))
    params["params"]["actor_head"]["out"]["bias"] = jnp.array([5.0])  # mean 5 > bound 2
    policy = pjp.Policy(params, config)
    action, out = policy.act(jnp.zeros((3, 3)), jax.random.key(0), 0.0, return_model_output=True)
    np.testing.assert_allclose(out["mean"], 5.0, atol=1e-5)
    np.testing.assert_allclose(action, 2.0)  # clipped to the Box bound


def test_evaluate_greedy_beats_random(run_dir):
    policy = pjp.Policy.load(run_dir)
    trained = pjp.evaluate(policy, "CartPole-v1", 64, jax.random.key(0), greedy=True)
    assert trained.returns.shape == (64,) and trained.lengths.dtype == np.int32
    np.testing.assert_allclose(trained.returns, trained.lengths)  # +1 per step
    zeros = pjp.Policy(jax.tree.map(jnp.zeros_like, policy.get_params()), CONFIG)
    uniform = pjp.evaluate(zeros, "CartPole-v1", 64, jax.random.key(0))
    print("greedy", trained.summary(), "uniform", uniform.summary())
    # Measured (2 shared CPU cores, 2026-11-25; CONFIG trained with key(0) .. key(4)): uniform
    # 24.5; greedy 480 / 488 / 353 / 330 / 497, so the bound 2 x 24.5 = 49 is 281 below the worst.
    assert uniform.summary()["mean"] < 40
    assert trained.summary()["mean"] > 2 * uniform.summary()["mean"]
    # A validation split: the same env with another time limit.
    env, params = pjp.make_env("CartPole-v1")
    short = pjp.evaluate(
        policy, "CartPole-v1", 8, greedy=True, env_params=params.replace(max_steps_in_episode=10)
    )
    assert short.lengths.max() <= 10


def test_evaluate_from_train_output_needs_config():
    out = jax.jit(pjp.make_train(pjp.PPOConfig(total_timesteps=512)))(jax.random.key(0))
    with pytest.raises(ValueError, match="config="):
        pjp.evaluate(out, num_episodes=2)
    result = pjp.evaluate(out, num_episodes=4, config=pjp.PPOConfig(total_timesteps=512))
    assert result.returns.shape == (4,)
    with pytest.raises(ValueError, match="num_episodes"):
        pjp.evaluate(out, num_episodes=0, config=pjp.PPOConfig(total_timesteps=512))


def test_summary_iqm():
    result = pjp.EvalResult(
        np.array([0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 100.0]), np.ones(8, np.int32)
    )
    # IQM drops the lowest and highest quarter: mean(2, 3, 4, 5) = 3.5.
    assert result.summary()["iqm"] == 3.5


def test_eval_cli(run_dir, capsys):
    assert main(["eval", str(run_dir), "--episodes", "8", "--greedy"]) == 0
    out = capsys.readouterr().out
    assert "8 episodes (greedy)" in out and "IQM" in out
    with pytest.raises(SystemExit):
        main(["eval", str(run_dir / "nope")])
    assert "no such run directory" in capsys.readouterr().err


@pytest.mark.parametrize("seed", ["-1", str(2**70)])
def test_eval_cli_refuses_a_seed_outside_32_bits(seed, tmp_path, capsys):
    # Checked first, as collect's --seed (the run directory is not even read).
    with pytest.raises(SystemExit) as exit_info:
        main(["eval", str(tmp_path / "run"), "--seed", seed])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert f"eval: --seed {seed}: must be in [0, 2**32)" in err and "Traceback" not in err


def test_export_cli_from_run_dir(run_dir, tmp_path, capsys):
    import torch

    out = tmp_path / "policy.pt"
    assert main(["export", str(run_dir), "--to", str(out)]) == 0
    assert "wrote" in capsys.readouterr().out
    for suffix in (".state_dict.pt", ".module.py", ".json"):
        assert out.with_suffix(suffix).exists()
    module = torch.jit.load(str(out))
    obs = np.random.default_rng(0).normal(scale=0.1, size=(64, 4)).astype(np.float32)
    logits, value = module(torch.from_numpy(obs))
    policy = pjp.Policy.load(run_dir)
    _, jax_out = policy.act(obs, jax.random.key(0), 0.0, return_model_output=True)
    np.testing.assert_allclose(
        torch.log_softmax(logits, -1).detach().numpy(), jax_out["logits"], atol=1e-5
    )
    np.testing.assert_allclose(value.detach().numpy(), jax_out["value"], atol=1e-5)
    with pytest.raises(SystemExit):
        main(["export", str(tmp_path / "missing"), "--to", str(out)])


def test_periodic_evaluation_on_named_splits_and_best_checkpoint(tmp_path):
    config = pjp.PPOConfig(
        total_timesteps=6 * 512,
        log_freq=5,
        eval_freq=2,
        eval_episodes=8,
        eval_splits={"train": {}, "short": {"max_steps_in_episode": 10}},
    )
    result = train_and_log(config, tmp_path, progress=False, plot=False)
    table = pd.read_csv(tmp_path / "metrics.csv")
    assert list(table["update"]) == list(range(1, 7))
    for column in ("eval/train/return", "eval/short/return"):
        evaluated = table[column].notna()
        assert list(table["update"][evaluated]) == [2, 4, 6], column
    assert table["eval/short/return"].max() <= 10.0  # that split's time limit
    np.testing.assert_allclose(result.metrics["v_loss"], table["v_loss"], rtol=1e-6)
    best_update = int(table.loc[table["eval/train/return"].idxmax(), "update"])
    best = load_checkpoint(tmp_path, kind="best")
    assert best.update_step == best_update
    assert [u for u, _ in best.eval_history["train"]] == list(range(2, best_update + 1, 2))
    assert pjp.Policy.load(tmp_path, kind="best").config == config
    # Evaluation does not change training: same numbers as without it.
    plain = jax.jit(pjp.make_train(config))(jax.random.key(config.seed))
    np.testing.assert_array_equal(table["pg_loss"].to_numpy(np.float32), plain.metrics["pg_loss"])


def test_bad_eval_split_is_a_clear_error(tmp_path):
    config = pjp.PPOConfig(total_timesteps=512, eval_freq=1, eval_splits={"x": {"gravity_": 1}})
    with pytest.raises(ValueError, match=r"eval_splits\['x'\]: \['gravity_'\] are not EnvParams"):
        train_and_log(config, tmp_path, progress=False)
    with pytest.raises(ValueError, match="eval_splits"):
        pjp.PPOConfig(eval_splits={"a/b": {}})
