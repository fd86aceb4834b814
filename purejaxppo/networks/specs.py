"""Static descriptions of what a network consumes and produces.

`ActionSpec` (action spaces, with an explicit `kind`), `ObsInput` (the arrays of an
observation, with their rescaling), `EncoderSettings` / `CoreSettings` (the network
fields of `PPOConfig` in one hashable object each), and the checks that a config fits an
environment's spaces. Nothing here builds a module.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from gymnax.environments import spaces

from purejaxppo.config import PPOConfig
from purejaxppo.envs.spaces import MultiBinary, MultiDiscrete

#: The action kinds an `ActionSpec` can have.
ACTION_KINDS = ("discrete", "continuous", "multi_discrete", "multi_binary")


# --------------------------------------------------------------------- actions
class ActionSpec(NamedTuple):
    """Static description of an action space.

    Attributes:
      kind: "discrete" (`Discrete(n)`), "continuous" (`Box`), "multi_discrete"
        (`MultiDiscrete(nvec)`) or "multi_binary" (`MultiBinary(n)`).
      num_actions: width of the actor output: categories (discrete), action dimensions
        (continuous), sum(nvec) (multi_discrete) or bits (multi_binary).
      shape: shape of one action as the env takes it (`()` for discrete).
      low, high: float32 numpy bounds `[*shape]` (continuous), else None.
      nvec: values per component (multi_discrete), else None.
    """

    kind: str
    num_actions: int
    shape: tuple[int, ...]
    low: Any = None
    high: Any = None
    nvec: tuple[int, ...] | None = None

    @property
    def discrete(self) -> bool:
        """True for a single categorical action (`Discrete(n)`)."""
        return self.kind == "discrete"


def action_spec(env: Any, env_params: Any) -> ActionSpec:
    """Reads a gymnax action space into an `ActionSpec`.

    Supported: gymnax `Discrete` and `Box`, and `MultiDiscrete` / `MultiBinary` from
    `purejaxppo.envs.spaces`.

    Raises:
      ValueError: for any other action space (e.g. dict or tuple actions).
    """
    space = env.action_space(env_params)
    if isinstance(space, spaces.Discrete):
        return ActionSpec("discrete", int(space.n), ())
    if isinstance(space, spaces.Box):
        shape = tuple(int(s) for s in np.shape(np.zeros(space.shape)))
        low = np.broadcast_to(np.asarray(space.low, np.float32), shape)
        high = np.broadcast_to(np.asarray(space.high, np.float32), shape)
        return ActionSpec("continuous", int(np.prod(shape)) if shape else 1, shape, low, high)
    if isinstance(space, MultiDiscrete):
        return ActionSpec("multi_discrete", sum(space.nvec), space.shape, nvec=space.nvec)
    if isinstance(space, MultiBinary):
        return ActionSpec("multi_binary", space.n, space.shape)
    raise ValueError(
        f"action space {type(space).__name__} of {getattr(env, 'name', env)} is not supported; "
        "purejaxppo handles Discrete (categorical), Box (diagonal Gaussian), MultiDiscrete "
        "(independent categoricals) and MultiBinary (Bernoulli per bit) actions "
        "(the last two from purejaxppo.envs.spaces)"
    )


# --------------------------------------------------------------------- observations
class ObsInput(NamedTuple):
    """One array of an observation (the whole of it, or one entry of a dict / tuple).

    Encoders rescale inputs as `(x - shift) / scale` (float32) before anything else.
    """

    name: str  # "obs" for a plain array, else the dict keys / tuple indices joined by "_"
    path: tuple[Any, ...]  # keys / indices leading to the array in the observation; () plain
    shape: tuple[int, ...]  # one observation, without the batch axis
    image: bool  # rank 3, [H, W, C] channels last
    shift: float  # 0.0 unless the bounds say otherwise
    scale: float  # 1.0 unless the dtype / bounds say otherwise
    one_hot: int = 0  # n for a Discrete(n) input (one-hot encoded, DTI's get_obs_shape), else 0

    @property
    def rescaled(self) -> bool:
        return (self.shift, self.scale) != (0.0, 1.0)


def observation_inputs(space: Any) -> tuple[ObsInput, ...]:
    """The arrays of an observation space, in a fixed order (dict keys sorted).

    Image inputs (rank 3) are rescaled to [0, 1] from their bounds when these are finite,
    uniform and not already [0, 1]; integer images without finite bounds are divided by
    255 (uint8 pixels). Bool frames (MinAtar) need no rescaling. The rescaling applies
    whatever the encoder (the MLP encoder sees [0, 1] pixels too). `Discrete(n)` inputs
    (an integer index, shape `()`) are one-hot encoded to `[n]` floats, always.
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
        one_hot = int(node.n) if isinstance(node, spaces.Discrete) else 0
        return [ObsInput(name, path, shape, image, shift, scale, one_hot)]

    return tuple(visit(space, ()))


