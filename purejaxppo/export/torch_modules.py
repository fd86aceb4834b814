"""PyTorch mirror of `purejaxppo.networks.ActorCritic` (imports torch, math and typing only).

This file is copied verbatim beside every export as `<stem>.module.py`; plain PyTorch
builds the policy from it without JAX or purejaxppo:

    meta = json.load(open("policy.json"))
    module = <import policy.module.py>
    net = getattr(module, meta["class_name"])(**meta["constructor"])
    net.load_state_dict(torch.load("policy.state_dict.pt"))

It computes the same functions as the flax module, on float32 tensors:

* `ActorCritic` (feed-forward): `net(obs) -> (actor_out [B, A], value [B])`,
  `net.act_greedy(obs) -> action`.
* `RecurrentActorCritic` (LSTM / GRU / transformer core): `net(obs, state [B, S]) ->
  (actor_out, value, state)`, `net.act_greedy(obs, state) -> (action, state)`,
  `net.initial_state(B)` (zeros) and `net.reset_state(state, done [B])` (zeroes the rows
  of ended episodes, as purejaxppo resets). The state has purejaxppo's layout, so it moves
  between JAX and torch unchanged: LSTM `[c, h]`, GRU `[h]`, transformer `[memory, flags]`;
  stacked cells (`layers` > 1) concatenate `[layer 0 S | layer 1 S | ...]`, separate
  actor / critic towers `[actor S | critic S]`.

`obs` is a tensor `[B, *obs_shape]` (plain observations), a dict of tensors (dict
observations, keys as the env's; the action-mask entry `mask_key`, if any, masks the
logits with -1e9 as purejaxppo does) or a tuple / list (tuple observations).
`actor_out` is the (masked) logits for Discrete `[B, n]`, MultiDiscrete `[B, sum(nvec)]`
and MultiBinary `[B, n]` actions, or the Gaussian mean `[B, A]` for Box actions (the
pre-tanh mean with `squash`; std = exp(`log_std`) `[A]`). Greedy actions: argmax `[B]`,
per-component argmax `[B, K]`, `logits > 0` `[B, n]` (int64), or the mean clipped to the
bounds / `mid + half * tanh(mean)` (squash), reshaped to `[B, *action_shape]`.

Parameter names follow the flax ones: `encoders.0` is `encoder` (shared) or
`actor_encoder`, `encoders.1` is `critic_encoder`; `cores.{0,1}` likewise;
`purejaxppo.export.param_map` maps flax params to this module's state_dict.
"""

import math
from typing import Any, Dict, Final, List, Optional, Tuple

import torch
import torch.nn.functional as F
from torch import nn

ACTIVATIONS = ("tanh", "relu", "gelu", "silu", "elu", "leaky_relu")
PAD_LOGIT = -1e9  # logit of masked actions, as purejaxppo.networks.PAD_LOGIT
MASKED_LOGIT = -1e9  # attention logit of an empty transformer memory slot
LAYER_NORM_EPS = 1e-6
GATE_BIAS_INIT = 2.0


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


