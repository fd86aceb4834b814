"""Actor-critic networks (flax linen): observation encoders and distrax action heads.

Encoders (`PPOConfig.encoder`), each followed by the `hidden_sizes` dense layers:

* "mlp": the flattened observation (CleanRL's `Agent`).
* "cnn": the Nature-DQN conv stack (Mnih et al. 2015, "Human-level control through deep
  reinforcement learning"): conv layers of `cnn_channels` / `cnn_kernel_sizes` /
  `cnn_strides`, VALID padding, then flatten.
* "impala": the IMPALA ResNet (Espeholt et al. 2018, arXiv:1802.01561, fig. 3) on the image
  with two CoordConv channels (x and y in [-1, 1], Liu et al. 2018, arXiv:1807.03247)
  appended: per stage of `impala_channels`, a 3x3 conv, a 3x3 max-pool with stride 2 and
  two residual blocks (act, conv, act, conv, + input); then act and flatten.

The conv encoders take image observations `[H, W, C]` (channels last), rescaled to [0, 1]
when the observation space says so (integer dtypes, or finite bounds other than [0, 1];
bool frames such as MinAtar's become 0.0 / 1.0). Dict / tuple observations get one encoder
per entry (the conv encoder for images when `encoder` is "cnn" / "impala", the MLP for the
rest), with their outputs concatenated (AgileRL's multi-input encoder). With
`share_encoder` the actor and critic heads sit on one shared encoder. Dict / tuple
observations train (`make_train`), act (`Policy.act`) and evaluate like arrays; the
PyTorch export refuses them.

Action heads (`make_distribution`), by action space:

* `Discrete(n)`: `distrax.Categorical(logits [B, n])`.
* `Box`: `distrax.MultivariateNormalDiag(mean [B, A], exp(log_std))` (the env gets the
  sample clipped to the bounds), or with `squash_actions` a `SquashedDiagGaussian` (tanh,
  rescaled to the bounds, with the log-det-Jacobian correction).
* `MultiDiscrete(nvec)` (`purejaxppo.envs.spaces`): K independent categoricals,
  `distrax.Independent(Categorical(logits [B, K, max(nvec)]), 1)`: log-probs and
  entropies summed over components.
* `MultiBinary(n)`: one Bernoulli per bit, `distrax.Independent(Bernoulli(logits [B, n]), 1)`.

Action masking (`PPOConfig.action_mask_key`, default "action_mask"): when the observation
is a gymnax `Dict` with that entry, the entry is the mask of valid actions of each step
(bool or 0/1; `[n]` for `Discrete(n)`, `[sum(nvec)]` for `MultiDiscrete(nvec)`, laid out
like the flat logits). `apply_action_mask` sets the logits of invalid actions to
`PAD_LOGIT` (-1e9) before the categorical is built, so they have probability exactly 0,
are never sampled or chosen greedily, and add nothing to the entropy or the gradients
(invalid action masking, Huang & Ontanon 2020, arXiv:2006.14171). The encoders do not see
the mask. The mask is read from the observation the action is taken in, so the rollout
stores it with the observation and the update re-applies it. A row with no valid action
(all False) gives a uniform distribution over all actions: environments must keep at
least one action valid (per component for MultiDiscrete).

Recurrent cores (`PPOConfig.recurrent` "lstm" / "gru"): `RecurrentActorCritic` puts an
`nn.OptimizedLSTMCell` / `nn.GRUCell` of `recurrent_size` units between one shared encoder
and the actor / critic heads; `make_recurrent_networks` runs it over sequences `[T, N]`
with per-step resets of the state (PureJaxRL's recurrent PPO, Hausknecht & Stone 2015).

The default config (flat "mlp", separate actor and critic, one array observation) builds
`ActorCritic`, whose parameter names (`actor/Dense_i`, `critic/Dense_i`, `log_std`) the
checkpoint and export code rely on; every other feed-forward choice builds
`EncoderActorCritic`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import distrax
import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
from gymnax.environments import spaces

from purejaxppo.config import PPOConfig
from purejaxppo.envs.spaces import MultiBinary, MultiDiscrete
from purejaxppo.types import Params

_ACTIVATIONS: dict[str, Callable[[jax.Array], jax.Array]] = {
    "tanh": nn.tanh,
    "relu": nn.relu,
    "gelu": nn.gelu,
    "silu": nn.silu,
    "elu": nn.elu,
    "leaky_relu": nn.leaky_relu,
}

#: Logit given to the padding categories of MultiDiscrete components with fewer values
#: than the largest one: exp(-1e9 - logsumexp) is exactly 0 in float32, so they are never
#: sampled and add 0 to the entropy (finite, so no inf - inf in gradients).
PAD_LOGIT = -1e9


# --------------------------------------------------------------------- action spaces
class ActionSpec(NamedTuple):
    """Static description of an action space.

    `kind` (a property) is "discrete", "continuous", "multi_discrete" or "multi_binary".
    """

    discrete: bool  # True for Discrete (one categorical) only
    # Number of actor outputs: categories (Discrete), action dimensions (Box), sum(nvec)
    # (MultiDiscrete) or bits (MultiBinary).
    num_actions: int
    shape: tuple[int, ...]  # shape of one action as the env expects it
    low: Any  # np.ndarray bounds (continuous) or None
    high: Any
    nvec: tuple[int, ...] | None = None  # values per component (MultiDiscrete), else None
    binary: bool = False  # MultiBinary

    @property
    def kind(self) -> str:
        if self.discrete:
            return "discrete"
        if self.nvec is not None:
            return "multi_discrete"
        if self.binary:
            return "multi_binary"
        return "continuous"


def action_spec(env: Any, env_params: Any) -> ActionSpec:
    """Reads a gymnax action space into an `ActionSpec`.

    Supported: gymnax `Discrete` and `Box`, and `MultiDiscrete` / `MultiBinary` from
    `purejaxppo.envs.spaces`.

    Raises:
      ValueError: for any other action space (e.g. dict or tuple actions).
    """
    space = env.action_space(env_params)
    if isinstance(space, spaces.Discrete):
        return ActionSpec(True, int(space.n), (), None, None)
    if isinstance(space, spaces.Box):
        shape = tuple(int(s) for s in np.shape(np.zeros(space.shape)))
        low = np.broadcast_to(np.asarray(space.low, np.float32), shape)
        high = np.broadcast_to(np.asarray(space.high, np.float32), shape)
        return ActionSpec(False, int(np.prod(shape)) if shape else 1, shape, low, high)
    if isinstance(space, MultiDiscrete):
        return ActionSpec(False, sum(space.nvec), space.shape, None, None, nvec=space.nvec)
    if isinstance(space, MultiBinary):
        return ActionSpec(False, space.n, space.shape, None, None, binary=True)
    raise ValueError(
        f"action space {type(space).__name__} of {getattr(env, 'name', env)} is not supported; "
        "purejaxppo handles Discrete (categorical), Box (diagonal Gaussian), MultiDiscrete "
        "(independent categoricals) and MultiBinary (Bernoulli per bit) actions "
        "(the last two from purejaxppo.envs.spaces)"
    )


# --------------------------------------------------------------------- observations
class ObsInput(NamedTuple):
    """One array of an observation (the whole of it, or one entry of a dict / tuple).

    Encoders normalise image inputs as `(x - shift) / scale` (float32) before the convs.
    """

    name: str  # "obs" for a plain array, else the dict keys / tuple indices joined by "_"
    path: tuple[Any, ...]  # keys / indices leading to the array in the observation; () plain
    shape: tuple[int, ...]  # one observation, without the batch axis
    image: bool  # rank 3, [H, W, C] channels last
    shift: float  # 0.0 unless the bounds say otherwise
    scale: float  # 1.0 unless the dtype / bounds say otherwise


def observation_inputs(space: Any) -> tuple[ObsInput, ...]:
    """The arrays of an observation space, in a fixed order (dict keys sorted).

    Image inputs (rank 3) are rescaled to [0, 1] from their bounds when these are finite,
    uniform and not already [0, 1]; integer images without finite bounds are divided by
    255 (uint8 pixels). Bool frames (MinAtar) need no rescaling.
    """

    def visit(node: Any, path: tuple[Any, ...]) -> list[ObsInput]:
        if isinstance(node, spaces.Dict):
            return [x for k in sorted(node.spaces) for x in visit(node.spaces[k], (*path, k))]
        if isinstance(node, spaces.Tuple):
            return [x for i, s in enumerate(node.spaces) for x in visit(s, (*path, i))]
        shape = tuple(int(s) for s in node.shape)
        image = len(shape) == 3
        shift, scale = 0.0, 1.0
        if image:
            dtype = np.dtype(getattr(node, "dtype", np.float32))
            low = np.asarray(getattr(node, "low", -np.inf), np.float64)
            high = np.asarray(getattr(node, "high", np.inf), np.float64)
            bounded = low.size and high.size and np.isfinite(low).all() and np.isfinite(high).all()
            uniform = bounded and np.ptp(low) == 0 and np.ptp(high) == 0
            lo, hi = (float(low.flat[0]), float(high.flat[0])) if uniform else (0.0, 0.0)
            if dtype != np.bool_ and uniform and hi > lo:
                shift, scale = lo, hi - lo
            elif np.issubdtype(dtype, np.integer):
                shift, scale = 0.0, 255.0
        name = "_".join(str(p) for p in path) if path else "obs"
        return [ObsInput(name, path, shape, image, shift, scale)]

    return tuple(visit(space, ()))


def split_action_mask(space: Any, mask_key: str | None) -> tuple[Any, str | None]:
    """`(space the encoders see, mask key or None)` of an observation space.

    With `mask_key` naming an entry of a gymnax `Dict` space, that entry is removed from
    the space (the encoders never see it) and the key is returned; otherwise the space
    is returned unchanged with None.
    """
    if mask_key is None or not isinstance(space, spaces.Dict) or mask_key not in space.spaces:
        return space, None
    rest = {k: v for k, v in space.spaces.items() if k != mask_key}
    if not rest:
        raise ValueError(
            f"action_mask_key={mask_key!r}: the observation holds only the action mask; "
            "add at least one entry the policy can see"
        )
    return spaces.Dict(rest), mask_key


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


def _leaf(obs: Any, path: tuple[Any, ...]) -> jax.Array:
    for key in path:
        obs = obs[key]
    return obs


def _zeros_like_space(space: Any, batch: int) -> Any:
    """All-zero float32 observations `[batch, ...]` with the space's structure."""
    if isinstance(space, spaces.Dict):
        return {k: _zeros_like_space(s, batch) for k, s in space.spaces.items()}
    if isinstance(space, spaces.Tuple):
        return tuple(_zeros_like_space(s, batch) for s in space.spaces)
    return jnp.zeros((batch, *space.shape), jnp.float32)


