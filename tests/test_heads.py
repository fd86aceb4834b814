"""Action heads: log-probs and entropies of every head against independent references.

Each head (`purejaxppo.networks.make_distribution`) is checked on random inputs against a
hand-written NumPy formula (float64) and, where distrax has an equivalent built from other
parts, against that: the tanh-squashed Gaussian against `distrax.Transformed` with a
`Tanh` bijector, its entropy against numerical integration.
"""

from __future__ import annotations

import distrax
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.special import log_expit, logsumexp

import purejaxppo as pjp
from purejaxppo.networks import (
    PAD_LOGIT,
    ActionSpec,
    SquashedDiagGaussian,
    action_spec,
    make_distribution,
    multi_discrete_logits,
    to_env_action,
)

B = 256  # random inputs per check
NVEC = (3, 2, 4)  # MultiDiscrete components of different sizes (padding is exercised)


def _normal(seed, shape, scale=2.0):
    return scale * np.asarray(jax.random.normal(jax.random.key(seed), shape), np.float64)


def _spec(kind, n=4):
    if kind == "discrete":
        return ActionSpec("discrete", n, ())
    if kind == "continuous":
        low, high = np.full(n, -2.0, np.float32), np.linspace(0.5, 3.0, n).astype(np.float32)
        return ActionSpec("continuous", n, (n,), low, high)
    if kind == "multi_discrete":
        return ActionSpec("multi_discrete", sum(NVEC), (len(NVEC),), nvec=NVEC)
    return ActionSpec("multi_binary", n, (n,))


def test_spec_kinds_from_spaces():
    kinds = {
        "CartPole-v1": ("discrete", 2, ()),
        "Pendulum-v1": ("continuous", 1, (1,)),
        "ProbeMultiDiscrete-v0": ("multi_discrete", 9, (3,)),  # 3 + 2 + 4 logits
        "ProbeMultiBinary-v0": ("multi_binary", 4, (4,)),
    }
    for env_id, (kind, num_actions, shape) in kinds.items():
        spec = action_spec(*pjp.make_env(env_id))
        assert (spec.kind, spec.num_actions, spec.shape) == (kind, num_actions, shape), env_id


def test_categorical_matches_hand_formula():
    logits = _normal(0, (B, 5))
    actions = np.asarray(jax.random.randint(jax.random.key(1), (B,), 0, 5))
    dist = make_distribution(_spec("discrete", 5), jnp.asarray(logits, jnp.float32), None)
    log_p = logits - logsumexp(logits, axis=-1, keepdims=True)  # log softmax
    np.testing.assert_allclose(dist.log_prob(actions), log_p[np.arange(B), actions], atol=1e-5)
    np.testing.assert_allclose(dist.entropy(), -np.sum(np.exp(log_p) * log_p, -1), atol=1e-5)


def test_gaussian_matches_hand_formula():
    spec = _spec("continuous", 3)
    mean, log_std, actions = _normal(0, (B, 3)), _normal(1, (3,), 0.5), _normal(2, (B, 3))
    dist = make_distribution(
        spec, jnp.asarray(mean, jnp.float32), jnp.asarray(log_std, jnp.float32)
    )
    std = np.exp(log_std)
    # log N(a; m, s) = -(a - m)^2 / (2 s^2) - log s - log(2 pi) / 2, summed over dims.
    want = np.sum(-0.5 * ((actions - mean) / std) ** 2 - log_std - 0.5 * np.log(2 * np.pi), -1)
    np.testing.assert_allclose(dist.log_prob(jnp.asarray(actions, jnp.float32)), want, rtol=1e-5)
    # H = sum_i (log(2 pi e) / 2 + log s_i).
    want_h = np.sum(0.5 * np.log(2 * np.pi * np.e) + log_std)
    np.testing.assert_allclose(dist.entropy(), np.full(B, want_h), rtol=1e-5)


