"""PyTorch export of a purejaxppo actor-critic (the built-in `ActorCritic`, every kind).

`purejaxppo.export.export_torch(source, config, "policy.pt")` (`write_torch`) writes,
beside `policy.pt`:

- `policy.module.py`: a verbatim copy of `purejaxppo/export/torch_modules.py` (imports
  torch only) and `policy.state_dict.pt`: the primary route. Plain PyTorch builds
  `getattr(module, meta["class_name"])(**meta["constructor"])` and loads the state_dict.
- `policy.pt2`: a `torch.export` program of `forward` (`torch.export.load(p).module()`),
  with a dynamic batch axis, for deployment.
- `policy.pt` (the `path` itself): a TorchScript module (`torch.jit.load`), written only
  for policies that `torch.jit.script` handles (plain array observations). TorchScript is
  deprecated in torch 2.13; kinds it cannot script are listed in the metadata
  (`"torchscript": {"written": false, "reason": ...}`) instead of failing the export.
- `policy.json`: metadata (format, format_version 2, class name and constructor, the
  observation spec, the action spec, input / output names, the recurrent state size and
  layout, torch version, files).

What the modules compute (`forward`, `act_greedy`, `initial_state`, `reset_state`) is in
the docstring of `torch_modules.py`. The files are staged in a temporary folder beside
them and committed in one step (`request.commit`: `policy.json` last, never beside
files of another export), refusing to overwrite existing files unless
`overwrite=True`, which also removes an older export's `policy.pt` that this one does
not write; everything is validated before the first file is written.

This module imports torch at the top; `purejaxppo.export.export_torch` imports it lazily,
so `import purejaxppo` never imports torch.
"""

from __future__ import annotations

import json
import math
import tempfile
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NamedTuple

import jax
import numpy as np
import torch

import purejaxppo.export.param_map as param_map
import purejaxppo.export.torch_modules as torch_modules
from purejaxppo import kinds
from purejaxppo.export.request import (
    ExportRequest,
    commit,
    params_from_source,
    parent,
    refuse_existing,
)
from purejaxppo.networks import ActionSpec, Networks, state_size
from purejaxppo.networks.actor_critic import ActorCritic
from purejaxppo.networks.layers import ACTIVATIONS

__all__ = ["Prepared", "export_paths", "prepare", "write_torch"]

FORMAT = "purejaxppo-torch-export"
FORMAT_VERSION = 2
MODULE_SOURCE = Path(torch_modules.__file__)
STATE_LAYOUTS = {"lstm": "[c, h]", "gru": "[h]", "transformer": "[memory L*M*D, flags M]"}


class Prepared(NamedTuple):
    """A checked export: the torch module (params loaded) and its metadata."""

    net: torch.nn.Module
    state_dict: dict[str, torch.Tensor]
    meta: dict[str, Any]
    example: tuple[Any, ...]  # example inputs of forward (batch 3)
    stateful: bool
    obs_names: tuple[str, ...]  # ONNX input names of the observation arrays
    obs_paths: tuple[tuple[Any, ...], ...]  # their paths in the observation


def export_paths(path: str | Path) -> dict[str, Path]:
    """The files written for `path`: torchscript (path), pt2, state_dict, module, metadata
    (the manifest, last: `request.commit`)."""
    path = Path(path)
    return {
        "torchscript": path,
        "pt2": path.with_suffix(".pt2"),
        "state_dict": path.with_suffix(".state_dict.pt"),
        "module_source": path.with_suffix(".module.py"),
        "metadata": path.with_suffix(".json"),
    }


def write_torch(request: ExportRequest) -> Path:
    """Writes the files of `export_torch` (see the module docstring and `ExportRequest`).

    Returns:
      `request.path` as a `Path` (written or not: see `meta["torchscript"]`).
    """
    path = request.path
    paths = export_paths(path)
    if len({p.resolve() for p in paths.values()}) != len(paths):
        raise ValueError(f"path {str(path)!r} clashes with its side files")
    overwrite = request.overwrite
    refuse_existing(paths.values(), overwrite)
    prepared = prepare(request)
    net, meta = prepared.net, prepared.meta
    with tempfile.TemporaryDirectory(dir=parent(paths["metadata"])) as tmp:
        staged: dict[str, Path] = {}
        staged["module_source"] = Path(tmp, "module.py")
        staged["module_source"].write_bytes(MODULE_SOURCE.read_bytes())
        staged["state_dict"] = Path(tmp, "state_dict.pt")
        torch.save(prepared.state_dict, staged["state_dict"])
        staged["pt2"] = Path(tmp, "policy.pt2")
        torch.export.save(export_program(prepared), staged["pt2"])
        staged["torchscript"] = Path(tmp, "policy.pt")
        meta["torchscript"] = _write_torchscript(net, prepared, staged["torchscript"])
        if not meta["torchscript"]["written"]:
            del staged["torchscript"]
        meta["files"] = {key: paths[key].name for key in staged}
        staged["metadata"] = Path(tmp, "policy.json")
        staged["metadata"].write_text(json.dumps(meta, indent=2, allow_nan=False) + "\n")
        commit({paths[k]: file for k, file in staged.items()}, list(paths.values()), overwrite)
    return paths["torchscript"]