# --------------------------------------------------------------------- modules
class MLP(nn.Module):
    """Dense layers with orthogonal(sqrt 2) init, then a linear head of `out_size`."""

    hidden_sizes: Sequence[int]
    activation: str
    out_size: int
    head_scale: float

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        act = _ACTIVATIONS[self.activation]
        for size in self.hidden_sizes:
            x = nn.Dense(size, kernel_init=nn.initializers.orthogonal(math.sqrt(2.0)))(x)
            x = act(x)
        return nn.Dense(self.out_size, kernel_init=nn.initializers.orthogonal(self.head_scale))(x)


class ActorCritic(nn.Module):
    """Separate actor and critic MLPs on the flattened observation (CleanRL's `Agent`).

    Returns `(actor_out [B, A], value [B])`, where actor_out are logits (discrete) or the
    Gaussian mean (continuous). Continuous policies also own a state-independent
    `log_std` parameter `[A]`, initialised to 0. Init as CleanRL: orthogonal, sqrt(2)
    hidden, 0.01 for the policy head and 1.0 for the value head, zero biases.
    """

    num_outputs: int
    hidden_sizes: Sequence[int]
    activation: str
    continuous: bool

    @nn.compact
    def __call__(self, obs: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array | None]:
        x = obs.reshape((obs.shape[0], -1)).astype(jnp.float32)
        actor_out = MLP(self.hidden_sizes, self.activation, self.num_outputs, 0.01, name="actor")(x)
        value = MLP(self.hidden_sizes, self.activation, 1, 1.0, name="critic")(x)[:, 0]
        log_std = None
        if self.continuous:
            log_std = self.param("log_std", nn.initializers.zeros, (self.num_outputs,))
        return actor_out, value, log_std


