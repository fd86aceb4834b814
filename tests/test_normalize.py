"""Observation / reward normalisation: statistics against NumPy, the parallel merge, the
reward recurrence, checkpoint resume (bitwise), Policy and the PyTorch export on raw
observations, and bad input. One short Pendulum run is compiled for the module."""

from __future__ import annotations

import json
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch

import purejaxppo as pjp
from purejaxppo import normalize
from purejaxppo.checkpoint import load_checkpoint, save_checkpoint
from purejaxppo.export import export_torch
from purejaxppo.hyperparams import Hyperparams
from purejaxppo.train import make_train_fns

CONFIG = pjp.PPOConfig(
    env_name="Pendulum-v1",
    num_envs=8,
    num_steps=32,
    total_timesteps=8 * 32 * 6,
    num_minibatches=4,
    update_epochs=2,
    normalize_observations=True,
    normalize_rewards=True,
)


@pytest.fixture(scope="module")
def fns():
    return make_train_fns(CONFIG)


@pytest.fixture(scope="module")
def trained(fns):
    run = jax.jit(fns.run, static_argnums=2)
    runner = jax.jit(fns.init)(jax.random.key(3))
    hparams = Hyperparams.from_config(CONFIG)
    first, m1 = run(runner, hparams, 3)
    full, m2 = run(first, hparams, 3)
    return {"run": run, "hparams": hparams, "first": first, "full": full, "metrics": m1}


def moments_np(x):
    x = np.asarray(x, np.float64)
    return x.shape[0], x.mean(0), x.var(0)


