"""Strict YAML reading for config files: a key given twice is an error, aliases
(`*name`, also in `<<: *name` merges) are refused (a few hundred bytes of nested aliases,
a "billion laughs" file, expand to gigabytes), and so is nesting deeper than `MAX_DEPTH`
levels (PyYAML composes nested collections recursively: thousands of `[` would end in a
RecursionError)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

__all__ = ["FLOAT_1_2", "MAX_DEPTH", "DuplicateKeyError", "load_yaml", "load_yaml_file"]

#: A number with an exponent, YAML 1.2's way (`1e5`, `3e-4`, `2.5E4`, `.5e3`, `-1_000e3`).
FLOAT_1_2 = re.compile(r"^[-+]?(?:[0-9][0-9_]*(?:\.[0-9_]*)?|\.[0-9_]+)[eE][-+]?[0-9]+$")

#: The deepest nesting of collections a config file may have (a config nests a few levels:
#: `eval_splits: {name: {env_kwargs: {key: [values]}}}`).
MAX_DEPTH = 50


class DuplicateKeyError(ValueError):
    """A YAML mapping gives the same key twice."""


def load_yaml(text: str, source: str = "<string>") -> Any:
    """Parses YAML like `yaml.safe_load`, but strictly: a mapping with a key given twice
    is an error (PyYAML silently keeps the last value).

    Raises:
      ValueError: naming `source` and the line (1-based) of a syntax error, of the
        duplicate key, of an alias, or of a collection nested deeper than `MAX_DEPTH`.
    """
    import yaml

    loader = _strict_loader(source)
    try:
        return yaml.load(text, Loader=loader)  # noqa: S506 - a SafeLoader subclass
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark or err.context_mark
        where = f", line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        what = " ".join(str(p) for p in (err.context, err.problem) if p)
        raise ValueError(f"{source}{where}: invalid YAML: {what}") from None
    except yaml.YAMLError as err:
        raise ValueError(f"{source}: invalid YAML: {err}") from None
    except RecursionError:  # a safety net: `compose_node` stops at MAX_DEPTH levels
        raise ValueError(
            f"{source}: nested too deeply (more than {MAX_DEPTH} levels of lists / mappings)"
        ) from None


def _strict_loader(source: str) -> Any:
    """The `yaml.SafeLoader` subclass of `load_yaml`: it refuses aliases, collections
    nested deeper than `MAX_DEPTH` and duplicate keys, naming `source` and the line."""
    import yaml

    class StrictLoader(yaml.SafeLoader):
        depth = 0

        def compose_node(self, parent: Any, index: Any) -> Any:
            event = self.peek_event()
            if isinstance(event, yaml.AliasEvent):
                raise ValueError(
                    f"{source}, line {event.start_mark.line + 1}: YAML aliases "
                    f"(*{str(event.anchor)[:40]}) are not accepted in config files; write "
                    "the value out"
                )
            if self.depth >= MAX_DEPTH:
                raise ValueError(
                    f"{source}, line {event.start_mark.line + 1}: nested too deeply (more "
                    f"than {MAX_DEPTH} levels of lists / mappings)"
                )
            self.depth += 1
            try:
                return super().compose_node(parent, index)
            finally:
                self.depth -= 1

    def construct_mapping(loader, node, deep=False):
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            key = loader.construct_object(key_node, deep=True)
            line = key_node.start_mark.line + 1
            try:
                first = seen.get(key)
            except TypeError:  # an unhashable key: let PyYAML report it
                continue
            if first is not None:
                raise DuplicateKeyError(
                    f"{source}, line {line}: duplicate key {key!r} (first given on line {first})"
                )
            seen[key] = line
        return yaml.SafeLoader.construct_mapping(loader, node, deep=deep)

    StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, construct_mapping)
    # YAML 1.2's floats without a dot or a signed exponent (`3e-4` has one, `1e5` and
    # `2.5e4` do not), which PyYAML's YAML 1.1 reads as strings: `total_timesteps: 1e6`
    # and `learning_rate: 3e-4` mean numbers in every config a user copies.
    StrictLoader.add_implicit_resolver("tag:yaml.org,2002:float", FLOAT_1_2, list("-+.0123456789"))
    return StrictLoader


def load_yaml_file(path: str | Path) -> Any:
    """`load_yaml` of the text of the file `path`.

    Raises:
      ValueError: as `load_yaml`; or naming `path` when it is not UTF-8 text (a binary
        file, another encoding).
    """
    try:
        text = Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError as err:
        raise ValueError(
            f"{path}: not a UTF-8 text file (byte {err.object[err.start]:#04x} at offset "
            f"{err.start}); a YAML file must be UTF-8 text"
        ) from None
    return load_yaml(text, source=str(path))
