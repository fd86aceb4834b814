"""PyTorch export of a purejaxppo actor-critic.

`export_torch(source, config, path)` converts the flax parameters of `ActorCritic` (the
default network), `EncoderActorCritic` (`encoder` "cnn" / "impala" or `share_encoder`) or
`RecurrentActorCritic` (`recurrent` "lstm" / "gru", with any encoder; all in
`purejaxppo.networks`) into an equivalent PyTorch module and writes four files. Not
exported yet (ValueError naming them): `squash_actions`, MultiDiscrete / MultiBinary
actions and dict / tuple observations (hence also action masks).

- `path` (e.g. `policy.pt`): a TorchScript module. Plain PyTorch loads it with
  `torch.jit.load(path)`, without JAX or purejaxppo. `m(obs) -> (actor_out, value)` for
  float32 obs `[B, *obs_shape]`: actor_out are the logits `[B, A]` (discrete) or the
  Gaussian mean `[B, A]` (continuous); value is `[B]`. `m.act_greedy(obs)` gives the
  greedy action as the env takes it: the argmax `[B]` (int64), or the mean reshaped to
  `[B, *action_shape]` and clipped to the Box bounds. Continuous policies also carry
  `m.log_std` `[A]` (std = exp(log_std), state-independent) and the `m.action_low`,
  `m.action_high` buffers `[*action_shape]`.
- Recurrent policies carry a float32 state `[B, S]` in and out, laid out as purejaxppo's
  (`make_recurrent_networks`, `Policy.hidden`), so states move between JAX and torch
  unchanged: the GRU's h (S = recurrent_size) or the LSTM's `[c, h]` (S = 2 *
  recurrent_size). `m(obs, state) -> (actor_out, value, state)`, `m.act_greedy(obs,
  state) -> (action, state)`, `m.initial_state(B)` (zeros `[B, S]`) and
  `m.reset_state(state, done [B])`, which zeroes the rows of envs whose episode ended:
  the caller resets, as `Policy.reset(done)`. The core is a `torch.nn.LSTMCell` /
  `torch.nn.GRUCell` (`m.core.cell`) holding flax's `OptimizedLSTMCell` / `GRUCell`
  weights; both compute the same function (see `_recurrent_state_dict_from_params`).
- `path.with_suffix(".state_dict.pt")`: the module's plain `state_dict` (`torch.save`).
- `path.with_suffix(".module.py")`: the source of the matching `nn.Module` (imports only
  torch): build `<meta["class_name"]>(**meta["constructor"])`, then `load_state_dict`.
- `path.with_suffix(".json")`: metadata (obs_shape, action kind, num_actions,
  hidden_sizes, activation, recurrent, the constructor arguments, ...; recurrent
  policies add recurrent_size, state_size and state_layout).

This module imports torch at the top; `purejaxppo.export.export_torch` imports it lazily,
so `import purejaxppo` never imports torch.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import sys
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NamedTuple

import jax
import numpy as np
import torch

from purejaxppo.config import PPOConfig
from purejaxppo.networks import (
    ActionSpec,
    action_spec,
    make_networks,
    observation_inputs,
    recurrent_state_size,
)

FORMAT = "purejaxppo-torch-export"
FORMAT_VERSION = 1
CLASS_NAME = "ActorCritic"  # the default network (flat MLPs, separate actor and critic)
ENCODER_CLASS_NAME = "EncoderActorCritic"  # encoder "cnn" / "impala", or share_encoder
RECURRENT_CLASS_NAME = "RecurrentActorCritic"  # recurrent "lstm" / "gru"

# What the exported modules compute (the metadata's "outputs").
OUTPUTS = (
    "forward(obs float32 [B, *obs_shape]) -> (logits [B, A] | mean [B, A], value [B]); "
    "act_greedy(obs) -> argmax [B] int64 | mean clipped to the bounds "
    "[B, *action_shape]; continuous: std = exp(log_std) [A]"
)
RECURRENT_OUTPUTS = (
    "forward(obs float32 [B, *obs_shape], state float32 [B, S]) -> (logits [B, A] | "
    "mean [B, A], value [B], state [B, S]); act_greedy(obs, state) -> (argmax [B] int64 | "
    "mean clipped to the bounds [B, *action_shape], state [B, S]); initial_state(B) -> "
    "zeros [B, S]; reset_state(state, done [B]) zeroes the rows of done (call it after "
    "each env step); state = state_layout ([c, h] for LSTM, [h] for GRU), as purejaxppo's; "
    "continuous: std = exp(log_std) [A]"
)

#: Activations the exported module implements, matching flax's defaults:
#: nn.gelu is the tanh approximation, nn.leaky_relu has negative_slope 0.01, nn.elu alpha 1.
TORCH_ACTIVATIONS = ("tanh", "relu", "gelu", "silu", "elu", "leaky_relu")

# The exported module's source, written verbatim to `<path>.module.py` and scripted from
# that file (so the TorchScript module and the source file are the same code). It must
# stay self-contained: only `torch` and `typing` imports, TorchScript-compatible.
MODULE_SOURCE = '''\
"""PyTorch actor-critic exported by purejaxppo (self-contained: imports only torch).

Load the weights exported beside this file:

    import importlib.util, json, torch
    spec = importlib.util.spec_from_file_location("policy_module", "policy.module.py")
    policy_module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(policy_module)
    meta = json.load(open("policy.json"))
    net = getattr(policy_module, meta["class_name"])(**meta["constructor"])
    net.load_state_dict(torch.load("policy.state_dict.pt"))
    logits_or_mean, value = net(obs)  # obs: float32 [B, *obs_shape]

(`meta["class_name"]` names the class: `ActorCritic`, `EncoderActorCritic` or
`RecurrentActorCritic`; the recurrent one also takes and returns its state, see below.)

