"""Checks of the path `Policy.load` is given: a run directory written by `purejaxppo
train`, not a YAML config, a `tune` output directory or any other path, each refused with
what to load instead.

Stdlib only, on the ground floor: `Policy.load` checks the path before it imports the
checkpoint reader.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

#: Files of a `purejaxppo tune` output directory (`drivers.tune.outputs`).
TUNE_FILES = ("best.yaml", "trials.csv", "study.db")


def check_run_dir(path: Any) -> None:
    """Raises unless `path` may be a run directory (`Policy.load`): a str / PathLike that
    exists and is not a YAML config, a tune's output or another directory that holds
    neither config.yaml nor checkpoints/ (a `--num-seeds` directory is
    `load_checkpoint`'s to explain).

    Raises:
      TypeError: `path` not a str / `os.PathLike` (e.g. None).
      ValueError: `path` that does not exist, a file (a YAML config: train it first), a
        `tune` output directory (naming its best.yaml), or another directory without
        config.yaml and checkpoints/.
    """
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(
            f"Policy.load: path={path!r}: expected a run directory (str or pathlib.Path) "
            "written by purejaxppo train"
        )
    where = Path(path)
    if where.is_file():
        if where.suffix in (".yaml", ".yml"):
            raise ValueError(
                f"Policy.load: {path} is a YAML config, not a run directory; train it "
                f"first with purejaxppo train --config {path}, then load the run directory"
            )
        raise ValueError(f"Policy.load: {path} is a file, not a run directory")
    if not where.is_dir():
        raise ValueError(f"Policy.load: {path}: no such run directory")
    if (where / "config.yaml").is_file() or (where / "checkpoints").is_dir():
        return
    if (where / "seeds.yaml").is_file():
        return
    request = where / "request.yaml"
    tune = any((where / name).is_file() for name in TUNE_FILES) or (
        request.is_file() and "search:" in request.read_text(errors="replace")
    )
    if tune:
        best = where / "best.yaml"
        rerun = (
            f"its best trial's config is {best}: train it with purejaxppo train --config "
            f"{best}, then load that run directory"
            if best.is_file()
            else "it has no best.yaml yet (no trial completed)"
        )
        raise ValueError(
            f"Policy.load: {path} is a tune output directory, not a run directory; {rerun}"
        )
    raise ValueError(
        f"Policy.load: {path} is not a run directory (no config.yaml, no checkpoints/): "
        "give a directory written by purejaxppo train"
    )
