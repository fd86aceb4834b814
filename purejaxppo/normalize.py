"""Observation and reward normalisation by running statistics.

The statistics are non-trainable collections of the params tree, next to flax's
`"params"`, so that everything that holds a policy's params (checkpoints, `Policy`,
`evaluate`, PBT copies, the export) holds its statistics too:

- `params["obs_norm"] = {"count": f32[], "mean": {name: [*shape]}, "var": {name: ...}}`,
  one entry per normalised observation leaf (`"obs"` for an array observation, the key
  of a dict / the index of a tuple observation);
- `params["reward_norm"] = {"count": f32[], "mean": f32[], "var": f32[]}`, statistics of
  the discounted return.

`with_normalization(networks, ...)` wraps a `Networks` so that `step` / `unroll` /
`apply` take RAW observations and normalise them with `params["obs_norm"]` (under
`stop_gradient`: the optimizer sees zero gradients for the statistics, so Adam leaves
them bitwise unchanged). The training update refreshes the statistics after its epochs
from the rollout's observations (`update_obs_stats`), so the rollout, the bootstrap
values and every epoch of an update see the same normalisation. With
`normalize_timing: "step"` (SB3's `VecNormalize` timing) the rollout moves them at every
step and stores the normalised observations (`rollout.make_normalizing_rollout`), and
the update learns on those through `normalized_inputs(networks)`.

Running moments: Welford's update in the pairwise form of Chan, Golub & LeVeque (1979):
merging (n_a, mean_a, var_a) with a batch (n_b, mean_b, var_b) gives
n = n_a + n_b, mean = mean_a + d n_b / n, var = (var_a n_a + var_b n_b + d^2 n_a n_b / n) / n
with d = mean_b - mean_a. Over devices the batch moments merge exactly the same way
(`batch_moments(..., axis_name)`). The prior is mean 0, var 1, count 1e-4 (as gymnasium's
`RunningMeanStd`). Counts are float32 (exact up to 2**24 samples, then rounded to
relative 6e-8, which changes the merge weights by as little).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from purejaxppo.collectives import merged_moments
from purejaxppo.types import Params

PRIOR_COUNT = 1e-4  # gymnasium RunningMeanStd's epsilon
VAR_EPS = 1e-8  # under the square root, as gymnasium / CleanRL
COLLECTIONS = ("obs_norm", "reward_norm")


class Moments(NamedTuple):
    """Count (float32 scalar), mean and (population) variance of samples."""

    count: jax.Array
    mean: Any
    var: Any


def prior(example: Any) -> Moments:
    """Mean 0, variance 1, count `PRIOR_COUNT`, shaped like `example` (a pytree)."""
    return Moments(
        count=jnp.float32(PRIOR_COUNT),
        mean=jax.tree.map(lambda x: jnp.zeros(jnp.shape(x), jnp.float32), example),
        var=jax.tree.map(lambda x: jnp.ones(jnp.shape(x), jnp.float32), example),
    )


def batch_moments(x: Any, axis_name: str | None = None) -> Moments:
    """Moments over the leading axis of every leaf of `x` (`[B, *shape]` -> `[*shape]`).

    With `axis_name` (inside `shard_map` / `pmap`, every device with the same B), the
    moments of all devices' samples together (`collectives.merged_moments`): mean =
    mean_i(mean_i), var = mean_i(var_i) + mean_i((mean_i - mean)^2) (the exact parallel
    merge), in one all-reduce.
    """
    leaves = jax.tree.leaves(x)
    size = leaves[0].shape[0]
    x = jax.tree.map(lambda v: jnp.asarray(v, jnp.float32), x)
    mean = jax.tree.map(lambda v: jnp.mean(v, axis=0), x)
    var = jax.tree.map(lambda v, m: jnp.mean(jnp.square(v - m), axis=0), x, mean)
    count = jnp.float32(size)
    if axis_name is not None:  # one all-reduce
        mean, var = merged_moments(mean, var, axis_name)
        count = count * jax.lax.axis_size(axis_name)
    return Moments(count=count, mean=mean, var=var)


def merge(a: Moments, b: Moments) -> Moments:
    """The moments of the union of two sample sets (Chan et al. 1979)."""
    count = a.count + b.count
    wb = b.count / count
    delta = jax.tree.map(jnp.subtract, b.mean, a.mean)
    mean = jax.tree.map(lambda m, d: m + d * wb, a.mean, delta)
    var = jax.tree.map(
        lambda va, vb, d: (va * a.count + vb * b.count + jnp.square(d) * a.count * wb) / count,
        a.var,
        b.var,
        delta,
    )
    return Moments(count=count, mean=mean, var=var)


def scale(var: jax.Array) -> jax.Array:
    """1 / sqrt(var + 1e-8)."""
    return jax.lax.rsqrt(var + VAR_EPS)


# --------------------------------------------------------------------- observations
def obs_leaves(obs_example: Any, mask_key: str | None = None) -> dict[str, str | int | None]:
    """Which observation leaves are normalised: name -> key into the observation.

    An array observation is normalised whole (name "obs", key None), an integer or bool
    one too (cast to float32, per element: a symbolic grid, rejax's `FloatObsWrapper` +
    `normalize_observations`); not a scalar integer (a `Discrete` index, one-hot
    encoded). Of a dict / tuple observation, the floating-point VECTOR entries (`[D]` per
    env; images, integer grids and the action mask are left alone).

    Args:
      obs_example: one observation without a batch axis (arrays or ShapeDtypeStructs).

    Raises:
      ValueError: if no leaf qualifies.
    """
    if isinstance(obs_example, dict):
        items = [(str(k), k, v) for k, v in obs_example.items() if k != mask_key]
    elif isinstance(obs_example, (tuple, list)):
        items = [(str(i), i, v) for i, v in enumerate(obs_example)]
    else:
        if jnp.issubdtype(obs_example.dtype, jnp.floating) or len(obs_example.shape) >= 1:
            return {"obs": None}
        raise ValueError(
            f"normalize_observations=True: the observation is a {obs_example.dtype} scalar "
            f"(a Discrete index, one-hot encoded), not an array; nothing to normalise"
        )
    chosen = {
        name: key
        for name, key, v in items
        if jnp.issubdtype(v.dtype, jnp.floating) and len(v.shape) == 1
    }
    if not chosen:
        found = {name: f"{v.dtype}{list(v.shape)}" for name, _, v in items}
        raise ValueError(
            "normalize_observations=True: the observation has no floating-point vector "
            f"entries to normalise (entries: {found})"
        )
    return chosen


def _pick(obs: Any, leaves: dict[str, Any]) -> dict[str, jax.Array]:
    return {name: obs if key is None else obs[key] for name, key in leaves.items()}


def init_obs_stats(obs_example: Any, leaves: dict[str, Any]) -> dict[str, Any]:
    """The `obs_norm` collection at the prior (see the module docstring)."""
    moments = prior(_pick(obs_example, leaves))
    return {"count": moments.count, "mean": moments.mean, "var": moments.var}


def normalize_obs(stats: dict[str, Any], obs: Any, leaves: dict[str, Any], clip: float) -> Any:
    """`clip((x - mean) / sqrt(var + 1e-8), -clip, clip)` (float32) for the normalised
    leaves of `obs` (any leading axes); the other leaves unchanged."""
    stats = jax.lax.stop_gradient(stats)

    def norm(x: jax.Array, name: str) -> jax.Array:
        y = (jnp.asarray(x, jnp.float32) - stats["mean"][name]) * scale(stats["var"][name])
        return jnp.clip(y, -clip, clip)

    if list(leaves) == ["obs"] and leaves["obs"] is None:
        return norm(obs, "obs")
    out = dict(obs) if isinstance(obs, dict) else list(obs)
    for name, key in leaves.items():
        out[key] = norm(obs[key], name)
    return out if isinstance(obs, dict) else type(obs)(out)


def update_obs_stats(
    stats: dict[str, Any], obs: Any, leaves: dict[str, Any], axis_name: str | None = None
) -> dict[str, Any]:
    """`stats` merged with the moments of `obs` (`[..., *shape]`: all leading axes are
    samples, e.g. a rollout's `[T, N]`), over all devices of `axis_name`."""
    picked = _pick(obs, leaves)
    ndim = {name: len(stats["mean"][name].shape) for name in picked}
    flat = {name: x.reshape((-1, *x.shape[x.ndim - ndim[name] :])) for name, x in picked.items()}
    merged = merge(
        Moments(stats["count"], stats["mean"], stats["var"]), batch_moments(flat, axis_name)
    )
    return {"count": merged.count, "mean": merged.mean, "var": merged.var}


# --------------------------------------------------------------------- rewards
def init_reward_stats() -> dict[str, jax.Array]:
    """The `reward_norm` collection at the prior."""
    moments = prior(jnp.zeros(()))
    return {"count": moments.count, "mean": moments.mean, "var": moments.var}


def normalize_rewards(
    stats: dict[str, jax.Array],
    discounted_return: jax.Array,
    reward: jax.Array,
    done: jax.Array,
    gamma: jax.Array,
    clip: float,
    axis_name: str | None = None,
    per_step: bool = False,
) -> tuple[dict[str, jax.Array], jax.Array, jax.Array]:
    """Scales a rollout's rewards by the running std of the discounted return.

    As gymnasium's / CleanRL's `NormalizeReward`: per env the discounted return
    G_t = gamma G_{t-1} + r_t (restarting after an episode ends, `done`), its running
    variance over all G_t, and r_t / sqrt(var + 1e-8) clipped to +-clip. Here the
    variance is updated once per rollout with all its T*N returns (over all devices of
    `axis_name`), and that updated variance scales the whole rollout. With `per_step`
    (`normalize_timing: "step"`, as SB3's `VecNormalize`), it is updated at every step
    with that step's N returns, and the variance after step t scales r_t.

    Args:
      stats: the `reward_norm` collection.
      discounted_return: `[N]` float32 G of every env before the rollout.
      reward, done: `[T, N]` raw rewards and episode ends (terminated | truncated).
      gamma: discount (float32 scalar).

    Returns:
      `(new stats, G after the rollout [N], scaled rewards [T, N] float32)`.
    """

    prior_moments = Moments(stats["count"], stats["mean"], stats["var"])
    if per_step:

        def step(carry, inputs):
            g, moments = carry
            r, d = inputs
            g = gamma * g + r
            moments = merge(moments, batch_moments(g, axis_name))
            scaled = jnp.clip(r * scale(moments.var), -clip, clip)
            return (jnp.where(d, 0.0, g), moments), scaled

        (last, merged), scaled = jax.lax.scan(
            step, (discounted_return, prior_moments), (reward, done)
        )
        return {"count": merged.count, "mean": merged.mean, "var": merged.var}, last, scaled

    def body(g, inputs):
        r, d = inputs
        g = gamma * g + r
        return jnp.where(d, 0.0, g), g

    last, returns = jax.lax.scan(body, discounted_return, (reward, done))
    merged = merge(prior_moments, batch_moments(returns.reshape(-1), axis_name))
    new_stats = {"count": merged.count, "mean": merged.mean, "var": merged.var}
    scaled = jnp.clip(reward * scale(merged.var), -clip, clip)
    return new_stats, last, scaled


# --------------------------------------------------------------------- networks
def split_params(params: Params) -> tuple[Params, dict[str, Any]]:
    """`(the params without the statistics collections, the statistics)`."""
    if not isinstance(params, dict):
        return params, {}
    stats = {k: params[k] for k in COLLECTIONS if k in params}
    if not stats:
        return params, {}
    return {k: v for k, v in params.items() if k not in COLLECTIONS}, stats


def with_normalization(
    networks: Any,
    obs_example: Any,
    *,
    observations: bool,
    rewards: bool,
    obs_clip: float = 10.0,
    mask_key: str | None = None,
) -> Any:
    """`networks` taking raw observations: init adds the `obs_norm` / `reward_norm`
    collections to the params, step / unroll / apply normalise the observations with
    `params["obs_norm"]` and hand the inner networks their own params.

    Args:
      networks: a `Networks` whose `init` returns a dict (flax variables).
      obs_example: one observation without a batch axis (arrays or ShapeDtypeStructs).
      observations / rewards: which statistics to keep.
      obs_clip: observation clip bound.
      mask_key: the action-mask entry of dict observations (never normalised).

    Raises:
      ValueError: `observations` with no observation leaf to normalise (`obs_leaves`).
    """
    leaves = obs_leaves(obs_example, mask_key) if observations else {}
    inner = networks

    def prepare(params: Params, obs: Any) -> tuple[Params, Any]:
        own, stats = split_params(params)
        if observations:
            obs = normalize_obs(stats["obs_norm"], obs, leaves, obs_clip)
        return own, obs

    def init(key: jax.Array) -> Params:
        params = inner.init(key)
        if not isinstance(params, dict):
            raise ValueError(
                "normalize_observations / normalize_rewards need networks whose init "
                f"returns a dict of collections, got {type(params).__name__}"
            )
        params = dict(params)
        if observations:
            params["obs_norm"] = init_obs_stats(obs_example, leaves)
        if rewards:
            params["reward_norm"] = init_reward_stats()
        return params

    def step(params, state, obs, reset):
        own, obs = prepare(params, obs)
        return inner.step(own, state, obs, reset)

    def unroll(params, state, obs, resets):
        own, obs = prepare(params, obs)
        return inner.unroll(own, state, obs, resets)

    def apply(params, obs):
        own, obs = prepare(params, obs)
        return inner.apply(own, obs)

    settings = NormSettings(observations, rewards, float(obs_clip), leaves, inner)
    return networks._replace(
        init=init, step=step, unroll=unroll, apply=apply, normalization=settings
    )


class NormSettings(NamedTuple):
    """What a wrapped `Networks` normalises (`Networks.normalization`)."""

    observations: bool
    rewards: bool
    obs_clip: float
    leaves: dict[str, Any]  # normalised observation leaf name -> key (None: the array)
    inner: Any = None  # the wrapped `Networks`, which take normalised observations


def normalized_inputs(networks: Any) -> Any:
    """`networks` (wrapped by `with_normalization`) taking observations that are already
    normalised: step / unroll / apply hand the inner networks their own params and the
    observations as they come (`normalize_timing: "step"` stores the normalised
    observations in the rollout, and the update learns on them). `networks` itself when
    it does not normalise observations."""
    settings = networks.normalization
    if settings is None or not settings.observations:
        return networks
    inner = settings.inner

    def step(params, state, obs, reset):
        return inner.step(split_params(params)[0], state, obs, reset)

    def unroll(params, state, obs, resets):
        return inner.unroll(split_params(params)[0], state, obs, resets)

    def apply(params, obs):
        return inner.apply(split_params(params)[0], obs)

    return networks._replace(step=step, unroll=unroll, apply=apply)


def numpy_stats(params: Params) -> dict[str, Any] | None:
    """The `obs_norm` collection as NumPy float32 arrays (for the export), or None."""
    _, stats = split_params(params)
    if "obs_norm" not in stats:
        return None
    return jax.tree.map(lambda x: np.asarray(x, np.float32), stats["obs_norm"])
