"""Output directories (run, seeds, sweep, pbt): one writer each, nothing deleted that
purejaxppo did not write, unique default names.

Promises:

* **A marker decides what is ours.** Every output directory purejaxppo writes holds
  `.purejaxppo-run` (`format <FORMAT_VERSION>`, `kind run|sweep|pbt|tune`), written when the
  directory is claimed empty. `--overwrite` removes the contents of a directory only when it
  holds that marker with the same kind; any other non-empty directory is refused, naming
  what it holds, and nothing of it is deleted. Run directories written before the marker
  existed (no marker, a `config.yaml`) can be resumed (the marker is then added) and
  overwritten only when every entry is a name `purejaxppo train` writes (`LEGACY_RUN_FILES`).
* **One writer per directory.** `claim` holds an exclusive `filelock` lock
  (`.purejaxppo-lock`, the holder's process id in `.purejaxppo-lock.pid`) for the whole run;
  a second writer fails at once with `DirectoryLocked` naming the directory and that process
  id. The lock is an OS lock: a killed process releases it, so `--resume` after a crash is
  never blocked by a stale lock file.
* A fresh run refuses a non-empty directory unless told to `--resume` it or to
  `--overwrite` it; `--overwrite` removes the old contents only after the new run's
  configuration, environment and seed were validated, under the lock.
* **The `--import`s a directory needs are recorded.** The marker's `imports` line names the
  modules its command imported (`set_imports`; a resumed claim keeps its own), which
  `--resume` and `eval` name again (`recorded_imports`); a file never imports.
* Default names get a random suffix and are created with `exist_ok=False`, so two
  launches in the same second never share one; characters that are not portable in paths
  (`:`, `/`, `\\`) are replaced.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import shutil
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import filelock

#: The marker file: only purejaxppo writes it.
MARKER = ".purejaxppo-run"
#: The lock file and the side file with the holder's process id.
LOCK = ".purejaxppo-lock"
LOCK_PID = ".purejaxppo-lock.pid"
#: Bumped when the layout of an output directory changes incompatibly.
FORMAT_VERSION = 1
KINDS = ("run", "sweep", "pbt", "tune")
#: The modules this process imported by `--import` (`set_imports`), recorded in its markers.
_IMPORTS: list[str] = []
_INTERNAL = (MARKER, LOCK, LOCK_PID)
#: What a directory written before the marker existed holds, per kind (resumable).
_LEGACY_EVIDENCE = {"run": "config.yaml", "sweep": "request.yaml", "pbt": "checkpoints"}

#: Entries that mark a directory as a `purejaxppo train` run directory.
RUN_FILES = ("config.yaml", "metrics.csv", "checkpoints", "learning_curve.png")
#: Every top-level name a pre-marker `purejaxppo train` run directory may hold.
LEGACY_RUN_FILES = (
    *RUN_FILES,
    "videos",
    "datasets",
    "metrics.jsonl",
    "tensorboard",
    "wandb",
    "mlruns",
    "summary.csv",
    "summary.json",
)


class DirectoryNotEmpty(ValueError):
    """A fresh run or sweep was pointed at a directory that already holds files."""


class DirectoryLocked(ValueError):
    """Another live process is writing to this output directory."""


def entries(path: Path) -> list[Path]:
    """The entries of `path` other than the marker and lock files (sorted)."""
    if not path.is_dir():
        return []
    return sorted(e for e in path.iterdir() if e.name not in _INTERNAL)


def is_nonempty(path: Path) -> bool:
    return bool(entries(Path(path)))


def read_marker(path: str | Path) -> dict[str, str] | None:
    """The `key value` lines of `path/.purejaxppo-run`, or None without a marker."""
    marker = Path(path) / MARKER
    if not marker.is_file():
        return None
    fields = {}
    for line in marker.read_text().splitlines():
        key, _, value = line.partition(" ")
        fields[key] = value.strip()
    return fields


def set_imports(modules: list[str]) -> None:
    """Records `modules` (the command line's `--import`s) in every marker this process
    writes from now on."""
    _IMPORTS[:] = list(dict.fromkeys(modules))


def recorded_imports(path: str | Path) -> list[str]:
    """The modules the command that wrote `path` imported (`--import`), from its marker, or
    from its parent's (a seed_<s> directory of a `--num-seeds` run holds none of its own);
    [] when none were recorded."""
    path = Path(path)
    for where in (path, path.parent):
        marker = read_marker(where)
        if marker is not None:
            return marker.get("imports", "").split()
    return []


def write_marker(path: str | Path, kind: str, *, keep_imports: bool = False) -> None:
    """Writes `path/.purejaxppo-run` atomically (format version, kind and, when any, the
    `--import`ed modules: `set_imports`'s, after the marker's own when `keep_imports`)."""
    if kind not in KINDS:
        raise ValueError(f"kind={kind!r}: expected one of {KINDS}")
    kept = recorded_imports(path) if keep_imports and read_marker(path) else []
    imports = list(dict.fromkeys([*kept, *_IMPORTS]))
    text = f"format {FORMAT_VERSION}\nkind {kind}\n"
    if imports:
        text += f"imports {' '.join(imports)}\n"
    partial = Path(path) / f"{MARKER}.partial"
    partial.write_text(text)
    partial.replace(Path(path) / MARKER)


def _names(items: list[Path], limit: int = 6) -> str:
    text = ", ".join(e.name for e in items[:limit])
    return text + (f", ... ({len(items)} entries)" if len(items) > limit else "")


def check_fresh(path: str | Path, overwrite: bool, what: str = "run") -> None:
    """Raises unless `path` can take a fresh run / sweep / pbt (before anything is computed).

    Raises:
      DirectoryNotEmpty: `path` is a non-empty directory and `overwrite` is False (the
        message names --resume and --overwrite), or `overwrite` is True but `path` holds no
        purejaxppo marker of kind `what` (the message names what it holds; nothing of it
        is deleted).
      ValueError: `path` exists and is not a directory.
    """
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise ValueError(f"{what} directory {path} exists and is not a directory")
    held = entries(path)
    if not held:
        return
    if not overwrite:
        raise DirectoryNotEmpty(
            f"{what} directory {path} already exists and is not empty; pass --resume {path} "
            f"to continue it, or --overwrite to replace its contents"
        )
    marker = read_marker(path)
    if marker is not None and marker.get("kind") == what:
        return
    if marker is not None:
        raise DirectoryNotEmpty(
            f"--overwrite: {path} holds a purejaxppo {marker.get('kind')!r} output, not a "
            f"{what}; refusing to delete its contents"
        )
    if what == "run" and (path / "config.yaml").is_file():
        foreign = [e for e in held if e.name not in LEGACY_RUN_FILES]
        if not foreign:
            return  # a run directory written before the marker existed
        raise DirectoryNotEmpty(
            f"--overwrite: {path} holds entries purejaxppo does not write "
            f"({_names(foreign)}); refusing to delete its contents"
        )
    raise DirectoryNotEmpty(
        f"--overwrite: {path} is not a purejaxppo {what} directory (no {MARKER} marker; it "
        f"holds {_names(held)}); refusing to delete its contents"
    )


def clear(path: str | Path) -> None:
    """Deletes the contents of `path` but its marker and lock (after
    `check_fresh(path, overwrite=True)`)."""
    path = Path(path)
    old = entries(path)
    if old:
        print(
            f"--overwrite: removing the previous contents of {path} ({_names(old)})",
            file=sys.stderr,
        )
    for entry in old:
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()


def _lock_holder(path: Path) -> str:
    try:
        pid = (path / LOCK_PID).read_text().strip()
    except OSError:
        pid = ""
    return f"process {pid}" if pid.isdigit() else "another process"


@contextlib.contextmanager
def claim(
    path: str | Path, kind: str, *, resume: bool = False, overwrite: bool = False
) -> Iterator[Path]:
    """Holds `path` as its only writer for the `with` block (creates it).

    A resumed claim first checks that `path` is resumable, creating nothing when it is
    not (no folder, no lock file). Under the lock: a fresh claim checks
    `check_fresh(path, overwrite, kind)` again (another process may have written since the
    first check), removes the old contents when `overwrite`, then writes the marker; a
    resumed claim checks again that it holds the marker of `kind` (or, for an output
    written before the marker existed, its `_LEGACY_EVIDENCE`, and then adds the marker).
    On exit the lock is released and the pid file removed; a killed process's OS lock is
    released by the OS.

    Raises:
      DirectoryLocked: another live process holds `path` (names it and its process id).
      DirectoryNotEmpty: as `check_fresh`; or `resume` of a directory that is not a
        purejaxppo `kind` output.
    """
    path = Path(path)
    if resume:  # before anything is created: a refused resume leaves no folder, no lock
        _check_resumable(path, kind)
    path.mkdir(parents=True, exist_ok=True)
    lock = filelock.FileLock(path / LOCK, timeout=0)
    try:
        lock.acquire()
    except filelock.Timeout:
        raise DirectoryLocked(
            f"{path} is in use by {_lock_holder(path)} (another purejaxppo writer); wait "
            "for it to finish or stop it, then --resume"
        ) from None
    try:
        (path / LOCK_PID).write_text(f"{os.getpid()}\n")
        if resume:
            _check_resumable(path, kind)  # again, under the lock
        else:
            check_fresh(path, overwrite, kind)
            if overwrite:
                clear(path)
        write_marker(path, kind, keep_imports=resume)
        yield path
    finally:
        with contextlib.suppress(OSError):
            (path / LOCK_PID).unlink()
        lock.release()


def _check_resumable(path: Path, kind: str) -> None:
    marker = read_marker(path)
    legacy = _LEGACY_EVIDENCE.get(kind)  # none for kinds newer than the marker (tune)
    if marker is None and (legacy is None or not (path / legacy).exists()):
        raise DirectoryNotEmpty(
            f"--resume {path}: not a purejaxppo {kind} directory (no {MARKER} marker)"
        )
    if marker is not None and marker.get("kind") != kind:
        raise DirectoryNotEmpty(
            f"--resume {path}: holds a purejaxppo {marker.get('kind')!r} output, not a {kind}"
        )


def remove_if_empty(path: str | Path) -> None:
    """Removes `path` if it holds nothing but marker / lock files (a default directory
    created for a run that then failed validation)."""
    path = Path(path)
    if path.is_dir() and not entries(path):
        for name in _INTERNAL:
            with contextlib.suppress(OSError):
                (path / name).unlink()
        with contextlib.suppress(OSError):
            path.rmdir()


def safe_name(text: str) -> str:
    """`text` with the characters that are not portable in a path name (`:` `/` `\\` and
    the like) replaced by `_`, e.g. "gymnasium:phys2d/CartPole-v1" -> "gymnasium_phys2d_CartPole-v1"."""
    return re.sub(r"[^A-Za-z0-9._+=-]", "_", text)


def make_unique_dir(root: str | Path, stem: str) -> Path:
    """Creates and returns `root/<stem>-<6 random hex digits>` (`exist_ok=False`, retried
    on the unlikely collision), so concurrent launches never share a directory."""
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    for _ in range(100):
        path = root / f"{safe_name(stem)}-{secrets.token_hex(3)}"
        try:
            path.mkdir(exist_ok=False)
        except FileExistsError:
            continue
        return path
    raise RuntimeError(f"could not create a unique directory {root}/{stem}-*")  # pragma: no cover


def default_run_dir(
    env_name: str, seed: int, root: str | Path = "runs", name: str | None = None
) -> Path:
    """Creates `runs/<env>-<YYYYmmdd-HHMMSS>-seed<seed>-<random>`, or `runs/<name>-<random>`
    for a named run (`PPOConfig.name`); see `make_unique_dir`."""
    if name:
        return make_unique_dir(root, name)
    return make_unique_dir(root, f"{env_name}-{time.strftime('%Y%m%d-%H%M%S')}-seed{seed}")


def set_aside_newer_checkpoints(run_dir: str | Path, step: int, kind: str = "last") -> None:
    """Moves checkpoint steps newer than `step` (damaged ones that resume skipped) to
    `checkpoints/damaged/<kind>-<step>`, so that the resumed run can save those steps
    again; nothing is deleted."""
    directory = Path(run_dir) / "checkpoints" / kind
    if not directory.is_dir():
        return
    for entry in sorted(directory.iterdir()):
        if entry.name.isdigit() and int(entry.name) > step:
            target = Path(run_dir) / "checkpoints" / "damaged" / f"{kind}-{entry.name}"
            target.parent.mkdir(parents=True, exist_ok=True)
            if target.exists():
                target = target.with_name(f"{target.name}-{secrets.token_hex(3)}")
            entry.rename(target)
            print(f"set aside the damaged checkpoint {entry} as {target}", file=sys.stderr)
