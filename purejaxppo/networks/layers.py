"""Layers and observation encoders (flax linen), every parameter under an explicit name.

Encoders (`EncoderSettings.kind`), each followed by the `hidden_sizes` dense layers:

* "mlp": the flattened observation (CleanRL's `Agent`).
* "cnn": the Nature-DQN conv stack (Mnih et al. 2015, "Human-level control through deep
  reinforcement learning"): conv layers of `cnn_channels` / `cnn_kernel_sizes` /
  `cnn_strides`, VALID padding, then flatten.
* "impala": the IMPALA ResNet (Espeholt et al. 2018, arXiv:1802.01561, fig. 3) on the
  image with two CoordConv channels (x and y in [-1, 1], Liu et al. 2018,
  arXiv:1807.03247) appended: per stage of `impala_channels`, a 3x3 conv, a 3x3 max-pool
  with stride 2 and two residual blocks (act, conv, act, conv, + input); then act and
  flatten.

Parameter names (what the checkpoints hold and the export maps), for an input `<in>`
("obs" for a plain array, else the dict key / tuple index):
`<in>_mlp/dense_<i>`, `<in>_cnn/conv_<i>`, `<in>_impala/stage_<s>/conv`,
`<in>_impala/stage_<s>/block_<b>/conv_<j>`, `<in>_latent` (`latent_dim`); heads
`dense_<i>` then `out`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp

from purejaxppo.networks.specs import EncoderSettings, ObsInput, leaf

ACTIVATIONS: dict[str, Callable[[jax.Array], jax.Array]] = {
    "tanh": nn.tanh,
    "relu": nn.relu,
    "gelu": nn.gelu,
    "silu": nn.silu,
    "elu": nn.elu,
    "leaky_relu": nn.leaky_relu,
}

#: `Conv2D` implementations: "im2col" (one matmul; fast inside `lax.scan` on CPU),
#: "xla" (`lax.conv_general_dilated`, cuDNN on GPU), "auto" (im2col on CPU, else xla).
CONV_IMPLS = ("auto", "im2col", "xla")


def orthogonal(scale: float) -> Callable:
    return nn.initializers.orthogonal(scale)


class DenseStack(nn.Module):
    """Dense layers `dense_<i>` with orthogonal(sqrt 2) init, each followed by the activation.

    x float32 `[B, D]` -> `[B, hidden_sizes[-1]]` (x itself when `hidden_sizes` is empty).
    """

    hidden_sizes: Sequence[int]
    activation: str

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        return dense_layers(x, self.hidden_sizes, self.activation)


def dense_layers(x: jax.Array, sizes: Sequence[int], activation: str) -> jax.Array:
    """`dense_<i>` layers (orthogonal sqrt 2) + activation, created in the calling
    module's compact scope."""
    act = ACTIVATIONS[activation]
    for i, size in enumerate(sizes):
        x = act(nn.Dense(size, kernel_init=orthogonal(math.sqrt(2.0)), name=f"dense_{i}")(x))
    return x


class Head(nn.Module):
    """`DenseStack(hidden_sizes)` then a linear layer `out` of `out_size` (orthogonal(scale)).

    CleanRL's init: 0.01 for the policy head, 1.0 for the value head, zero biases.
    """

    hidden_sizes: Sequence[int]
    activation: str
    out_size: int
    scale: float

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        x = dense_layers(x, self.hidden_sizes, self.activation)
        return nn.Dense(self.out_size, kernel_init=orthogonal(self.scale), name="out")(x)