class DenseStack(nn.Module):
    """Dense layers with orthogonal(sqrt 2) init, each followed by the activation.

    x `[B, D]` float32 -> `[B, hidden_sizes[-1]]`.
    """

    hidden_sizes: Sequence[int]
    activation: str

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        act = _ACTIVATIONS[self.activation]
        for size in self.hidden_sizes:
            x = act(nn.Dense(size, kernel_init=nn.initializers.orthogonal(math.sqrt(2.0)))(x))
        return x


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


class Conv2D(nn.Module):
    """2-d convolution with flax `nn.Conv`'s parameters, computed as im2col + one matmul.

    Params `kernel` `[k, k, C_in, features]` and `bias` `[features]`, as `nn.Conv` (same
    outputs, tested). x float32 `[B, H, W, C_in]` -> `[B, H', W', features]`. Why not
    `nn.Conv`: on CPU, XLA runs convolutions inside `lax.scan` / `while` bodies (PPO's
    minibatch loop) about 6x slower than the same convolution outside; the matmul form is
    as fast in both places.
    """

    features: int
    kernel_size: int
    stride: int = 1
    padding: str = "VALID"  # or "SAME"
    kernel_init: Callable = nn.initializers.lecun_normal()

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        k, s = self.kernel_size, self.stride
        kernel = self.param("kernel", self.kernel_init, (k, k, x.shape[-1], self.features))
        bias = self.param("bias", nn.initializers.zeros, (self.features,))
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
    """The conv stack of the Nature DQN (Mnih et al. 2015), flattened.

    Defaults of the paper: 32 8x8 filters with stride 4, 64 4x4 with stride 2, 64 3x3 with
    stride 1, ReLU, VALID padding; orthogonal(sqrt 2) init as CleanRL's Atari agent.
    x float32 `[B, H, W, C]` -> `[B, H' * W' * C']` (flattened in H, W, C order).
    """

    channels: Sequence[int]
    kernel_sizes: Sequence[int]
    strides: Sequence[int]
    activation: str

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        act = _ACTIVATIONS[self.activation]
        for channels, kernel, stride in zip(
            self.channels, self.kernel_sizes, self.strides, strict=True
        ):
            x = Conv2D(
                channels,
                kernel,
                stride,
                padding="VALID",
                kernel_init=nn.initializers.orthogonal(math.sqrt(2.0)),
            )(x)
            x = act(x)
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
    """IMPALA residual block: x + conv(act(conv(act(x)))), 3x3 convs with SAME padding."""

    channels: int
    activation: str

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        act = _ACTIVATIONS[self.activation]
        y = Conv2D(self.channels, 3, padding="SAME")(act(x))
        y = Conv2D(self.channels, 3, padding="SAME")(act(y))
        return x + y


