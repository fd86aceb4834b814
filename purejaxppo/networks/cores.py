"""Recurrent cores: one step `(state [B, S], x [B, F]) -> (state [B, S], y [B, H])`.

The state of one env is ONE float32 vector `[S]` whatever the core, so the rollout, the
checkpoints and the exported modules carry a single `[B, S]` array; an all-zero state is
the state of a fresh episode (the library resets by zeroing).

* "lstm": `nn.OptimizedLSTMCell` of `recurrent_size` units (`cell`); state `[c, h]`,
  S = 2 * recurrent_size (Hochreiter & Schmidhuber 1997; PureJaxRL's recurrent PPO).
* "gru": `nn.GRUCell` (`cell`); state h, S = recurrent_size (Cho et al. 2014).
* "transformer": a gated transformer-XL (GTrXL, Parisotto et al. 2019,
  arXiv:1910.06764) over the last `memory_len` steps, see `transformer.py`.
"""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp

from purejaxppo.networks.specs import CoreSettings


def core_state_size(settings: CoreSettings) -> int:
    """S, floats of state per env (0 for feed-forward)."""
    if settings.kind is None:
        return 0
    if settings.kind == "lstm":
        return 2 * settings.size
    if settings.kind == "gru":
        return settings.size
    from purejaxppo.networks.transformer import transformer_state_size

    return transformer_state_size(
        settings.transformer_layers, settings.transformer_dim, settings.memory_len
    )


def core_output_size(settings: CoreSettings) -> int:
    """H, width of the core's output."""
    return settings.transformer_dim if settings.kind == "transformer" else settings.size


class Core(nn.Module):
    """The recurrent core of `settings.kind` ("lstm", "gru" or "transformer")."""

    settings: CoreSettings

    @nn.compact
    def __call__(self, state: jax.Array, x: jax.Array) -> tuple[jax.Array, jax.Array]:
        s = self.settings
        if s.kind == "lstm":
            (cell, h), out = nn.OptimizedLSTMCell(s.size, name="cell")(
                (state[:, : s.size], state[:, s.size :]), x
            )
            return jnp.concatenate([cell, h], axis=-1), out
        if s.kind == "gru":
            return nn.GRUCell(s.size, name="cell")(state, x)
        if s.kind == "transformer":
            from purejaxppo.networks.transformer import TransformerCore

            return TransformerCore(
                num_layers=s.transformer_layers,
                num_heads=s.transformer_heads,
                dim=s.transformer_dim,
                memory_len=s.memory_len,
                name="transformer",
            )(state, x)
        raise ValueError(f"recurrent={s.kind!r}: no such core")