def test_multi_discrete_sums_independent_categoricals():
    spec = _spec("multi_discrete")
    flat = _normal(0, (B, sum(NVEC)))
    keys = jax.random.split(jax.random.key(1), len(NVEC))
    actions = np.stack(
        [np.asarray(jax.random.randint(k, (B,), 0, n)) for k, n in zip(keys, NVEC, strict=True)], -1
    )
    dist = make_distribution(spec, jnp.asarray(flat, jnp.float32), None)
    assert dist.batch_shape == (B,) and dist.event_shape == (len(NVEC),)
    # Reference: split the flat logits per component, log softmax each, sum over components.
    want_lp, want_h = np.zeros(B), np.zeros(B)
    for k, (lo, n) in enumerate(zip(np.cumsum((0, *NVEC[:-1])), NVEC, strict=True)):
        log_p = flat[:, lo : lo + n] - logsumexp(flat[:, lo : lo + n], axis=-1, keepdims=True)
        want_lp += log_p[np.arange(B), actions[:, k]]
        want_h += -np.sum(np.exp(log_p) * log_p, -1)
    np.testing.assert_allclose(dist.log_prob(jnp.asarray(actions)), want_lp, atol=1e-5)
    np.testing.assert_allclose(dist.entropy(), want_h, atol=1e-5)
    # Samples: int32 [N, B, K], every component inside its own range (padding never drawn).
    samples = dist.sample(seed=jax.random.key(2), sample_shape=(200,))
    assert samples.shape == (200, B, len(NVEC)) and samples.dtype == jnp.int32
    assert np.all(np.asarray(samples).max(axis=(0, 1)) == np.asarray(NVEC) - 1)
    assert np.all(np.asarray(samples) >= 0)
    # Mode: per-component argmax.
    want_mode = [np.argmax(flat[:, lo : lo + n], -1) for lo, n in zip((0, 3, 5), NVEC, strict=True)]
    np.testing.assert_array_equal(dist.mode(), np.stack(want_mode, -1))
    # Padding layout: component 1 (2 values) is padded in slots 2, 3.
    padded = np.asarray(multi_discrete_logits(jnp.asarray(flat, jnp.float32), NVEC))
    assert padded.shape == (B, 3, 4)
    np.testing.assert_array_equal(padded[:, 1, 2:], PAD_LOGIT)
    np.testing.assert_allclose(padded[:, 2, :], flat[:, 5:9], rtol=1e-6)
    # Gradients of the log-prob are finite (the padding does not make NaNs).
    grad = jax.grad(
        lambda x: (
            make_distribution(spec, x, None).log_prob(jnp.asarray(actions)).sum()
            + make_distribution(spec, x, None).entropy().sum()
        )
    )(jnp.asarray(flat, jnp.float32))
    assert np.all(np.isfinite(grad))


def test_multi_binary_matches_bernoulli_formula():
    spec = _spec("multi_binary", 5)
    logits = _normal(0, (B, 5))
    bits = np.asarray(jax.random.bernoulli(jax.random.key(1), 0.5, (B, 5))).astype(np.int32)
    dist = make_distribution(spec, jnp.asarray(logits, jnp.float32), None)
    assert dist.batch_shape == (B,) and dist.event_shape == (5,)
    # log p(b) = b log sigmoid(l) + (1 - b) log sigmoid(-l), summed over bits.
    want = np.sum(bits * log_expit(logits) + (1 - bits) * log_expit(-logits), -1)
    np.testing.assert_allclose(dist.log_prob(jnp.asarray(bits)), want, atol=1e-5)
    p = 1.0 / (1.0 + np.exp(-logits))
    want_h = np.sum(-(p * np.log(p) + (1 - p) * np.log1p(-p)), -1)
    np.testing.assert_allclose(dist.entropy(), want_h, atol=1e-5)
    sample = dist.sample(seed=jax.random.key(2))
    assert sample.dtype == jnp.int32 and set(np.unique(sample)) <= {0, 1}
    np.testing.assert_array_equal(dist.mode(), (logits > 0).astype(np.int32))


# --------------------------------------------------------------------- squashed Gaussian


def _squashed(seed, n=3, batch=B, loc_scale=1.5):
    loc = _normal(seed, (batch, n), loc_scale)
    scale = np.exp(_normal(seed + 1, (batch, n), 0.5))
    low = np.array([-2.0, 0.0, -0.5][:n])
    high = np.array([2.0, 1.0, 3.0][:n])
    return loc, scale, low, high


def test_squashed_log_prob_matches_distrax_tanh_transform():
    loc, scale, low, high = _squashed(0)
    dist = SquashedDiagGaussian(loc, scale, low, high)
    mid, half = (high + low) / 2, (high - low) / 2
    # Events: actions of pre-squash values |u| < 3 (the reference's atanh is exact there).
    u = np.clip(_normal(5, (B, 3), 1.5), -3, 3)
    actions = mid + half * np.tanh(u)
    reference = distrax.Transformed(
        distrax.MultivariateNormalDiag(jnp.asarray(loc), jnp.asarray(scale)),
        distrax.Block(
            distrax.Chain(
                [
                    distrax.ScalarAffine(shift=jnp.asarray(mid), scale=jnp.asarray(half)),
                    distrax.Tanh(),
                ]
            ),
            1,
        ),
    )
    got = dist.log_prob(jnp.asarray(actions, jnp.float32))
    np.testing.assert_allclose(got, reference.log_prob(jnp.asarray(actions)), rtol=2e-4, atol=2e-4)
    # Hand formula (SAC appendix C, eq. 21, plus the affine rescale), float64:
    # log N(u; loc, scale) - log(half) - log(1 - tanh(u)^2), summed over dims.
    log_n = -0.5 * ((u - loc) / scale) ** 2 - np.log(scale) - 0.5 * np.log(2 * np.pi)
    want = np.sum(log_n - np.log(half) - np.log(1 - np.tanh(u) ** 2), -1)
    np.testing.assert_allclose(got, want, rtol=2e-4, atol=2e-4)