class ImpalaCNN(nn.Module):
    """The IMPALA ResNet encoder (Espeholt et al. 2018, fig. 3) with CoordConv channels.

    x float32 `[B, H, W, C]` -> coord_channels -> per stage (`channels`, IMPALA: 16, 32,
    32): 3x3 conv, 3x3 max-pool with stride 2 (SAME), two `ResidualBlock`s; then act and
    flatten to `[B, ceil(H / 2^S) * ceil(W / 2^S) * channels[-1]]` (S stages). Flax's
    default (LeCun normal) conv init.
    """

    channels: Sequence[int]
    activation: str

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        x = coord_channels(x)
        for channels in self.channels:
            x = Conv2D(channels, 3, padding="SAME")(x)
            x = max_pool(x, 3, 2)
            x = ResidualBlock(channels, self.activation)(x)
            x = ResidualBlock(channels, self.activation)(x)
        x = _ACTIVATIONS[self.activation](x)
        return x.reshape((x.shape[0], -1))


class Encoder(nn.Module):
    """Per-input encoders, concatenated: observation -> features float32 `[B, F]`.

    Each `ObsInput` gets the conv encoder (images, when `encoder` is "cnn" / "impala";
    normalised first) or is flattened, and then its own `hidden_sizes` dense layers
    (submodules `<name>_cnn` / `<name>_impala` and `<name>_mlp`). The features of several
    inputs are concatenated in `inputs` order.
    """

    inputs: tuple[ObsInput, ...]
    encoder: str
    hidden_sizes: Sequence[int]
    activation: str
    cnn_channels: Sequence[int]
    cnn_kernel_sizes: Sequence[int]
    cnn_strides: Sequence[int]
    impala_channels: Sequence[int]

    @nn.compact
    def __call__(self, obs: Any) -> jax.Array:
        features = []
        for spec in self.inputs:
            x = jnp.asarray(_leaf(obs, spec.path)).astype(jnp.float32)
            batch = x.shape[0]
            if spec.image and self.encoder != "mlp":
                if (spec.shift, spec.scale) != (0.0, 1.0):
                    x = (x - spec.shift) / spec.scale
                if self.encoder == "cnn":
                    x = NatureCNN(
                        self.cnn_channels,
                        self.cnn_kernel_sizes,
                        self.cnn_strides,
                        self.activation,
                        name=f"{spec.name}_cnn",
                    )(x)
                else:
                    x = ImpalaCNN(
                        self.impala_channels, self.activation, name=f"{spec.name}_impala"
                    )(x)
            else:
                x = x.reshape((batch, -1))
            x = DenseStack(self.hidden_sizes, self.activation, name=f"{spec.name}_mlp")(x)
            features.append(x)
        return features[0] if len(features) == 1 else jnp.concatenate(features, axis=-1)


