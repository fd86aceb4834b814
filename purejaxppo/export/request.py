"""The one export signature (`ExportRequest`) and what every exporter shares without
torch: the public wrappers' factory (`exporter`), the params of a source, the
refuse-to-overwrite check and the commit of the staged files (`commit`). Imports
neither torch nor onnx.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import inspect
import os
import shutil
import signal
import tempfile
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = ["ExportRequest", "commit", "exporter", "params_from_source", "refuse_existing"]


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
    """Raises FileExistsError naming the first existing path, unless `overwrite`; and
    naming the first path that is a folder, even with `overwrite` (never replaced)."""
    for path in paths:
        if Path(path).is_dir():
            raise FileExistsError(f"{path} is a folder; an export never replaces a folder")
    if overwrite:
        return
    for path in paths:
        if os.path.lexists(path):
            raise FileExistsError(
                f"{path} exists; pass overwrite=True (CLI: --overwrite) to replace it"
            )


def commit(staged: Mapping[Path, Path], targets: Sequence[Path], overwrite: bool) -> None:
    """Moves an export's staged files onto their targets in one step: the folder never
    holds files of two exports under a manifest.

    The manifest (the metadata JSON, `targets[-1]`) is moved in last: the existing
    targets are first moved aside into a temporary folder beside them (the manifest
    first), then the staged files are moved in (`os.replace`, the manifest last), so
    until that last rename the folder holds no manifest, and after it every file is the
    new export's. SIGINT / SIGTERM arriving meanwhile are handled once the commit is done
    (`signals_deferred`), so neither Ctrl-C nor a second one lands between two renames.
    Any error rolls back: the new files go back, the old ones are restored. Only a
    crash of the process itself (kill -9, power loss) in the few renames can leave
    a folder without its manifest; the old files are then in the `tmp*` folder beside.

    Args:
      staged: target -> its staged file, on the targets' file system; the manifest is
        among them.
      targets: every file of the export, the manifest last. When overwriting, a target
        that is not staged (an older export's file the new one does not write, e.g. its
        TorchScript file) is removed, not left beside the new files.
      overwrite: replace the existing targets; else checked again here (another writer
        may have made one since the first check).

    Raises:
      FileExistsError: as `refuse_existing`; nothing moved.
      OSError: a rename failed (the folder is as before); or it failed and the rollback
        too, naming the folder that keeps the old files.
    """
    manifest = Path(targets[-1])
    if manifest not in staged or set(staged) - set(targets):
        raise ValueError(
            f"commit: the staged files {sorted(map(str, staged))} must be "
            f"among the targets and include the manifest {manifest}"
        )
    aside_order = [manifest, *targets[:-1]]
    in_order = [Path(t) for t in targets[:-1] if t in staged] + [manifest]
    with signals_deferred():
        refuse_existing(targets, overwrite)
        aside = Path(tempfile.mkdtemp(prefix="tmp", dir=manifest.parent))
        moved: list[tuple[Path, Path]] = []  # (source, destination) in the order made
        try:
            for i, target in enumerate(aside_order):
                if os.path.lexists(target):
                    _move(Path(target), aside / f"{i}_{Path(target).name}", moved)
            for target in in_order:
                _move(staged[target], target, moved)
        except BaseException as err:
            _roll_back(moved, aside, err)
            raise
        shutil.rmtree(aside, ignore_errors=True)


def _move(source: Path, destination: Path, moved: list[tuple[Path, Path]]) -> None:
    """`os.replace(source, destination)`, recorded in `moved` for a rollback."""
    os.replace(source, destination)
    moved.append((source, destination))


def _roll_back(moved: list[tuple[Path, Path]], aside: Path, err: BaseException) -> None:
    """Undoes `moved` (newest first) and removes `aside`; if a rename back fails, raises
    OSError naming `aside` (which keeps the old files) and the original error."""
    try:
        for source, destination in reversed(moved):
            os.replace(destination, source)
    except OSError as undo:
        raise OSError(
            f"export: committing failed ({err!r}) and so did restoring the old files "
            f"({undo}); they are in {aside}"
        ) from err
    shutil.rmtree(aside, ignore_errors=True)


@contextlib.contextmanager
def signals_deferred() -> Iterator[None]:
    """While open, SIGINT and SIGTERM are recorded instead of handled; on exit the
    previous handlers come back and each recorded signal is raised again, in order (so a
    Python handler, `KeyboardInterrupt` or the default action runs after the block).
    Outside the main thread (where Python runs no handler and sets none) it does nothing.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[int] = []
    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    for sig in previous:
        signal.signal(sig, lambda signum, frame: caught.append(signum))
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, signal.SIG_DFL if handler is None else handler)
        for signum in caught:
            signal.raise_signal(signum)


def parent(path: Path) -> Path:
    """`path`'s folder, made if missing."""
    path.parent.mkdir(parents=True, exist_ok=True)
    return path.parent
