"""Trajectory windows (`purejaxppo.sequences`, DTI's `get_trajectory_minibatches`): golden
windows of a hand-made rollout, the gathered batch, the masked loss, errors, and a
recurrent policy learning Probe7 on windows."""

from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import purejaxppo as pjp
from purejaxppo.envs.rows import vmapped_envs
from purejaxppo.losses import ppo_loss
from purejaxppo.networks import make_networks
from purejaxppo.rollout import make_rollout
from purejaxppo.sequences import window_indices
from purejaxppo.types import Transition

CONFIGS = Path(__file__).resolve().parent.parent / "configs"

# A rollout of T = 6 steps of N = 2 envs. Env 0's episode ends at t = 2 (reset at t = 3),
# env 1's at t = 1 (reset at t = 2): four trajectories, env 0 [0, 2] and [3, 5], env 1
# [0, 1] and [2, 5] (the last ones cut by the rollout's edge).
RESETS = np.zeros((6, 2), bool)
RESETS[3, 0] = RESETS[2, 1] = True
TRAJECTORIES = {(0, 0): 2, (0, 3): 5, (1, 0): 1, (1, 2): 5}  # (env, first t): last t


def draw(prob, timesteps=4, num_windows=256, key=0):
    windows = window_indices(
        jax.random.key(key),
        RESETS,
        timesteps=timesteps,
        num_windows=num_windows,
        prob_go_from_end=prob,
    )
    return jax.tree.map(np.asarray, windows)


def spans(windows):
    """(env, first t, last t) of each window's valid steps."""
    last = windows.mask.sum(axis=1) - 1
    rows = np.arange(len(windows.env))
    return list(zip(windows.env, windows.time[:, 0], windows.time[rows, last], strict=True))


def trajectory_of(env, t):
    return max(
        (first, last) for (e, first), last in TRAJECTORIES.items() if e == env and first <= t
    )


def test_windows_from_end_are_the_trajectories_tails():
    # prob_go_from_end = 1, L = 4: every window is the last <= 4 steps of its trajectory,
    # left-aligned, padded with its last step: env 0 [0, 1, 2, 2] / [3, 4, 5, 5] (3 steps),
    # env 1 [0, 1, 1, 1] (2 steps) / [2, 3, 4, 5] (4 steps).
    windows = draw(1.0)
    golden = {
        0: {0: ([0, 1, 2, 2], 3), 3: ([3, 4, 5, 5], 3)},
        1: {0: ([0, 1, 1, 1], 2), 2: ([2, 3, 4, 5], 4)},
    }
    seen = set()
    for time, env, mask in zip(windows.time, windows.env, windows.mask, strict=True):
        steps, valid = golden[int(env)][int(time[0])]
        np.testing.assert_array_equal(time, steps)
        np.testing.assert_array_equal(mask, np.arange(4) < valid)
        seen.add((int(env), int(time[0])))
    assert seen == set(TRAJECTORIES)  # 256 draws reach all four trajectories


@pytest.mark.parametrize("prob", [0.0, 0.1, 0.5])
def test_windows_never_cross_an_episode_end(prob):
    windows = draw(prob, timesteps=3)
    for env, first, last in spans(windows):
        start, end = trajectory_of(env, first)
        assert start <= first <= last <= end  # inside one trajectory
        # up to L = 3 steps, cut only at the trajectory's first step
        assert last - first + 1 == min(3, last - start + 1)
    # Valid steps are a prefix; padding repeats the window's last step.
    mask = windows.mask
    assert np.all(mask[:, 0]) and np.all(mask[:, :-1] >= mask[:, 1:])
    last = windows.time[np.arange(len(mask)), mask.sum(axis=1) - 1]
    np.testing.assert_array_equal(np.where(mask, windows.time, last[:, None]), windows.time)