`ActorCritic` mirrors purejaxppo.networks.ActorCritic (the default network): separate
actor and critic MLPs on the flattened observation, each `hidden_sizes` Linear layers
with `activation`, then a linear head (actor: num_actions logits or Gaussian mean;
critic: 1 value). `EncoderActorCritic` mirrors purejaxppo.networks.EncoderActorCritic
(`encoder` "cnn" / "impala", or `share_encoder`): Nature-DQN or IMPALA (CoordConv) conv
encoders on [H, W, C] images, then the `hidden_sizes` layers and linear heads.
`RecurrentActorCritic` mirrors purejaxppo.networks.RecurrentActorCritic (`recurrent`
"lstm" / "gru"): one encoder, an LSTM or GRU core, then actor and critic heads of one
hidden layer each; `forward(obs, state) -> (logits or mean, value, new state)`.
Continuous policies own a state-independent `log_std` [A] (std = exp(log_std)); the env
receives the action clipped to [action_low, action_high].
"""

from typing import Final, List, Optional, Tuple

import torch
import torch.nn.functional as F
from torch import nn

ACTIVATIONS = ("tanh", "relu", "gelu", "silu", "elu", "leaky_relu")


def activate(x: torch.Tensor, name: str) -> torch.Tensor:
    """The activations of flax.linen with flax's defaults."""
    if name == "tanh":
        return torch.tanh(x)
    if name == "relu":
        return F.relu(x)
    if name == "gelu":
        return F.gelu(x, approximate="tanh")  # flax nn.gelu defaults to the tanh form
    if name == "silu":
        return F.silu(x)
    if name == "elu":
        return F.elu(x, alpha=1.0)
    if name == "leaky_relu":
        return F.leaky_relu(x, negative_slope=0.01)
    raise ValueError("unknown activation " + name)


class MLP(nn.Module):
    """`hidden` Linear layers, each followed by the activation, then a Linear `head`."""

    activation: Final[str]

    def __init__(self, in_size: int, hidden_sizes: List[int], out_size: int, activation: str):
        super().__init__()
        if activation not in ACTIVATIONS:
            raise ValueError(f"activation must be one of {ACTIVATIONS}, got {activation!r}")
        layers = []
        last = int(in_size)
        for size in hidden_sizes:
            layers.append(nn.Linear(last, int(size)))
            last = int(size)
        self.hidden = nn.ModuleList(layers)
        self.head = nn.Linear(last, int(out_size))
        self.activation = activation

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.hidden:
            x = activate(layer(x), self.activation)
        return self.head(x)


