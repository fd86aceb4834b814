"""ONNX export of a purejaxppo actor-critic (needs `pip install "purejaxppo[onnx]"` and torch).

`export_onnx(source, config, "policy.onnx")` builds the torch mirror (`torch_modules.py`,
params mapped by `param_map.py`, as `export_torch`) and writes it with
`torch.onnx.export(..., dynamo=False)` (opset 17, dynamic batch axis), plus
`policy.onnx.json` (the metadata of `export_torch`, with `"format": "purejaxppo-onnx-export"`;
its own name, so a torch export of the same stem can sit beside it).

Graph inputs (float32 unless the env's dtype says otherwise; B is dynamic):

* `obs` `[B, *obs_shape]` for a plain array observation; for dict / tuple observations
  one input per array named `obs_<key>` (`obs_<index>` for tuples, nested keys joined by
  "_"), dict keys sorted, the action-mask entry included (e.g. `obs_action_mask`).
* `state` `[B, S]` for recurrent policies (zeros = a fresh episode; zero a row when its
  episode ends).

Outputs: `actor_out` `[B, A]` (masked logits or the Gaussian mean, as the torch module),
`value` `[B]`, and `state_out` `[B, S]` for recurrent policies. Greedy actions are not
in the graph: take the argmax / clip the mean as `act_greedy` of the torch module does.
"""

from __future__ import annotations

import json
import tempfile
import warnings
from pathlib import Path

from purejaxppo.export.request import ExportRequest, commit, refuse_existing

__all__ = ["write_onnx"]

OPSET = 17
FORMAT = "purejaxppo-onnx-export"


def write_onnx(request: ExportRequest) -> Path:
    """Writes `path` (ONNX) and `<path>.json`, e.g. `policy.onnx.json` (metadata), for
    `export_onnx` (arguments: `ExportRequest`); see the module docstring for the graph's
    inputs and outputs.

    Raises:
      ImportError: naming `pip install "purejaxppo[onnx]"` when onnx is missing.
      ValueError, FileExistsError: as `export_torch`; a path without the suffix .onnx.
    """
    try:
        import onnx  # noqa: F401
        import torch
    except ImportError as err:
        raise ImportError(
            f"export_onnx needs onnx and torch ({err.name} is missing): "
            'pip install "purejaxppo[onnx]"'
        ) from err
    from purejaxppo.export.torch import FlatPolicy, flat_inputs, prepare

    path = Path(request.path)
    meta_path = path.with_name(path.name + ".json")
    if path.suffix != ".onnx":
        raise ValueError(f"path {str(path)!r}: an ONNX export needs the suffix .onnx")
    refuse_existing([path, meta_path], request.overwrite)
    prepared = prepare(request)
    names, example = flat_inputs(prepared)
    outputs = list(prepared.meta["outputs"])
    dynamic = {name: {0: "batch"} for name in names + outputs}
    meta = dict(prepared.meta, format=FORMAT, opset=OPSET, onnx_inputs=names)
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=path.parent) as tmp:
        staged = Path(tmp, "policy.onnx")
        with warnings.catch_warnings(), torch.no_grad():
            warnings.simplefilter("ignore")
            torch.onnx.export(
                FlatPolicy(prepared),
                example,
                str(staged),
                input_names=names,
                output_names=outputs,
                dynamic_axes=dynamic,
                opset_version=OPSET,
                dynamo=False,
            )
        meta["files"] = {"onnx": path.name}
        staged_meta = Path(tmp, "policy.json")
        staged_meta.write_text(json.dumps(meta, indent=2, allow_nan=False) + "\n")
        commit({path: staged, meta_path: staged_meta}, [path, meta_path], request.overwrite)
    return path