def test_running_moments_match_numpy_over_uneven_batches():
    rng = np.random.default_rng(0)
    batches = [rng.normal(3.0, 2.0, (n, 4)).astype(np.float32) for n in (1, 7, 100, 33)]
    stats = normalize.prior(jnp.zeros(4))
    for batch in batches:
        stats = normalize.merge(stats, normalize.batch_moments(batch))
    everything = np.concatenate(batches)
    n, mean, var = moments_np(everything)
    # The prior (count 1e-4, mean 0, var 1) weighs 1e-4 / 141 of the result.
    want_mean = mean * n / (n + 1e-4)
    want_var = (var * n + 1e-4 + mean**2 * n * 1e-4 / (n + 1e-4)) / (n + 1e-4)
    np.testing.assert_allclose(float(stats.count), n + 1e-4, rtol=1e-7)
    np.testing.assert_allclose(stats.mean, want_mean, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(stats.var, want_var, rtol=1e-5)


def test_parallel_merge_equals_single_pass():
    rng = np.random.default_rng(1)
    x = rng.normal(-1.0, 5.0, (4, 64, 3)).astype(np.float32)  # 4 "devices" x 64 samples
    per_device = jax.vmap(partial(normalize.batch_moments, axis_name="d"), axis_name="d")(x)
    single = normalize.batch_moments(x.reshape(-1, 3))
    for got in (per_device.mean, per_device.var):
        np.testing.assert_array_equal(got[0], got[3])  # identical on every device
    np.testing.assert_allclose(per_device.count[0], 256)
    np.testing.assert_allclose(per_device.mean[0], single.mean, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(per_device.var[0], single.var, rtol=1e-5)
    n, mean, var = moments_np(x.reshape(-1, 3))
    np.testing.assert_allclose(single.var, var, rtol=1e-5)


def test_reward_normalisation_follows_the_discounted_return_recurrence():
    rng = np.random.default_rng(2)
    steps, envs, gamma = 20, 3, 0.9
    reward = rng.normal(size=(steps, envs)).astype(np.float32)
    done = rng.random((steps, envs)) < 0.2
    start = rng.normal(size=envs).astype(np.float32)
    stats, last, scaled = normalize.normalize_rewards(
        normalize.init_reward_stats(), start, reward, done, jnp.float32(gamma), clip=1.5
    )
    g, returns = start.astype(np.float64), []
    for t in range(steps):
        g = gamma * g + reward[t]
        returns.append(g.copy())
        g = np.where(done[t], 0.0, g)
    returns = np.stack(returns).reshape(-1)
    n, mean, var = returns.size, returns.mean(), returns.var()
    total = n + 1e-4
    want_var = (var * n + 1e-4 + mean**2 * n * 1e-4 / total) / total
    np.testing.assert_allclose(stats["var"], want_var, rtol=1e-5)
    np.testing.assert_allclose(last, g, rtol=1e-5, atol=1e-6)
    want = np.clip(reward / np.sqrt(want_var + 1e-8), -1.5, 1.5)
    np.testing.assert_allclose(scaled, want, rtol=1e-5, atol=1e-6)
    assert np.abs(scaled).max() == pytest.approx(1.5)  # the clip bites


def test_statistics_count_every_rollout_observation(trained):
    params = trained["full"].train_state.params
    steps = 6 * CONFIG.num_envs * CONFIG.num_steps
    assert float(params["obs_norm"]["count"]) == pytest.approx(steps + 1e-4)
    assert float(params["reward_norm"]["count"]) == pytest.approx(steps + 1e-4)
    var = np.asarray(params["obs_norm"]["var"]["obs"])
    assert var.shape == (3,) and np.all(var > 0) and not np.allclose(var, 1.0)
    assert trained["full"].env.discounted_return.shape == (CONFIG.num_envs,)


def test_resume_from_a_checkpoint_is_bitwise_equal(trained, tmp_path):
    first = trained["first"]
    save_checkpoint(tmp_path, jax.device_get(first), jax.device_get(trained["metrics"]), CONFIG)
    restored = load_checkpoint(tmp_path).runner_state
    again, _ = trained["run"](restored, trained["hparams"], 3)
    for got, want in zip(jax.tree.leaves(again), jax.tree.leaves(trained["full"]), strict=True):
        if jnp.issubdtype(want.dtype, jax.dtypes.prng_key):
            got, want = jax.random.key_data(got), jax.random.key_data(want)
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


def test_policy_and_export_take_raw_observations(trained, tmp_path):
    params = jax.device_get(trained["full"].train_state.params)
    stats = params["obs_norm"]
    obs = np.random.default_rng(3).normal(0, 4, (6, 3)).astype(np.float32)
    policy = pjp.Policy(params, CONFIG)
    _, out = policy.act(obs, jax.random.key(0), temperature=0.0, return_model_output=True)
    # The same network on observations normalised by hand.
    inner = pjp.make_networks(CONFIG.replace(normalize_observations=False,
                                             normalize_rewards=False),
                              *pjp.make_env("Pendulum-v1"))  # fmt: skip
    manual = np.clip((obs - stats["mean"]["obs"]) / np.sqrt(stats["var"]["obs"] + 1e-8), -10, 10)
    dist, value = inner.apply({"params": params["params"]}, jnp.asarray(manual))
    np.testing.assert_allclose(out["value"], value, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(out["mean"], dist.mean(), rtol=1e-5, atol=1e-6)

    export_torch(trained["full"], CONFIG, tmp_path / "policy.pt")
    meta = json.loads((tmp_path / "policy.json").read_text())
    assert meta["constructor"]["inputs"][0]["normalize"] is True
    program = torch.export.load(str(tmp_path / "policy.pt2")).module()
    with torch.no_grad():
        actor_out, torch_value = program(torch.from_numpy(obs))
    np.testing.assert_allclose(actor_out.numpy(), out["mean"], atol=1e-5)
    np.testing.assert_allclose(torch_value.numpy(), out["value"], atol=1e-5)


def test_dict_observations_normalise_float_vectors_only():
    example = {
        "action_mask": jax.ShapeDtypeStruct((3,), jnp.bool_),
        "grid": jax.ShapeDtypeStruct((5, 5, 2), jnp.uint8),
        "position": jax.ShapeDtypeStruct((2,), jnp.float32),
        "image": jax.ShapeDtypeStruct((4, 4, 1), jnp.float32),
    }
    assert normalize.obs_leaves(example, "action_mask") == {"position": "position"}
    stats = normalize.init_obs_stats(example, {"position": "position"})
    stats["mean"]["position"] = jnp.array([1.0, 2.0])
    obs = {k: jnp.ones((7, *v.shape), v.dtype) for k, v in example.items()}
    out = normalize.normalize_obs(stats, obs, {"position": "position"}, 10.0)
    np.testing.assert_allclose(out["position"][0], [0.0, -1.0], atol=1e-6)
    for key in ("action_mask", "grid", "image"):
        assert out[key] is obs[key]


def test_integer_array_observations_are_normalised_whole(tmp_path):
    # Navix's uint8 [5, 5, 3] grid (rejax's FloatObsWrapper + normalize_observations): the
    # statistics are per cell, the encoder skips its [0, 8] bounds rescaling, and Policy /
    # the export apply the same statistics to raw uint8 observations.
    config = pjp.PPOConfig.from_yaml(
        "configs/navix_empty.yaml", normalize_observations=True, total_timesteps=1024
    )
    env, env_params = pjp.make_env(config.env_name, config.env_kwargs)
    plain = pjp.make_networks(config.replace(normalize_observations=False), env, env_params)
    assert plain.module.inputs[0].scale == 8  # the grid's [0, 8] bounds
    networks = pjp.make_networks(config, env, env_params)
    assert (networks.module.inputs[0].shift, networks.module.inputs[0].scale) == (0.0, 1.0)
    out = jax.jit(pjp.make_train(config))(jax.random.key(0))
    params = jax.device_get(out.train_state.params)
    stats = params["obs_norm"]
    assert float(stats["count"]) == pytest.approx(1024 + 1e-4)
    mean, var = np.asarray(stats["mean"]["obs"]), np.asarray(stats["var"]["obs"])
    assert mean.shape == (5, 5, 3) and (var > 0).all() and not np.allclose(var, 1.0)
    obs, _ = env.reset(jax.random.key(1), env_params)
    raw = np.asarray(obs)[None]
    assert raw.dtype == np.uint8
    _, model = pjp.Policy(params, config).act(
        raw, jax.random.key(0), temperature=0.0, return_model_output=True
    )
    export_torch(out, config, tmp_path / "policy.pt")
    program = torch.export.load(str(tmp_path / "policy.pt2")).module()
    with torch.no_grad():
        logits, value = program(torch.from_numpy(raw.astype(np.float32)))  # its input dtype
    np.testing.assert_allclose(value.numpy(), model["value"], rtol=1e-5, atol=1e-5)
    log_probs = torch.log_softmax(logits, dim=-1).numpy()  # distrax keeps normalised logits
    np.testing.assert_allclose(log_probs, model["logits"], rtol=1e-5, atol=1e-5)


def test_normalising_a_discrete_index_observation_is_a_clear_error():
    config = pjp.PPOConfig(env_name="ProbeDiscreteObs-v0", normalize_observations=True)
    with pytest.raises(ValueError, match="ProbeDiscreteObs-v0.*scalar.*Discrete index"):
        make_train_fns(config)
    # Reward normalisation alone needs no observation to normalise.
    rewards_only = config.replace(normalize_observations=False, normalize_rewards=True)
    fns = make_train_fns(rewards_only)
    assert "reward_norm" in jax.eval_shape(fns.init, jax.random.key(0)).train_state.params


@pytest.mark.parametrize("field, value", [("obs_clip", 0.0), ("reward_clip", -1.0)])
def test_clip_bounds_must_be_positive(field, value):
    with pytest.raises(ValueError, match=field):
        pjp.PPOConfig(**{field: value})
