"""Export trained policies to other frameworks.

`export_torch` writes a PyTorch copy of the actor-critic (module source + state_dict,
a `torch.export` program, TorchScript where it scripts; see `purejaxppo.export.torch`);
`export_onnx` writes an ONNX graph (see `purejaxppo.export.onnx`). Both take the one
export signature, `ExportRequest`'s. Importing this package does not import torch or
onnx: the exporters load them on first use, so purejaxppo works without them installed.
"""

from __future__ import annotations

from purejaxppo.export.request import ExportRequest, exporter

__all__ = ["ExportRequest", "export_onnx", "export_torch"]

export_torch = exporter(
    "export_torch",
    "purejaxppo.export.torch",
    "write_torch",
    "purejaxppo.export.export_torch needs PyTorch: pip install torch==2.13.0",
    """Writes a PyTorch copy of a trained actor-critic (needs `pip install torch==2.13.0`):
    `policy.module.py` + `policy.state_dict.pt`, `policy.pt2`, `policy.pt` (TorchScript,
    where it scripts) and `policy.json` (see `purejaxppo.export.torch`). Returns `path`.""",
)

export_onnx = exporter(
    "export_onnx",
    "purejaxppo.export.onnx",
    "write_onnx",
    'export_onnx needs onnx and torch: pip install "purejaxppo[onnx]"',
    """Writes an ONNX copy of a trained actor-critic (needs `pip install
    "purejaxppo[onnx]"`): `path` (suffix .onnx) and `<path>.json` (metadata); see
    `purejaxppo.export.onnx` for the graph's inputs and outputs. Returns `path`.""",
)