class EncoderActorCritic(nn.Module):
    """Actor-critic on `Encoder` features: separate or shared encoders, linear heads.

    Submodules: `encoder` (shared) or `actor_encoder` and `critic_encoder`, then
    `actor_head` (Dense, orthogonal 0.01) and `critic_head` (Dense, orthogonal 1.0), and
    the state-independent `log_std` `[A]` for Box actions. Returns `(actor_out [B, A],
    value [B], log_std [A] or None)` like `ActorCritic`.
    """

    num_outputs: int
    continuous: bool
    share_encoder: bool
    inputs: tuple[ObsInput, ...]
    encoder: str
    hidden_sizes: Sequence[int]
    activation: str
    cnn_channels: Sequence[int]
    cnn_kernel_sizes: Sequence[int]
    cnn_strides: Sequence[int]
    impala_channels: Sequence[int]

    @nn.compact
    def __call__(self, obs: Any) -> tuple[jax.Array, jax.Array, jax.Array | None]:
        def make_encoder(name: str) -> Encoder:
            return Encoder(
                self.inputs,
                self.encoder,
                self.hidden_sizes,
                self.activation,
                self.cnn_channels,
                self.cnn_kernel_sizes,
                self.cnn_strides,
                self.impala_channels,
                name=name,
            )

        if self.share_encoder:
            actor_features = critic_features = make_encoder("encoder")(obs)
        else:
            actor_features = make_encoder("actor_encoder")(obs)
            critic_features = make_encoder("critic_encoder")(obs)
        actor_out = nn.Dense(
            self.num_outputs, kernel_init=nn.initializers.orthogonal(0.01), name="actor_head"
        )(actor_features)
        value = nn.Dense(1, kernel_init=nn.initializers.orthogonal(1.0), name="critic_head")(
            critic_features
        )[:, 0]
        log_std = None
        if self.continuous:
            log_std = self.param("log_std", nn.initializers.zeros, (self.num_outputs,))
        return actor_out, value, log_std


class RecurrentActorCritic(nn.Module):
    """Encoder, recurrent core (LSTM or GRU), then actor and critic heads.

    Submodules: `encoder` (`Encoder`: flattened MLP or conv stack, then the `hidden_sizes`
    layers), `core` (`nn.OptimizedLSTMCell` or `nn.GRUCell` of `recurrent_size` units),
    `actor_head` and `critic_head` (one hidden layer of `hidden_sizes[-1]` units each, then
    a linear output, orthogonal 0.01 / 1.0 as `ActorCritic`) and `log_std` `[A]` for Box
    actions. The state of one env is ONE float32 vector `[S]`: the hidden state h (GRU,
    S = recurrent_size) or the LSTM's cell and hidden state concatenated, `[c, h]`
    (S = 2 * recurrent_size). Calling the module is one step for B envs: `(hidden [B, S],
    obs [B, ...]) -> (hidden [B, S], actor_out [B, A], value [B], log_std [A] or None)`;
    `make_recurrent_networks` scans the methods `encode` / `step_core` / `heads` over time.
    """

    num_outputs: int
    continuous: bool
    recurrent: str  # "lstm" or "gru"
    recurrent_size: int
    inputs: tuple[ObsInput, ...]
    encoder_kind: str
    hidden_sizes: Sequence[int]
    activation: str
    cnn_channels: Sequence[int]
    cnn_kernel_sizes: Sequence[int]
    cnn_strides: Sequence[int]
    impala_channels: Sequence[int]

    def setup(self) -> None:
        self.encoder = Encoder(
            self.inputs,
            self.encoder_kind,
            self.hidden_sizes,
            self.activation,
            self.cnn_channels,
            self.cnn_kernel_sizes,
            self.cnn_strides,
            self.impala_channels,
        )
        if self.recurrent == "lstm":
            self.core = nn.OptimizedLSTMCell(self.recurrent_size)
        else:
            self.core = nn.GRUCell(self.recurrent_size)
        width = (self.hidden_sizes[-1],)
        self.actor_head = MLP(width, self.activation, self.num_outputs, 0.01)
        self.critic_head = MLP(width, self.activation, 1, 1.0)
        if self.continuous:
            self.log_std = self.param("log_std", nn.initializers.zeros, (self.num_outputs,))

    def encode(self, obs: Any) -> jax.Array:
        """obs `[B, ...]` -> features `[B, F]`."""
        return self.encoder(obs)

    def step_core(self, hidden: jax.Array, features: jax.Array) -> tuple[jax.Array, jax.Array]:
        """One core step: (state `[B, S]`, features `[B, F]`) -> (state, output `[B, R]`)."""
        if self.recurrent == "lstm":
            size = self.recurrent_size
            (cell, h), out = self.core((hidden[:, :size], hidden[:, size:]), features)
            return jnp.concatenate([cell, h], axis=-1), out
        h, out = self.core(hidden, features)
        return h, out

    def heads(self, core_out: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array | None]:
        """Core outputs `[B, R]` -> (actor_out `[B, A]`, value `[B]`, log_std or None)."""
        log_std = self.log_std if self.continuous else None
        return self.actor_head(core_out), self.critic_head(core_out)[:, 0], log_std

    def __call__(self, hidden: jax.Array, obs: Any) -> tuple[jax.Array, ...]:
        hidden, out = self.step_core(hidden, self.encode(obs))
        return (hidden, *self.heads(out))


