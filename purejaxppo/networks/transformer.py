"""Gated Transformer-XL (GTrXL) recurrent core: one step at a time, memory in a flat state.

Parisotto et al. 2019, "Stabilizing Transformers for Reinforcement Learning"
(arXiv:1910.06764). Each layer is TrXL-I (layer norm before the sublayers, the "identity
map reordering") with GRU-type gates in place of the residual additions, and the ReLU of
the sublayer output before the gate, as the paper's GTrXL (GRU):

    y = ReLU(MHA(LayerNorm([e, memory]) + age_embedding))  # attention over current + past
    e = gate_attn(e, y)
    y = ReLU(MLP(LayerNorm(e)))
    e = gate_mlp(e, y)

with the gate (paper eq. 9-12; x the residual stream, y the sublayer output):

    r = sigmoid(Wr y + Ur x)
    z = sigmoid(Wz y + Uz x - b_g)
    h = tanh(Wg y + Ug (r * x))
    g = (1 - z) * x + z * h

`b_g` [D] starts at 2, so z ~ sigmoid(-2) ~ 0.12 and each layer starts near the identity
(the paper's initialisation). `Wr`, `Ur`, `Wz`, `Uz`, `Wg`, `Ug` are bias-free `D -> D`
Dense layers.

Differences from the paper, all deliberate:
- The position encoding is a learned age embedding `[M + 1, D]` per layer (age 0 = the
  current step, age j = j steps ago), added to the layer-normed inputs before the
  query/key/value projections. The memory is ordered by age, so this is a relative
  encoding: it does not depend on the absolute time step.
- No stop-gradient on the memory. The memory is part of the recurrent state, so inside
  one rollout the library's `lax.scan` back-propagates through it as through an LSTM's
  state (truncated at the rollout's first step, whose state is data).
- The memory stores the layer INPUTS, not keys/values: keys and values are recomputed each
  step with the current params (O(M * D^2) per layer per step), so a stored state stays
  valid after a parameter update.
- No final layer norm: the core's output is the last layer's residual stream.

The state of one env is ONE flat float32 vector `[S]`, S = L * M * D + M (see
`transformer_state_size`), so it fits the library's generic `[B, S]` recurrent state:

    state[:L*M*D].reshape(L, M, D)[l, j]  input of layer l (l = 0: after `input_proj`)
                                          j + 1 steps ago (slot 0 = the most recent)
    state[L*M*D:]                         [M] validity flags: 1.0 = slot j holds a real
                                          past step of the current episode, 0.0 = empty

An all-zero state is an empty memory: the current step attends only to itself. The library
resets a recurrent state by zeroing it, so no attention crosses an episode boundary. A
step shifts the current layer inputs into slot 0 of each layer's memory (dropping slot
M - 1) and a 1.0 into the flags. Flags are read as `flag > 0.5`. Invalid slots get the
attention logit -1e9, whose softmax weight is exactly 0 in float32 (the current step is
always valid, so the softmax never sees only masked logits).

The PyTorch mirror is `purejaxppo.export.torch_modules.TransformerCore`, with
params mapped by `purejaxppo.export.param_map`.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
from flax import linen as nn

from purejaxppo.networks.layers import ACTIVATIONS as LAYER_ACTIVATIONS

#: The position-wise MLP's activations: those of `purejaxppo.networks.layers` (flax
#: defaults: nn.gelu is the tanh approximation, nn.leaky_relu has negative slope 0.01).
ACTIVATIONS = LAYER_ACTIVATIONS

#: Attention logit of an empty memory slot: exp(-1e9 - max) is exactly 0 in float32.
MASKED_LOGIT = -1e9

#: LayerNorm epsilon (flax's default; the torch mirror uses the same).
LAYER_NORM_EPS = 1e-6

#: Initial value of the gate bias b_g: z starts at sigmoid(-2) ~ 0.12 (near identity).
GATE_BIAS_INIT = 2.0


def check_transformer_config(
    num_layers: int, num_heads: int, dim: int, memory_len: int, activation: str = "relu"
) -> None:
    """Raises ValueError naming the field if a `TransformerCore` setting is invalid."""
    for name, value in (
        ("num_layers", num_layers),
        ("num_heads", num_heads),
        ("dim", dim),
        ("memory_len", memory_len),
    ):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
            raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
    if dim % num_heads != 0:
        raise ValueError(f"dim ({dim}) must be divisible by num_heads ({num_heads})")
    if activation not in ACTIVATIONS:
        raise ValueError(f"activation must be one of {tuple(ACTIVATIONS)}, got {activation!r}")


def transformer_state_size(num_layers: int, dim: int, memory_len: int) -> int:
    """S = num_layers * memory_len * dim + memory_len: floats of state per env.

    Raises:
      ValueError: naming the field, if one is not an integer >= 1.
    """
    check_transformer_config(num_layers, 1, dim, memory_len)
    return num_layers * memory_len * dim + memory_len


class GRUGate(nn.Module):
    """GTrXL's GRU-type gate g(x, y) (arXiv:1910.06764, eq. 9-12; see the module docstring).

    Submodules `Wr`, `Ur`, `Wz`, `Uz`, `Wg`, `Ug` (bias-free Dense `D -> D`) and the param
    `b_g` `[D]` (init 2.0).
    """

    dim: int

    @nn.compact
    def __call__(self, x: jax.Array, y: jax.Array) -> jax.Array:
        """Residual stream x `[B, D]`, sublayer output y `[B, D]` (float32) -> `[B, D]`."""

        def dense(name: str) -> nn.Dense:
            return nn.Dense(self.dim, use_bias=False, name=name)

        b_g = self.param("b_g", nn.initializers.constant(GATE_BIAS_INIT), (self.dim,))
        r = nn.sigmoid(dense("Wr")(y) + dense("Ur")(x))
        z = nn.sigmoid(dense("Wz")(y) + dense("Uz")(x) - b_g)
        h = jnp.tanh(dense("Wg")(y) + dense("Ug")(r * x))
        return (1.0 - z) * x + z * h


class GTrXLLayer(nn.Module):
    """One GTrXL layer for one step: attention over [current, memory], MLP, two gates.

    Submodules: `ln_attn`, `query`, `key`, `value`, `out` (Dense `D -> D`, biased),
    `gate_attn`, `ln_mlp`, `mlp_0`, `mlp_1` (Dense `D -> D`), `gate_mlp`; param
    `age_embedding` `[M + 1, D]`.
    """

    num_heads: int
    dim: int
    memory_len: int
    activation: str

    @nn.compact
    def __call__(self, h: jax.Array, memory: jax.Array, valid: jax.Array) -> jax.Array:
        """One step.

        Args:
          h: float32 `[B, D]`, this layer's input at the current step.
          memory: float32 `[B, M, D]`, its inputs 1..M steps ago (slot 0 = the latest).
          valid: bool `[B, M + 1]`, which of [current, memory slots] to attend to
            (`valid[:, 0]` is True).

        Returns:
          float32 `[B, D]`, the layer's output (the next layer's input).
        """
        batch, heads = h.shape[0], self.num_heads
        head_dim = self.dim // heads
        age = self.param(
            "age_embedding", nn.initializers.normal(0.02), (self.memory_len + 1, self.dim)
        )
        ln_attn = nn.LayerNorm(epsilon=LAYER_NORM_EPS, use_fast_variance=False, name="ln_attn")
        z = ln_attn(jnp.concatenate([h[:, None], memory], axis=1)) + age  # [B, M+1, D]
        q = nn.Dense(self.dim, name="query")(z[:, 0]).reshape(batch, heads, head_dim)
        k = nn.Dense(self.dim, name="key")(z).reshape(batch, -1, heads, head_dim)
        v = nn.Dense(self.dim, name="value")(z).reshape(batch, -1, heads, head_dim)
        logits = jnp.einsum("bhd,bkhd->bhk", q, k) / math.sqrt(head_dim)  # [B, H, M+1]
        logits = jnp.where(valid[:, None, :], logits, MASKED_LOGIT)
        weights = jax.nn.softmax(logits, axis=-1)
        attended = jnp.einsum("bhk,bkhd->bhd", weights, v).reshape(batch, self.dim)
        y = nn.relu(nn.Dense(self.dim, name="out")(attended))
        h = GRUGate(self.dim, name="gate_attn")(h, y)

        ln_mlp = nn.LayerNorm(epsilon=LAYER_NORM_EPS, use_fast_variance=False, name="ln_mlp")
        y = ACTIVATIONS[self.activation](nn.Dense(self.dim, name="mlp_0")(ln_mlp(h)))
        y = nn.relu(nn.Dense(self.dim, name="mlp_1")(y))
        return GRUGate(self.dim, name="gate_mlp")(h, y)


class TransformerCore(nn.Module):
    """Gated Transformer-XL recurrent core (GTrXL, arXiv:1910.06764), one step for B envs.

    Settings: `num_layers` L, `num_heads` H, `dim` D (model width, divisible by H),
    `memory_len` M (past steps each layer attends to), `activation` of the position-wise
    MLP (one of `ACTIVATIONS`). Params: `input_proj` (Dense `F -> D`), then `layer_{i}`
    (`GTrXLLayer`) for i < L. The state layout, the gating and the masking are in the
    module docstring; `transformer_state_size(L, D, M)` gives S.

    Calling it: `(state [B, S], x [B, F]) -> (new_state [B, S], y [B, D])`, all float32.

    Raises:
      ValueError: naming the field, for an invalid setting (at construction), or if the
        state is not `[B, S]` or x is not `[B, F]` (at call).
    """

    num_layers: int
    num_heads: int
    dim: int
    memory_len: int
    activation: str = "relu"

    def __post_init__(self) -> None:
        check_transformer_config(
            self.num_layers, self.num_heads, self.dim, self.memory_len, self.activation
        )
        super().__post_init__()

    @nn.compact
    def __call__(self, state: jax.Array, x: jax.Array) -> tuple[jax.Array, jax.Array]:
        """One step: state float32 `[B, S]`, x float32 `[B, F]` -> (new_state `[B, S]`, y `[B, D]`)."""
        layers, mem_len, dim = self.num_layers, self.memory_len, self.dim
        size = transformer_state_size(layers, dim, mem_len)
        if state.ndim != 2 or state.shape[1] != size:
            raise ValueError(
                f"state must have shape [B, {size}] (num_layers={layers}, dim={dim}, "
                f"memory_len={mem_len}), got {state.shape}"
            )
        if x.ndim != 2 or x.shape[0] != state.shape[0]:
            raise ValueError(f"x must have shape [B, F] with B = {state.shape[0]}, got {x.shape}")
        batch = state.shape[0]
        memory = state[:, : layers * mem_len * dim].reshape(batch, layers, mem_len, dim)
        flags = state[:, layers * mem_len * dim :]  # [B, M]
        valid = jnp.concatenate([jnp.ones((batch, 1), bool), flags > 0.5], axis=1)

        h = nn.Dense(dim, name="input_proj")(x)
        new_memory = []
        for i in range(layers):
            new_memory.append(jnp.concatenate([h[:, None], memory[:, i, : mem_len - 1]], 1))
            h = GTrXLLayer(self.num_heads, dim, mem_len, self.activation, name=f"layer_{i}")(
                h, memory[:, i], valid
            )
        new_flags = jnp.concatenate([jnp.ones((batch, 1), state.dtype), flags[:, :-1]], axis=1)
        new_state = jnp.concatenate(
            [jnp.stack(new_memory, axis=1).reshape(batch, -1), new_flags], axis=1
        )
        return new_state, h
