"""`Hyperparams`: the traced fields of `PPOConfig` as a pytree of float32 scalars (or `[S]`
batches under `vmap`), and `check_hyperparams`, which validates concrete values with
`PPOConfig`'s rules and messages. Its fields are `config.TRACED_FIELDS` (declared traced
on each `PPOConfig` field), written out so that type checkers see them;
tests/test_hyperparams_class.py keeps the two equal, in order."""

from __future__ import annotations

import dataclasses
import math
import typing
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from purejaxppo.config import TRACED_FIELDS, PPOConfig

_FIELDS = {f.name: f for f in dataclasses.fields(PPOConfig)}


__all__ = ["Hyperparams", "check_hyperparams"]


def _checked_replace(self: Hyperparams, **changes: Any) -> Hyperparams:
    """A copy with leaves changed; concrete values are validated like `PPOConfig`'s
    (`check_hyperparams`). Raises ValueError naming the field and value."""
    out = dataclasses.replace(self, **changes)
    check_hyperparams(out)
    return out


@struct.dataclass
class Hyperparams:
    """Traced hyperparameters: a pytree of float32 scalars (or `[S]` batches under vmap),
    one leaf per traced `PPOConfig` field, in the order of `config.TRACED_FIELDS`.

    `target_kl` is `inf` when early stopping is off; `actor_learning_rate` /
    `critic_learning_rate` are NaN when unset (then `learning_rate` applies). Build one
    with `from_config`, change values with `.replace(...)`, and stack several with
    `Hyperparams.stack`.
    """

    gamma: jax.Array
    gae_lambda: jax.Array
    clip_coef: jax.Array
    vf_coef: jax.Array
    ent_coef: jax.Array
    max_grad_norm: jax.Array
    learning_rate: jax.Array
    actor_learning_rate: jax.Array
    critic_learning_rate: jax.Array
    end_learning_rate: jax.Array
    target_kl: jax.Array

    @classmethod
    def from_config(cls, config: PPOConfig) -> Hyperparams:
        """The config's traced fields as float32 scalars (None as the field's `none_as`)."""
        values = {}
        for name in TRACED_FIELDS:
            value = getattr(config, name)
            values[name] = _FIELDS[name].metadata["none_as"] if value is None else value
        return cls(**{k: jnp.asarray(v, jnp.float32) for k, v in values.items()})

    # `struct.dataclass` overwrites a class's `replace` with its own, unchecked one; the
    # checked one is set again after the class (below).
    replace = _checked_replace

    @staticmethod
    def stack(hparams: typing.Sequence[Hyperparams]) -> Hyperparams:
        """Stacks S scalar `Hyperparams` into one with `[S]` leaves (for `jax.vmap`);
        each is validated first (`check_hyperparams`)."""
        for index, h in enumerate(hparams):
            check_hyperparams(h, where=f"Hyperparams.stack: item {index}: ")
        return jax.tree.map(lambda *xs: jnp.stack(xs), *hparams)


Hyperparams.replace = _checked_replace  # see the comment in the class


def check_hyperparams(
    hparams: Any, config: PPOConfig | None = None, where: str = "Hyperparams: "
) -> None:
    """Validates the concrete values of `hparams` (scalar or `[S]` leaves) with the rules
    and messages of `PPOConfig` (`config`'s static fields, default `PPOConfig()`), so that
    a negative learning rate, gamma 1.5 or a NaN never trains silently.

    Traced leaves (inside `jit` / `vmap`) cannot be checked and are skipped: validate
    before tracing (`make_train(config)(key, hparams)` called outside `jit` checks them).
    A leaf equal to its field's `none_as` (NaN / inf) means None (off / unset).

    Raises:
      ValueError: `where` + PPOConfig's message for the first bad value (with its index
        for `[S]` leaves).
    """
    leaves = {name: getattr(hparams, name) for name in TRACED_FIELDS}
    if any(isinstance(v, jax.core.Tracer) for v in leaves.values()):
        return
    arrays = {name: np.asarray(v, np.float32) for name, v in leaves.items()}
    shape = np.broadcast_shapes(*(a.shape for a in arrays.values()))
    base = PPOConfig() if config is None else config
    for index in np.ndindex(shape):
        values = {}
        for name, array in arrays.items():
            # The shortest decimal of the float32 (-0.001, not -0.0010000000474974513).
            value = float(str(np.broadcast_to(array, shape)[index]))
            none_as = _FIELDS[name].metadata["none_as"]
            off = none_as is not None and (
                value == none_as or (math.isnan(none_as) and math.isnan(value))
            )
            values[name] = None if off else value
        try:
            base.replace(**values)
        except ValueError as err:
            at = f"[{', '.join(map(str, index))}] " if index else ""
            raise ValueError(f"{where}{at}{err}") from None