def recurrent_state_size(config: PPOConfig) -> int:
    """S, floats of recurrent state per env: 2 * recurrent_size (LSTM) or recurrent_size."""
    return 2 * config.recurrent_size if config.recurrent == "lstm" else config.recurrent_size


class RecurrentNetworks(NamedTuple):
    """What `make_recurrent_networks` returns (all pure functions).

    init(key) -> params
    apply(params, hidden [N, S], obs [T, N, ...], resets [T, N] bool)
        -> (hidden [N, S], dist with batch shape [T, N], value [T, N])
        Step t first zeroes the state of the envs with `resets[t]` (the previous step
        ended their episode), then runs the core; the returned state is after step T-1.
    step(params, hidden [N, S], obs [N, ...]) -> (hidden [N, S], dist [N], value [N])
        one step (no reset), as the rollout and `Policy.act` take it
    initial_hidden(batch) -> zeros [batch, S] float32
    """

    init: Callable[[jax.Array], Params]
    apply: Callable[..., tuple[jax.Array, Any, jax.Array]]
    step: Callable[..., tuple[jax.Array, Any, jax.Array]]
    initial_hidden: Callable[[int], jax.Array]


# --------------------------------------------------------------------- distributions
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


# --------------------------------------------------------------------- factory
def _check_action_mask(spec: ActionSpec, obs_space: Any, mask_key: str | None, env: Any) -> None:
    """ValueErrors for an action mask that does not fit the action space."""
    if mask_key is None:
        return
    name = getattr(env, "name", type(env).__name__)
    if spec.kind not in ("discrete", "multi_discrete"):
        raise ValueError(
            f"action_mask_key={mask_key!r}: {name} observations carry an action mask but its "
            f"actions are {spec.kind}; masks apply to Discrete and MultiDiscrete actions only "
            "(set action_mask_key: null to feed the entry to the encoder instead)"
        )
    shape = tuple(int(s) for s in obs_space.spaces[mask_key].shape)
    if shape != (spec.num_actions,):
        raise ValueError(
            f"action_mask_key={mask_key!r}: the mask of {name} has shape {list(shape)}, but "
            f"its {spec.kind} actions need [{spec.num_actions}] (one flag per "
            f"{'action' if spec.discrete else 'value of each component, concatenated'})"
        )


