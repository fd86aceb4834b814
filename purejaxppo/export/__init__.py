"""Export trained policies to other frameworks.

`export_torch` writes a PyTorch copy of the actor-critic (module source + state_dict,
a `torch.export` program, TorchScript where it scripts; see `purejaxppo.export.torch`);
`export_onnx` writes an ONNX graph (see `purejaxppo.export.onnx`). Importing this package
does not import torch or onnx: the wrappers below load the exporters on first use, so
purejaxppo works without them installed.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from purejaxppo.config import PPOConfig

__all__ = ["export_onnx", "export_torch"]


def export_torch(
    source: Any,
    config: PPOConfig,
    path: str | Path,
    env: Any = None,
    env_params: Any = None,
    *,
    index: int | None = None,
    overwrite: bool = False,
    networks: Any = None,
) -> Path:
    """Writes a PyTorch copy of a trained actor-critic (needs `pip install torch==2.13.0`).

    See `purejaxppo.export.torch.export_torch` for the arguments and the files written.
    """
    try:
        from purejaxppo.export.torch import export_torch as _export_torch
    except ImportError as err:  # torch missing
        if getattr(err, "name", None) == "torch":
            raise ImportError(
                "purejaxppo.export.export_torch needs PyTorch: pip install torch==2.13.0"
            ) from err
        raise
    return _export_torch(
        source, config, path, env=env, env_params=env_params, index=index,
        overwrite=overwrite, networks=networks,
    )  # fmt: skip


def export_onnx(
    source: Any,
    config: PPOConfig,
    path: str | Path,
    env: Any = None,
    env_params: Any = None,
    *,
    index: int | None = None,
    overwrite: bool = False,
    networks: Any = None,
) -> Path:
    """Writes an ONNX copy of a trained actor-critic (needs `pip install "purejaxppo[onnx]"`).

    See `purejaxppo.export.onnx.export_onnx` for the arguments, inputs and outputs.
    """
    from purejaxppo.export.onnx import export_onnx as _export_onnx

    return _export_onnx(
        source, config, path, env=env, env_params=env_params, index=index,
        overwrite=overwrite, networks=networks,
    )  # fmt: skip
