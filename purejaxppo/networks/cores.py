"""Recurrent cores: one step `(state [B, S], x [B, F]) -> (state [B, S], y [B, H])`.

The state of one env is ONE float32 vector `[S]` whatever the core, so the rollout, the
checkpoints and the exported modules carry a single `[B, S]` array; an all-zero state is
the state of a fresh episode (the library resets by zeroing).

* "lstm": `nn.OptimizedLSTMCell` of `recurrent_size` units (`cell`); state `[c, h]`,
  S = 2 * recurrent_size (Hochreiter & Schmidhuber 1997; PureJaxRL's recurrent PPO).
* "gru": `nn.GRUCell` (`cell`); state h, S = recurrent_size (Cho et al. 2014).
* `recurrent_layers` L > 1 stacks L LSTM / GRU cells `cell_0` ... `cell_<L-1>`, each
  on the output of the one below; the state is the layers' states concatenated, layer 0
  first (S = L * the one-cell S), and the output is the top cell's.
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
        return 2 * settings.size * settings.layers
    if settings.kind == "gru":
        return settings.size * settings.layers
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
        if s.kind in ("lstm", "gru"):
            if s.layers == 1:
                return _cell(s, state, x, "cell")
            width = state.shape[-1] // s.layers
            parts = []
            for layer in range(s.layers):
                part, x = _cell(
                    s, state[:, layer * width : (layer + 1) * width], x, f"cell_{layer}"
                )
                parts.append(part)
            return jnp.concatenate(parts, axis=-1), x
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


def _cell(
    settings: CoreSettings, state: jax.Array, x: jax.Array, name: str
) -> tuple[jax.Array, jax.Array]:
    """One LSTM / GRU cell `name` in the calling module's compact scope:
    (state [B, S1], x [B, F]) -> (state [B, S1], y [B, recurrent_size])."""
    size = settings.size
    if settings.kind == "lstm":
        (cell, h), out = nn.OptimizedLSTMCell(size, name=name)(
            (state[:, :size], state[:, size:]), x
        )
        return jnp.concatenate([cell, h], axis=-1), out
    return nn.GRUCell(size, name=name)(state, x)