# --------------------------------------------------------------------- preparation


def prepare(request: ExportRequest) -> Prepared:
    """Checks the params against the network and builds the torch module with them."""
    config, index = request.config, request.index
    # Multi-agent: MAPPO's world state; the networks with the run's normalisation.
    setup = kinds.resolve(config, request.env, request.env_params, request.networks)
    env, env_params, networks = setup.env, setup.env_params, setup.networks
    module = networks.module
    if not isinstance(module, ActorCritic):
        raise ValueError(
            "export needs the built-in networks (make_networks: module ActorCritic); got "
            f"Networks with module {type(module).__name__}. Custom networks have no export: "
            "write their torch module by hand"
        )
    if module.encoder_settings.activation not in torch_modules.ACTIVATIONS:
        raise ValueError(
            f"activation={module.encoder_settings.activation!r} has no PyTorch export; "
            f"supported: {', '.join(torch_modules.ACTIVATIONS)}"
        )
    assert set(torch_modules.ACTIVATIONS) == set(ACTIVATIONS)
    expected = {
        name: tuple(leaf.shape)
        for name, leaf in param_map.flatten(
            jax.eval_shape(networks.init, jax.random.key(0))
        ).items()
    }
    flat = param_map.check_params(
        param_map.flatten(params_from_source(request.source)), expected, index
    )
    param_map.check_finite(flat)
    names = [spec.name for spec in module.inputs]
    core = module.core_settings
    tower_names = None
    if module.tower_inputs is not None:
        tower_names = {
            f"{tower}_encoder": [spec.name for spec in module.tower(i)]
            for i, tower in enumerate(("actor", "critic"))
        }
    arrays = param_map.torch_state_dict(flat, names, core.kind, core.size, tower_names)

    spec = networks.action_spec
    obs_space = env.observation_space(env_params)
    mask_key = config.action_mask_key if _has_key(obs_space, config.action_mask_key) else None
    constructor = _constructor(module, spec, config.squash_actions, mask_key)
    params = params_from_source(request.source)
    arrays.update(_normalization(networks, params, constructor, index))
    class_name = "RecurrentActorCritic" if core.kind else "ActorCritic"
    net = getattr(torch_modules, class_name)(**constructor)
    state_dict = {k: torch.from_numpy(v.copy()) for k, v in arrays.items()}
    net.load_state_dict(state_dict, strict=True)
    net.eval()

    obs_leaves = _obs_leaves(obs_space)
    example_obs = _example_obs(obs_space, 3)
    example: tuple[Any, ...] = (example_obs,)
    if core.kind:
        example = (example_obs, torch.zeros(3, state_size(config)))
    meta = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "env_name": config.env_name,
        "env_kwargs": _json_safe(config.env_kwargs),
        "class_name": class_name,
        "constructor": _json_safe(constructor),
        "observation": {
            "structure": _structure(obs_space),
            "arrays": [
                {"path": list(p), "input_name": n, "shape": list(s), "dtype": d}
                for p, n, s, d in obs_leaves
            ],
            "action_mask_key": mask_key,
        },
        "action": _json_safe(constructor["action"]),
        "recurrent": core.kind,
        "state_size": state_size(config) if core.kind else 0,
        "state_layout": _state_layout(core.kind, config.shares_encoder, core.layers),
        "inputs": [n for _, n, _, _ in obs_leaves] + (["state"] if core.kind else []),
        "outputs": ["actor_out", "value"] + (["state_out"] if core.kind else []),
        "actor_out": _actor_out_doc(spec, config.squash_actions),
        "torch_version": torch.__version__,
    }
    return Prepared(
        net=net,
        state_dict=state_dict,
        meta=meta,
        example=example,
        stateful=core.kind is not None,
        obs_names=tuple(n for _, n, _, _ in obs_leaves),
        obs_paths=tuple(p for p, _, _, _ in obs_leaves),
    )


