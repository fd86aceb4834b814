"""The one export signature (`ExportRequest`) and what every exporter shares without
torch: the public wrappers' factory (`exporter`), the params of a source, and the
refuse-to-overwrite check. Imports neither torch nor onnx.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import os
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

__all__ = ["ExportRequest", "exporter", "params_from_source", "refuse_existing"]


@dataclasses.dataclass(frozen=True)
class ExportRequest:
    """What to export and where: the arguments of `export_torch` and `export_onnx`.

    Args:
      source: a `TrainOutput`, `TrainState`, `RunnerState`, a flax params dict (as
        `make_networks(...).init` returns) or a run directory (its newest checkpoint).
      config: the run's `PPOConfig` (network fields; `env_name` / `env_kwargs` when `env`
        is not given).
      path: the file to write ("policy.pt" for torch, "policy.onnx" for ONNX); the side
        files are named from it. Parent folders are made.
      env, env_params: the gymnax environment; default `make_env(config.env_name,
        config.env_kwargs)`; `env_params` defaults to `env.default_params`.
      index: for params trained under `jax.vmap` (leading `[S]` axis), the agent to export.
      overwrite: replace existing files (default: refuse).
      networks: the `Networks` the params belong to, when not `make_networks(config, env)`;
        only the built-in `ActorCritic` exports.

    Raises (from the exporters):
      ValueError: custom networks; settings that do not fit the env (as `make_networks`);
        a source without params; a param tree that does not match the config and env
        (naming the missing, unexpected or mis-shaped entries); non-finite params.
      FileExistsError: naming an existing target file, without `overwrite`.
    """

    source: Any
    config: Any
    path: str | Path
    env: Any = None
    env_params: Any = None
    _: dataclasses.KW_ONLY
    index: int | None = None
    overwrite: bool = False
    networks: Any = None


#: The signature of every public exporter (that of `ExportRequest`).
SIGNATURE = inspect.signature(ExportRequest).replace(return_annotation=Path)


def exporter(name: str, module: str, function: str, missing: str, doc: str) -> Callable[..., Path]:
    """The public exporter `name`, with `ExportRequest`'s signature: it imports `module`
    on first call (so `import purejaxppo` imports no torch) and runs
    `module.function(request)`.

    `missing` is the ImportError's message when torch / onnx, which `module` imports,
    are not installed.
    """

    def export(*args: Any, **kwargs: Any) -> Path:
        try:
            bound = SIGNATURE.bind(*args, **kwargs)
        except TypeError as err:
            raise TypeError(f"{name}(): {err}") from None
        request = ExportRequest(*bound.args, **bound.kwargs)
        try:
            implementation = getattr(importlib.import_module(module), function)
        except ImportError as err:
            if getattr(err, "name", None) in ("torch", "onnx"):
                raise ImportError(missing) from err
            raise
        return implementation(request)

    export.__signature__ = SIGNATURE  # type: ignore[attr-defined]
    export.__name__ = export.__qualname__ = name
    export.__module__ = "purejaxppo.export"
    export.__doc__ = f"{doc}\n\n{inspect.getdoc(ExportRequest)}"
    return export


def params_from_source(source: Any) -> Any:
    """The flax params tree of a TrainOutput, TrainState, RunnerState, dict or run dir."""
    from purejaxppo.types import RunnerState, TrainOutput, TrainState

    if isinstance(source, (TrainOutput, RunnerState)):
        return source.train_state.params
    if isinstance(source, TrainState):
        return source.params
    if isinstance(source, Mapping):
        return source
    if isinstance(source, (str, os.PathLike)):
        from purejaxppo.checkpoint import load_checkpoint

        return load_checkpoint(source).runner_state.train_state.params
    raise ValueError(
        f"cannot export from a {type(source).__name__}: pass a TrainOutput, TrainState, "
        "RunnerState, flax params dict or run directory"
    )


def refuse_existing(paths: Iterable[Path], overwrite: bool) -> None:
    """Raises FileExistsError naming the first existing path, unless `overwrite`."""
    if overwrite:
        return
    for path in paths:
        if Path(path).exists():
            raise FileExistsError(
                f"{path} exists; pass overwrite=True (CLI: --overwrite) to replace it"
            )


def parent(path: Path) -> Path:
    """`path`'s folder, made if missing."""
    path.parent.mkdir(parents=True, exist_ok=True)
    return path.parent
