"""Command-line values: scalars, grids, random-search specs and the config they build.

Imports nothing heavy: the command line validates a request before it starts JAX.
"""

from __future__ import annotations

import argparse
import functools
import typing
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


class _Int(int):
    """An int read from a command-line word; `.text` is the word."""

    text: str


class _Float(float):
    """A float read from a command-line word; `.text` is the word."""

    text: str


class _List(list):
    """A comma-separated command-line list (`64,64`); `.text` is the word."""

    text: str


class _Word(str):
    """A command-line word that YAML reads as another scalar (`on` -> True, `0x10` -> 16,
    `~` -> None): the word itself, with YAML's value as `.parsed`."""

    parsed: Any


def _tagged(kind: type, value: Any, text: str) -> Any:
    out = kind(value)
    out.text = text
    return out


def _parse_value(text: str) -> Any:
    """Command-line value -> Python: YAML scalars/lists/mappings, plus `1e6` and `64,64`.

    Numbers and comma lists remember their word (`.text`), and words that YAML reads as
    another scalar (`on`, `yes`, `0x10`, `~`, dates; not the plain `true`, `false` and
    `null`) come back as that word with YAML's value as `.parsed`: `field_value` then
    gives a string field (`PPOConfig.fused_kernels`, `name`) the word verbatim and any
    other field the value.
    """
    try:
        return _tagged(_Int, int(text), text)
    except ValueError:
        pass
    try:
        return _tagged(_Float, float(text), text)
    except ValueError:
        pass
    if "," in text and not text.lstrip().startswith(("[", "{")):
        parts = [_parse_value(part.strip()) for part in text.split(",") if part.strip()]
        return _tagged(_List, parts, text)
    try:
        value = load_yaml(text, source=repr(text))
    except DuplicateKeyError as err:
        raise argparse.ArgumentTypeError(str(err)) from None
    except ValueError:
        return text
    if isinstance(value, (str, list, dict)) or text.strip() in ("true", "false", "null"):
        return value
    word = _Word(text)
    word.parsed = value
    return word


def _plain(value: Any) -> Any:
    """`_parse_value`'s result as plain Python (`_Word` -> its YAML value)."""
    if isinstance(value, _Word):
        return value.parsed
    if isinstance(value, _Int):
        return int(value)
    if isinstance(value, _Float):
        return float(value)
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


@functools.cache
def _string_field(name: str) -> tuple[bool, bool]:
    """(whether the `PPOConfig` field `name` holds a string, whether it may be None)."""
    hint = typing.get_type_hints(PPOConfig).get(name)
    if hint is str:
        return True, False
    args = typing.get_args(hint)
    return set(args) == {str, type(None)}, True


def field_value(name: str, value: Any) -> Any:
    """The value of the `PPOConfig` field `name` given `value` from `_parse_value`: a
    string field (annotation `str` or `str | None`) takes the command-line word verbatim
    (`--fused-kernels off` is "off", `--name 007` is "007"; `null` / `~` is None where
    the field may be None); any other field takes YAML's value (`--norm-adv on` is True).
    """
    string, optional = _string_field(name)
    if not string:
        return _plain(value)
    if _plain(value) is None:
        return None if optional else str(value if isinstance(value, _Word) else "null")
    if isinstance(value, (_Int, _Float, _List)):
        return value.text
    if isinstance(value, bool):  # the plain `true` / `false`
        return "true" if value else "false"
    return str(value) if isinstance(value, _Word) else value


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
        parts = text.split(";") if ";" in text else text.split(",")
        grid[name] = [field_value(name, _parse_value(p.strip())) for p in parts if p.strip()]
    return grid


def parse_random(items: Sequence[str], flag: str = "--random") -> dict[str, tuple]:
    """['learning_rate=log_uniform:1e-5:1e-3', 'num_envs=choice:4,8'] -> random dict.

    `flag` names the option in errors (`--random` of `sweep`, `--search` of `tune` and
    `pbt`).

    Raises:
      ValueError: an item that is not FIELD=SPEC, or a field given twice (`learning_rate`
        and `learning-rate` are the same field), naming the flag, the item and the field.
    """
    random: dict[str, tuple] = {}
    for item in items:
        name, text = _split_assignment(item, flag)
        if name in random:
            raise ValueError(f"{flag} {item!r}: field {name!r} given twice (one {flag} per field)")
        kind, _, rest = text.partition(":")
        if kind == "choice":
            values = _parse_value(rest)
            values = list(values) if isinstance(values, list) else [values]
            random[name] = (kind, [field_value(name, v) for v in values])
        else:
            random[name] = (kind, *(_plain(_parse_value(part)) for part in rest.split(":") if part))
    return random


def load_config(path: Path | None, overrides: dict[str, Any]) -> PPOConfig:
    """Defaults <- YAML file <- overrides; raises ValueError naming a bad field, or a
    `path` that is a directory or does not exist.

    `overrides` may hold `_parse_value`'s results (the command line's): a string field
    takes the word verbatim (`field_value`). A warm start (`init_from`) without
    `init_step` gets its source's absolute path and the step of its newest checkpoint
    (`resolve_init_from`), so config.yaml records them.
    """
    overrides = {name: field_value(name, value) for name, value in overrides.items()}
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