@pytest.mark.parametrize("prob", [0.0, 0.5])
def test_short_trajectories_are_whole_windows_long_ones_full(prob):
    # DTI's rule, L = 3. A trajectory of <= 3 steps is one whole window, whatever the
    # probability (env 0 [0, 2] and [3, 5], env 1 [0, 1]: a window never stops before a
    # short trajectory's last step, where a memory task's reward is). Env 1's [2, 5] (4
    # steps) gives full 3-step windows [2, 4] or [3, 5]: the end is 5 with probability
    # prob, else uniform over {4, 5}, so 5 with prob + (1 - prob) / 2 (0.5, 0.75).
    counts = {}
    for span in spans(draw(prob, timesteps=3, num_windows=4000)):
        key = tuple(int(x) for x in span)
        counts[key] = counts.get(key, 0) + 1
    assert set(counts) == {(0, 0, 2), (0, 3, 5), (1, 0, 1), (1, 2, 4), (1, 3, 5)}
    from_end = counts[(1, 3, 5)] / (counts[(1, 2, 4)] + counts[(1, 3, 5)])
    assert abs(from_end - (prob + (1 - prob) / 2)) < 0.05, from_end


def test_window_longer_than_the_rollout_is_padding():
    windows = draw(1.0, timesteps=9, num_windows=16)
    assert windows.time.shape == (16, 9)
    assert windows.mask.sum(axis=1).max() == 4  # the longest trajectory, env 1 [2, 5]


def test_trajectory_minibatches_gathers_the_window_steps():
    # Every field holds 10 * t + n, so the gathered values name their step.
    t, n = np.meshgrid(np.arange(6), np.arange(2), indexing="ij")
    code = (10 * t + n).astype(np.float32)
    traj = Transition(
        obs=code[..., None],
        action=code.astype(np.int32),
        log_prob=code,
        value=code + 0.5,
        reward=code,
        terminated=np.roll(RESETS, -1, axis=0),
        truncated=np.zeros_like(RESETS),
        final_obs=code[..., None],
        policy_state=np.stack([code, -code], axis=-1),
        reset=RESETS,
    )
    batch = jax.jit(
        lambda key: pjp.trajectory_minibatches(
            key, traj, code + 0.25, code + 0.75, timesteps=4, num_windows=32
        )
    )(jax.random.key(3))
    windows = draw(0.1, num_windows=32, key=3)  # the same draw
    expected = 10 * windows.time + windows.env[:, None]
    np.testing.assert_array_equal(batch.mask, windows.mask)
    np.testing.assert_array_equal(batch.obs[..., 0], expected)
    np.testing.assert_array_equal(batch.action, expected)
    np.testing.assert_array_equal(batch.value, expected + 0.5)
    np.testing.assert_array_equal(batch.advantages, expected + 0.25)
    np.testing.assert_array_equal(batch.returns, expected + 0.75)
    np.testing.assert_array_equal(batch.resets, RESETS[windows.time, windows.env[:, None]])
    first = expected[:, 0].astype(np.float32)
    np.testing.assert_array_equal(batch.initial_state, np.stack([first, -first], axis=-1))


def test_rerun_over_windows_reproduces_the_rollout():
    """A GRU re-run over each window from its stored state gives the rollout's log-probs
    and values on the valid steps (Probe7's 5-step episodes, 12-step rollout)."""
    config = pjp.PPOConfig(
        env_name="Probe7-v0", num_envs=4, num_steps=12, hidden_sizes=(8,), recurrent="gru"
    ).replace(recurrent_size=4, max_seq_len=4, sequence_sampling="windows")
    env, env_params = pjp.make_env(config.env_name)
    nets = make_networks(config, env, env_params)
    params = nets.init(jax.random.key(1))
    envs = vmapped_envs(env, env_params)
    rollout = jax.jit(make_rollout(envs, nets, config.num_steps))
    carry = envs.reset(jax.random.key(2), config.num_envs, nets)
    carry, _, _ = rollout(params, carry, jax.random.key(3))
    _, traj, _ = rollout(params, carry, jax.random.key(4))
    zeros = jnp.zeros_like(traj.value)
    batch = pjp.trajectory_minibatches(
        jax.random.key(5), traj, zeros, zeros, timesteps=4, num_windows=64
    )
    _, dist, value = nets.unroll(
        params, batch.initial_state, jnp.swapaxes(batch.obs, 0, 1), jnp.swapaxes(batch.resets, 0, 1)
    )
    log_prob = jnp.swapaxes(dist.log_prob(jnp.swapaxes(batch.action, 0, 1)), 0, 1)
    mask = np.asarray(batch.mask)
    assert 0 < mask.mean() < 1  # some windows are padded
    np.testing.assert_allclose(np.asarray(log_prob)[mask], batch.log_prob[mask], atol=1e-5)
    np.testing.assert_allclose(
        np.asarray(jnp.swapaxes(value, 0, 1))[mask], batch.value[mask], atol=1e-5
    )


