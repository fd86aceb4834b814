"""Options the seed libraries' users reach for (issue #26, items 3-4): `log_std_init`,
one-hot Discrete observations, n-step returns and the total `loss` metric."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch

import purejaxppo as pjp
from purejaxppo.networks import make_networks

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def test_log_std_init_sets_the_initial_std_and_is_exported(tmp_path):
    config = pjp.PPOConfig(env_name="Pendulum-v1", log_std_init=-0.7)
    env, env_params = pjp.make_env(config.env_name)
    networks = make_networks(config, env, env_params)
    params = networks.init(jax.random.key(0))
    dist, _ = networks.apply(params, jnp.zeros((3, 3)))
    # std = exp(-0.7) = 0.496585...
    np.testing.assert_allclose(dist.stddev(), np.full((3, 1), math.exp(-0.7)), rtol=1e-6)
    pjp.export_torch(params, config, tmp_path / "policy.pt")
    state = torch.load(tmp_path / "policy.state_dict.pt")
    np.testing.assert_allclose(state["log_std"].numpy(), [-0.7], rtol=1e-6)
    # The default keeps the old init (log_std 0: std 1), so golden runs stay bitwise.
    default = make_networks(pjp.PPOConfig(env_name="Pendulum-v1"), env, env_params)
    assert float(default.init(jax.random.key(0))["params"]["log_std"][0]) == 0.0


def _n_step_loop(reward, value, next_value, terminated, truncated, gamma, n):
    """The n-step return written out: sum up to n rewards, stop at an episode's end or
    the rollout's, then bootstrap from V(s') unless the episode terminated."""
    steps = len(reward)
    returns = np.zeros(steps)
    for t in range(steps):
        total, scale = 0.0, 1.0
        for k in range(t, min(t + n, steps)):
            total += scale * reward[k]
            if terminated[k]:
                break
            scale *= gamma
            if truncated[k] or k == t + n - 1 or k == steps - 1:
                total += scale * next_value[k]
                break
        returns[t] = total
    return returns - value, returns


@pytest.mark.parametrize("n", [1, 3, 20])
def test_n_step_equals_a_python_loop(n):
    rng = np.random.default_rng(n)
    steps = 12
    reward, value, next_value = (rng.normal(size=steps).astype(np.float32) for _ in range(3))
    terminated = np.zeros(steps, bool)
    truncated = np.zeros(steps, bool)
    terminated[4], truncated[8] = True, True
    adv, ret = pjp.n_step_advantages(reward, value, next_value, terminated, truncated, 0.9, n)
    want_adv, want_ret = _n_step_loop(reward, value, next_value, terminated, truncated, 0.9, n)
    np.testing.assert_allclose(ret, want_ret, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(adv, want_adv, rtol=1e-5, atol=1e-5)
    if n == 1:  # TD(0) = GAE with lambda 0
        gae_adv, _ = pjp.gae_advantages(reward, value, next_value, terminated, truncated, 0.9, 0.0)
        np.testing.assert_allclose(adv, gae_adv, rtol=1e-5, atol=1e-6)


def test_bad_estimator_and_n_step_raise():
    with pytest.raises(ValueError, match="advantage_estimator='nstep'.*did you mean n_step"):
        pjp.PPOConfig(advantage_estimator="nstep")
    with pytest.raises(ValueError, match="n_step=0: must be >= 1"):
        pjp.PPOConfig(n_step=0)


def test_n_step_run_learns_and_logs_the_total_loss():
    config = pjp.PPOConfig(
        advantage_estimator="n_step", n_step=8, num_envs=8, total_timesteps=60_000
    )
    out = jax.jit(pjp.make_train(config))(jax.random.key(0))
    m = {k: np.asarray(v) for k, v in out.metrics.items()}
    # CleanRL's loss = pg_loss - ent_coef * entropy + vf_coef * v_loss (means over the
    # minibatches: the sum is linear, so it holds for the means too).
    np.testing.assert_allclose(
        m["loss"], m["pg_loss"] - 0.01 * m["entropy"] + 0.5 * m["v_loss"], rtol=1e-4, atol=1e-5
    )
    first, last = np.nanmean(m["episode_return"][:3]), np.nanmean(m["episode_return"][-5:])
    print(f"n-step CartPole: first updates {first:.1f}, last updates {last:.1f}")
    assert last > 100 > 2 * first  # random play ~22; seed 0 gave 26 -> 164


def test_discrete_observations_are_one_hot_and_the_probe_learns(tmp_path):
    config = pjp.PPOConfig(
        env_name="ProbeDiscreteObs-v0", num_envs=8, num_steps=16, total_timesteps=12_800,
        learning_rate=2.5e-3, ent_coef=0.0,
    )  # fmt: skip
    env, env_params = pjp.make_env(config.env_name)
    networks = make_networks(config, env, env_params)
    assert networks.module.inputs[0].one_hot == 5
    out = jax.jit(pjp.make_train(config))(jax.random.key(0))
    returns = np.asarray(out.metrics["episode_return"])
    print(f"ProbeDiscreteObs: first {returns[0]:.2f}, last {returns[-5:].mean():.2f}")
    assert returns[0] < 0.4 and returns[-5:].mean() > 0.9  # random play gets 0.2
    # The export one-hot encodes too: the torch policy picks the learned action per cue.
    params = out.runner_state.train_state.params
    pjp.export_torch(params, config, tmp_path / "policy.pt")
    program = torch.export.load(tmp_path / "policy.pt2").module()
    cues = np.arange(5, dtype=np.int32)
    logits, _ = program(torch.from_numpy(cues.astype(np.float32)))  # inputs are float32
    dist, _ = networks.apply(params, jnp.asarray(cues))
    log_probs = torch.log_softmax(logits, -1).detach().numpy()  # distrax normalises logits
    np.testing.assert_allclose(log_probs, dist.logits, rtol=1e-4, atol=1e-4)
    np.testing.assert_array_equal(logits.argmax(-1).numpy(), (2 * cues) % 5)