class ActorCritic(nn.Module):
    """forward(obs [B, *obs_shape]) -> (logits or mean [B, A], value [B])."""

    continuous: Final[bool]
    obs_shape: List[int]
    action_shape: List[int]

    def __init__(
        self,
        obs_shape: List[int],
        num_actions: int,
        hidden_sizes: List[int],
        activation: str = "tanh",
        continuous: bool = False,
        action_shape: Optional[List[int]] = None,
    ):
        super().__init__()
        obs_size = 1
        for s in obs_shape:
            obs_size *= int(s)
        self.obs_shape = [int(s) for s in obs_shape]
        self.num_actions = int(num_actions)
        self.continuous = bool(continuous)
        self.action_shape = [int(s) for s in (action_shape or [])]
        self.actor = MLP(obs_size, list(hidden_sizes), self.num_actions, activation)
        self.critic = MLP(obs_size, list(hidden_sizes), 1, activation)
        if self.continuous:
            self.log_std = nn.Parameter(torch.zeros(self.num_actions))
            # Bounds of the Box action space; filled by load_state_dict.
            self.register_buffer("action_low", torch.zeros(self.action_shape))
            self.register_buffer("action_high", torch.zeros(self.action_shape))

    def forward(self, obs: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        x = obs.reshape(obs.shape[0], -1).to(torch.float32)
        return self.actor(x), self.critic(x)[:, 0]

    @torch.jit.export
    def act_greedy(self, obs: torch.Tensor) -> torch.Tensor:
        """Argmax action [B] (int64), or the mean [B, *action_shape] clipped to the bounds."""
        x = obs.reshape(obs.shape[0], -1).to(torch.float32)
        out = self.actor(x)
        if self.continuous:
            shape: List[int] = [out.shape[0]] + self.action_shape
            mean = out.reshape(shape)
            return torch.minimum(torch.maximum(mean, self.action_low), self.action_high)
        return torch.argmax(out, dim=-1)


def same_padding(size: int, kernel: int, stride: int) -> List[int]:
    """TensorFlow / flax "SAME" padding of one axis: [before, after]."""
    out = (size + stride - 1) // stride
    total = max((out - 1) * stride + kernel - size, 0)
    return [total // 2, total - total // 2]


class Conv(nn.Module):
    """Conv2d on NCHW after explicit zero padding [left, right, top, bottom] (flax's)."""

    padding: List[int]

    def __init__(
        self, in_channels: int, out_channels: int, kernel: int, stride: int, padding: List[int]
    ):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel, stride)
        self.padding = [int(p) for p in padding]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(F.pad(x, self.padding))


class NatureCNN(nn.Module):
    """Nature-DQN conv stack (VALID padding), each conv followed by the activation."""

    activation: Final[str]

    def __init__(
        self,
        in_shape: List[int],
        channels: List[int],
        kernel_sizes: List[int],
        strides: List[int],
        activation: str,
    ):
        super().__init__()
        height, width, in_channels = [int(s) for s in in_shape]
        layers = []
        for out_channels, kernel, stride in zip(channels, kernel_sizes, strides):
            layers.append(Conv(in_channels, int(out_channels), int(kernel), int(stride), [0, 0, 0, 0]))
            height = (height - int(kernel)) // int(stride) + 1
            width = (width - int(kernel)) // int(stride) + 1
            in_channels = int(out_channels)
        self.convs = nn.ModuleList(layers)
        self.out_size = height * width * in_channels
        self.activation = activation

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for conv in self.convs:
            x = activate(conv(x), self.activation)
        return x


class ResidualBlock(nn.Module):
    """x + conv(act(conv(act(x)))), 3x3 convs with SAME padding."""

    activation: Final[str]

    def __init__(self, channels: int, activation: str):
        super().__init__()
        self.convs = nn.ModuleList([Conv(channels, channels, 3, 1, [1, 1, 1, 1]) for _ in range(2)])
        self.activation = activation

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = x
        for conv in self.convs:
            y = conv(activate(y, self.activation))
        return x + y


class ImpalaStage(nn.Module):
    """3x3 conv, 3x3 max-pool with stride 2 (SAME: -inf padding), two residual blocks."""

    pool_padding: List[int]

    def __init__(self, in_channels: int, channels: int, height: int, width: int, activation: str):
        super().__init__()
        self.conv = Conv(in_channels, channels, 3, 1, [1, 1, 1, 1])
        pad_h, pad_w = same_padding(height, 3, 2), same_padding(width, 3, 2)
        self.pool_padding = [pad_w[0], pad_w[1], pad_h[0], pad_h[1]]
        self.blocks = nn.ModuleList([ResidualBlock(channels, activation) for _ in range(2)])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.pad(self.conv(x), self.pool_padding, value=float("-inf"))
        x = F.max_pool2d(x, 3, 2)
        for block in self.blocks:
            x = block(x)
        return x


def coordinates(n: int, like: torch.Tensor) -> torch.Tensor:
    """n values from -1 to 1 (0 for n = 1), as the CoordConv channels."""
    if n == 1:
        return torch.zeros(1, dtype=like.dtype, device=like.device)
    return torch.linspace(-1.0, 1.0, n, dtype=like.dtype, device=like.device)


class ImpalaCNN(nn.Module):
    """IMPALA ResNet on the input with CoordConv x / y channels appended."""

    activation: Final[str]

    def __init__(self, in_shape: List[int], channels: List[int], activation: str):
        super().__init__()
        height, width, in_channels = [int(s) for s in in_shape]
        in_channels += 2  # CoordConv
        stages = []
        for out_channels in channels:
            stages.append(ImpalaStage(in_channels, int(out_channels), height, width, activation))
            height, width, in_channels = (height + 1) // 2, (width + 1) // 2, int(out_channels)
        self.stages = nn.ModuleList(stages)
        self.out_size = height * width * in_channels
        self.activation = activation

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, height, width = x.shape[0], x.shape[2], x.shape[3]
        cols = coordinates(width, x).view(1, 1, 1, width).expand(batch, 1, height, width)
        rows = coordinates(height, x).view(1, 1, height, 1).expand(batch, 1, height, width)
        x = torch.cat([x, cols, rows], dim=1)
        for stage in self.stages:
            x = stage(x)
        return activate(x, self.activation)


class Encoder(nn.Module):
    """Observation [B, *obs_shape] -> features [B, hidden_sizes[-1]].

    Images [H, W, C] with a conv encoder: (x - obs_shift) / obs_scale, the conv stack (on
    NCHW), flattened in H, W, C order as in JAX; otherwise flattened. Then the
    `hidden_sizes` Linear layers, each followed by the activation.
    """

    use_conv: Final[bool]
    activation: Final[str]
    obs_shift: Final[float]
    obs_scale: Final[float]

    def __init__(
        self,
        obs_shape: List[int],
        encoder: str,
        hidden_sizes: List[int],
        activation: str,
        cnn_channels: List[int],
        cnn_kernel_sizes: List[int],
        cnn_strides: List[int],
        impala_channels: List[int],
        obs_shift: float,
        obs_scale: float,
    ):
        super().__init__()
        self.use_conv = encoder != "mlp" and len(obs_shape) == 3
        size = 1
        for s in obs_shape:
            size *= int(s)
        if self.use_conv and encoder == "cnn":
            conv = NatureCNN(obs_shape, cnn_channels, cnn_kernel_sizes, cnn_strides, activation)
            size = conv.out_size
            self.conv = conv
        elif self.use_conv:
            impala = ImpalaCNN(obs_shape, impala_channels, activation)
            size = impala.out_size
            self.conv = impala
        else:
            self.conv = nn.Identity()
        layers = []
        for width in hidden_sizes:
            layers.append(nn.Linear(size, int(width)))
            size = int(width)
        self.mlp = nn.ModuleList(layers)
        self.activation = activation
        self.obs_shift = float(obs_shift)
        self.obs_scale = float(obs_scale)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        x = obs.to(torch.float32)
        if self.use_conv:
            x = (x - self.obs_shift) / self.obs_scale
            x = self.conv(x.permute(0, 3, 1, 2)).permute(0, 2, 3, 1)
        x = x.reshape(x.shape[0], -1)
        for layer in self.mlp:
            x = activate(layer(x), self.activation)
        return x


class EncoderActorCritic(nn.Module):
    """forward(obs [B, *obs_shape]) -> (logits or mean [B, A], value [B]).

    Mirrors purejaxppo.networks.EncoderActorCritic: `encoder` (the actor's, or the one
    shared with the critic when share_encoder) and `critic_encoder`, then linear
    `actor_head` and `critic_head`.
    """

    continuous: Final[bool]
    share_encoder: Final[bool]
    obs_shape: List[int]
    action_shape: List[int]

    def __init__(
        self,
        obs_shape: List[int],
        num_actions: int,
        hidden_sizes: List[int],
        activation: str = "tanh",
        continuous: bool = False,
        action_shape: Optional[List[int]] = None,
        encoder: str = "mlp",
        share_encoder: bool = False,
        cnn_channels: Optional[List[int]] = None,
        cnn_kernel_sizes: Optional[List[int]] = None,
        cnn_strides: Optional[List[int]] = None,
        impala_channels: Optional[List[int]] = None,
        obs_shift: float = 0.0,
        obs_scale: float = 1.0,
    ):
        super().__init__()
        if activation not in ACTIVATIONS:
            raise ValueError(f"activation must be one of {ACTIVATIONS}, got {activation!r}")
        self.obs_shape = [int(s) for s in obs_shape]
        self.num_actions = int(num_actions)
        self.continuous = bool(continuous)
        self.share_encoder = bool(share_encoder)
        self.action_shape = [int(s) for s in (action_shape or [])]
        args = (
            self.obs_shape,
            encoder,
            [int(h) for h in hidden_sizes],
            activation,
            list(cnn_channels or [32, 64, 64]),
            list(cnn_kernel_sizes or [8, 4, 3]),
            list(cnn_strides or [4, 2, 1]),
            list(impala_channels or [16, 32, 32]),
            obs_shift,
            obs_scale,
        )
        self.encoder = Encoder(*args)
        self.critic_encoder = nn.Identity() if self.share_encoder else Encoder(*args)
        features = int(hidden_sizes[-1])
        self.actor_head = nn.Linear(features, self.num_actions)
        self.critic_head = nn.Linear(features, 1)
        if self.continuous:
            self.log_std = nn.Parameter(torch.zeros(self.num_actions))
            self.register_buffer("action_low", torch.zeros(self.action_shape))
            self.register_buffer("action_high", torch.zeros(self.action_shape))

    def forward(self, obs: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        actor_features = self.encoder(obs)
        if self.share_encoder:
            critic_features = actor_features
        else:
            critic_features = self.critic_encoder(obs)
        return self.actor_head(actor_features), self.critic_head(critic_features)[:, 0]

    @torch.jit.export
    def act_greedy(self, obs: torch.Tensor) -> torch.Tensor:
        """Argmax action [B] (int64), or the mean [B, *action_shape] clipped to the bounds."""
        out = self.actor_head(self.encoder(obs))
        if self.continuous:
            shape: List[int] = [out.shape[0]] + self.action_shape
            mean = out.reshape(shape)
            return torch.minimum(torch.maximum(mean, self.action_low), self.action_high)
        return torch.argmax(out, dim=-1)


class LSTMCore(nn.Module):
    """LSTM step on the state [c, h]: (features [B, F], state [B, 2R]) -> (state, h [B, R]).

    `cell` is a torch.nn.LSTMCell (gates i, f, g, o) holding the weights of flax's
    OptimizedLSTMCell, which computes the same function: flax's input kernels have no
    bias (bias_ih is 0), its recurrent ones carry the gate biases (bias_hh).
    """

    size: Final[int]

    def __init__(self, in_size: int, size: int):
        super().__init__()
        self.cell = nn.LSTMCell(int(in_size), int(size))
        self.size = int(size)

    def forward(self, x: torch.Tensor, state: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        c, h = state[:, : self.size], state[:, self.size :]
        h, c = self.cell(x, (h, c))
        return torch.cat([c, h], dim=-1), h


class GRUCore(nn.Module):
    """GRU step on the state h: (features [B, F], state [B, R]) -> (state, h [B, R]).

    `cell` is a torch.nn.GRUCell (gates r, z, n) holding the weights of flax's GRUCell,
    which computes the same function: n = tanh(W_in x + b_in + r * (W_hn h + b_hn)),
    h' = (1 - z) * n + z * h; flax has no bias on W_hr h and W_hz h (those rows of bias_hh
    are 0).
    """

    def __init__(self, in_size: int, size: int):
        super().__init__()
        self.cell = nn.GRUCell(int(in_size), int(size))

    def forward(self, x: torch.Tensor, state: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        h = self.cell(x, state)
        return h, h


class RecurrentActorCritic(nn.Module):
    """forward(obs [B, *obs_shape], state [B, S]) -> (logits or mean [B, A], value [B], state).

    Mirrors purejaxppo.networks.RecurrentActorCritic: `encoder` (as EncoderActorCritic's),
    `core` (LSTMCore or GRUCore of `recurrent_size` units R), then `actor_head` and
    `critic_head` (one hidden layer of hidden_sizes[-1] units each, then Linear).

    The state of one env is ONE float32 vector [S], laid out as in purejaxppo (states move
    between JAX and torch unchanged): the GRU's h (S = R), or the LSTM's cell and hidden
    state concatenated, [c, h] (S = 2R). A new episode starts from zeros: zero the rows of
    the envs whose episode ended before their next step (`reset_state(state, done)`, as
    purejaxppo's `Policy.reset(done)`); `initial_state(B)` is the state of B fresh envs.

        state = net.initial_state(num_envs)
        for t in range(T):
            action, state = net.act_greedy(obs, state)
            obs, reward, done = env.step(action)
            state = net.reset_state(state, done)
    """

    continuous: Final[bool]
    recurrent_size: Final[int]
    state_size: Final[int]
    obs_shape: List[int]
    action_shape: List[int]

    def __init__(
        self,
        obs_shape: List[int],
        num_actions: int,
        hidden_sizes: List[int],
        activation: str = "tanh",
        continuous: bool = False,
        action_shape: Optional[List[int]] = None,
        recurrent: str = "lstm",
        recurrent_size: int = 64,
        encoder: str = "mlp",
        cnn_channels: Optional[List[int]] = None,
        cnn_kernel_sizes: Optional[List[int]] = None,
        cnn_strides: Optional[List[int]] = None,
        impala_channels: Optional[List[int]] = None,
        obs_shift: float = 0.0,
        obs_scale: float = 1.0,
    ):
        super().__init__()
        if activation not in ACTIVATIONS:
            raise ValueError(f"activation must be one of {ACTIVATIONS}, got {activation!r}")
        if recurrent not in ("lstm", "gru"):
            raise ValueError(f"recurrent must be 'lstm' or 'gru', got {recurrent!r}")
        self.obs_shape = [int(s) for s in obs_shape]
        self.num_actions = int(num_actions)
        self.continuous = bool(continuous)
        self.action_shape = [int(s) for s in (action_shape or [])]
        self.recurrent_size = int(recurrent_size)
        self.state_size = 2 * self.recurrent_size if recurrent == "lstm" else self.recurrent_size
        self.encoder = Encoder(
            self.obs_shape,
            encoder,
            [int(h) for h in hidden_sizes],
            activation,
            list(cnn_channels or [32, 64, 64]),
            list(cnn_kernel_sizes or [8, 4, 3]),
            list(cnn_strides or [4, 2, 1]),
            list(impala_channels or [16, 32, 32]),
            obs_shift,
            obs_scale,
        )
        features = int(hidden_sizes[-1])
        if recurrent == "lstm":
            self.core = LSTMCore(features, self.recurrent_size)
        else:
            self.core = GRUCore(features, self.recurrent_size)
        self.actor_head = MLP(self.recurrent_size, [features], self.num_actions, activation)
        self.critic_head = MLP(self.recurrent_size, [features], 1, activation)
        if self.continuous:
            self.log_std = nn.Parameter(torch.zeros(self.num_actions))
            self.register_buffer("action_low", torch.zeros(self.action_shape))
            self.register_buffer("action_high", torch.zeros(self.action_shape))

    def forward(
        self, obs: torch.Tensor, state: torch.Tensor
    ) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """One step of B envs.

        Args:
          obs: [B, *obs_shape], any real dtype (cast to float32).
          state: float32 [B, S], the state before this step (zero rows: new episodes).

        Returns:
          (logits [B, A] or Gaussian mean [B, A], value [B], state after the step [B, S]),
          all float32.
        """
        state, out = self.core(self.encoder(obs), state)
        return self.actor_head(out), self.critic_head(out)[:, 0], state

    @torch.jit.export
    def act_greedy(
        self, obs: torch.Tensor, state: torch.Tensor
    ) -> Tuple[torch.Tensor, torch.Tensor]:
        """(argmax [B] int64, or the mean [B, *action_shape] clipped to the bounds; state)."""
        state, out = self.core(self.encoder(obs), state)
        actor_out = self.actor_head(out)
        if self.continuous:
            shape: List[int] = [actor_out.shape[0]] + self.action_shape
            mean = actor_out.reshape(shape)
            action = torch.minimum(torch.maximum(mean, self.action_low), self.action_high)
            return action, state
        return torch.argmax(actor_out, dim=-1), state

    @torch.jit.export
    def initial_state(self, batch: int) -> torch.Tensor:
        """Zeros [batch, S] float32 on the module's device: the state of fresh episodes."""
        weight = self.actor_head.head.weight
        return torch.zeros([batch, self.state_size], dtype=torch.float32, device=weight.device)

    @torch.jit.export
    def reset_state(self, state: torch.Tensor, done: torch.Tensor) -> torch.Tensor:
        """The state [B, S] with the rows of `done` [B] (bool or 0/1) zeroed."""
        return torch.where(done.reshape(-1, 1) != 0, torch.zeros_like(state), state)
'''


class ExportPaths(NamedTuple):
    """The files `export_torch(..., path)` writes."""

    torchscript: Path  # path itself, e.g. policy.pt
    state_dict: Path  # policy.state_dict.pt
    module_source: Path  # policy.module.py
    metadata: Path  # policy.json


def export_paths(path: str | Path) -> ExportPaths:
    """The four files written for `path` (suffix of `path` replaced for the others)."""
    path = Path(path)
    return ExportPaths(
        torchscript=path,
        state_dict=path.with_suffix(".state_dict.pt"),
        module_source=path.with_suffix(".module.py"),
        metadata=path.with_suffix(".json"),
    )


def export_torch(
    source: Any,
    config: PPOConfig,
    path: str | Path,
    env: Any = None,
    env_params: Any = None,
    *,
    index: int | None = None,
) -> Path:
    """Writes a PyTorch copy of a trained actor-critic.

    Args:
      source: a `TrainOutput` (from `train(key, hparams)`), a `TrainState`, a
        `RunnerState`, or a flax params dict (`{"params": {"actor": ..., "critic": ...,
        "log_std": ...}}`, as `make_networks`'s `init` returns).
      config: the run's config; uses the network fields (`hidden_sizes`, `activation`,
        `encoder` and its conv settings, `share_encoder`, `recurrent`, `recurrent_size`)
        and `env_name` / `env_kwargs` when `env` is not given.
      path: the TorchScript file to write (e.g. "policy.pt"); the state dict, module
        source and metadata go beside it (see `export_paths`). Parent folders are made.
      env, env_params: the gymnax environment; default
        `purejaxppo.make_env(config.env_name, config.env_kwargs)`. `env_params` defaults
        to `env.default_params`.
      index: for a source trained under `jax.vmap` (params with a leading `[S]` axis),
        which agent to export.

    Returns:
      `path` as a `Path`.

    Raises:
      ValueError: for an unsupported activation or action space (MultiDiscrete,
        MultiBinary), `squash_actions` (not exported yet, the message names the field),
        dict / tuple observations, settings that do not fit the env (as
        `make_networks`), a source that holds no params, or a param tree that does not
        match the config and env (naming the missing, unexpected or mis-shaped entries).
    """
    paths = export_paths(path)
    if len(set(paths)) != len(paths):
        raise ValueError(f"path {str(path)!r} clashes with its side files {list(map(str, paths))}")
    if config.activation not in TORCH_ACTIVATIONS:
        raise ValueError(
            f"activation={config.activation!r} has no PyTorch export; "
            f"supported: {', '.join(TORCH_ACTIVATIONS)}"
        )
    if config.squash_actions:
        raise ValueError(
            "squash_actions=True has no PyTorch export yet: the exported act_greedy clips "
            "the Gaussian mean to the bounds (squash_actions=False)"
        )
    if env is None:
        from purejaxppo.envs import make_env

        env, default_params = make_env(config.env_name, config.env_kwargs)
        env_params = default_params if env_params is None else env_params
    elif env_params is None:
        env_params = env.default_params
    spec = action_spec(env, env_params)
    if spec.kind not in ("discrete", "continuous"):
        raise ValueError(
            f"{spec.kind} actions ({env.action_space(env_params)!r}) have no PyTorch export "
            "yet; supported: Discrete and Box action spaces"
        )
    obs_space = env.observation_space(env_params)
    if not hasattr(obs_space, "shape"):
        raise ValueError(
            f"{type(obs_space).__name__} observations have no PyTorch export yet; supported: "
            "one array observation"
        )
    obs_shape = tuple(int(s) for s in obs_space.shape)
    hidden_sizes = tuple(int(h) for h in config.hidden_sizes)

    params = _params_from_source(source)
    constructor = {
        "obs_shape": list(obs_shape),
        "num_actions": spec.num_actions,
        "hidden_sizes": list(hidden_sizes),
        "activation": config.activation,
        "continuous": not spec.discrete,
        "action_shape": list(spec.shape),
    }
    if config.recurrent is None and config.encoder == "mlp" and not config.share_encoder:
        class_name = CLASS_NAME
        flat = _select_agent(
            _flatten_params(params), _expected_shapes(obs_shape, spec, hidden_sizes), index
        )
        arrays = _state_dict_from_params(flat, obs_shape, spec, hidden_sizes)
    else:
        # The JAX network's own param shapes (make_networks also rejects settings that do
        # not fit the env, e.g. a conv encoder on vector observations).
        init, _ = make_networks(config, env, env_params)
        expected = _abstract_shapes(jax.eval_shape(init, jax.random.key(0)))
        flat = _select_agent(_flatten_params(params), expected, index)
        if config.recurrent is None:
            class_name = ENCODER_CLASS_NAME
            arrays = _encoder_state_dict_from_params(flat, config, spec)
            constructor["share_encoder"] = config.share_encoder
        else:
            # One encoder feeds the core and both heads (share_encoder has no effect).
            class_name = RECURRENT_CLASS_NAME
            arrays = _recurrent_state_dict_from_params(flat, config, spec)
            constructor.update(recurrent=config.recurrent, recurrent_size=config.recurrent_size)
        (obs_input,) = observation_inputs(obs_space)
        constructor.update(
            encoder=config.encoder,
            cnn_channels=list(config.cnn_channels),
            cnn_kernel_sizes=list(config.cnn_kernel_sizes),
            cnn_strides=list(config.cnn_strides),
            impala_channels=list(config.impala_channels),
            obs_shift=obs_input.shift,
            obs_scale=obs_input.scale,
        )

    paths.torchscript.parent.mkdir(parents=True, exist_ok=True)
    paths.module_source.write_text(MODULE_SOURCE)
    module = load_module_source(paths.module_source)
    net = getattr(module, class_name)(**constructor)
    net.load_state_dict({k: torch.tensor(v) for k, v in arrays.items()}, strict=True)
    net.eval()
    with warnings.catch_warnings():
        # torch 2.13 marks torch.jit.script deprecated; TorchScript is still what
        # torch.jit.load reads without the Python class.
        warnings.simplefilter("ignore", DeprecationWarning)
        scripted = torch.jit.script(net)
    scripted.save(str(paths.torchscript))
    torch.save(net.state_dict(), paths.state_dict)

    meta = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "env_name": config.env_name,
        "env_kwargs": _json_safe(config.env_kwargs),
        "obs_shape": list(obs_shape),
        "obs_dtype": str(np.dtype(getattr(obs_space, "dtype", np.float32))),
        "action_kind": "discrete" if spec.discrete else "continuous",
        "num_actions": spec.num_actions,
        "action_shape": list(spec.shape),
        "action_low": None if spec.discrete else _json_floats(spec.low),
        "action_high": None if spec.discrete else _json_floats(spec.high),
        "hidden_sizes": list(hidden_sizes),
        "activation": config.activation,
        "encoder": config.encoder,
        "share_encoder": config.share_encoder,
        "recurrent": config.recurrent,
        "class_name": class_name,
        "constructor": constructor,
        "outputs": OUTPUTS if config.recurrent is None else RECURRENT_OUTPUTS,
        "files": {
            "torchscript": paths.torchscript.name,
            "state_dict": paths.state_dict.name,
            "module_source": paths.module_source.name,
        },
        "torch_version": torch.__version__,
    }
    if config.recurrent is not None:
        meta["recurrent_size"] = config.recurrent_size
        meta["state_size"] = recurrent_state_size(config)
        meta["state_layout"] = "[c, h]" if config.recurrent == "lstm" else "[h]"
    paths.metadata.write_text(json.dumps(meta, indent=2, allow_nan=False) + "\n")
    return paths.torchscript


def load_module_source(path: str | Path) -> Any:
    """Imports an exported `.module.py` file as a Python module (for scripting or use)."""
    path = Path(path)
    name = "purejaxppo_exported_policy"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ValueError(f"cannot import module source {path}")
    module = importlib.util.module_from_spec(spec)
    # Registered while it executes (dataclass-like lookups and inspect.getsource, which
    # torch.jit.script needs, resolve the class's module through sys.modules).
    previous = sys.modules.get(name)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    finally:
        if previous is None:
            sys.modules.pop(name, None)
        else:
            sys.modules[name] = previous
    return module


# --------------------------------------------------------------------- params


def _params_from_source(source: Any) -> Any:
    """Extracts the flax params tree from what `export_torch` accepts.

    Extension hook: add new kinds of source here (e.g. a checkpoint directory, restored
    to a params tree); everything after this works on the returned params.
    """
    from purejaxppo.types import RunnerState, TrainOutput, TrainState

    if isinstance(source, TrainOutput):
        return source.train_state.params
    if isinstance(source, RunnerState):
        return source.train_state.params
    if isinstance(source, TrainState):
        return source.params
    if isinstance(source, Mapping):
        return source
    if isinstance(source, (str, os.PathLike)):
        # A run directory: the params of its newest checkpoint (ValueError if none / corrupt).
        from purejaxppo.checkpoint import load_checkpoint

        return load_checkpoint(source).runner_state.train_state.params
    raise ValueError(
        f"cannot export from a {type(source).__name__}: pass a TrainOutput, TrainState, "
        "RunnerState or flax params dict"
    )


def _flatten_params(params: Any) -> dict[str, np.ndarray]:
    """`{"params": {"actor": {"Dense_0": {"kernel": x}}}}` -> `{"actor/Dense_0/kernel": x}`.

    Accepts the tree with or without the top-level "params" collection.
    """
    if not isinstance(params, Mapping):
        raise ValueError(f"params must be a mapping, got {type(params).__name__}")
    if "params" in params:
        extra = sorted(str(k) for k in params if k != "params")
        if extra:
            raise ValueError(f"params has collections other than 'params': {extra}")
        params = params["params"]
        if not isinstance(params, Mapping):
            raise ValueError(f"params['params'] must be a mapping, got {type(params).__name__}")
    flat: dict[str, np.ndarray] = {}

    def visit(prefix: str, node: Any) -> None:
        if isinstance(node, Mapping):
            for key, child in node.items():
                visit(f"{prefix}/{key}" if prefix else str(key), child)
        else:
            flat[prefix] = np.asarray(jax.device_get(node))

    visit("", params)
    return flat


def _expected_shapes(
    obs_shape: tuple[int, ...], spec: ActionSpec, hidden_sizes: tuple[int, ...]
) -> dict[str, tuple[int, ...]]:
    """Flat param names of `ActorCritic` and their shapes for this env and config."""
    obs_size = math.prod(obs_shape)
    shapes: dict[str, tuple[int, ...]] = {}
    for name, out_size in (("actor", spec.num_actions), ("critic", 1)):
        sizes = (obs_size, *hidden_sizes, out_size)
        for i in range(len(sizes) - 1):
            shapes[f"{name}/Dense_{i}/kernel"] = (sizes[i], sizes[i + 1])
            shapes[f"{name}/Dense_{i}/bias"] = (sizes[i + 1],)
    if not spec.discrete:
        shapes["log_std"] = (spec.num_actions,)
    return shapes


def _abstract_shapes(params: Any) -> dict[str, tuple[int, ...]]:
    """`jax.eval_shape(init, key)` -> `{"encoder/obs_cnn/Conv2D_0/kernel": shape, ...}`."""
    leaves = jax.tree_util.tree_flatten_with_path(params["params"])[0]
    return {"/".join(str(k.key) for k in path): tuple(leaf.shape) for path, leaf in leaves}


def _dense_arrays(flat: Mapping[str, np.ndarray], flax_name: str, torch_name: str) -> dict:
    """Flax Dense `kernel [in, out]`, `bias` -> torch Linear `weight [out, in]`, `bias`."""
    kernel = np.asarray(flat[f"{flax_name}/kernel"], np.float32)
    return {
        f"{torch_name}.weight": np.ascontiguousarray(kernel.T),
        f"{torch_name}.bias": np.asarray(flat[f"{flax_name}/bias"], np.float32),
    }


def _conv_arrays(flat: Mapping[str, np.ndarray], flax_name: str, torch_name: str) -> dict:
    """Flax conv `kernel [kh, kw, in, out]` -> torch Conv2d `weight [out, in, kh, kw]`."""
    kernel = np.asarray(flat[f"{flax_name}/kernel"], np.float32)
    return {
        f"{torch_name}.weight": np.ascontiguousarray(kernel.transpose(3, 2, 0, 1)),
        f"{torch_name}.bias": np.asarray(flat[f"{flax_name}/bias"], np.float32),
    }


def _encoder_arrays(
    flat: Mapping[str, np.ndarray], config: PPOConfig, flax_prefix: str, torch_prefix: str
) -> dict[str, np.ndarray]:
    """One flax `Encoder` (conv stack if any, then `obs_mlp`) -> the torch `Encoder`'s."""
    out: dict[str, np.ndarray] = {}
    if f"{flax_prefix}/obs_cnn/Conv2D_0/kernel" in flat:
        for i in range(len(config.cnn_channels)):
            out.update(
                _conv_arrays(
                    flat, f"{flax_prefix}/obs_cnn/Conv2D_{i}", f"{torch_prefix}.conv.convs.{i}.conv"
                )
            )
    if f"{flax_prefix}/obs_impala/Conv2D_0/kernel" in flat:
        for s in range(len(config.impala_channels)):
            stage = f"{torch_prefix}.conv.stages.{s}"
            out.update(
                _conv_arrays(flat, f"{flax_prefix}/obs_impala/Conv2D_{s}", f"{stage}.conv.conv")
            )
            for b in range(2):
                block = f"{flax_prefix}/obs_impala/ResidualBlock_{2 * s + b}"
                for j in range(2):
                    out.update(
                        _conv_arrays(
                            flat, f"{block}/Conv2D_{j}", f"{stage}.blocks.{b}.convs.{j}.conv"
                        )
                    )
    for i in range(len(config.hidden_sizes)):
        out.update(
            _dense_arrays(flat, f"{flax_prefix}/obs_mlp/Dense_{i}", f"{torch_prefix}.mlp.{i}")
        )
    return out


def _action_arrays(flat: Mapping[str, np.ndarray], spec: ActionSpec) -> dict[str, np.ndarray]:
    """Box actions: `log_std` [A] and the bound buffers [*action_shape]; nothing otherwise."""
    if spec.discrete:
        return {}
    return {
        "log_std": np.asarray(flat["log_std"], np.float32),
        "action_low": np.asarray(spec.low, np.float32).reshape(spec.shape),
        "action_high": np.asarray(spec.high, np.float32).reshape(spec.shape),
    }


def _encoder_state_dict_from_params(
    flat: Mapping[str, np.ndarray], config: PPOConfig, spec: ActionSpec
) -> dict[str, np.ndarray]:
    """Flat, checked flax params of `EncoderActorCritic` -> the torch module's state_dict.

    Flax conv kernels `[kh, kw, in, out]` become torch `[out, in, kh, kw]`; Dense kernels
    `[in, out]` become Linear weights `[out, in]`. Flax `encoder` (shared) or
    `actor_encoder` maps to torch `encoder`, flax `critic_encoder` to `critic_encoder`.
    """
    if config.share_encoder:
        encoders = [("encoder", "encoder")]
    else:
        encoders = [("actor_encoder", "encoder"), ("critic_encoder", "critic_encoder")]
    out: dict[str, np.ndarray] = {}
    for flax_prefix, torch_prefix in encoders:
        out.update(_encoder_arrays(flat, config, flax_prefix, torch_prefix))
    out.update(_dense_arrays(flat, "actor_head", "actor_head"))
    out.update(_dense_arrays(flat, "critic_head", "critic_head"))
    out.update(_action_arrays(flat, spec))
    return out


def _recurrent_state_dict_from_params(
    flat: Mapping[str, np.ndarray], config: PPOConfig, spec: ActionSpec
) -> dict[str, np.ndarray]:
    """Flat, checked flax params of `RecurrentActorCritic` -> the torch module's state_dict.

    The encoder and heads convert as in `_encoder_state_dict_from_params`. The core's
    per-gate flax kernels `[in, R]` stack, transposed, into torch's `[n_gates * R, in]`:

    - LSTM (`nn.OptimizedLSTMCell`: input kernels `ii, if, ig, io` without bias,
      recurrent kernels `hi, hf, hg, ho` with bias) -> `torch.nn.LSTMCell` in its gate
      order i, f, g, o; `bias_ih` = 0, `bias_hh` = the recurrent biases.
    - GRU (`nn.GRUCell`: input kernels `ir, iz, in` with bias, recurrent kernels `hr, hz`
      without and `hn` with bias) -> `torch.nn.GRUCell` in its gate order r, z, n;
      `bias_ih` = the input biases, `bias_hh` = [0, 0, b_hn]. Both compute
      n = tanh(W_in x + b_in + r * (W_hn h + b_hn)).
    """
    size = config.recurrent_size
    zeros = np.zeros(size, np.float32)

    def kernel(name: str) -> np.ndarray:
        return np.asarray(flat[f"core/{name}/kernel"], np.float32).T

    def bias(name: str) -> np.ndarray:
        key = f"core/{name}/bias"
        return np.asarray(flat[key], np.float32) if key in flat else zeros

    gates = "ifgo" if config.recurrent == "lstm" else "rzn"
    out = _encoder_arrays(flat, config, "encoder", "encoder")
    out["core.cell.weight_ih"] = np.ascontiguousarray(
        np.concatenate([kernel(f"i{g}") for g in gates])
    )
    out["core.cell.weight_hh"] = np.ascontiguousarray(
        np.concatenate([kernel(f"h{g}") for g in gates])
    )
    out["core.cell.bias_ih"] = np.concatenate([bias(f"i{g}") for g in gates])
    out["core.cell.bias_hh"] = np.concatenate([bias(f"h{g}") for g in gates])
    for head in ("actor_head", "critic_head"):
        out.update(_dense_arrays(flat, f"{head}/Dense_0", f"{head}.hidden.0"))
        out.update(_dense_arrays(flat, f"{head}/Dense_1", f"{head}.head"))
    out.update(_action_arrays(flat, spec))
    return out


def _inferred_hidden_sizes(flat: Mapping[str, np.ndarray]) -> list[int] | None:
    """Hidden sizes read off the actor's kernels (for error messages), or None."""
    sizes = []
    i = 0
    while f"actor/Dense_{i}/kernel" in flat:
        shape = np.shape(flat[f"actor/Dense_{i}/kernel"])
        if len(shape) < 2:
            return None
        sizes.append(int(shape[-1]))
        i += 1
    return sizes[:-1] if sizes else None


def _select_agent(
    flat: dict[str, np.ndarray], expected: dict[str, tuple[int, ...]], index: int | None
) -> dict[str, np.ndarray]:
    """Checks names and shapes against `expected`; picks agent `index` of vmapped params."""
    missing = sorted(set(expected) - set(flat))
    unexpected = sorted(set(flat) - set(expected))
    problems = []
    if missing:
        problems.append(f"missing {missing}")
    if unexpected:
        problems.append(f"unexpected {unexpected}")
    if not problems:
        if index is not None:
            batched = {k: np.shape(v) for k, v in flat.items()}
            if any(len(s) != len(expected[k]) + 1 for k, s in batched.items()):
                raise ValueError(
                    f"index={index} was given but the params have no leading agent axis"
                )
            sizes = {s[0] for s in batched.values()}
            if len(sizes) != 1 or not -min(sizes) <= index < min(sizes):
                raise ValueError(f"index={index} is out of range for {sorted(sizes)} agents")
            flat = {k: v[index] for k, v in flat.items()}
        wrong = {k: np.shape(v) for k, v in flat.items() if tuple(np.shape(v)) != expected[k]}
        if wrong:
            lead = {
                s[0]
                for k, s in wrong.items()
                if len(s) == len(expected[k]) + 1 and tuple(s[1:]) == expected[k]
            }
            if index is None and len(wrong) == len(flat) and len(lead) == 1:
                raise ValueError(
                    f"the params carry a leading axis of {lead.pop()} agents (trained under "
                    "jax.vmap); pass index=i to export agent i"
                )
            problems.extend(
                f"{k} has shape {tuple(s)}, expected {expected[k]}"
                for k, s in sorted(wrong.items())
            )
    if problems:
        hint = ""
        inferred = _inferred_hidden_sizes(flat)
        if inferred is not None:
            hint = f" (the params look like hidden_sizes={inferred})"
        raise ValueError(
            "param tree does not match the config and env (expected hidden_sizes="
            f"{list(_hidden_of(expected))}, {len(expected)} arrays{hint}): " + "; ".join(problems)
        )
    for k, v in flat.items():
        if not np.issubdtype(v.dtype, np.floating):
            raise ValueError(f"{k} has dtype {v.dtype}, expected a float array")
    return flat


def _hidden_of(expected: Mapping[str, tuple[int, ...]]) -> list[int]:
    sizes = []
    i = 0
    while f"actor/Dense_{i}/kernel" in expected:
        sizes.append(expected[f"actor/Dense_{i}/kernel"][1])
        i += 1
    return sizes[:-1]


def _state_dict_from_params(
    flat: Mapping[str, np.ndarray],
    obs_shape: tuple[int, ...],
    spec: ActionSpec,
    hidden_sizes: tuple[int, ...],
    *,
    transpose: bool = True,
) -> dict[str, np.ndarray]:
    """Flat, checked flax params -> float32 numpy arrays keyed like the torch state_dict.

    Flax Dense kernels are `[in, out]`, torch Linear weights `[out, in]`: kernels are
    transposed. `transpose=False` exists only for the tests, to show that the parity check
    catches a missing transpose.
    """
    n = len(hidden_sizes)
    out: dict[str, np.ndarray] = {}
    for name in ("actor", "critic"):
        for i in range(n + 1):
            prefix = f"{name}.hidden.{i}" if i < n else f"{name}.head"
            kernel = np.asarray(flat[f"{name}/Dense_{i}/kernel"], np.float32)
            out[f"{prefix}.weight"] = np.ascontiguousarray(kernel.T if transpose else kernel)
            out[f"{prefix}.bias"] = np.asarray(flat[f"{name}/Dense_{i}/bias"], np.float32)
    out.update(_action_arrays(flat, spec))
    return out


# --------------------------------------------------------------------- JSON helpers


def _json_floats(values: Any) -> Any:
    """Nested list of floats; +-inf as the strings "inf" / "-inf" (strict JSON)."""

    def conv(x: Any) -> Any:
        if isinstance(x, list):
            return [conv(v) for v in x]
        x = float(x)
        if math.isfinite(x):
            return x
        if math.isnan(x):
            return "nan"
        return "inf" if x > 0 else "-inf"

    return conv(np.asarray(values, np.float64).tolist())


def _json_safe(value: Any) -> Any:
    """env_kwargs as JSON: numbers, strings, lists and dicts kept, the rest as repr."""
    if isinstance(value, Mapping):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    if isinstance(value, (bool, int, str)) or value is None:
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else repr(value)
    if isinstance(value, (np.integer, np.floating, np.bool_)):
        return _json_safe(value.item())
    return repr(value)
