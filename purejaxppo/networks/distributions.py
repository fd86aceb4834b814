"""Action distributions, action masks, env-action conversion and action selection.

The one place that turns actor outputs into actions, used by the rollout, `Policy`,
`evaluate` and (mirrored in torch) the export:

* `make_distribution(spec, actor_out, log_std, squash, mask)`: the distrax distribution
  of a batch of actor outputs (`Discrete(n)`: Categorical over logits `[..., n]`; `Box`:
  MultivariateNormalDiag(mean, exp(log_std)) or `SquashedDiagGaussian`; MultiDiscrete:
  Independent(Categorical) over `multi_discrete_logits`; MultiBinary:
  Independent(Bernoulli)).
* `apply_action_mask`: invalid-action masking (Huang & Ontanon 2020, arXiv:2006.14171).
* `to_env_action`: a policy sample -> what `env.step` takes.
* `select_action(spec, dist, key, temperature)`: sampled (temperature 1), sharpened
  (0 < T < 1) or greedy (T = 0) actions with the model outputs `Policy.act` returns.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import distrax
import jax
import jax.numpy as jnp
import numpy as np

from purejaxppo.networks.specs import ActionSpec

#: Logit of impossible categories (masked actions, MultiDiscrete padding): exp(-1e9 -
#: logsumexp) is exactly 0 in float32, so they are never sampled and add 0 to the
#: entropy (finite, so no inf - inf in gradients).
PAD_LOGIT = -1e9


def apply_action_mask(actor_out: jax.Array, mask: jax.Array) -> jax.Array:
    """Invalid-action masking: logits `[..., A]` with `PAD_LOGIT` where `mask` is False.

    Args:
      actor_out: float32 logits `[..., A]` (Discrete: A = n; MultiDiscrete: the flat
        `[..., sum(nvec)]` logits, before `multi_discrete_logits`).
      mask: valid actions `[..., A]`, bool or 0/1 of any dtype (nonzero = valid).

    exp(-1e9 - logsumexp) is exactly 0 in float32, so masked actions are never sampled;
    the logit is finite, so entropies and gradients stay finite (Huang & Ontanon 2020,
    "A Closer Look at Invalid Action Masking in Policy Gradient Algorithms").
    """
    return jnp.where(jnp.asarray(mask) != 0, actor_out, PAD_LOGIT)


def _gauss_hermite(num_points: int = 64) -> tuple[np.ndarray, np.ndarray]:
    """Nodes z and weights w with sum_j w_j f(z_j) ~= E[f(Z)], Z ~ N(0, 1)."""
    nodes, weights = np.polynomial.hermite_e.hermegauss(num_points)
    return nodes.astype(np.float32), (weights / math.sqrt(2.0 * math.pi)).astype(np.float32)


_GH_NODES, _GH_WEIGHTS = _gauss_hermite()


def _log_one_minus_tanh_sq(u: jax.Array) -> jax.Array:
    """log(1 - tanh(u)^2) = 2 (log 2 - u - softplus(-2u)), stable for large |u|."""
    return 2.0 * (math.log(2.0) - u - jax.nn.softplus(-2.0 * u))


class SquashedDiagGaussian(distrax.Distribution):
    """Diagonal Gaussian squashed by tanh and rescaled to the action bounds.

        u ~ N(loc, diag(scale^2)),   a = mid + half * tanh(u)
        mid = (high + low) / 2,      half = (high - low) / 2

    Events are the actions `a` `[B, A]` inside the bounds, as the env takes them. By the
    change of variables (Haarnoja et al. 2018, arXiv:1801.01290, appendix C, eq. 21, with
    the affine rescaling added):

        log pi(a) = sum_i [ log N(u_i; loc_i, scale_i) - log half_i - log(1 - tanh(u_i)^2) ]

    with u = atanh((a - mid) / half). `(a - mid) / half` is clipped to
    [-1 + 1e-6, 1 - 1e-6] first, so actions on the bounds (a tanh saturated in float32,
    |u| > ~9) have a finite log-prob; sampling and `log_prob` go through the same
    computation from `a`, so the rollout's and the update's log-probs agree exactly.
    `entropy()` = sum_i [ 0.5 log(2 pi e scale_i^2) + log half_i + E[log(1 - tanh(u_i)^2)] ]
    with the expectation by 64-point Gauss-Hermite quadrature (deterministic, smooth).
    `mode()` is the squashed Gaussian mean `mid + half * tanh(loc)`, the usual
    deterministic action (SAC), not the exact mode of the squashed density.

    Args:
      loc: float32 `[B, A]`, the pre-squash Gaussian mean.
      scale_diag: float32 `[B, A]`, its standard deviations (> 0).
      low, high: float32 `[A]` finite action bounds, low < high.
    """

    def __init__(self, loc: jax.Array, scale_diag: jax.Array, low: Any, high: Any):
        super().__init__()
        self._loc = jnp.asarray(loc, jnp.float32)
        self._scale_diag = jnp.asarray(scale_diag, jnp.float32)
        low = jnp.asarray(low, jnp.float32)
        high = jnp.asarray(high, jnp.float32)
        self._mid = (high + low) / 2.0
        self._half = (high - low) / 2.0

    @property
    def loc(self) -> jax.Array:
        """Pre-squash mean `[B, A]`."""
        return self._loc

    @property
    def scale_diag(self) -> jax.Array:
        """Pre-squash standard deviations `[B, A]`."""
        return self._scale_diag

    @property
    def event_shape(self) -> tuple[int, ...]:
        return self._loc.shape[-1:]

    @property
    def batch_shape(self) -> tuple[int, ...]:
        return self._loc.shape[:-1]

    def squash(self, u: jax.Array) -> jax.Array:
        """Pre-squash values `[..., A]` -> actions `mid + half * tanh(u)`."""
        return self._mid + self._half * jnp.tanh(u)

    def _sample_n(self, key: jax.Array, n: int) -> jax.Array:
        noise = jax.random.normal(key, (n, *self._loc.shape), jnp.float32)
        return self.squash(self._loc + self._scale_diag * noise)

    def log_prob(self, value: jax.Array) -> jax.Array:
        y = jnp.clip((value - self._mid) / self._half, -1.0 + 1e-6, 1.0 - 1e-6)
        u = jnp.arctanh(y)
        z = (u - self._loc) / self._scale_diag
        log_normal = -0.5 * jnp.square(z) - jnp.log(self._scale_diag) - 0.5 * math.log(2 * math.pi)
        log_det = jnp.log(self._half) + _log_one_minus_tanh_sq(u)
        return jnp.sum(log_normal - log_det, axis=-1)

    def entropy(self) -> jax.Array:
        u = self._loc[..., None] + self._scale_diag[..., None] * _GH_NODES  # [B, A, P]
        expected_log_det = jnp.sum(_log_one_minus_tanh_sq(u) * _GH_WEIGHTS, axis=-1)
        gaussian = 0.5 * math.log(2 * math.pi * math.e) + jnp.log(self._scale_diag)
        return jnp.sum(gaussian + jnp.log(self._half) + expected_log_det, axis=-1)

    def mean(self) -> jax.Array:
        """E[a] `[B, A]` by 64-point Gauss-Hermite quadrature."""
        u = self._loc[..., None] + self._scale_diag[..., None] * _GH_NODES
        return self._mid + self._half * jnp.sum(jnp.tanh(u) * _GH_WEIGHTS, axis=-1)

    def mode(self) -> jax.Array:
        return self.squash(self._loc)


def multi_discrete_logits(actor_out: jax.Array, nvec: Sequence[int]) -> jax.Array:
    """Splits flat logits `[B, sum(nvec)]` into `[B, K, max(nvec)]` (padding `PAD_LOGIT`).

    Component k takes logits `actor_out[:, sum(nvec[:k]) : sum(nvec[:k+1])]`.
    """
    nvec = tuple(int(n) for n in nvec)
    width = max(nvec)
    offsets = np.cumsum((0, *nvec[:-1]))
    index = np.zeros((len(nvec), width), np.int32)
    valid = np.zeros((len(nvec), width), bool)
    for k, (offset, n) in enumerate(zip(offsets, nvec, strict=True)):
        index[k, :n] = offset + np.arange(n)
        valid[k, :n] = True
    if valid.all():
        return actor_out.reshape((*actor_out.shape[:-1], len(nvec), width))
    return jnp.where(valid, actor_out[..., index], PAD_LOGIT)


def make_distribution(
    spec: ActionSpec,
    actor_out: jax.Array,
    log_std: jax.Array | None,
    squash: bool = False,
    mask: jax.Array | None = None,
) -> distrax.Distribution:
    """The action distribution of a batch `[B]` of actor outputs `[B, spec.num_actions]`.

    Categorical(logits) for Discrete; MultivariateNormalDiag(mean, exp(log_std)) for Box,
    or `SquashedDiagGaussian` with `squash`; Independent(Categorical) over the
    `multi_discrete_logits` for MultiDiscrete (event `[K]` int32); Independent(Bernoulli)
    for MultiBinary (event `[n]` int32). `mask` `[B, spec.num_actions]` (Discrete and
    MultiDiscrete only) zeroes the probability of invalid actions (`apply_action_mask`).
    """
    kind = spec.kind
    if mask is not None:
        actor_out = apply_action_mask(actor_out, mask)
    if kind == "discrete":
        return distrax.Categorical(logits=actor_out)
    if kind == "multi_discrete":
        logits = multi_discrete_logits(actor_out, spec.nvec)
        return distrax.Independent(distrax.Categorical(logits=logits), 1)
    if kind == "multi_binary":
        return distrax.Independent(distrax.Bernoulli(logits=actor_out, dtype=jnp.int32), 1)
    scale = jnp.broadcast_to(jnp.exp(log_std), actor_out.shape)
    if squash:
        low = np.asarray(spec.low, np.float32).reshape(-1)
        high = np.asarray(spec.high, np.float32).reshape(-1)
        return SquashedDiagGaussian(actor_out, scale, low, high)
    return distrax.MultivariateNormalDiag(loc=actor_out, scale_diag=scale)


def to_env_action(spec: ActionSpec, action: jax.Array) -> jax.Array:
    """Policy sample -> what the env takes, for a batch of N actions.

    Discrete `[N]` -> int32 `[N]`; MultiDiscrete `[N, K]` / MultiBinary `[N, n]` -> int32
    `[N, *action_shape]`; Box `[N, A]` -> float32 `[N, *action_shape]` clipped to the
    bounds (a no-op for squashed-Gaussian samples, already inside them).
    """
    if spec.discrete:
        return action.astype(jnp.int32)
    action = action.reshape((action.shape[0], *spec.shape))
    if spec.kind in ("multi_discrete", "multi_binary"):
        return action.astype(jnp.int32)
    return jnp.clip(action, spec.low, spec.high)


def select_action(
    spec: ActionSpec,
    dist: distrax.Distribution,
    value: jax.Array,
    key: jax.Array,
    temperature: jax.typing.ArrayLike,
) -> tuple[jax.Array, dict[str, jax.Array]]:
    """Env actions `[B, ...]` and model outputs for a batch `[B]` of distributions.

    temperature 1 samples from the policy, 0 takes the argmax (discrete, per component
    for MultiDiscrete, logit > 0 per bit for MultiBinary) / the mean (continuous; with
    `squash_actions` the squashed pre-tanh mean); in between it sharpens (logits / T) or
    narrows (std * T, before squashing). Continuous actions are clipped to (or squashed
    into) the bounds, as `to_env_action` makes them.

    Returns:
      `(actions, outputs)`: outputs hold `value` `[B]` and either `logits` (normalised
      log-probabilities `[B, n]` / `[B, K, max n]`, or Bernoulli logits `[B, n]`) or
      `mean` and `log_std` `[B, A]` of the (pre-squash) Gaussian.
    """
    kind = spec.kind
    if kind in ("discrete", "multi_discrete", "multi_binary"):
        logits = dist.logits if kind == "discrete" else dist.distribution.logits
        scaled = logits / jnp.maximum(temperature, 1e-8)
        if kind == "multi_binary":
            greedy = (logits > 0).astype(jnp.int32)
            sampled = jax.random.bernoulli(key, jax.nn.sigmoid(scaled)).astype(jnp.int32)
        else:
            greedy = jnp.argmax(logits, axis=-1)
            sampled = jax.random.categorical(key, scaled, axis=-1)
        action = jnp.where(temperature > 0, sampled, greedy)
        outputs = {"logits": logits, "value": value}
    elif isinstance(dist, SquashedDiagGaussian):
        mean, std = dist.loc, dist.scale_diag
        noise = jax.random.normal(key, mean.shape)
        action = dist.squash(mean + temperature * std * noise)
        outputs = {"mean": mean, "log_std": jnp.log(std), "value": value}
    else:
        mean, std = dist.mean(), dist.stddev()
        noise = jax.random.normal(key, mean.shape)
        action = mean + temperature * std * noise
        outputs = {"mean": mean, "log_std": jnp.log(std), "value": value}
    return to_env_action(spec, action), outputs
