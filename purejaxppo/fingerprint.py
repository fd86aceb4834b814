"""What a resumable command started with, kept beside its results and compared on resume.

A command that continues from what it wrote (a sweep's chunk files, a population's
checkpoint, the seeds of `train --num-seeds`) records, when it starts, the resolved
configuration, the settings, the seeds and the chunking that decide its results
(`record`). A resume compares what it would run now with that record (`check`) and refuses
any change in one line naming the field, so results computed for old settings are never
reported under new ones. The record is JSON (`.purejaxppo-fingerprint.json`, written
atomically); values are compared after a JSON round trip (tuples as lists).

`digest(value)` is the SHA-256 of a value's canonical JSON, for files that carry their own
fingerprint (a sweep's chunk files).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = ["FILE", "FingerprintMismatch", "check", "digest", "ensure", "record"]

#: The record's file name inside a command's output directory.
FILE = ".purejaxppo-fingerprint.json"


class FingerprintMismatch(ValueError):
    """A resume with other settings than the run it continues. `changes`: the differing
    fields as (dotted name, recorded value, value now), in order."""

    def __init__(self, message: str, changes: list[tuple[str, Any, Any]]):
        super().__init__(message)
        self.changes = changes


def _canonical(value: Any) -> Any:
    """`value` after a JSON round trip (tuples as lists, keys as strings)."""
    return json.loads(json.dumps(value, sort_keys=True, default=repr))


def digest(value: Any) -> str:
    """The SHA-256 (hex) of `value`'s canonical JSON (sorted keys, `repr` for others)."""
    text = json.dumps(_canonical(value), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def _flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    """{"config.gamma": 0.99, "settings[1].learning_rate": 0.001, ...}: the leaves of a
    JSON value by dotted name (a list of scalars is one leaf)."""
    if isinstance(value, Mapping):
        items = [(f"{prefix}.{k}" if prefix else str(k), v) for k, v in value.items()]
    elif isinstance(value, list) and any(isinstance(v, (Mapping, list)) for v in value):
        items = [(f"{prefix}[{i}]", v) for i, v in enumerate(value)]
        items.append((f"{prefix}.length", len(value)))
    else:
        return {prefix: value}
    flat: dict[str, Any] = {}
    for name, item in items:
        if isinstance(item, (Mapping, list)):
            flat.update(_flatten(item, name))
        else:
            flat[name] = item
    return flat


def record(directory: str | Path, fields: Mapping[str, Any]) -> Path:
    """Writes `fields` (JSON-able: dicts, lists, numbers, strings; others by `repr`) as
    `directory/FILE`, atomically (a temporary file renamed into place); returns the path."""
    path = Path(directory) / FILE
    partial = path.with_name(path.name + ".partial")
    text = json.dumps(_canonical(dict(fields)), sort_keys=True, indent=1)
    with open(partial, "w") as file:
        file.write(text)
        file.flush()
        os.fsync(file.fileno())
    os.replace(partial, path)
    return path


def check(directory: str | Path, fields: Mapping[str, Any], *, what: str) -> bool:
    """Compares `fields` with `directory`'s record; returns False where there is none.

    Raises:
      FingerprintMismatch (a ValueError): a field differs, naming the first one with its
        recorded value and the value now (and how many more differ); or the record is
        unreadable.
    """
    path = Path(directory) / FILE
    if not path.is_file():
        return False
    try:
        stored = json.loads(path.read_text())
    except (OSError, ValueError) as err:
        raise FingerprintMismatch(f"{what}: {path} is unreadable ({err})", []) from None
    old, new = _flatten(stored), _flatten(_canonical(dict(fields)))
    changes = [
        (name, old.get(name, "<absent>"), new.get(name, "<absent>"))
        for name in sorted(set(old) | set(new))
        if old.get(name, "<absent>") != new.get(name, "<absent>")
    ]
    if not changes:
        return True
    name, was, now = changes[0]
    more = f" (and {len(changes) - 1} more field(s))" if len(changes) > 1 else ""
    raise FingerprintMismatch(
        f"{what}: {Path(directory)} was started with {name}={was!r}, now {name}={now!r}"
        f"{more}: its saved results belong to the old values; resume with the original "
        "settings, or start anew in another directory",
        changes,
    )


def ensure(directory: str | Path, fields: Mapping[str, Any], *, what: str) -> None:
    """`check` against `directory`'s record, or `record` the first one (the directory
    exists). Raises `FingerprintMismatch` as `check` does."""
    if not check(directory, fields, what=what):
        record(directory, fields)
