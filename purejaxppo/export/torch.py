"""PyTorch export of a purejaxppo actor-critic.

`export_torch(source, config, path)` converts the flax parameters of `ActorCritic`
(`purejaxppo.networks`) into an equivalent PyTorch module and writes four files:

- `path` (e.g. `policy.pt`): a TorchScript module. Plain PyTorch loads it with
  `torch.jit.load(path)`, without JAX or purejaxppo. `m(obs) -> (actor_out, value)` for
  float32 obs `[B, *obs_shape]`: actor_out are the logits `[B, A]` (discrete) or the
  Gaussian mean `[B, A]` (continuous); value is `[B]`. `m.act_greedy(obs)` gives the
  greedy action as the env takes it: the argmax `[B]` (int64), or the mean reshaped to
  `[B, *action_shape]` and clipped to the Box bounds. Continuous policies also carry
  `m.log_std` `[A]` (std = exp(log_std), state-independent) and the `m.action_low`,
  `m.action_high` buffers `[*action_shape]`.
- `path.with_suffix(".state_dict.pt")`: the module's plain `state_dict` (`torch.save`).
- `path.with_suffix(".module.py")`: the source of the matching `nn.Module` (imports only
  torch): build `ActorCritic(**meta["constructor"])`, then `load_state_dict`.
- `path.with_suffix(".json")`: metadata (obs_shape, action kind, num_actions,
  hidden_sizes, activation, the constructor arguments, ...).

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
from purejaxppo.networks import ActionSpec, action_spec

FORMAT = "purejaxppo-torch-export"
FORMAT_VERSION = 1
CLASS_NAME = "ActorCritic"

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
    net = policy_module.ActorCritic(**meta["constructor"])
    net.load_state_dict(torch.load("policy.state_dict.pt"))
    logits_or_mean, value = net(obs)  # obs: float32 [B, *obs_shape]

Layers mirror purejaxppo.networks.ActorCritic: separate actor and critic MLPs on the
flattened observation, each `hidden_sizes` Linear layers with `activation`, then a linear
head (actor: num_actions logits or Gaussian mean; critic: 1 value). Continuous policies
own a state-independent `log_std` [A] (std = exp(log_std)); the env receives the action
clipped to [action_low, action_high].
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
      config: the run's config; uses `hidden_sizes`, `activation`, and `env_name` /
        `env_kwargs` when `env` is not given.
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
      ValueError: for an unsupported activation or action space, a source that holds no
        params, or a param tree that does not match the config and env (naming the
        missing, unexpected or mis-shaped entries).
    """
    paths = export_paths(path)
    if len(set(paths)) != len(paths):
        raise ValueError(f"path {str(path)!r} clashes with its side files {list(map(str, paths))}")
    if config.activation not in TORCH_ACTIVATIONS:
        raise ValueError(
            f"activation={config.activation!r} has no PyTorch export; "
            f"supported: {', '.join(TORCH_ACTIVATIONS)}"
        )
    if env is None:
        from purejaxppo.envs import make_env

        env, default_params = make_env(config.env_name, config.env_kwargs)
        env_params = default_params if env_params is None else env_params
    elif env_params is None:
        env_params = env.default_params
    spec = action_spec(env, env_params)
    obs_space = env.observation_space(env_params)
    obs_shape = tuple(int(s) for s in obs_space.shape)
    hidden_sizes = tuple(int(h) for h in config.hidden_sizes)

    params = _params_from_source(source)
    flat = _select_agent(
        _flatten_params(params), _expected_shapes(obs_shape, spec, hidden_sizes), index
    )
    arrays = _state_dict_from_params(flat, obs_shape, spec, hidden_sizes)
    constructor = {
        "obs_shape": list(obs_shape),
        "num_actions": spec.num_actions,
        "hidden_sizes": list(hidden_sizes),
        "activation": config.activation,
        "continuous": not spec.discrete,
        "action_shape": list(spec.shape),
    }

    paths.torchscript.parent.mkdir(parents=True, exist_ok=True)
    paths.module_source.write_text(MODULE_SOURCE)
    module = load_module_source(paths.module_source)
    net = getattr(module, CLASS_NAME)(**constructor)
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
        "class_name": CLASS_NAME,
        "constructor": constructor,
        "outputs": (
            "forward(obs float32 [B, *obs_shape]) -> (logits [B, A] | mean [B, A], value [B]); "
            "act_greedy(obs) -> argmax [B] int64 | mean clipped to the bounds "
            "[B, *action_shape]; continuous: std = exp(log_std) [A]"
        ),
        "files": {
            "torchscript": paths.torchscript.name,
            "state_dict": paths.state_dict.name,
            "module_source": paths.module_source.name,
        },
        "torch_version": torch.__version__,
    }
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
    if not spec.discrete:
        out["log_std"] = np.asarray(flat["log_std"], np.float32)
        out["action_low"] = np.asarray(spec.low, np.float32).reshape(spec.shape)
        out["action_high"] = np.asarray(spec.high, np.float32).reshape(spec.shape)
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
