"""`normalize_timing: "step"`: the statistics move at every env step, as SB3's
`VecNormalize` moves them; the rollout stores normalised observations and the update
learns on them."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from running_moments import PRIOR, chan_merge

import purejaxppo as pjp
from purejaxppo import learning, normalize
from purejaxppo.envs.probes import ProbeScaledObs
from purejaxppo.hyperparams import Hyperparams
from purejaxppo.rollout import make_normalizing_rollout, make_rollout
from purejaxppo.train import make_train_fns

# ProbeScaledObs: obs = [1000 + 200 * cue], the cue drawn from the env's key at every
# reset, so the observations do not depend on the actions: the two rollouts below see the
# same raw observations, whatever their policies do.
CONFIG = pjp.PPOConfig(
    env_name="ProbeScaledObs-v0",
    num_envs=4,
    num_steps=8,
    total_timesteps=4 * 8 * 3,
    num_minibatches=2,
    update_epochs=2,
    normalize_observations=True,
    normalize_timing="step",
)


@pytest.fixture(scope="module")
def fns():
    return make_train_fns(CONFIG, ProbeScaledObs())


@pytest.fixture(scope="module")
def rollouts(fns):
    runner = jax.jit(fns.init)(jax.random.key(7))
    setup = fns.setup
    raw = jax.jit(make_rollout(setup.rows, setup.networks, CONFIG.num_steps))
    stepped = jax.jit(make_normalizing_rollout(setup.rows, setup.networks, CONFIG.num_steps))
    params = runner.train_state.params
    key = jax.random.key(11)
    return runner, raw(params, runner.env, key), stepped(params, runner.env, key)


def test_each_step_is_normalised_with_the_statistics_up_to_it(rollouts):
    _, (_, raw, _), (_, traj, _, obs_norm) = rollouts
    obs, final = np.asarray(raw.obs, np.float64), np.asarray(raw.final_obs, np.float64)
    assert np.ptp(obs) == pytest.approx(200.0)  # both cues seen
    stats = PRIOR
    for t in range(CONFIG.num_steps):
        stats = chan_merge(stats, obs[t])
        std = np.sqrt(stats[2] + 1e-8)
        np.testing.assert_allclose(traj.obs[t], (obs[t] - stats[1]) / std, rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(
            traj.final_obs[t], (final[t] - stats[1]) / std, rtol=1e-4, atol=1e-4
        )
    assert float(obs_norm["count"]) == pytest.approx(stats[0])
    np.testing.assert_allclose(obs_norm["mean"]["obs"], stats[1], rtol=1e-6)
    np.testing.assert_allclose(obs_norm["var"]["obs"], stats[2], rtol=1e-4)
    # The first step sees its own observations: the prior moves at once (update timing
    # acts on the raw 1000 / 1200 in the first rollout).
    assert np.abs(np.asarray(traj.obs[0])).max() < 2.0


def test_an_update_keeps_the_statistics_its_rollout_moved(fns, rollouts):
    runner = rollouts[0]
    hparams = Hyperparams.from_config(CONFIG)
    after, _ = jax.jit(fns.update)(runner, hparams)
    _, rollout_key, _ = jax.random.split(runner.key, 3)
    setup = fns.setup
    stepped = make_normalizing_rollout(setup.rows, setup.networks, CONFIG.num_steps)
    *_, moved = jax.jit(stepped)(runner.train_state.params, runner.env, rollout_key)
    got = after.train_state.params["obs_norm"]
    assert float(got["count"]) == pytest.approx(CONFIG.num_envs * CONFIG.num_steps + 1e-4)
    for a, b in zip(jax.tree.leaves(got), jax.tree.leaves(moved), strict=True):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-6)


def test_per_step_rewards_follow_sb3s_vecnormalize():
    rng = np.random.default_rng(3)
    steps, envs, gamma = 20, 3, 0.9
    reward = rng.normal(size=(steps, envs)).astype(np.float32)
    done = rng.random((steps, envs)) < 0.2
    start = rng.normal(size=envs).astype(np.float32)
    stats, last, scaled = normalize.normalize_rewards(
        normalize.init_reward_stats(),
        start,
        reward,
        done,
        jnp.float32(gamma),
        clip=1.0,
        per_step=True,
    )
    # VecNormalize.step_wait: returns = returns * gamma + r; ret_rms.update(returns);
    # r / sqrt(ret_rms.var + eps), clipped; returns[dones] = 0.
    g, moments, want = start.astype(np.float64), (1e-4, np.zeros(()), np.ones(())), []
    for t in range(steps):
        g = gamma * g + reward[t]
        moments = chan_merge(moments, g)
        want.append(np.clip(reward[t] / np.sqrt(moments[2] + 1e-8), -1.0, 1.0))
        g = np.where(done[t], 0.0, g)
    np.testing.assert_allclose(scaled, np.stack(want), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(stats["var"], moments[2], rtol=1e-5)
    assert float(stats["count"]) == pytest.approx(moments[0])
    np.testing.assert_allclose(last, g, rtol=1e-5, atol=1e-6)
    assert np.abs(scaled).max() == pytest.approx(1.0)  # the clip bites


def _learning_renormalises(networks):
    """A planted bug: the update normalises the stored (already normalised) observations
    again."""
    return networks


@pytest.mark.parametrize("planted", [False, True], ids=["clean", "normalised-twice"])
def test_the_checks_scaled_observation_probe_judges_step_timing(planted, monkeypatch):
    if planted:
        monkeypatch.setattr(learning, "normalized_inputs", _learning_renormalises)
    config = pjp.PPOConfig.from_yaml("configs/pendulum_normalized.yaml").replace(
        normalize_timing="step"
    )
    report = pjp.check(
        config, seeds=4, invariants=False, rows=["scaled observations"], progress=False
    )
    (row,) = report.rows
    assert row.passed is (not planted), str(report)


def test_bad_timing_and_unsupported_uses_get_one_line(fns):
    with pytest.raises(ValueError, match="normalize_timing.*sometimes"):
        CONFIG.replace(normalize_timing="sometimes")
    plain = make_train_fns(CONFIG.replace(normalize_observations=False), ProbeScaledObs())
    with pytest.raises(ValueError, match="do not normalise observations"):
        make_normalizing_rollout(plain.setup.rows, plain.setup.networks, CONFIG.num_steps)
    runner = jax.jit(fns.init)(jax.random.key(0))
    rollout = make_rollout(fns.setup.rows, fns.setup.networks, CONFIG.num_steps)
    _, traj, _ = jax.jit(rollout)(runner.train_state.params, runner.env, jax.random.key(1))
    with pytest.raises(ValueError, match="learn: normalize_timing='step'"):
        pjp.learn(
            runner.train_state,
            traj,
            runner.env.obs,
            jax.random.key(2),
            config=CONFIG,
            networks=fns.networks,
        )