# --------------------------------------------------------------------- masked loss
def loss_inputs(size, key=0):
    keys = jax.random.split(jax.random.key(key), 6)
    x = [jax.random.normal(k, (size,)) for k in keys]
    return (x[0] * 0.1, x[1] * 0.1, x[2], x[3], x[4], x[5], jnp.abs(x[0]))


COEFS = dict(clip_coef=0.2, vf_coef=0.5, ent_coef=0.01, norm_adv=True, clip_vloss=True)


def test_masked_loss_is_the_loss_of_the_valid_samples():
    inputs = loss_inputs(12)
    mask = np.arange(12) % 3 != 2  # 8 valid samples
    masked = ppo_loss(*inputs, **COEFS, mask=mask)
    valid = ppo_loss(*(x[mask] for x in inputs), **COEFS)
    for a, b in zip(masked, valid, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7)
    # Padded samples do not matter, whatever they hold (even NaN).
    garbage = [jnp.where(mask, x, jnp.nan) for x in inputs]
    for a, b in zip(ppo_loss(*garbage, **COEFS, mask=mask), masked, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-6)
    # The gradient: zero on padded samples, the valid-only gradient on the others
    # (padding holds copies of real steps in practice: finite values).
    padded = [jnp.where(mask, x, 1e3) for x in inputs]

    def value_grad(value, xs, mask=None):
        return jax.grad(lambda v: ppo_loss(*xs[:3], v, *xs[4:], **COEFS, mask=mask).loss)(value)

    grad = value_grad(padded[3], padded, mask)
    np.testing.assert_array_equal(grad[~mask], 0.0)
    expected = value_grad(inputs[3][mask], [x[mask] for x in inputs])
    np.testing.assert_allclose(grad[mask], expected, rtol=1e-5, atol=1e-7)


# --------------------------------------------------------------------- errors
@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"timesteps": 0}, r"timesteps=0: must be an int >= 1"),
        ({"timesteps": 2.5}, r"timesteps=2.5: must be an int >= 1"),
        ({"num_windows": 0}, r"num_windows=0: must be an int >= 1"),
        ({"prob_go_from_end": 1.5}, r"prob_go_from_end=1.5: must be a number in \[0, 1\]"),
        ({"prob_go_from_end": -0.1}, r"prob_go_from_end=-0.1: must be a number in \[0, 1\]"),
    ],
)
def test_bad_arguments_name_the_value(kwargs, match):
    args = {"timesteps": 4, "num_windows": 8, "prob_go_from_end": 0.1, **kwargs}
    with pytest.raises(ValueError, match=match):
        window_indices(jax.random.key(0), RESETS, **args)


def test_resets_must_be_a_rollout():
    with pytest.raises(ValueError, match=r"resets has shape \(6,\): expected \[T, N\]"):
        window_indices(jax.random.key(0), RESETS[:, 0], timesteps=4, num_windows=8)


@pytest.mark.parametrize(
    "changes, match",
    [
        ({"sequence_sampling": "window"}, r"sequence_sampling='window'.*did you mean windows"),
        ({"recurrent": None}, r"sequence_sampling='windows': needs a recurrent core"),
        ({"window_prob_from_end": 1.5}, r"window_prob_from_end=1.5: must be in \[0, 1\]"),
    ],
)
def test_config_validation(changes, match):
    config = pjp.PPOConfig(recurrent="gru", sequence_sampling="windows")
    with pytest.raises(ValueError, match=match):
        config.replace(**changes)


# --------------------------------------------------------------------- learning
def test_gru_learns_probe7_on_windows():
    """Probe7 (cue at t = 0, recalled at the 5th and last step: 1.0 with memory, 0.5 by
    chance) with a GRU trained on windows of 5 steps: ~10 s on a 2-core CPU."""
    config = pjp.PPOConfig.from_yaml(
        CONFIGS / "probe7_lstm.yaml",
        recurrent="gru",
        max_seq_len=5,
        sequence_sampling="windows",
        window_prob_from_end=0.5,
        total_timesteps=24_000,
    )
    out = jax.device_get(jax.jit(pjp.make_train(config))(jax.random.key(0)))
    returns = out.metrics["episode_return"]
    assert np.nanmean(returns[-10:]) > 0.9, returns[-10:]
    assert np.all(np.isfinite(out.metrics["loss"]))
