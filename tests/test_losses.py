"""PPO loss terms against hand-computed golden values."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from purejaxppo import ppo_loss

# Three samples. ratio = exp(log_prob - old_log_prob) = [1.5, 0.5, 1.0].
LOG_PROB = jnp.log(jnp.array([1.5, 0.5, 1.0]))
OLD_LOG_PROB = jnp.zeros(3)
ADV = jnp.array([1.0, -2.0, 0.5])
VALUE = jnp.array([1.0, 3.0, 1.0])
OLD_VALUE = jnp.array([0.5, 2.0, 1.0])
RETURNS = jnp.array([2.0, 2.5, 1.0])
ENTROPY = jnp.array([0.6, 0.8, 0.7])
COEFS = dict(clip_coef=0.2, vf_coef=0.5, ent_coef=0.01)


def loss(**kw):
    args = dict(norm_adv=False, clip_vloss=True, **COEFS)
    args.update(kw)
    return ppo_loss(LOG_PROB, OLD_LOG_PROB, ADV, VALUE, OLD_VALUE, RETURNS, ENTROPY, **args)


def test_golden_values_clipped():
    terms = jax.jit(lambda: loss())()
    # pg: max(-A r, -A clip(r, 0.8, 1.2)) per sample:
    #   s0: A=1,  r=1.5: max(-1.5, -1.2) = -1.2
    #   s1: A=-2, r=0.5: max( 1.0,  1.6) =  1.6
    #   s2: A=.5, r=1.0: max(-0.5, -0.5) = -0.5      mean = -0.1/3
    np.testing.assert_allclose(terms.pg_loss, -0.1 / 3, rtol=1e-6)
    # v: unclipped (V-G)^2 = [1, 0.25, 0];
    #    clipped V_old + clip(V - V_old, +-0.2) = [0.7, 2.2, 1.0] -> (.-G)^2 = [1.69, 0.09, 0]
    #    max = [1.69, 0.25, 0];  0.5 * mean = 0.5 * 1.94 / 3
    np.testing.assert_allclose(terms.v_loss, 0.5 * 1.94 / 3, rtol=1e-6)
    np.testing.assert_allclose(terms.entropy, 0.7, rtol=1e-6)
    # loss = pg - 0.01 * 0.7 + 0.5 * v
    np.testing.assert_allclose(terms.loss, -0.1 / 3 - 0.007 + 0.5 * 0.5 * 1.94 / 3, rtol=1e-6)
    # approx_kl = mean((r - 1) - log r) = mean(0.5 - ln 1.5, -0.5 + ln 2, 0)
    kl = ((0.5 - math.log(1.5)) + (-0.5 + math.log(2.0))) / 3
    np.testing.assert_allclose(terms.approx_kl, kl, rtol=1e-5)
    # clipfrac: |r - 1| > 0.2 for samples 0 and 1.
    np.testing.assert_allclose(terms.clipfrac, 2 / 3, rtol=1e-6)


def test_golden_value_unclipped_vloss():
    terms = loss(clip_vloss=False)
    np.testing.assert_allclose(terms.v_loss, 0.5 * (1.0 + 0.25 + 0.0) / 3, rtol=1e-6)


def test_critic_only_loss():
    terms = loss(actor_coef=0.0)
    np.testing.assert_allclose(terms.loss, 0.5 * 0.5 * 1.94 / 3, rtol=1e-6)
    # The policy terms are still reported.
    np.testing.assert_allclose(terms.pg_loss, -0.1 / 3, rtol=1e-6)


def test_norm_adv_normalises_within_minibatch():
    terms = loss(norm_adv=True)
    a = np.array(ADV)
    a = (a - a.mean()) / (a.std() + 1e-8)
    r = np.array([1.5, 0.5, 1.0])
    expected = np.maximum(-a * r, -a * np.clip(r, 0.8, 1.2)).mean()
    np.testing.assert_allclose(terms.pg_loss, expected, rtol=1e-5)


def test_gradient_is_zero_outside_clip_region():
    # Outside the trust region in the direction the advantage pushes, the objective is flat.
    def pg(lp):
        return ppo_loss(
            lp,
            OLD_LOG_PROB,
            ADV,
            VALUE,
            OLD_VALUE,
            RETURNS,
            ENTROPY,
            norm_adv=False,
            clip_vloss=True,
            **COEFS,
        ).pg_loss

    grad = jax.grad(pg)(LOG_PROB)
    assert grad[0] == 0.0  # s0: A>0, r=1.5 above 1+eps: clipped term is the max, flat
    assert grad[1] == 0.0  # s1: A<0, r=0.5 below 1-eps: clipped term (1.6) is the max, flat
    np.testing.assert_allclose(grad[2], -0.5 / 3, rtol=1e-6)  # d/dlp (-A e^lp)/3 at r=1


@pytest.mark.parametrize("clip_vloss", [True, False])
def test_jit_and_vmap_agree(clip_vloss):
    def f(scale):
        return loss(clip_vloss=clip_vloss, clip_coef=0.2 * scale).loss

    scales = jnp.array([0.5, 1.0, 2.0])
    np.testing.assert_allclose(jax.vmap(f)(scales), [jax.jit(f)(s) for s in scales], rtol=1e-6)