def _same_padding(size: int, kernel: int, stride: int) -> tuple[int, int]:
    """TensorFlow / flax "SAME" padding of one axis: output ceil(size / stride)."""
    out = -(-size // stride)
    total = max((out - 1) * stride + kernel - size, 0)
    return total // 2, total - total // 2


def _windows(x: jax.Array, kernel: int, stride: int) -> list[jax.Array]:
    """The kernel*kernel strided shifts of x `[B, H, W, C]` (already padded), VALID.

    Shift (i, j) is `[B, H', W', C]` with H' = (H - kernel) // stride + 1 (W' likewise).
    """
    height = (x.shape[1] - kernel) // stride + 1
    width = (x.shape[2] - kernel) // stride + 1
    return [
        x[:, i : i + stride * (height - 1) + 1 : stride, j : j + stride * (width - 1) + 1 : stride]
        for i in range(kernel)
        for j in range(kernel)
    ]


def resolve_conv_impl(impl: str) -> str:
    """ "im2col" or "xla" for a `CONV_IMPLS` value ("auto": im2col on CPU, xla elsewhere)."""
    if impl not in CONV_IMPLS:
        raise ValueError(f"conv_impl={impl!r}: must be one of {CONV_IMPLS}")
    if impl == "auto":
        return "im2col" if jax.default_backend() == "cpu" else "xla"
    return impl


class Conv2D(nn.Module):
    """2-d convolution with flax `nn.Conv`'s parameters, as im2col + matmul or `lax.conv`.

    Params `kernel` `[k, k, C_in, features]` and `bias` `[features]`, as `nn.Conv`, whatever
    the implementation, so a checkpoint moves between them. x float32 `[B, H, W, C_in]` ->
    `[B, H', W', features]`. Why im2col: on CPU, XLA runs convolutions inside `lax.scan` /
    `while` bodies (PPO's minibatch loop) about 6x slower than the same convolution outside;
    the matmul form is as fast in both places. On GPU / TPU `lax.conv_general_dilated`
    (cuDNN) is the fast one; `impl="auto"` picks by backend.
    """

    features: int
    kernel_size: int
    stride: int = 1
    padding: str = "VALID"  # or "SAME"
    kernel_init: Callable = nn.initializers.lecun_normal()
    impl: str = "auto"

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        k, s = self.kernel_size, self.stride
        kernel = self.param("kernel", self.kernel_init, (k, k, x.shape[-1], self.features))
        bias = self.param("bias", nn.initializers.zeros, (self.features,))
        if resolve_conv_impl(self.impl) == "xla":
            y = jax.lax.conv_general_dilated(
                x, kernel, (s, s), self.padding, dimension_numbers=("NHWC", "HWIO", "NHWC")
            )
            return y + bias
        if self.padding == "SAME":
            pads = [_same_padding(n, k, s) for n in x.shape[1:3]]
            x = jnp.pad(x, ((0, 0), *pads, (0, 0)))
        patches = jnp.concatenate(_windows(x, k, s), axis=-1)  # [B, H', W', k*k*C_in]
        return patches @ kernel.reshape((-1, self.features)) + bias


def max_pool(x: jax.Array, window: int, stride: int) -> jax.Array:
    """Max-pool with "SAME" padding (padded cells never win), as `nn.max_pool`.

    x `[B, H, W, C]` -> `[B, ceil(H / stride), ceil(W / stride), C]`; a max over shifted
    slices (fast inside `lax.scan` on CPU, like `Conv2D`).
    """
    pads = [_same_padding(n, window, stride) for n in x.shape[1:3]]
    x = jnp.pad(x, ((0, 0), *pads, (0, 0)), constant_values=-jnp.inf)
    out = _windows(x, window, stride)
    result = out[0]
    for shifted in out[1:]:
        result = jnp.maximum(result, shifted)
    return result


class NatureCNN(nn.Module):
    """The conv stack of the Nature DQN (Mnih et al. 2015): convs `conv_<i>`, flattened.

    Defaults of the paper: 32 8x8 filters with stride 4, 64 4x4 with stride 2, 64 3x3 with
    stride 1, ReLU, VALID padding; orthogonal(sqrt 2) init as CleanRL's Atari agent.
    x float32 `[B, H, W, C]` -> `[B, H' * W' * C']` (flattened in H, W, C order).
    """

    settings: EncoderSettings

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        s = self.settings
        act = ACTIVATIONS[s.activation]
        layers = zip(s.cnn_channels, s.cnn_kernel_sizes, s.cnn_strides, strict=True)
        for i, (channels, kernel, stride) in enumerate(layers):
            conv = Conv2D(
                channels,
                kernel,
                stride,
                padding="VALID",
                kernel_init=orthogonal(math.sqrt(2.0)),
                impl=s.conv_impl,
                name=f"conv_{i}",
            )
            x = act(conv(x))
        return x.reshape((x.shape[0], -1))


def coord_channels(x: jax.Array) -> jax.Array:
    """Appends CoordConv channels (Liu et al. 2018): x `[B, H, W, C]` -> `[B, H, W, C + 2]`.

    Channel C is the column coordinate (-1 at the left edge, +1 at the right), channel
    C + 1 the row coordinate (-1 at the top, +1 at the bottom); for a size-1 axis it is 0.
    """
    batch, height, width, _ = x.shape

    def axis(n: int) -> jax.Array:
        return jnp.linspace(-1.0, 1.0, n, dtype=x.dtype) if n > 1 else jnp.zeros((1,), x.dtype)

    cols = jnp.broadcast_to(axis(width)[None, None, :, None], (batch, height, width, 1))
    rows = jnp.broadcast_to(axis(height)[None, :, None, None], (batch, height, width, 1))
    return jnp.concatenate([x, cols, rows], axis=-1)


class ResidualBlock(nn.Module):
    """IMPALA residual block: x + conv_1(act(conv_0(act(x)))), 3x3 convs, SAME padding."""

    channels: int
    activation: str
    impl: str = "auto"

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        act = ACTIVATIONS[self.activation]
        y = Conv2D(self.channels, 3, padding="SAME", impl=self.impl, name="conv_0")(act(x))
        y = Conv2D(self.channels, 3, padding="SAME", impl=self.impl, name="conv_1")(act(y))
        return x + y


class ImpalaStage(nn.Module):
    """One IMPALA stage: 3x3 conv `conv`, 3x3 max-pool (stride 2), blocks `block_0/1`."""

    channels: int
    activation: str
    impl: str = "auto"

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        x = Conv2D(self.channels, 3, padding="SAME", impl=self.impl, name="conv")(x)
        x = max_pool(x, 3, 2)
        for b in range(2):
            x = ResidualBlock(self.channels, self.activation, self.impl, name=f"block_{b}")(x)
        return x


class ImpalaCNN(nn.Module):
    """The IMPALA ResNet encoder (Espeholt et al. 2018, fig. 3) with CoordConv channels.

    x float32 `[B, H, W, C]` -> coord_channels -> per stage `stage_<s>` (`impala_channels`,
    IMPALA: 16, 32, 32): 3x3 conv `conv`, 3x3 max-pool with stride 2 (SAME), residual
    blocks `block_0`, `block_1`; then act and flatten to
    `[B, ceil(H / 2^S) * ceil(W / 2^S) * channels[-1]]` (S stages). Flax's default (LeCun
    normal) conv init.
    """

    settings: EncoderSettings

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        s = self.settings
        x = coord_channels(x)
        for i, channels in enumerate(s.impala_channels):
            x = ImpalaStage(channels, s.activation, s.conv_impl, name=f"stage_{i}")(x)
        x = ACTIVATIONS[s.activation](x)
        return x.reshape((x.shape[0], -1))


class Encoder(nn.Module):
    """Per-input encoders, concatenated: observation -> features float32 `[B, F]`.

    Each `ObsInput` is one-hot encoded (a `Discrete(n)` input: `[B]` -> `[B, n]`) or
    rescaled (`(x - shift) / scale`, e.g. uint8 pixels to [0, 1]), then
    gets the conv encoder (images, when `settings.kind` is "cnn" / "impala") or is
    flattened, then its own `hidden_sizes` dense layers (submodules `<name>_cnn` /
    `<name>_impala` and `<name>_mlp`), then, with `settings.latent_dim`, a dense layer
    `<name>_latent` of `latent_dim` units (orthogonal sqrt 2) + activation. The features
    of several inputs are concatenated in `inputs` order (AgileRL's multi-input encoder).
    """

    inputs: tuple[ObsInput, ...]
    settings: EncoderSettings

    @nn.compact
    def __call__(self, obs: Any) -> jax.Array:
        s = self.settings
        features = []
        for spec in self.inputs:
            x = jnp.asarray(leaf(obs, spec.path))
            batch = x.shape[0]
            if spec.one_hot:  # Discrete(n) index [B] -> [B, n]
                x = jax.nn.one_hot(x.reshape((batch,)).astype(jnp.int32), spec.one_hot)
            x = x.astype(jnp.float32)
            if spec.rescaled:
                x = (x - spec.shift) / spec.scale
            if spec.image and s.kind == "cnn":
                x = NatureCNN(s, name=f"{spec.name}_cnn")(x)
            elif spec.image and s.kind == "impala":
                x = ImpalaCNN(s, name=f"{spec.name}_impala")(x)
            else:
                x = x.reshape((batch, -1))
            x = DenseStack(s.hidden_sizes, s.activation, name=f"{spec.name}_mlp")(x)
            if s.latent_dim is not None:  # AgileRL's per-input latent_dim
                latent = nn.Dense(
                    s.latent_dim, kernel_init=orthogonal(math.sqrt(2.0)), name=f"{spec.name}_latent"
                )
                x = ACTIVATIONS[s.activation](latent(x))
            features.append(x)
        return features[0] if len(features) == 1 else jnp.concatenate(features, axis=-1)