def _check_config(
    config: PPOConfig, spec: ActionSpec, inputs: tuple[ObsInput, ...], env: Any
) -> None:
    """ValueErrors for settings that do not fit this env's spaces."""
    name = getattr(env, "name", type(env).__name__)
    if config.squash_actions:
        if spec.kind != "continuous":
            raise ValueError(
                f"squash_actions=True: only Box actions can be squashed; {name} has "
                f"{spec.kind} actions"
            )
        if not (np.all(np.isfinite(spec.low)) and np.all(np.isfinite(spec.high))):
            raise ValueError(
                f"squash_actions=True needs finite action bounds; {name} has "
                f"low={spec.low.tolist()}, high={spec.high.tolist()}"
            )
        if np.any(spec.high <= spec.low):
            raise ValueError(
                f"squash_actions=True needs low < high; {name} has "
                f"low={spec.low.tolist()}, high={spec.high.tolist()}"
            )
    if config.encoder == "mlp":
        return
    images = [i for i in inputs if i.image]
    if not images:
        raise ValueError(
            f"encoder={config.encoder!r} needs image observations [H, W, C] (rank 3); "
            f"{name} observations have shapes {[list(i.shape) for i in inputs]}; "
            "use encoder='mlp'"
        )
    if config.encoder == "cnn":
        for image in images:
            height, width = image.shape[:2]
            for kernel, stride in zip(config.cnn_kernel_sizes, config.cnn_strides, strict=True):
                height, width = (height - kernel) // stride + 1, (width - kernel) // stride + 1
                if min(height, width) < 1:
                    raise ValueError(
                        f"cnn_kernel_sizes={list(config.cnn_kernel_sizes)}, cnn_strides="
                        f"{list(config.cnn_strides)}: the VALID convs shrink the "
                        f"{list(image.shape)} observation {image.name!r} below 1x1; use "
                        "smaller kernels / strides (MinAtar 10x10: kernels [3], strides [1])"
                    )


def _recurrent_module(
    config: PPOConfig, spec: ActionSpec, inputs: tuple[ObsInput, ...]
) -> RecurrentActorCritic:
    return RecurrentActorCritic(
        num_outputs=spec.num_actions,
        continuous=spec.kind == "continuous",
        recurrent=config.recurrent,
        recurrent_size=config.recurrent_size,
        inputs=inputs,
        encoder_kind=config.encoder,
        hidden_sizes=tuple(config.hidden_sizes),
        activation=config.activation,
        cnn_channels=tuple(config.cnn_channels),
        cnn_kernel_sizes=tuple(config.cnn_kernel_sizes),
        cnn_strides=tuple(config.cnn_strides),
        impala_channels=tuple(config.impala_channels),
    )


def make_recurrent_networks(config: PPOConfig, env: Any, env_params: Any) -> RecurrentNetworks:
    """Builds the recurrent actor-critic (`RecurrentActorCritic`) of a `recurrent` config.

    The encoder runs on all T*N observations at once, the core is a `lax.scan` over the
    T steps (resetting the state where `resets`), the heads run on all T*N core outputs;
    PureJaxRL's recurrent PPO does the same, with the reset flag of the previous step.

    Raises:
      ValueError: if `config.recurrent` is None, or as `make_networks`.
    """
    if config.recurrent is None:
        raise ValueError("recurrent=None: make_recurrent_networks needs recurrent 'lstm' or 'gru'")
    spec = action_spec(env, env_params)
    obs_space = env.observation_space(env_params)
    encoded_space, mask_key = split_action_mask(obs_space, config.action_mask_key)
    _check_action_mask(spec, obs_space, mask_key, env)
    inputs = observation_inputs(encoded_space)
    _check_config(config, spec, inputs, env)
    module = _recurrent_module(config, spec, inputs)
    size = recurrent_state_size(config)
    squash = config.squash_actions

    def initial_hidden(batch: int) -> jax.Array:
        return jnp.zeros((batch, size), jnp.float32)

    def init(key: jax.Array) -> Params:
        return module.init(key, initial_hidden(1), _zeros_like_space(obs_space, 1))

    def apply(
        params: Params, hidden: jax.Array, obs: Any, resets: jax.Array
    ) -> tuple[jax.Array, distrax.Distribution, jax.Array]:
        steps, batch = resets.shape
        flat = jax.tree.map(lambda x: x.reshape((steps * batch, *x.shape[2:])), obs)
        features = module.apply(params, flat, method="encode")
        features = features.reshape((steps, batch, features.shape[-1]))

        def step(h, inputs):
            x, reset = inputs
            h = jnp.where(reset[:, None], 0.0, h)
            return module.apply(params, h, x, method="step_core")

        hidden, outs = jax.lax.scan(step, hidden, (features, resets))
        actor_out, value, log_std = module.apply(
            params, outs.reshape((steps * batch, outs.shape[-1])), method="heads"
        )
        actor_out = actor_out.reshape((steps, batch, actor_out.shape[-1]))
        mask = None if mask_key is None else obs[mask_key]
        dist = make_distribution(spec, actor_out, log_std, squash, mask)
        return hidden, dist, value.reshape((steps, batch))

    def step(
        params: Params, hidden: jax.Array, obs: Any
    ) -> tuple[jax.Array, distrax.Distribution, jax.Array]:
        hidden, actor_out, value, log_std = module.apply(params, hidden, obs)
        mask = None if mask_key is None else obs[mask_key]
        return hidden, make_distribution(spec, actor_out, log_std, squash, mask), value

    return RecurrentNetworks(init=init, apply=apply, step=step, initial_hidden=initial_hidden)


