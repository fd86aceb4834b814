"""PBT's search space and its operators: selection (exploit) and mutation (explore),
pure functions of `[P]` arrays (Jaderberg et al. 2017, arXiv:1711.09846).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import jax
import jax.numpy as jnp

from purejaxppo.config import TRACED_FIELDS, PPOConfig
from purejaxppo.drivers.settings import check_field
from purejaxppo.hyperparams import Hyperparams
from purejaxppo.types import RunnerState

#: Initial distributions a searched field may have (`search=`).
SEARCH_DISTRIBUTIONS = ("uniform", "log_uniform")


#: RunnerState fields that stay with the member's slot when it copies another member.
NOT_COPIED = ("env", "key", "update_step")


@dataclasses.dataclass(frozen=True)
class SearchSpace:
    """The searched traced fields, their initial distributions and ranges (static).

    Attributes:
      names: searched fields, in the order of the `[P, F]` value matrices.
      kinds: "uniform" or "log_uniform" per field.
      lows, highs: range of each field (perturbed values are clipped to it).
    """

    names: tuple[str, ...]
    kinds: tuple[str, ...]
    lows: tuple[float, ...]
    highs: tuple[float, ...]

    @property
    def spec(self) -> dict[str, tuple]:
        """`{name: (kind, low, high)}`, the `sweep(random=...)` form."""
        return {
            n: (k, lo, hi)
            for n, k, lo, hi in zip(self.names, self.kinds, self.lows, self.highs, strict=True)
        }


def parse_search(search: Mapping[str, Sequence[Any]] | None, config: PPOConfig) -> SearchSpace:
    """Checks `search` (field -> `(distribution, low, high)`, the syntax of
    `sweep(random=...)`) and returns its `SearchSpace`.

    Raises:
      ValueError: an empty `search`; naming the field and value, for an unknown field, a static field, a
        distribution other than uniform / log_uniform, low >= high, a log_uniform range
        that is not positive, or bounds that are not valid values of the field.
    """
    if not search:
        raise ValueError(
            f"search={search!r}: pbt needs at least one traced field to search, e.g. "
            "search={'learning_rate': ('log_uniform', 1e-4, 1e-2)} "
            "(CLI: --search learning_rate=log_uniform:1e-4:1e-2)"
        )
    names, kinds, lows, highs = [], [], [], []
    for name, spec in search.items():
        check_field(name, "search")
        if name not in TRACED_FIELDS:
            raise ValueError(
                f"search: field {name!r} is static (it fixes the compiled program); pbt "
                f"searches only traced fields: {', '.join(TRACED_FIELDS)}"
            )
        if isinstance(spec, str) or not isinstance(spec, Sequence) or len(spec) != 3:
            raise ValueError(f"search[{name!r}]={spec!r}: must be (distribution, low, high)")
        kind, low, high = spec
        if kind not in SEARCH_DISTRIBUTIONS:
            raise ValueError(
                f"search[{name!r}]: distribution {kind!r} is not one of {SEARCH_DISTRIBUTIONS}"
            )
        try:
            low, high = float(low), float(high)
        except (TypeError, ValueError):
            raise ValueError(f"search[{name!r}]={spec!r}: low and high must be numbers") from None
        if not low < high:
            raise ValueError(f"search[{name!r}]={spec!r}: needs low < high (got {low} >= {high})")
        if kind == "log_uniform" and low <= 0:
            raise ValueError(f"search[{name!r}]={spec!r}: log_uniform needs 0 < low")
        for bound in (low, high):
            try:
                config.replace(**{name: bound})
            except ValueError as err:
                raise ValueError(f"search[{name!r}]={spec!r}: {err}") from None
        names.append(name)
        kinds.append(kind)
        lows.append(low)
        highs.append(high)
    return SearchSpace(tuple(names), tuple(kinds), tuple(lows), tuple(highs))


def get_values(hparams: Hyperparams, space: SearchSpace) -> jax.Array:
    """The searched fields of `[P]`-batched `hparams` as a float32 `[P, F]` matrix."""
    if not space.names:
        return jnp.zeros((hparams.learning_rate.shape[0], 0), jnp.float32)
    return jnp.stack([getattr(hparams, name) for name in space.names], axis=1)


def set_values(hparams: Hyperparams, values: jax.Array, space: SearchSpace) -> Hyperparams:
    """`hparams` with its searched fields replaced by the columns of `values` `[P, F]`."""
    return hparams.replace(**{name: values[:, i] for i, name in enumerate(space.names)})


def truncation_parents(
    fitness: jax.Array, key: jax.Array, fraction: float = 0.25
) -> tuple[jax.Array, jax.Array]:
    """Truncation selection (Jaderberg et al. 2017, Sec. 4): the bottom `fraction` of the
    ranking, and every member with non-finite fitness, copy a member drawn uniformly from
    the finite members of the top `fraction`.

    Ranking: descending fitness, ties broken by the lower member index. The top pool holds
    `max(1, floor(P * fraction))` members, the bottom `floor(P * fraction)`; pool members
    are never replaced. Parent of replaced member i: the pool's `floor(u_i * V)`-th finite
    member in rank order, `u = jax.random.uniform(key, [P])`, V the number of finite
    pool members (nobody is replaced when V = 0). A member is replaced only by a strictly
    fitter parent: on ties (e.g. every member at the maximal return, or at the time limit
    early in training) nobody copies, so the index tie-break decides nothing.

    Args:
      fitness: float32 `[P]`; -inf (or NaN) for members that must not be parents.
      key: PRNG key of this selection.
      fraction: top / bottom fraction, in (0, 0.5].

    Returns:
      `parents` int32 `[P]` (i for members that keep their own state) and `replaced`
      bool `[P]`.
    """
    num = fitness.shape[0]
    fitness = jnp.where(jnp.isnan(fitness), -jnp.inf, fitness)
    cut = int(num * fraction)
    order = jnp.argsort(-fitness, stable=True)  # best first
    rank = jnp.zeros(num, jnp.int32).at[order].set(jnp.arange(num, dtype=jnp.int32))
    pool = order[: max(cut, 1)]
    num_valid = jnp.sum(jnp.isfinite(fitness[pool]))
    in_pool = rank < max(cut, 1)
    candidate = ((rank >= num - cut) | ~jnp.isfinite(fitness)) & ~in_pool & (num_valid > 0)
    u = jax.random.uniform(key, (num,))
    choice = jnp.minimum(jnp.floor(u * num_valid).astype(jnp.int32), jnp.maximum(num_valid - 1, 0))
    drawn = pool[choice]
    replaced = candidate & (fitness < fitness[drawn])  # only a strictly fitter parent
    parents = jnp.where(replaced, drawn, jnp.arange(num, dtype=jnp.int32))
    return parents.astype(jnp.int32), replaced


def tournament_parents(
    fitness: jax.Array, key: jax.Array, size: int = 3, elitism: bool = True
) -> tuple[jax.Array, jax.Array]:
    """Tournament selection with elitism (AgileRL's `TournamentSelection`).

    Every member i (but the elite, the first member of highest fitness, when `elitism`)
    is replaced by the winner of a tournament among `size` members drawn with
    replacement, `contenders = jax.random.randint(key, [P, size], 0, P)`: the contender of
    highest fitness, the first one on ties. A winner with non-finite fitness is replaced
    by the elite; if no member is finite nobody is replaced.

    Args:
      fitness: float32 `[P]`; -inf (or NaN) for members that must not be parents.
      key: PRNG key of this selection.
      size: tournament size k >= 1.
      elitism: keep the best member (its slot copies nothing and is not explored).

    Returns:
      `parents` int32 `[P]` and `replaced` bool `[P]` (every member but the elite).
    """
    num = fitness.shape[0]
    fitness = jnp.where(jnp.isnan(fitness), -jnp.inf, fitness)
    members = jnp.arange(num, dtype=jnp.int32)
    contenders = jax.random.randint(key, (num, size), 0, num, dtype=jnp.int32)
    winners = contenders[members, jnp.argmax(fitness[contenders], axis=1)]
    elite = jnp.argmax(fitness).astype(jnp.int32)
    winners = jnp.where(jnp.isfinite(fitness[winners]), winners, elite)
    replaced = jnp.ones(num, bool)
    if elitism:
        replaced = replaced & (members != elite)
    replaced = replaced & jnp.isfinite(fitness[elite])
    return jnp.where(replaced, winners, members), replaced


def perturb(
    values: jax.Array,
    key: jax.Array,
    low: jax.typing.ArrayLike,
    high: jax.typing.ArrayLike,
    factors: tuple[float, float] = (0.8, 1.2),
) -> jax.Array:
    """PBT's perturb explore: each value times `factors[0]` or `factors[1]` (equal odds,
    `up = jax.random.bernoulli(key, 0.5, values.shape)` picks `factors[1]`), clipped to
    `[low, high]`.

    Args:
      values: float32 `[P, F]` searched values.
      key: PRNG key.
      low, high: float32 `[F]` range of each field.
    """
    up = jax.random.bernoulli(key, 0.5, values.shape)
    scaled = values * jnp.where(up, jnp.float32(factors[1]), jnp.float32(factors[0]))
    return jnp.clip(scaled, jnp.asarray(low, jnp.float32), jnp.asarray(high, jnp.float32))


def sample_values(key: jax.Array, space: SearchSpace, shape: tuple[int, ...]) -> jax.Array:
    """Draws from the initial distributions: float32 `[*shape, F]`, `u ~ U[0, 1)` per value
    (`jax.random.uniform(key, (*shape, F))`), `low + u (high - low)` (uniform) or
    `exp(log low + u (log high - log low))` (log_uniform)."""
    low = jnp.asarray(space.lows, jnp.float32)
    high = jnp.asarray(space.highs, jnp.float32)
    log_scale = jnp.asarray([k == "log_uniform" for k in space.kinds], bool)
    u = jax.random.uniform(key, (*shape, len(space.names)))
    linear = low + u * (high - low)
    safe_low = jnp.where(log_scale, low, 1.0)
    safe_high = jnp.where(log_scale, high, 1.0)
    logs = jnp.exp(jnp.log(safe_low) + u * (jnp.log(safe_high) - jnp.log(safe_low)))
    return jnp.where(log_scale, logs, linear)


def resample(
    values: jax.Array, key: jax.Array, space: SearchSpace, probability: float = 0.25
) -> jax.Array:
    """PBT's resample explore: each value is redrawn from its initial distribution with
    probability `probability` (`jax.random.uniform(mask_key, [P, F]) < probability`, with
    `mask_key, draw_key = jax.random.split(key)`; draws from `sample_values(draw_key)`),
    else kept.

    Args:
      values: float32 `[P, F]` searched values.
    """
    mask_key, draw_key = jax.random.split(key)
    redraw = jax.random.uniform(mask_key, values.shape) < probability
    return jnp.where(redraw, sample_values(draw_key, space, values.shape[:1]), values)


def copy_members(runner: RunnerState, parents: jax.Array) -> RunnerState:
    """Population `runner` (`[P]` leaves) where member i holds member `parents[i]`'s value
    of every field except `env`, `key` and `update_step` (train state: params and
    optimizer state, and any statistics a RunnerState carries). Exact copies (a gather)."""
    copied = {
        field.name: jax.tree.map(lambda x: x[parents], getattr(runner, field.name))
        for field in dataclasses.fields(runner)
        if field.name not in NOT_COPIED
    }
    return runner.replace(**copied)
