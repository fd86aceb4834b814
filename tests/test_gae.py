"""GAE against a plain-Python reference loop, and the lambda = 1 identity."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from purejaxppo import gae_advantages


def reference_gae(rewards, values, next_values, terminated, truncated, gamma, lam):
    """Plain-Python GAE, written independently of the library, one step at a time."""
    T = len(rewards)
    advantages = [0.0] * T
    running = 0.0
    for t in reversed(range(T)):
        if terminated[t]:
            bootstrap = 0.0  # the MDP ended: no value after it
        else:
            bootstrap = next_values[t]  # V(s'_t), also for truncated steps
        delta = rewards[t] + gamma * bootstrap - values[t]
        if terminated[t] or truncated[t]:
            running = delta  # the next buffer entry is another episode
        else:
            running = delta + gamma * lam * running
        advantages[t] = running
    returns = [a + v for a, v in zip(advantages, values, strict=True)]
    return np.array(advantages), np.array(returns)


def random_sequence(seed, T=40):
    rng = np.random.default_rng(seed)
    rewards = rng.normal(size=T).astype(np.float32)
    values = rng.normal(size=T).astype(np.float32)
    next_values = rng.normal(size=T).astype(np.float32)
    terminated = rng.random(T) < 0.15
    truncated = (rng.random(T) < 0.15) & ~terminated
    # Make sure the last step of the rollout and both kinds of ending are covered.
    terminated[5], truncated[6] = True, True
    return rewards, values, next_values, terminated, truncated


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("last", ["terminated", "truncated", "running"])
@pytest.mark.parametrize("gamma, lam", [(0.99, 0.95), (0.9, 0.0), (1.0, 1.0)])
def test_matches_reference_loop(seed, last, gamma, lam):
    r, v, nv, term, trunc = random_sequence(seed)
    term[-1], trunc[-1] = last == "terminated", last == "truncated"
    adv, ret = jax.jit(gae_advantages)(r, v, nv, term, trunc, gamma, lam)
    ref_adv, ref_ret = reference_gae(r, v, nv, term, trunc, gamma, lam)
    np.testing.assert_allclose(adv, ref_adv, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(ret, ref_ret, rtol=1e-5, atol=1e-5)


def test_lambda_one_is_discounted_return_minus_value():
    # One episode, no endings: with lambda = 1, A_t = sum_k gamma^k r_{t+k}
    # + gamma^(T-t) V(s_T) - V(s_t), and returns are the bootstrapped MC returns.
    T, gamma = 10, 0.9
    rng = np.random.default_rng(0)
    r = rng.normal(size=T).astype(np.float32)
    v = rng.normal(size=T).astype(np.float32)
    v_last = np.float32(0.7)
    nv = np.append(v[1:], v_last)
    no = np.zeros(T, bool)
    adv, ret = gae_advantages(r, v, nv, no, no, gamma, 1.0)
    mc = [
        sum(gamma**k * r[t + k] for k in range(T - t)) + gamma ** (T - t) * v_last for t in range(T)
    ]
    np.testing.assert_allclose(ret, mc, rtol=1e-5)
    np.testing.assert_allclose(adv, np.array(mc) - v, rtol=1e-5, atol=1e-5)


def test_golden_two_steps():
    r, v, nv = jnp.array([1.0, 2.0]), jnp.array([0.5, 1.0]), jnp.array([1.0, 3.0])
    no, at0, at1 = jnp.array([False, False]), jnp.array([True, False]), jnp.array([False, True])
    # gamma = 0.5, lambda = 0.5, no endings:
    # delta_1 = 2 + 0.5*3 - 1 = 2.5;    A_1 = 2.5
    # delta_0 = 1 + 0.5*1 - 0.5 = 1.0;  A_0 = 1.0 + 0.5*0.5*2.5 = 1.625;  G = A + V
    adv, ret = gae_advantages(r, v, nv, no, no, 0.5, 0.5)
    np.testing.assert_allclose(adv, [1.625, 2.5])
    np.testing.assert_allclose(ret, [2.125, 3.5])
    # Terminated at step 1: delta_1 = 2 - 1 = 1;  A_0 = 1.0 + 0.25*1 = 1.25.
    adv, _ = gae_advantages(r, v, nv, at1, no, 0.5, 0.5)
    np.testing.assert_allclose(adv, [1.25, 1.0])
    # Truncated at step 1: delta_1 still bootstraps V(s'_1) = 3 -> 2.5; A_0 = 1.625.
    adv, _ = gae_advantages(r, v, nv, no, at1, 0.5, 0.5)
    np.testing.assert_allclose(adv, [1.625, 2.5])
    # Truncated at step 0: A_0 = delta_0 = 1.0 (bootstraps V(s'_0) = 1, trace cut).
    adv, _ = gae_advantages(r, v, nv, no, at0, 0.5, 0.5)
    np.testing.assert_allclose(adv, [1.0, 2.5])
    # Terminated at step 0: A_0 = 1 - 0.5 = 0.5.
    adv, _ = gae_advantages(r, v, nv, at0, no, 0.5, 0.5)
    np.testing.assert_allclose(adv, [0.5, 2.5])


def test_vmap_over_envs_equals_loop():
    seqs = [random_sequence(s) for s in range(4)]
    stacked = [np.stack([s[i] for s in seqs], axis=1) for i in range(5)]  # [T, N]
    adv, _ = jax.vmap(gae_advantages, in_axes=(1, 1, 1, 1, 1, None, None), out_axes=1)(
        *stacked, 0.99, 0.95
    )
    for n, s in enumerate(seqs):
        np.testing.assert_allclose(
            adv[:, n], reference_gae(*s, 0.99, 0.95)[0], rtol=1e-5, atol=1e-5
        )


def test_rejects_batched_input():
    x = jnp.zeros((3, 2))
    with pytest.raises(AssertionError):
        gae_advantages(x, x, x, x > 0, x > 0, 0.99, 0.95)