def test_squashed_density_integrates_to_one():
    # One dimension, bounds [-2, 2]: the density of the env action integrates to 1, which
    # fails without the tanh correction or with a wrong affine term.
    for loc, scale in ((0.5, 0.8), (-1.0, 0.3), (2.0, 1.5)):
        dist = SquashedDiagGaussian(jnp.array([[loc]]), jnp.array([[scale]]), [-2.0], [2.0])
        a = np.linspace(-2.0, 2.0, 400_001)[1:-1]
        density = np.exp(np.asarray(dist.log_prob(jnp.asarray(a[:, None, None], jnp.float32))))
        assert abs(np.trapezoid(density[:, 0], a) - 1.0) < 2e-3, (loc, scale)


def test_squashed_entropy_matches_numerical_integration():
    loc, scale, low, high = _squashed(1, batch=16)
    dist = SquashedDiagGaussian(loc, scale, low, high)
    half = (high - low) / 2
    # H = -E[log pi(a)] = sum_i -int N(u) [log N(u) - log half_i - log(1 - tanh(u)^2)] du,
    # integrated over u on a fine grid (+-12 std).
    want = np.zeros(16)
    for b in range(16):
        for i in range(3):
            u = np.linspace(loc[b, i] - 12 * scale[b, i], loc[b, i] + 12 * scale[b, i], 200_001)
            log_n = (
                -0.5 * ((u - loc[b, i]) / scale[b, i]) ** 2
                - np.log(scale[b, i])
                - 0.5 * np.log(2 * np.pi)
            )
            log_det = np.log(half[i]) + 2 * (np.log(2) - u - np.logaddexp(0, -2 * u))
            want[b] += -np.trapezoid(np.exp(log_n) * (log_n - log_det), u)
    np.testing.assert_allclose(dist.entropy(), want, rtol=1e-4, atol=1e-4)


def test_squashed_sampling_bounds_and_saturation():
    loc, scale, low, high = _squashed(2)
    loc[:8] = 30.0  # tanh saturates in float32: actions on the upper bound
    loc[8:16] = -30.0
    dist = SquashedDiagGaussian(loc, scale, low, high)
    actions, log_prob = dist.sample_and_log_prob(seed=jax.random.key(0))
    assert np.all(actions >= low) and np.all(actions <= high)
    assert np.all(np.isfinite(log_prob))
    # The rollout's log-prob equals the update's recomputation from the stored action.
    np.testing.assert_array_equal(log_prob, dist.log_prob(actions))
    want_mode = (high + low) / 2 + (high - low) / 2 * np.tanh(loc)
    np.testing.assert_allclose(dist.mode(), want_mode, rtol=1e-6, atol=1e-6)
    # E[a] by quadrature vs a Monte Carlo mean of 20000 samples.
    mc = dist.sample(seed=jax.random.key(1), sample_shape=(20_000,)).mean(axis=0)
    np.testing.assert_allclose(dist.mean(), mc, atol=0.03)
    # The distribution crosses jit as a pytree.
    rebuilt = jax.jit(lambda d: d)(dist)
    np.testing.assert_array_equal(rebuilt.entropy(), dist.entropy())


def test_make_distribution_squash_uses_spec_bounds():
    spec = _spec("continuous", 3)
    mean, log_std = _normal(0, (B, 3)), _normal(1, (3,), 0.5)
    dist = make_distribution(
        spec, jnp.asarray(mean, jnp.float32), jnp.asarray(log_std, jnp.float32), squash=True
    )
    assert isinstance(dist, SquashedDiagGaussian)
    sample = dist.sample(seed=jax.random.key(0))
    assert np.all(sample >= spec.low) and np.all(sample <= spec.high)
    # to_env_action leaves squashed samples unchanged (clipping is a no-op inside the bounds).
    np.testing.assert_array_equal(to_env_action(spec, sample), sample)


@pytest.mark.parametrize(
    ("env_id", "dtype", "shape"),
    [
        ("CartPole-v1", jnp.int32, (7,)),
        ("Pendulum-v1", jnp.float32, (7, 1)),
        ("ProbeMultiDiscrete-v0", jnp.int32, (7, 3)),
        ("ProbeMultiBinary-v0", jnp.int32, (7, 4)),
    ],
)
def test_sampled_actions_step_the_env(env_id, dtype, shape):
    """Policy samples -> to_env_action -> env.step, for every head (7 envs)."""
    config = pjp.PPOConfig(env_name=env_id, hidden_sizes=(8,))
    env, env_params = pjp.make_env(env_id)
    _nets = pjp.make_networks(config, env, env_params)
    init, apply = _nets.init, _nets.apply
    obs, state = jax.vmap(env.reset, in_axes=(0, None))(
        jax.random.split(jax.random.key(0), 7), env_params
    )
    dist, value = apply(init(jax.random.key(1)), obs)
    sample, log_prob = dist.sample_and_log_prob(seed=jax.random.key(2))
    assert log_prob.shape == (7,) and value.shape == (7,)
    action = to_env_action(action_spec(env, env_params), sample)
    assert action.shape == shape and action.dtype == dtype
    space = env.action_space(env_params)
    assert all(bool(space.contains(a)) for a in action)
    _, _, reward, _, _, _ = jax.vmap(env.step, in_axes=(0, 0, 0, None))(
        jax.random.split(jax.random.key(3), 7), state, action, env_params
    )
    assert reward.shape == (7,)
