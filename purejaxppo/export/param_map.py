"""Flax params of `purejaxppo.networks.ActorCritic` -> the torch mirror's state_dict.

The one place that knows both the flax names (`actor_critic.py`, `layers.py`, `cores.py`,
`transformer.py`) and the torch names (`torch_modules.py`). Imports numpy only (params
may be jax arrays; they are read with `np.asarray`).

    flax                                      torch
    encoder | actor_encoder                   encoders.0
    critic_encoder                            encoders.1
    <enc>/<in>_mlp/dense_<j>                  <enc>.inputs.<i>.mlp.dense.<j>
    <enc>/<in>_cnn/conv_<j>                   <enc>.inputs.<i>.conv.convs.<j>
    <enc>/<in>_impala/stage_<s>/conv          <enc>.inputs.<i>.conv.stages.<s>.conv
    <enc>/<in>_impala/stage_<s>/block_<b>/conv_<j>   ....stages.<s>.blocks.<b>.convs.<j>
    <enc>/<in>_latent                         <enc>.inputs.<i>.latent.dense.0
    core | actor_core, critic_core            cores.0 | cores.0, cores.1
    <core>/cell/{ii,if,ig,io,hi,hf,hg,ho}     <core>.cell.{weight,bias}_{ih,hh} (LSTM)
    <core>/cell/{ir,iz,in,hr,hz,hn}           <core>.cell.{weight,bias}_{ih,hh} (GRU)
    <core>/cell_<l>/...  (recurrent_layers)   <core>.layers.<l>.cell....
    <core>/transformer/input_proj, layer_<l>/...   <core>.input_proj, layers.<l>....
    {actor,critic}_head/dense_<j>, out        {actor,critic}_head.hidden.dense.<j>, .out
    log_std                                   log_std

Dense kernels `[in, out]` become Linear weights `[out, in]`; conv kernels
`[kh, kw, in, out]` become `[out, in, kh, kw]`; LayerNorm `scale` becomes `weight`.
The LSTM (`nn.OptimizedLSTMCell`: input kernels without bias, recurrent kernels with)
stacks gates i, f, g, o as `torch.nn.LSTMCell` with `bias_ih` = 0, `bias_hh` = the gate
biases; the GRU (`nn.GRUCell`: input kernels with bias; `hr`, `hz` without, `hn` with)
stacks r, z, n with `bias_hh` = [0, 0, b_hn]: both compute
n = tanh(W_in x + b_in + r * (W_hn h + b_hn)).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

Flat = dict[str, np.ndarray]

_TOWERS = {
    "encoder": "encoders.0",
    "actor_encoder": "encoders.0",
    "critic_encoder": "encoders.1",
    "core": "cores.0",
    "actor_core": "cores.0",
    "critic_core": "cores.1",
}


def flatten(params: Any) -> dict[str, Any]:
    """`{"params": {"a": {"b": x}}}` -> `{"a/b": x}` (with or without the "params" level).

    The normalisation statistics (`obs_norm`, `reward_norm`: `purejaxppo.normalize`) are
    left out; the export folds them in separately.

    Raises:
      ValueError: if `params` is not a mapping or holds collections other than "params"
        and the statistics.
    """
    if not isinstance(params, Mapping):
        raise ValueError(f"params must be a mapping, got {type(params).__name__}")
    if "params" in params:
        extra = sorted(str(k) for k in params if k not in ("params", "obs_norm", "reward_norm"))
        if extra:
            raise ValueError(f"params has collections other than 'params': {extra}")
        params = params["params"]
    flat: dict[str, Any] = {}

    def visit(prefix: str, node: Any) -> None:
        if isinstance(node, Mapping):
            for key, child in node.items():
                visit(f"{prefix}/{key}" if prefix else str(key), child)
        else:
            flat[prefix] = node

    visit("", params)
    return flat


def check_params(
    flat: Mapping[str, Any], expected: Mapping[str, tuple[int, ...]], index: int | None
) -> Flat:
    """Checks names and shapes against `expected`; picks agent `index` of vmapped params.

    Args:
      flat: flattened params (`flatten`), arrays of any kind.
      expected: `{name: shape}` of the network (`expected_shapes`).
      index: for params trained under `jax.vmap` (a leading `[S]` axis on every leaf),
        which agent to take; None for unbatched params.

    Returns:
      `{name: float32 numpy array}` of the expected shapes.

    Raises:
      ValueError: params with no name in common with `expected` (a custom network: not
        exportable); listing the missing, unexpected and mis-shaped entries; for a leading
        agent axis without `index` (saying to pass it), an `index` without the axis or out
        of range, or a non-float leaf.
    """
    arrays = {k: np.asarray(v) for k, v in flat.items()}
    missing = sorted(set(expected) - set(arrays))
    unexpected = sorted(set(arrays) - set(expected))
    if arrays and not set(arrays) & set(expected):
        raise ValueError(
            "the params share no parameter name with the built-in network of this config "
            f"(got {_short(sorted(arrays))}, expected {_short(sorted(expected))}): custom "
            "networks are not exportable; write their torch module by hand"
        )
    problems = []
    if missing:
        problems.append(f"missing {missing}")
    if unexpected:
        problems.append(f"unexpected {unexpected}")
    if not problems:
        if index is not None:
            shapes = {k: v.shape for k, v in arrays.items()}
            if any(len(s) != len(expected[k]) + 1 for k, s in shapes.items()):
                raise ValueError(
                    f"index={index} was given but the params have no leading agent axis"
                )
            sizes = {s[0] for s in shapes.values()}
            if len(sizes) != 1 or not -min(sizes) <= index < min(sizes):
                raise ValueError(f"index={index} is out of range for {sorted(sizes)} agents")
            arrays = {k: v[index] for k, v in arrays.items()}
        problems.extend(_shape_problems(arrays, expected, index))
    if problems:
        raise ValueError(
            f"param tree does not match the config and env ({len(expected)} arrays expected): "
            + "; ".join(problems)
        )
    for k, v in arrays.items():
        if not np.issubdtype(v.dtype, np.floating):
            raise ValueError(f"{k} has dtype {v.dtype}, expected a float array")
    return {k: v.astype(np.float32) for k, v in arrays.items()}


def _shape_problems(
    arrays: Mapping[str, np.ndarray], expected: Mapping[str, tuple[int, ...]], index: int | None
) -> list[str]:
    """`check_params`' mis-shaped entries, one line each (none: []).

    Raises:
      ValueError: every entry carries a leading agent axis and no `index` is given
        (saying to pass it).
    """
    wrong = {k: v.shape for k, v in arrays.items() if tuple(v.shape) != expected[k]}
    lead = {
        s[0]
        for k, s in wrong.items()
        if len(s) == len(expected[k]) + 1 and tuple(s[1:]) == expected[k]
    }
    if wrong and index is None and len(wrong) == len(arrays) and len(lead) == 1:
        raise ValueError(
            f"the params carry a leading axis of {lead.pop()} agents (trained under "
            "jax.vmap); pass index=i to export agent i"
        )
    return [f"{k} has shape {tuple(s)}, expected {expected[k]}" for k, s in sorted(wrong.items())]


def _short(names: list[str], limit: int = 4) -> str:
    return ", ".join(names[:limit]) + (", ..." if len(names) > limit else "")


def check_finite(flat: Mapping[str, np.ndarray]) -> None:
    """ValueError naming the first leaf (in name order) with a NaN or infinity."""
    for name in sorted(flat):
        if not np.all(np.isfinite(flat[name])):
            raise ValueError(f"param {name} is not finite (NaN or inf); refusing to export it")


def _dense(kernel: np.ndarray) -> np.ndarray:
    return kernel.T


def _conv(kernel: np.ndarray) -> np.ndarray:
    return kernel.transpose(3, 2, 0, 1)


def _same(x: np.ndarray) -> np.ndarray:
    return x


def _leaf(name: str, kernel: Callable[[np.ndarray], np.ndarray]) -> tuple[str, Callable]:
    """flax leaf name -> (torch leaf name, transform)."""
    if name == "kernel":
        return "weight", kernel
    if name == "scale":
        return "weight", _same
    return name, _same


def _encoder_entry(parts: list[str], input_names: list[str]) -> tuple[str, Callable]:
    """`<in>_<kind>/...` inside an encoder -> torch name (relative) and transform."""
    module, rest = parts[0], parts[1:]
    name, _, kind = module.rpartition("_")
    if name not in input_names:
        raise KeyError(module)
    i = input_names.index(name)
    leaf, transform = _leaf(rest[-1], _conv if kind in ("cnn", "impala") else _dense)
    if kind == "mlp":  # dense_<j>/<leaf>
        return f"inputs.{i}.mlp.dense.{_num(rest[0], 'dense')}.{leaf}", transform
    if kind == "latent" and len(rest) == 1:  # <leaf>
        return f"inputs.{i}.latent.dense.0.{leaf}", transform
    if kind == "cnn":  # conv_<j>/<leaf>
        return f"inputs.{i}.conv.convs.{_num(rest[0], 'conv')}.{leaf}", transform
    if kind == "impala":  # stage_<s>/conv/<leaf> | stage_<s>/block_<b>/conv_<j>/<leaf>
        stage = f"inputs.{i}.conv.stages.{_num(rest[0], 'stage')}"
        if rest[1] == "conv":
            return f"{stage}.conv.{leaf}", transform
        block, conv = _num(rest[1], "block"), _num(rest[2], "conv")
        return f"{stage}.blocks.{block}.convs.{conv}.{leaf}", transform
    raise KeyError(module)


def _num(part: str, stem: str) -> int:
    match = re.fullmatch(rf"{stem}_(\d+)", part)
    if match is None:
        raise KeyError(part)
    return int(match.group(1))


def _transformer_entry(parts: list[str]) -> tuple[str, Callable]:
    """`input_proj/...` or `layer_<l>/...` inside the GTrXL core -> torch name, transform."""
    names = list(parts)
    if names[0] != "input_proj":
        names[0:1] = ["layers", str(_num(names[0], "layer"))]
    names[-1], transform = _leaf(names[-1], _dense)
    return ".".join(names), transform


def _cell_arrays(flat: Mapping[str, np.ndarray], prefix: str, kind: str, size: int) -> Flat:
    """The flax LSTM / GRU cell under `prefix` -> torch LSTMCell / GRUCell arrays."""
    gates = "ifgo" if kind == "lstm" else "rzn"
    zeros = np.zeros(size, np.float32)

    def kernel(gate: str) -> np.ndarray:
        return flat[f"{prefix}/{gate}/kernel"].T

    def bias(gate: str) -> np.ndarray:
        return flat.get(f"{prefix}/{gate}/bias", zeros)

    return {
        "weight_ih": np.concatenate([kernel(f"i{g}") for g in gates]),
        "weight_hh": np.concatenate([kernel(f"h{g}") for g in gates]),
        "bias_ih": np.concatenate([bias(f"i{g}") for g in gates]),
        "bias_hh": np.concatenate([bias(f"h{g}") for g in gates]),
    }


def torch_state_dict(
    flat: Mapping[str, np.ndarray],
    input_names: list[str],
    core_kind: str | None,
    core_size: int = 0,
    tower_names: Mapping[str, list[str]] | None = None,
) -> Flat:
    """Checked flat flax params (`check_params`) -> the torch `ActorCritic` state_dict.

    Args:
      flat: `{flax name: float32 array}` of an `ActorCritic` (every name is mapped).
      input_names: `ObsInput.name` of the encoded inputs, in the encoder's order.
      core_kind: None, "lstm", "gru" or "transformer"; core_size: LSTM / GRU units.
      tower_names: `{"actor_encoder": names, "critic_encoder": names}` where the towers
        encode different inputs (`ActorCritic.tower_inputs`); None: `input_names` both.

    Returns:
      `{torch name: contiguous float32 numpy array}`.

    Raises:
      ValueError: naming the flax entries it cannot map (a tree this module does not
        describe; `check_params` against `jax.eval_shape(networks.init)` comes first).
    """
    out: Flat = {}
    unmapped = []
    cells = set()
    for name, array in flat.items():
        parts = name.split("/")
        try:
            top = parts[0]
            if top == "log_std":
                out["log_std"] = array
            elif top in ("actor_head", "critic_head"):
                leaf, transform = _leaf(parts[-1], _dense)
                layer = "out" if parts[1] == "out" else f"hidden.dense.{_num(parts[1], 'dense')}"
                out[f"{top}.{layer}.{leaf}"] = transform(array)
            elif top in _TOWERS and top.endswith("encoder"):
                names = (tower_names or {}).get(top, input_names)
                key, transform = _encoder_entry(parts[1:-1] + [parts[-1]], names)
                out[f"{_TOWERS[top]}.{key}"] = transform(array)
            elif top in _TOWERS and parts[1] == "cell" and core_kind in ("lstm", "gru"):
                cells.add((f"{top}/cell", f"{_TOWERS[top]}.cell"))
            elif top in _TOWERS and parts[1].startswith("cell_") and core_kind in ("lstm", "gru"):
                layer = _num(parts[1], "cell")
                cells.add((f"{top}/{parts[1]}", f"{_TOWERS[top]}.layers.{layer}.cell"))
            elif top in _TOWERS and parts[1] == "transformer" and core_kind == "transformer":
                key, transform = _transformer_entry(parts[2:])
                out[f"{_TOWERS[top]}.{key}"] = transform(array)
            else:
                raise KeyError(name)
        except (KeyError, IndexError):
            unmapped.append(name)
    if unmapped:
        raise ValueError(f"params the torch export cannot map: {sorted(unmapped)}")
    for prefix, torch_prefix in sorted(cells):
        for key, array in _cell_arrays(flat, prefix, core_kind, core_size).items():
            out[f"{torch_prefix}.{key}"] = array
    return {k: np.ascontiguousarray(v, np.float32) for k, v in out.items()}