def make_networks(
    config: PPOConfig, env: Any, env_params: Any
) -> tuple[Callable[[jax.Array], Params], Callable[[Params, Any], tuple[Any, jax.Array]]]:
    """Builds the actor-critic for an environment.

    Args:
      config: uses `hidden_sizes`, `activation`, `encoder`, `cnn_channels`,
        `cnn_kernel_sizes`, `cnn_strides`, `impala_channels`, `share_encoder`,
        `squash_actions` and `action_mask_key`.
      env, env_params: a gymnax-API environment: Discrete, Box, MultiDiscrete or
        MultiBinary actions; observations an array of any shape (flattened for the MLP,
        `[H, W, C]` for the conv encoders) or a gymnax `Dict` / `Tuple` of arrays.

    For a `recurrent` config, `apply(params, obs)` is ONE step from the zero state (what an
    episode's first step computes); sequences and carried states go through
    `make_recurrent_networks`.

    Returns:
      `(init, apply)`: `init(key) -> params`; `apply(params, obs)` with obs
      `[B, *obs_shape]` (or a dict / tuple of such arrays) returns `(dist, value)`, a
      distrax distribution over actions with batch shape `[B]` (see `make_distribution`;
      Box actions: `MultivariateNormalDiag` over `[B, A]` unclipped actions, or
      `SquashedDiagGaussian` over actions within the bounds) and float32 values `[B]`.

    Raises:
      ValueError: for an unsupported action space, or settings that do not fit the env
        (conv encoder without image observations, convs that shrink the image below 1x1,
        `squash_actions` without finite Box bounds, an action mask on Box / MultiBinary
        actions or of the wrong shape), naming the field and value.
    """
    if config.recurrent is not None:
        # One step from the zero state (what a fresh episode's first step computes); the
        # rollout and the update use `make_recurrent_networks` for whole sequences.
        nets = make_recurrent_networks(config, env, env_params)

        def apply_first_step(params: Params, obs: Any) -> tuple[distrax.Distribution, jax.Array]:
            batch = jax.tree.leaves(obs)[0].shape[0]
            _, dist, value = nets.step(params, nets.initial_hidden(batch), obs)
            return dist, value

        return nets.init, apply_first_step
    spec = action_spec(env, env_params)
    obs_space = env.observation_space(env_params)
    encoded_space, mask_key = split_action_mask(obs_space, config.action_mask_key)
    _check_action_mask(spec, obs_space, mask_key, env)
    inputs = observation_inputs(encoded_space)
    _check_config(config, spec, inputs, env)
    continuous = spec.kind == "continuous"
    plain = len(inputs) == 1 and inputs[0].path == ()
    if config.encoder == "mlp" and not config.share_encoder and plain:
        module: nn.Module = ActorCritic(
            num_outputs=spec.num_actions,
            hidden_sizes=tuple(config.hidden_sizes),
            activation=config.activation,
            continuous=continuous,
        )
    else:
        module = EncoderActorCritic(
            num_outputs=spec.num_actions,
            continuous=continuous,
            share_encoder=config.share_encoder,
            inputs=inputs,
            encoder=config.encoder,
            hidden_sizes=tuple(config.hidden_sizes),
            activation=config.activation,
            cnn_channels=tuple(config.cnn_channels),
            cnn_kernel_sizes=tuple(config.cnn_kernel_sizes),
            cnn_strides=tuple(config.cnn_strides),
            impala_channels=tuple(config.impala_channels),
        )
    dummy_obs = _zeros_like_space(obs_space, 1)
    squash = config.squash_actions

    def init(key: jax.Array) -> Params:
        return module.init(key, dummy_obs)

    def apply(params: Params, obs: Any) -> tuple[distrax.Distribution, jax.Array]:
        actor_out, value, log_std = module.apply(params, obs)
        mask = None if mask_key is None else obs[mask_key]
        return make_distribution(spec, actor_out, log_std, squash, mask), value

    return init, apply
