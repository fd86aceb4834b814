"""Known settings queued as a study's first trials (`TuneOptions.enqueue`,
`enqueue_base`), as Optuna's `study.enqueue_trial`: the sampler runs them before it
draws, so a study starts from what the user already trusts.

An entry is a mapping `{field: value}` (Python) or the command line's text
`"FIELD=VALUE,FIELD=VALUE"` (`--enqueue`); its fields must be searched and its values in
the search's distributions (a choice among the choices, a number within the range); a
searched field it leaves out is drawn by the sampler. The base config's own values of
the searched fields come first as trial 0 (`enqueue_base`), those that lie in the space.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from purejaxppo.config import PPOConfig
from purejaxppo.drivers.tune.space import SearchSpace, encode


def _scalar(text: str) -> Any:
    """A value of `FIELD=VALUE`: an int, a float, or the text (a choice, sizes 64-64)."""
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def _entry(item: Any) -> dict[str, Any]:
    """One entry as `{field: value}` (see the module docstring).

    Raises:
      ValueError: text that is not FIELD=VALUE[,FIELD=VALUE...], or an entry of another type.
    """
    if isinstance(item, Mapping):
        return dict(item)
    if not isinstance(item, str) or not item.strip():
        raise ValueError(f"enqueue {item!r}: must be FIELD=VALUE[,FIELD=VALUE...] or a mapping")
    entry = {}
    for part in item.split(","):
        name, sep, value = part.partition("=")
        if not sep or not name.strip() or not value.strip():
            raise ValueError(
                f"enqueue {item!r}: {part!r} is not FIELD=VALUE (e.g. --enqueue "
                "learning_rate=0.0003,ent_coef=0.01)"
            )
        entry[name.strip().replace("-", "_")] = _scalar(value.strip())
    return entry


def _stored(name: str, value: Any, spec: tuple, where: str) -> Any:
    """`value` as the trial stores it, after checking it lies in `spec`.

    Raises:
      ValueError: naming the entry, for a value outside the distribution.
    """
    kind, *params = spec
    if kind == "choice":
        stored = encode(name, value)
        if stored not in params[0]:
            raise ValueError(f"{where}: {value!r} is not one of the choices {params[0]}")
        return stored
    numeric = isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind == "int_uniform" and not (numeric and float(value).is_integer()):
        raise ValueError(f"{where}: {value!r} is not an integer (int_uniform)")
    if not numeric or not params[0] <= value <= params[1]:
        raise ValueError(
            f"{where}: {value!r} is outside the search's {kind} [{params[0]}, {params[1]}]"
        )
    return int(value) if kind == "int_uniform" else float(value)


def parse_enqueued(items: Sequence[Any], space: SearchSpace) -> list[dict[str, Any]]:
    """The `enqueue` entries as trial parameters (Optuna's stored values).

    Raises:
      ValueError: one line naming the entry: not FIELD=VALUE, a field that is not searched
        (listing the searched ones), a value outside its distribution.
    """
    entries = []
    for item in items:
        params = {}
        for name, value in _entry(item).items():
            where = f"enqueue {item!r}"
            if name not in space.spec:
                raise ValueError(
                    f"{where}: {name!r} is not a searched field (searched: "
                    f"{', '.join(space.names)})"
                )
            params[name] = _stored(name, value, space.spec[name], f"{where}: {name}")
        entries.append(params)
    return entries


def base_params(config: PPOConfig, space: SearchSpace) -> dict[str, Any]:
    """The base config's values of the searched fields that lie in the space."""
    params = {}
    for name, spec in space.spec.items():
        try:
            params[name] = _stored(name, getattr(config, name), spec, name)
        except ValueError:
            continue
    return params