def same_padding(size: int, kernel: int, stride: int) -> List[int]:
    """TensorFlow / flax "SAME" padding of one axis: [before, after]."""
    out = -(-size // stride)
    total = max((out - 1) * stride + kernel - size, 0)
    return [total // 2, total - total // 2]


# --------------------------------------------------------------------- layers
class DenseStack(nn.Module):
    """Linear layers `dense.<i>` (flax `dense_<i>`), each followed by the activation."""

    activation: Final[str]

    def __init__(self, in_size: int, sizes: List[int], activation: str):
        super().__init__()
        self.activation = activation
        widths = [in_size] + list(sizes)
        self.dense = nn.ModuleList(
            [nn.Linear(a, b) for a, b in zip(widths[:-1], widths[1:], strict=True)]
        )
        self.out_size = widths[-1]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.dense:
            x = activate(layer(x), self.activation)
        return x


class Head(nn.Module):
    """`DenseStack` then a linear `out` (flax `Head`)."""

    def __init__(self, in_size: int, sizes: List[int], activation: str, out_size: int):
        super().__init__()
        self.hidden = DenseStack(in_size, sizes, activation)
        self.out = nn.Linear(self.hidden.out_size, out_size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(self.hidden(x))


class NatureCNN(nn.Module):
    """Nature-DQN convs `convs.<i>` (flax `conv_<i>`), VALID; NHWC in, flat (H, W, C) out."""

    activation: Final[str]

    def __init__(
        self,
        shape: List[int],
        channels: List[int],
        kernels: List[int],
        strides: List[int],
        activation: str,
    ):
        super().__init__()
        self.activation = activation
        height, width, depth = shape
        convs = []
        for c, k, s in zip(channels, kernels, strides, strict=True):
            convs.append(nn.Conv2d(depth, c, k, s))
            height, width, depth = (height - k) // s + 1, (width - k) // s + 1, c
        self.convs = nn.ModuleList(convs)
        self.out_size = height * width * depth

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.permute(0, 3, 1, 2)
        for conv in self.convs:
            x = activate(conv(x), self.activation)
        return x.permute(0, 2, 3, 1).reshape(x.shape[0], -1)


class ResidualBlock(nn.Module):
    """x + conv_1(act(conv_0(act(x)))), 3x3 SAME convs `convs.{0,1}`."""

    activation: Final[str]

    def __init__(self, channels: int, activation: str):
        super().__init__()
        self.activation = activation
        self.convs = nn.ModuleList([nn.Conv2d(channels, channels, 3, 1, 1) for _ in range(2)])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = x
        for conv in self.convs:
            y = conv(activate(y, self.activation))
        return x + y


class ImpalaStage(nn.Module):
    """3x3 SAME conv `conv`, 3x3 max-pool stride 2 (SAME, -inf padding), `blocks.{0,1}`."""

    def __init__(self, in_channels: int, channels: int, height: int, width: int, activation: str):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, channels, 3, 1, 1)
        top, bottom = same_padding(height, 3, 2)
        left, right = same_padding(width, 3, 2)
        self.pool_pad = [left, right, top, bottom]
        self.blocks = nn.ModuleList([ResidualBlock(channels, activation) for _ in range(2)])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.pad(self.conv(x), self.pool_pad, value=-math.inf)
        x = F.max_pool2d(x, 3, 2)
        for block in self.blocks:
            x = block(x)
        return x


class ImpalaCNN(nn.Module):
    """IMPALA ResNet with 2 CoordConv channels (column, row in [-1, 1]) appended first."""

    activation: Final[str]

    def __init__(self, shape: List[int], channels: List[int], activation: str):
        super().__init__()
        self.activation = activation
        height, width, depth = shape

        def axis(n: int) -> List[float]:
            return [-1.0 + 2.0 * i / (n - 1) for i in range(n)] if n > 1 else [0.0]

        cols = torch.tensor(axis(width)).reshape(1, 1, width).expand(1, height, width)
        rows = torch.tensor(axis(height)).reshape(1, height, 1).expand(1, height, width)
        self.register_buffer("coords", torch.cat([cols, rows], 0).contiguous(), persistent=False)
        stages = []
        depth += 2
        for c in channels:
            stages.append(ImpalaStage(depth, c, height, width, activation))
            height, width, depth = -(-height // 2), -(-width // 2), c
        self.stages = nn.ModuleList(stages)
        self.out_size = height * width * depth

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.permute(0, 3, 1, 2)
        coords = self.coords.unsqueeze(0).expand(x.shape[0], -1, -1, -1)
        x = torch.cat([x, coords], 1)
        for stage in self.stages:
            x = stage(x)
        x = activate(x, self.activation)
        return x.permute(0, 2, 3, 1).reshape(x.shape[0], -1)


class InputEncoder(nn.Module):
    """One observation input: normalise (with `spec["normalize"]`: the training run's
    running statistics, buffers `norm_mean` and `norm_scale` = 1 / sqrt(var + 1e-8),
    clipped to +-`obs_clip`), rescale, conv stack (images) or flatten, then `mlp`."""

    rescaled: Final[bool]
    one_hot: Final[int]
    shift: Final[float]
    scale: Final[float]
    normalized: Final[bool]
    norm_clip: Final[float]
    has_latent: Final[bool]

    def __init__(self, spec: Dict[str, Any], encoder: Dict[str, Any]):
        super().__init__()
        shape = [int(s) for s in spec["shape"]]
        self.shift, self.scale = float(spec["shift"]), float(spec["scale"])
        self.rescaled = (self.shift, self.scale) != (0.0, 1.0)
        self.one_hot = int(spec.get("one_hot", 0))  # Discrete(n) index -> n floats
        if self.one_hot:
            shape = [self.one_hot]
        self.normalized = bool(spec.get("normalize", False))
        self.norm_clip = float(spec.get("obs_clip", "inf"))
        stats_shape = shape if self.normalized else [0]
        # Persistent (in the state_dict) only when used; filled by the export.
        self.register_buffer("norm_mean", torch.zeros(stats_shape), self.normalized)
        self.register_buffer("norm_scale", torch.ones(stats_shape), self.normalized)
        kind, act = encoder["kind"], encoder["activation"]
        if spec["image"] and kind == "cnn":
            self.conv = NatureCNN(
                shape,
                encoder["cnn_channels"],
                encoder["cnn_kernel_sizes"],
                encoder["cnn_strides"],
                act,
            )
            size = self.conv.out_size
        elif spec["image"] and kind == "impala":
            self.conv = ImpalaCNN(shape, encoder["impala_channels"], act)
            size = self.conv.out_size
        else:
            self.conv = nn.Flatten()
            size = math.prod(shape)
        self.mlp = DenseStack(size, encoder["hidden_sizes"], act)
        self.out_size = self.mlp.out_size
        # latent_dim: one more dense layer `latent` + activation (flax `<name>_latent`)
        latent = encoder.get("latent_dim")
        self.latent = DenseStack(self.out_size, [int(latent)] if latent else [], act)
        self.has_latent = bool(latent)
        self.out_size = self.latent.out_size

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.one_hot:
            x = F.one_hot(x.reshape(x.shape[0]).to(torch.int64), self.one_hot)
        x = x.to(torch.float32)
        if self.normalized:
            x = torch.clamp((x - self.norm_mean) * self.norm_scale, -self.norm_clip, self.norm_clip)
        if self.rescaled:
            x = (x - self.shift) / self.scale
        x = self.mlp(self.conv(x))
        if self.has_latent:
            x = self.latent(x)
        return x


class Encoder(nn.Module):
    """Per-input encoders `inputs.<i>` (flax `<name>_mlp`, ...), features concatenated."""

    def __init__(self, inputs: List[Dict[str, Any]], encoder: Dict[str, Any]):
        super().__init__()
        self.inputs = nn.ModuleList([InputEncoder(spec, encoder) for spec in inputs])
        self.out_size = sum(m.out_size for m in self.inputs)

    def forward(self, xs: List[torch.Tensor]) -> torch.Tensor:
        features: List[torch.Tensor] = []
        for i, encoder in enumerate(self.inputs):
            features.append(encoder(xs[i]))
        return torch.cat(features, -1)


# --------------------------------------------------------------------- cores
class LSTMCore(nn.Module):
    """flax `OptimizedLSTMCell` as `torch.nn.LSTMCell` `cell`; state `[c, h]`, S = 2 R."""

    size: Final[int]

    def __init__(self, in_size: int, size: int):
        super().__init__()
        self.size = size
        self.cell = nn.LSTMCell(in_size, size)

    def forward(self, state: torch.Tensor, x: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        h, c = self.cell(x, (state[:, self.size :], state[:, : self.size]))
        return torch.cat([c, h], -1), h


class GRUCore(nn.Module):
    """flax `GRUCell` as `torch.nn.GRUCell` `cell`; state `[h]`, S = R."""

    def __init__(self, in_size: int, size: int):
        super().__init__()
        self.cell = nn.GRUCell(in_size, size)

    def forward(self, state: torch.Tensor, x: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        h = self.cell(x, state)
        return h, h


# The gated transformer-XL core, mirrored from purejaxppo.networks.transformer (GTrXL,
# Parisotto et al. 2019, arXiv:1910.06764); see that module for the math and the state
# layout: state[:, :L*M*D].reshape(B, L, M, D)[:, l, j] is the input of layer l j + 1
# steps ago, state[:, L*M*D:] the [B, M] validity flags.
class GRUGate(nn.Module):
    """GTrXL's gate: r = s(Wr y + Ur x), z = s(Wz y + Uz x - b_g),
    h = tanh(Wg y + Ug (r * x)), g = (1 - z) * x + z * h."""

    def __init__(self, dim: int):
        super().__init__()
        self.Wr = nn.Linear(dim, dim, bias=False)
        self.Ur = nn.Linear(dim, dim, bias=False)
        self.Wz = nn.Linear(dim, dim, bias=False)
        self.Uz = nn.Linear(dim, dim, bias=False)
        self.Wg = nn.Linear(dim, dim, bias=False)
        self.Ug = nn.Linear(dim, dim, bias=False)
        self.b_g = nn.Parameter(torch.full((dim,), GATE_BIAS_INIT))

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        r = torch.sigmoid(self.Wr(y) + self.Ur(x))
        z = torch.sigmoid(self.Wz(y) + self.Uz(x) - self.b_g)
        h = torch.tanh(self.Wg(y) + self.Ug(r * x))
        return (1.0 - z) * x + z * h


class GTrXLLayer(nn.Module):
    """One layer, one step: h [B, D], memory [B, M, D], valid bool [B, M + 1] -> [B, D]."""

    num_heads: Final[int]
    head_dim: Final[int]
    dim: Final[int]
    activation: Final[str]

    def __init__(self, num_heads: int, dim: int, memory_len: int, activation: str):
        super().__init__()
        self.num_heads = num_heads
        self.head_dim = dim // num_heads
        self.dim = dim
        self.activation = activation
        self.ln_attn = nn.LayerNorm(dim, eps=LAYER_NORM_EPS)
        self.age_embedding = nn.Parameter(0.02 * torch.randn(memory_len + 1, dim))
        self.query = nn.Linear(dim, dim)
        self.key = nn.Linear(dim, dim)
        self.value = nn.Linear(dim, dim)
        self.out = nn.Linear(dim, dim)
        self.gate_attn = GRUGate(dim)
        self.ln_mlp = nn.LayerNorm(dim, eps=LAYER_NORM_EPS)
        self.mlp_0 = nn.Linear(dim, dim)
        self.mlp_1 = nn.Linear(dim, dim)
        self.gate_mlp = GRUGate(dim)

    def forward(self, h: torch.Tensor, memory: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
        heads, head_dim = self.num_heads, self.head_dim
        z = self.ln_attn(torch.cat([h.unsqueeze(1), memory], 1)) + self.age_embedding
        q = self.query(z[:, 0]).reshape(-1, heads, head_dim)  # [B, H, d]
        k = self.key(z).reshape(z.shape[0], z.shape[1], heads, head_dim)  # [B, M+1, H, d]
        v = self.value(z).reshape(z.shape[0], z.shape[1], heads, head_dim)
        logits = torch.einsum("bhd,bkhd->bhk", q, k) / math.sqrt(head_dim)
        # MASKED_LOGIT, written out: TorchScript does not read module-level floats.
        logits = logits.masked_fill(~valid.unsqueeze(1), -1e9)
        weights = torch.softmax(logits, -1)
        attended = torch.einsum("bhk,bkhd->bhd", weights, v).reshape(-1, self.dim)
        h = self.gate_attn(h, F.relu(self.out(attended)))
        y = F.relu(self.mlp_1(activate(self.mlp_0(self.ln_mlp(h)), self.activation)))
        return self.gate_mlp(h, y)


class TransformerCore(nn.Module):
    """GTrXL core, one step for B envs: forward(state [B, S], x [B, F]) -> (state, y [B, D]).

    `num_layers` L, `num_heads` H, `dim` D (divisible by H), `memory_len` M, `activation`
    of the position-wise MLP, `in_features` F; S = L * M * D + M.
    """

    num_layers: Final[int]
    dim: Final[int]
    memory_len: Final[int]
    state_size: Final[int]

    def __init__(
        self,
        num_layers: int,
        num_heads: int,
        dim: int,
        memory_len: int,
        activation: str = "relu",
        *,
        in_features: int,
    ):
        super().__init__()
        if dim % num_heads != 0:
            raise ValueError(f"dim ({dim}) must be divisible by num_heads ({num_heads})")
        self.num_layers = num_layers
        self.dim = dim
        self.memory_len = memory_len
        self.state_size = num_layers * memory_len * dim + memory_len
        self.input_proj = nn.Linear(in_features, dim)
        self.layers = nn.ModuleList(
            [GTrXLLayer(num_heads, dim, memory_len, activation) for _ in range(num_layers)]
        )

    def forward(self, state: torch.Tensor, x: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        mem_size = self.num_layers * self.memory_len * self.dim
        memory = state[:, :mem_size].reshape(-1, self.num_layers, self.memory_len, self.dim)
        flags = state[:, mem_size:]  # [B, M]
        ones = torch.ones_like(flags[:, :1])
        valid = torch.cat([ones, flags], 1) > 0.5  # [B, M + 1]
        h = self.input_proj(x)
        new_memory = []
        for i, layer in enumerate(self.layers):
            past = memory[:, i]
            new_memory.append(torch.cat([h.unsqueeze(1), past[:, : self.memory_len - 1]], 1))
            h = layer(h, past, valid)
        new_flags = torch.cat([ones, flags[:, : self.memory_len - 1]], 1)
        new_state = torch.cat([torch.stack(new_memory, 1).reshape(-1, mem_size), new_flags], 1)
        return new_state, h


class StackedCore(nn.Module):
    """`recurrent_layers` L > 1 LSTM / GRU cores `layers.<l>` (flax `cell_<l>`), each on
    the output of the one below; state `[layer 0 S | ... | layer L-1 S]`."""

    size: Final[int]

    def __init__(self, kind: str, in_size: int, size: int, layers: int):
        super().__init__()
        cell = LSTMCore if kind == "lstm" else GRUCore
        self.layers = nn.ModuleList(
            [cell(in_size if i == 0 else size, size) for i in range(layers)]
        )
        self.size = 2 * size if kind == "lstm" else size

    def forward(self, state: torch.Tensor, x: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        parts: List[torch.Tensor] = []
        for i, layer in enumerate(self.layers):
            part, x = layer(state[:, i * self.size : (i + 1) * self.size], x)
            parts.append(part)
        return torch.cat(parts, -1), x


def make_core(core: Dict[str, Any], in_size: int) -> nn.Module:
    """The core of `core["kind"]` ("lstm", "gru" or "transformer") on features [B, in_size]."""
    layers = int(core.get("layers", 1))
    if layers > 1 and core["kind"] in ("lstm", "gru"):
        return StackedCore(core["kind"], in_size, core["size"], layers)
    if core["kind"] == "lstm":
        return LSTMCore(in_size, core["size"])
    if core["kind"] == "gru":
        return GRUCore(in_size, core["size"])
    if core["kind"] == "transformer":
        return TransformerCore(
            core["transformer_layers"],
            core["transformer_heads"],
            core["transformer_dim"],
            core["memory_len"],
            in_features=in_size,
        )
    raise ValueError(f"recurrent={core['kind']!r}: no such core")


def core_sizes(core: Dict[str, Any]) -> Tuple[int, int]:
    """(S, H): state floats per env and output width of one core."""
    if core["kind"] == "lstm":
        return 2 * core["size"] * int(core.get("layers", 1)), core["size"]
    if core["kind"] == "gru":
        return core["size"] * int(core.get("layers", 1)), core["size"]
    layers, dim, mem = core["transformer_layers"], core["transformer_dim"], core["memory_len"]
    return layers * mem * dim + mem, dim


# --------------------------------------------------------------------- actor-critic
class ActorCritic(nn.Module):
    """Feed-forward actor-critic: `forward(obs) -> (actor_out [B, A], value [B])`.

    Constructor arguments (JSON, from the export's metadata): `inputs` (per encoded
    observation array: name, path of dict keys / tuple indices, shape, image, shift,
    scale), `encoder` (kind, hidden_sizes, activation, the conv settings and latent_dim),
    `core` (None, or kind, size, layers and the transformer settings), `shared` (one torso or separate
    actor / critic towers), `head_hidden_sizes`, `action` (kind, num_actions, shape, low,
    high, nvec, squash), `mask_key` (the dict entry holding the action mask, or None) and
    `tower_inputs` (the indices of the inputs each separate tower encodes; None: all of
    them; MAPPO's actor encodes "obs", its critic "world_state").
    Bounds may be given as the strings "inf" / "-inf".
    """

    kind: Final[str]
    squash: Final[bool]
    num_towers: Final[int]
    state_size: Final[int]
    action_shape: List[int]
    tower_index: List[List[int]]

    def __init__(
        self,
        inputs: List[Dict[str, Any]],
        encoder: Dict[str, Any],
        core: Optional[Dict[str, Any]],
        shared: bool,
        head_hidden_sizes: List[int],
        action: Dict[str, Any],
        mask_key: Optional[str] = None,
        tower_inputs: Optional[List[List[int]]] = None,
    ):
        super().__init__()
        self.paths = [list(spec["path"]) for spec in inputs]
        self.mask_key = mask_key
        self.num_towers = 1 if shared else 2
        # The inputs (indices into `inputs`) each tower encodes (MAPPO: actor obs, critic
        # world state); default: every input.
        every = list(range(len(inputs)))
        self.tower_index = (
            [list(t) for t in tower_inputs] if tower_inputs else [every] * self.num_towers
        )
        self.encoders = nn.ModuleList(
            [Encoder([inputs[j] for j in index], encoder) for index in self.tower_index]
        )
        sizes = [e.out_size for e in self.encoders]
        cores = []
        self.state_size = 0
        if core is not None:
            cores = [make_core(core, size) for size in sizes]
            self.state_size, out = core_sizes(core)
            sizes = [out for _ in sizes]
        self.cores = nn.ModuleList(cores)
        act, num = encoder["activation"], int(action["num_actions"])
        self.actor_head = Head(sizes[0], head_hidden_sizes, act, num)
        self.critic_head = Head(sizes[-1], head_hidden_sizes, act, 1)
        self.kind = action["kind"]
        self.squash = bool(action.get("squash", False))
        self.action_shape = [int(s) for s in action["shape"]]
        if self.kind == "continuous":
            self.log_std = nn.Parameter(torch.zeros(num))
        low = [float(v) for v in action.get("low") or []]
        high = [float(v) for v in action.get("high") or []]
        self.register_buffer("action_low", torch.tensor(low, dtype=torch.float32), False)
        self.register_buffer("action_high", torch.tensor(high, dtype=torch.float32), False)
        # MultiDiscrete: component k takes logits[:, index[k, :nvec[k]]] (padding masked).
        nvec = [int(n) for n in action.get("nvec") or []]
        width = max(nvec) if nvec else 0
        index = torch.zeros(len(nvec), width, dtype=torch.int64)
        valid = torch.zeros(len(nvec), width, dtype=torch.bool)
        offset = 0
        for k, n in enumerate(nvec):
            index[k, :n] = torch.arange(offset, offset + n)
            valid[k, :n] = True
            offset += n
        self.register_buffer("nvec_index", index, False)
        self.register_buffer("nvec_valid", valid, False)

    @torch.jit.unused
    def split_obs(self, obs: Any) -> Tuple[List[torch.Tensor], Optional[torch.Tensor]]:
        """The encoded arrays of an observation (tensor, dict or tuple) and its mask."""
        if isinstance(obs, torch.Tensor):
            return [obs], None
        xs = []
        for path in self.paths:
            x = obs
            for key in path:
                x = x[key]
            xs.append(x)
        mask = obs[self.mask_key] if self.mask_key is not None else None
        return xs, mask

    def step(
        self, xs: List[torch.Tensor], mask: Optional[torch.Tensor], state: Optional[torch.Tensor]
    ) -> Tuple[torch.Tensor, torch.Tensor, Optional[torch.Tensor]]:
        """One step from the encoded arrays `xs`, the mask and the state (None: no core)."""
        features: List[torch.Tensor] = []
        for i, encoder in enumerate(self.encoders):
            features.append(encoder([xs[j] for j in self.tower_index[i]]))
        new_state = state
        if state is not None:
            outs: List[torch.Tensor] = []
            parts: List[torch.Tensor] = []
            size = self.state_size
            for i, core in enumerate(self.cores):
                part, out = core(state[:, i * size : (i + 1) * size], features[i])
                parts.append(part)
                outs.append(out)
            features = outs
            new_state = torch.cat(parts, -1)
        actor_out = self.actor_head(features[0])
        value = self.critic_head(features[-1])[:, 0]
        if mask is not None:
            valid = mask.to(torch.float32) != 0.0
            actor_out = torch.where(valid, actor_out, torch.full_like(actor_out, -1e9))
        return actor_out, value, new_state

    def greedy(self, actor_out: torch.Tensor) -> torch.Tensor:
        """Greedy env actions from the actor outputs (see the module docstring)."""
        batch = actor_out.shape[0]
        shape = [batch] + self.action_shape
        if self.kind == "discrete":
            return torch.argmax(actor_out, -1)
        if self.kind == "multi_discrete":
            logits = actor_out[:, self.nvec_index]  # [B, K, max(nvec)]
            logits = torch.where(self.nvec_valid, logits, torch.full_like(logits, -1e9))
            return torch.argmax(logits, -1).reshape(shape)
        if self.kind == "multi_binary":
            return (actor_out > 0).to(torch.int64).reshape(shape)
        low, high = self.action_low.reshape(-1), self.action_high.reshape(-1)
        action = actor_out
        if self.squash:
            action = (high + low) / 2.0 + (high - low) / 2.0 * torch.tanh(actor_out)
        action = torch.minimum(torch.maximum(action, low), high)
        return action.reshape(shape)

    def forward(self, obs: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        if torch.jit.is_scripting():
            xs, mask = [obs], None
        else:
            xs, mask = self.split_obs(obs)
        actor_out, value, _ = self.step(xs, mask, None)
        return actor_out, value

    @torch.jit.export
    def act_greedy(self, obs: torch.Tensor) -> torch.Tensor:
        return self.greedy(self.forward(obs)[0])


class RecurrentActorCritic(ActorCritic):
    """Actor-critic with a recurrent core: `forward(obs, state [B, S]) -> (actor_out,
    value, state)`; see `ActorCritic` for the arguments and the module docstring."""

    def forward(  # type: ignore[override]
        self, obs: torch.Tensor, state: torch.Tensor
    ) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        if torch.jit.is_scripting():
            xs, mask = [obs], None
        else:
            xs, mask = self.split_obs(obs)
        actor_out, value, new_state = self.step(xs, mask, state)
        assert new_state is not None
        return actor_out, value, new_state

    @torch.jit.export
    def act_greedy(  # type: ignore[override]
        self, obs: torch.Tensor, state: torch.Tensor
    ) -> Tuple[torch.Tensor, torch.Tensor]:
        actor_out, _, new_state = self.forward(obs, state)
        return self.greedy(actor_out), new_state

    @torch.jit.export
    def initial_state(self, batch: int) -> torch.Tensor:
        """Zeros `[batch, S]` float32: the state of a fresh episode."""
        return torch.zeros(batch, self.state_size * self.num_towers)

    @torch.jit.export
    def reset_state(self, state: torch.Tensor, done: torch.Tensor) -> torch.Tensor:
        """Zeroes the rows `[B]` of `state` whose episode ended (`done` bool or 0/1)."""
        keep = (done.to(torch.float32) == 0.0).unsqueeze(-1)
        return torch.where(keep, state, torch.zeros_like(state))