def _normalization(
    networks: Networks, params: Any, constructor: dict[str, Any], index: int | None
) -> dict[str, np.ndarray]:
    """Folds the observation statistics (`params["obs_norm"]`, `purejaxppo.normalize`)
    into the constructor's inputs (`normalize`, `obs_clip`) and returns the buffers
    `encoders.<tower>.inputs.<i>.norm_mean` / `norm_scale` (1 / sqrt(var + 1e-8)).

    Raises:
      ValueError: networks that normalise observations but params without statistics.
    """
    norm = networks.normalization
    if norm is None or not norm.observations:
        return {}
    stats = params.get("obs_norm") if isinstance(params, Mapping) else None
    if stats is None:
        raise ValueError(
            "the config has normalize_observations=True but the params have no 'obs_norm' "
            "statistics: export the params of that run (TrainOutput, TrainState or run dir)"
        )
    stats = jax.tree.map(lambda x: np.asarray(x, np.float32), stats)
    if index is not None:
        stats = jax.tree.map(lambda x: x[index], stats)
    by_path = {(() if key is None else (key,)): name for name, key in norm.leaves.items()}
    arrays = {}
    every = list(range(len(constructor["inputs"])))
    towers = constructor.get("tower_inputs") or [every] * (1 if constructor["shared"] else 2)
    for i, spec in enumerate(constructor["inputs"]):
        name = by_path.get(tuple(spec["path"]))
        if name is None:
            continue
        spec["normalize"], spec["obs_clip"] = True, _json_floats(norm.obs_clip)
        mean = stats["mean"][name]
        scale = (1.0 / np.sqrt(stats["var"][name].astype(np.float64) + 1e-8)).astype(np.float32)
        for tower, index in enumerate(towers):
            if i not in index:
                continue
            prefix = f"encoders.{tower}.inputs.{index.index(i)}"
            arrays[f"{prefix}.norm_mean"] = mean.reshape(spec["shape"])
            arrays[f"{prefix}.norm_scale"] = scale.reshape(spec["shape"])
    return arrays


def _constructor(module: ActorCritic, spec: ActionSpec, squash: bool, mask_key: str | None):
    enc, core = module.encoder_settings, module.core_settings
    return {
        "inputs": [
            {
                "name": i.name,
                "path": list(i.path),
                "shape": list(i.shape),
                "image": i.image,
                "shift": i.shift,
                "scale": i.scale,
                "one_hot": i.one_hot,
            }
            for i in module.inputs
        ],
        "encoder": {
            "kind": enc.kind,
            "hidden_sizes": list(enc.hidden_sizes),
            "activation": enc.activation,
            "cnn_channels": list(enc.cnn_channels),
            "cnn_kernel_sizes": list(enc.cnn_kernel_sizes),
            "cnn_strides": list(enc.cnn_strides),
            "impala_channels": list(enc.impala_channels),
            "latent_dim": enc.latent_dim,
        },
        "core": None if core.kind is None else dict(core._asdict()),
        "shared": module.shared,
        "head_hidden_sizes": list(module.head_hidden_sizes),
        "action": {
            "kind": spec.kind,
            "num_actions": spec.num_actions,
            "shape": list(spec.shape),
            "low": None if spec.low is None else _json_floats(np.reshape(spec.low, -1)),
            "high": None if spec.high is None else _json_floats(np.reshape(spec.high, -1)),
            "nvec": None if spec.nvec is None else [int(n) for n in spec.nvec],
            "squash": bool(squash),
        },
        "mask_key": mask_key,
        **_tower_inputs(module),
    }


def _tower_inputs(module: ActorCritic) -> dict[str, Any]:
    """`{"tower_inputs": [[input indices] per tower]}` where the towers encode different
    inputs (MAPPO), else `{}` (the torch module's default: every input)."""
    if module.tower_inputs is None:
        return {}
    index = {spec: i for i, spec in enumerate(module.inputs)}
    return {"tower_inputs": [[index[spec] for spec in module.tower(t)] for t in (0, 1)]}


def _has_key(space: Any, key: str | None) -> bool:
    return (
        key is not None and isinstance(getattr(space, "spaces", None), dict) and key in space.spaces
    )


def _obs_leaves(space: Any, path: tuple[Any, ...] = ()) -> list[tuple]:
    """(path, input name, shape, dtype) per observation array, dict keys sorted."""
    children = getattr(space, "spaces", None)
    if isinstance(children, dict):
        return [x for k in sorted(children) for x in _obs_leaves(children[k], (*path, k))]
    if isinstance(children, (tuple, list)):
        return [x for i, s in enumerate(children) for x in _obs_leaves(s, (*path, i))]
    name = "obs_" + "_".join(str(p) for p in path) if path else "obs"
    dtype = str(np.dtype(getattr(space, "dtype", np.float32)))
    return [(path, name, tuple(int(s) for s in space.shape), dtype)]


def _structure(space: Any) -> Any:
    """JSON of the observation's structure: "array", {key: ...} or [...]."""
    children = getattr(space, "spaces", None)
    if isinstance(children, dict):
        return {k: _structure(children[k]) for k in sorted(children)}
    if isinstance(children, (tuple, list)):
        return [_structure(s) for s in children]
    return "array"


