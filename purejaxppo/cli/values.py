"""Command-line values: scalars, grids, random-search specs and the config they build.

Imports nothing heavy: the command line validates a request before it starts JAX.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from purejaxppo.config import DuplicateKeyError, PPOConfig, load_yaml

#: Exit code of a run whose losses or parameters became NaN / Inf.
EXIT_DIVERGED = 3
#: Exit code of a command that stopped because the disk (or quota) is full (ENOSPC).
EXIT_NO_SPACE = 4
#: Exit code of any other operating-system error while writing or reading files
#: (permissions, a path that cannot exist, a read-only disk): the same code as bad input.
EXIT_OS_ERROR = 2


def _parse_value(text: str) -> Any:
    """Command-line value -> Python: YAML scalars/lists/mappings, plus `1e6` and `64,64`."""
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        pass
    if "," in text and not text.lstrip().startswith(("[", "{")):
        return [_parse_value(part.strip()) for part in text.split(",") if part.strip()]
    try:
        return load_yaml(text, source=repr(text))
    except DuplicateKeyError as err:
        raise argparse.ArgumentTypeError(str(err)) from None
    except ValueError:
        return text


def _split_assignment(text: str, flag: str) -> tuple[str, str]:
    name, sep, value = text.partition("=")
    if not sep or not name.strip() or not value.strip():
        raise ValueError(f"{flag} {text!r}: expected FIELD=VALUES")
    return name.strip().replace("-", "_"), value.strip()


def parse_grid(items: Sequence[str]) -> dict[str, list[Any]]:
    """['learning_rate=1e-4,3e-4', 'hidden_sizes=64,64;128,128'] -> grid dict."""
    grid: dict[str, list[Any]] = {}
    for item in items:
        name, text = _split_assignment(item, "--grid")
        if name in grid:
            raise ValueError(f"--grid {item!r}: field {name!r} given twice")
        if ";" in text:
            grid[name] = [_parse_value(part.strip()) for part in text.split(";") if part.strip()]
        else:
            grid[name] = [_parse_value(part.strip()) for part in text.split(",") if part.strip()]
    return grid


def parse_random(items: Sequence[str]) -> dict[str, tuple]:
    """['learning_rate=log_uniform:1e-5:1e-3', 'num_envs=choice:4,8'] -> random dict."""
    random: dict[str, tuple] = {}
    for item in items:
        name, text = _split_assignment(item, "--random")
        kind, _, rest = text.partition(":")
        if kind == "choice":
            values = _parse_value(rest)
            random[name] = (kind, values if isinstance(values, list) else [values])
        else:
            random[name] = (kind, *(_parse_value(part) for part in rest.split(":") if part))
    return random


def load_config(path: Path | None, overrides: dict[str, Any]) -> PPOConfig:
    """Defaults <- YAML file <- overrides; raises ValueError naming a bad field, or a
    `path` that is a directory or does not exist.

    A warm start (`init_from`) without `init_step` gets its source's absolute path and
    the step of its newest checkpoint (`resolve_init_from`), so config.yaml records them.
    """
    if path is None:
        config = PPOConfig.from_dict(overrides)
    elif path.is_dir():
        hint = (
            f" (the run's config: {path / 'config.yaml'})"
            if (path / "config.yaml").is_file()
            else ""
        )
        raise ValueError(f"--config {path}: is a directory, not a YAML file{hint}")
    elif not path.is_file():
        raise ValueError(f"--config {path}: no such file")
    else:
        config = PPOConfig.from_yaml(path, **overrides)
    if config.init_from is not None and config.init_step is None:
        config = resolve_init_from(config)
    return config


def resolve_init_from(config: PPOConfig) -> PPOConfig:
    """`config` with `init_from` made absolute and `init_step` the newest complete
    checkpoint of that run (a directory name of digits under `checkpoints/last`; orbax
    writes elsewhere and renames when complete). Reads no arrays.

    Raises:
      ValueError: one line naming `init_from` when it is not a run directory or holds no
        complete checkpoint.
    """
    source = Path(config.init_from).expanduser().resolve()
    last = source / "checkpoints" / "last"
    if not (source / "config.yaml").is_file() or not last.is_dir():
        raise ValueError(
            f"--init-from {config.init_from}: not a run directory (no config.yaml and "
            "checkpoints/last): give a directory written by purejaxppo train"
        )
    steps = [int(p.name) for p in last.iterdir() if p.is_dir() and p.name.isdigit()]
    if not steps:
        raise ValueError(f"--init-from {config.init_from}: no complete checkpoint in {last}")
    return config.replace(init_from=str(source), init_step=max(steps))


def error(parser: argparse.ArgumentParser, message: Any, code: int = 2) -> None:
    """Exits with `code` (2: bad input) and "purejaxppo: error: <message>"; a full disk
    (also one orbax reports as a ValueError) exits with `EXIT_NO_SPACE` instead."""
    from purejaxppo.paths import is_disk_full

    if isinstance(message, BaseException) and is_disk_full(message):
        code = EXIT_NO_SPACE
        first = str(message).splitlines()[0] if str(message) else type(message).__name__
        message = (
            f"the disk is full ({first[:300]}); the newest complete checkpoint is kept: "
            "free space, then rerun (train: --resume)"
        )
    parser.exit(code, f"purejaxppo: error: {message}\n")
