"""Run and sweep directories: unique default names, no silent overwrites.

A fresh run refuses a directory that already holds files unless told to `--resume` it or
to `--overwrite` it; `--overwrite` removes the old contents only after the new run's
configuration, environment and seed were validated (`drivers.single.train_and_log`), and only in
a directory that looks like a run directory. Default names get a random suffix and are
created with `exist_ok=False`, so two launches in the same second never share one.
"""

from __future__ import annotations

import secrets
import shutil
import sys
import time
from pathlib import Path

#: Entries that mark a directory as a `purejaxppo train` run directory.
RUN_FILES = ("config.yaml", "metrics.csv", "checkpoints", "learning_curve.png")


class DirectoryNotEmpty(ValueError):
    """A fresh run or sweep was pointed at a directory that already holds files."""


def is_nonempty(path: Path) -> bool:
    return path.is_dir() and any(path.iterdir())


def check_fresh(path: str | Path, overwrite: bool, what: str = "run") -> None:
    """Raises unless `path` can take a fresh run / sweep (before anything is computed).

    Raises:
      DirectoryNotEmpty: `path` is a non-empty directory and `overwrite` is False (the
        message names --resume and --overwrite), or `overwrite` is True but `path` does
        not look like a run directory (nothing of it is deleted).
      ValueError: `path` exists and is not a directory.
    """
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise ValueError(f"{what} directory {path} exists and is not a directory")
    if not is_nonempty(path):
        return
    if not overwrite:
        raise DirectoryNotEmpty(
            f"{what} directory {path} already exists and is not empty; pass --resume {path} "
            f"to continue it, or --overwrite to replace its contents"
        )
    if what == "run" and not any((path / name).exists() for name in RUN_FILES):
        raise DirectoryNotEmpty(
            f"--overwrite: {path} does not look like a run directory (it holds none of "
            f"{', '.join(RUN_FILES)}); refusing to delete its contents"
        )


def clear(path: str | Path) -> None:
    """Deletes the contents of `path` (after `check_fresh(path, overwrite=True)`)."""
    path = Path(path)
    if not path.is_dir():
        return
    entries = sorted(path.iterdir())
    if entries:
        print(
            f"--overwrite: removing the previous contents of {path} "
            f"({', '.join(e.name for e in entries[:6])}{', ...' if len(entries) > 6 else ''})",
            file=sys.stderr,
        )
    for entry in entries:
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()


def make_unique_dir(root: str | Path, stem: str) -> Path:
    """Creates and returns `root/<stem>-<6 random hex digits>` (`exist_ok=False`, retried
    on the unlikely collision), so concurrent launches never share a directory."""
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    for _ in range(100):
        path = root / f"{stem}-{secrets.token_hex(3)}"
        try:
            path.mkdir(exist_ok=False)
        except FileExistsError:
            continue
        return path
    raise RuntimeError(f"could not create a unique directory {root}/{stem}-*")  # pragma: no cover


def default_run_dir(env_name: str, seed: int, root: str | Path = "runs") -> Path:
    """Creates `runs/<env>-<YYYYmmdd-HHMMSS>-seed<seed>-<random>` (see `make_unique_dir`)."""
    name = env_name.replace(":", "_")  # suite ids "brax:..."; ':' is not portable in paths
    return make_unique_dir(root, f"{name}-{time.strftime('%Y%m%d-%H%M%S')}-seed{seed}")


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