def _example_obs(space: Any, batch: int) -> Any:
    children = getattr(space, "spaces", None)
    if isinstance(children, dict):
        return {k: _example_obs(children[k], batch) for k in sorted(children)}
    if isinstance(children, (tuple, list)):
        return tuple(_example_obs(s, batch) for s in children)
    return torch.zeros(batch, *[int(s) for s in space.shape])


def _state_layout(kind: str | None, shared: bool, layers: int = 1) -> str | None:
    if kind is None:
        return None
    layout = STATE_LAYOUTS[kind]
    if layers > 1:  # stacked cells (recurrent_layers)
        layout = f"[{' | '.join(f'layer {i} {layout}' for i in range(layers))}]"
    return layout if shared else f"[actor {layout} | critic {layout}]"


def _actor_out_doc(spec: ActionSpec, squash: bool) -> str:
    if spec.kind == "continuous":
        return "pre-tanh Gaussian mean [B, A]" if squash else "Gaussian mean [B, A]"
    if spec.kind == "multi_discrete":
        return "logits [B, sum(nvec)] (masked with -1e9 where the mask is 0)"
    return f"logits [B, {spec.num_actions}]" + (
        " (masked with -1e9 where the mask is 0)" if spec.kind == "discrete" else ""
    )


# --------------------------------------------------------------------- programs


def flat_inputs(prepared: Prepared) -> tuple[list[str], tuple[torch.Tensor, ...]]:
    """Input names and example tensors of `FlatPolicy` (ONNX)."""
    obs = prepared.example[0]
    tensors = []
    for path in prepared.obs_paths:
        x = obs
        for key in path:
            x = x[key]
        tensors.append(x)
    names = list(prepared.obs_names)
    if prepared.stateful:
        names.append("state")
        tensors.append(prepared.example[1])
    return names, tuple(tensors)


class FlatPolicy(torch.nn.Module):
    """`forward(*obs arrays[, state])`: the policy on flat tensor inputs (ONNX graphs)."""

    def __init__(self, prepared: Prepared):
        super().__init__()
        self.net = prepared.net
        self.paths = prepared.obs_paths
        self.stateful = prepared.stateful
        self.structure = prepared.example[0]

    def forward(self, *inputs: torch.Tensor):
        obs_arrays = inputs[: len(self.paths)]
        if not self.paths[0]:
            obs: Any = obs_arrays[0]
        else:
            obs = _rebuild(self.structure, dict(zip(self.paths, obs_arrays, strict=True)), ())
        if self.stateful:
            return self.net(obs, inputs[-1])
        return self.net(obs)


def _rebuild(template: Any, leaves: dict, path: tuple) -> Any:
    if isinstance(template, dict):
        return {k: _rebuild(v, leaves, (*path, k)) for k, v in template.items()}
    if isinstance(template, tuple):
        return tuple(_rebuild(v, leaves, (*path, i)) for i, v in enumerate(template))
    return leaves[path]


def export_program(prepared: Prepared) -> torch.export.ExportedProgram:
    """`torch.export` of `forward` with a dynamic batch axis."""
    batch = torch.export.Dim("batch", min=1, max=1 << 20)
    dynamic = jax.tree.map(lambda _: {0: batch}, prepared.example)
    with torch.no_grad():
        return torch.export.export(prepared.net, prepared.example, dynamic_shapes=dynamic)


def _write_torchscript(net: torch.nn.Module, prepared: Prepared, path: Path) -> dict[str, Any]:
    """Scripts and saves `net` if TorchScript handles it; the metadata entry either way."""
    if prepared.obs_paths[0]:
        return {"written": False, "reason": "dict / tuple observations (use .pt2 or .module.py)"}
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            scripted = torch.jit.script(net)
            scripted.save(str(path))
            torch.jit.load(str(path))
    except Exception as err:  # noqa: BLE001 - any scripting failure skips the file
        return {"written": False, "reason": f"torch.jit.script failed: {type(err).__name__}"}
    return {"written": True, "deprecated": "TorchScript is deprecated in torch 2.13"}


# --------------------------------------------------------------------- files


def _json_floats(values: Any) -> Any:
    """Nested list of floats; +-inf as the strings "inf" / "-inf" (strict JSON)."""

    def conv(x: Any) -> Any:
        if isinstance(x, list):
            return [conv(v) for v in x]
        x = float(x)
        if math.isfinite(x):
            return x
        return "nan" if math.isnan(x) else ("inf" if x > 0 else "-inf")

    return conv(np.asarray(values, np.float64).tolist())


def _json_safe(value: Any) -> Any:
    """Numbers, strings, lists and dicts kept, the rest as repr."""
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
