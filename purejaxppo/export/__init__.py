"""Export trained policies to other frameworks.

`export_torch` writes a PyTorch (TorchScript) copy of the actor-critic (feed-forward or
recurrent); see `purejaxppo.export.torch`. Importing this package does not import torch: the wrapper
below loads the torch exporter on first use, so purejaxppo works without torch installed.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from purejaxppo.config import PPOConfig

__all__ = ["export_torch"]


def export_torch(
    source: Any,
    config: PPOConfig,
    path: str | Path,
    env: Any = None,
    env_params: Any = None,
    *,
    index: int | None = None,
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
    return _export_torch(source, config, path, env=env, env_params=env_params, index=index)