def split_action_mask(space: Any, mask_key: str | None) -> tuple[Any, str | None]:
    """`(space the encoders see, mask key or None)` of an observation space.

    With `mask_key` naming an entry of a gymnax `Dict` space, that entry is removed from
    the space (the encoders never see it) and the key is returned; otherwise the space
    is returned unchanged with None.

    Raises:
      ValueError: if the mask is the only entry.
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


def leaf(obs: Any, path: tuple[Any, ...]) -> jax.Array:
    """The array at `path` (dict keys / tuple indices) of an observation."""
    for key in path:
        obs = obs[key]
    return obs


def zeros_like_space(space: Any, batch: int) -> Any:
    """All-zero float32 observations `[batch, ...]` with the space's structure."""
    if isinstance(space, spaces.Dict):
        return {k: zeros_like_space(s, batch) for k, s in space.spaces.items()}
    if isinstance(space, spaces.Tuple):
        return tuple(zeros_like_space(s, batch) for s in space.spaces)
    return jnp.zeros((batch, *space.shape), jnp.float32)


# --------------------------------------------------------------------- settings
class EncoderSettings(NamedTuple):
    """The encoder fields of a `PPOConfig` (see its docstring), hashable for flax.

    `conv_impl`: "auto" (im2col on CPU, `lax.conv` elsewhere), "im2col" or "xla".
    """

    kind: str = "mlp"  # "mlp", "cnn" or "impala" (encoder="nature" builds "cnn")
    hidden_sizes: tuple[int, ...] = (64, 64)
    activation: str = "tanh"
    cnn_channels: tuple[int, ...] = (32, 64, 64)
    cnn_kernel_sizes: tuple[int, ...] = (8, 4, 3)
    cnn_strides: tuple[int, ...] = (4, 2, 1)
    impala_channels: tuple[int, ...] = (16, 32, 32)
    conv_impl: str = "auto"
    latent_dim: int | None = None  # per-input projection width before the concatenation

    @classmethod
    def from_config(cls, config: PPOConfig) -> EncoderSettings:
        return cls(
            kind="cnn" if config.encoder == "nature" else config.encoder,
            hidden_sizes=tuple(config.hidden_sizes),
            activation=config.activation,
            cnn_channels=tuple(config.cnn_channels),
            cnn_kernel_sizes=tuple(config.cnn_kernel_sizes),
            cnn_strides=tuple(config.cnn_strides),
            impala_channels=tuple(config.impala_channels),
            conv_impl=config.conv_impl,
            latent_dim=config.latent_dim,
        )


class CoreSettings(NamedTuple):
    """The recurrent-core fields of a `PPOConfig`; `kind` None for feed-forward."""

    kind: str | None = None  # None, "lstm", "gru" or "transformer"
    size: int = 64  # recurrent_size (LSTM / GRU units)
    transformer_layers: int = 2
    transformer_heads: int = 2
    transformer_dim: int = 64
    memory_len: int = 10
    layers: int = 1  # recurrent_layers: stacked LSTM / GRU cells

    @classmethod
    def from_config(cls, config: PPOConfig) -> CoreSettings:
        return cls(
            kind=config.recurrent,
            size=config.recurrent_size,
            transformer_layers=config.transformer_layers,
            transformer_heads=config.transformer_heads,
            transformer_dim=config.transformer_dim,
            memory_len=config.memory_len,
            layers=config.recurrent_layers,
        )


# --------------------------------------------------------------------- checks
def env_label(env: Any) -> str:
    return getattr(env, "name", type(env).__name__)


def check_action_mask(spec: ActionSpec, obs_space: Any, mask_key: str | None, env: Any) -> None:
    """ValueErrors for an action mask that does not fit the action space."""
    if mask_key is None:
        return
    name = env_label(env)
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


def check_config(
    config: PPOConfig, spec: ActionSpec, inputs: tuple[ObsInput, ...], env: Any
) -> None:
    """ValueErrors for settings that do not fit this env's spaces."""
    name = env_label(env)
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
    if config.encoder in ("cnn", "nature"):
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
