"""PBT's static search space: fields that fix the compiled program (`hidden_sizes`,
`num_minibatches`, `update_epochs`, `num_steps`), searched as `("choice", [A, B, ...])`,
and the checks that refuse what a static search cannot do, before anything compiles.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Mapping, Sequence
from typing import Any

from purejaxppo.config import TRACED_FIELDS, PPOConfig
from purejaxppo.drivers.settings import check_field

#: Static fields `pbt` may search (by `choice`); members that share their values run as
#: one compiled program (`drivers.population.groups`).
STATIC_SEARCH_FIELDS = ("hidden_sizes", "num_minibatches", "update_epochs", "num_steps")


@dataclasses.dataclass(frozen=True)
class StaticSpace:
    """The searched static fields and their choices (normalised values).

    Attributes:
      names: searched static fields, in the order of the `[P, S]` choice-index matrices.
      choices: per field, its values (`hidden_sizes`: tuples of ints; the others: ints).
    """

    names: tuple[str, ...] = ()
    choices: tuple[tuple[Any, ...], ...] = ()

    @property
    def spec(self) -> dict[str, tuple]:
        """`{name: ("choice", [values])}`, the `search=` form."""
        return {n: ("choice", list(c)) for n, c in zip(self.names, self.choices, strict=True)}

    def values(self, index: Sequence[int]) -> dict[str, Any]:
        """`{name: value}` of one member's choice indices `[S]`."""
        return {n: c[int(i)] for n, c, i in zip(self.names, self.choices, index, strict=True)}


def static_text(value: Any) -> Any:
    """A static value as a table cell: `(64, 64)` -> "64-64", ints unchanged."""
    return "-".join(str(v) for v in value) if isinstance(value, tuple) else value


def _normalise(name: str, value: Any) -> Any:
    if name != "hidden_sizes":
        return value
    if isinstance(value, str):  # "64-64" (the CLI's form)
        parts = value.split("-")
        if not all(p.strip().lstrip("+").isdigit() for p in parts):
            raise ValueError(
                f"search[{name!r}]: {value!r} is not an architecture; write widths joined "
                "by '-', e.g. 64-64 or 256-256-256"
            )
        return tuple(int(p) for p in parts)
    if isinstance(value, int) and not isinstance(value, bool):
        return (value,)
    if isinstance(value, Sequence):
        return tuple(value)
    raise ValueError(f"search[{name!r}]: {value!r} is not an architecture (e.g. 64-64)")


def split_search(
    search: Mapping[str, Sequence[Any]] | None, config: PPOConfig
) -> tuple[dict[str, Sequence[Any]], StaticSpace]:
    """Splits `search` into its traced part (for `search.parse_search`) and its static
    `choice` fields (a `StaticSpace`), checking each static value against `config`.

    Raises:
      ValueError: naming the field and value, for a static field pbt cannot search (it
        names the ones it can), a spec other than `("choice", [values])`, a value given
        twice, or a value the config (the network, the batch) cannot take.
    """
    traced: dict[str, Sequence[Any]] = {}
    names, choices = [], []
    for name, spec in (search or {}).items():
        check_field(name, "search")
        if name in TRACED_FIELDS:
            traced[name] = spec
            continue
        if name not in STATIC_SEARCH_FIELDS:
            raise ValueError(
                f"search: field {name!r} is static and pbt cannot search it; static fields "
                f"it searches (choice:A,B,...): {', '.join(STATIC_SEARCH_FIELDS)}; traced "
                f"fields (uniform / log_uniform): {', '.join(TRACED_FIELDS)}"
            )
        if (
            isinstance(spec, str)
            or not isinstance(spec, Sequence)
            or len(spec) != 2
            or spec[0] != "choice"
            or isinstance(spec[1], str)
            or not isinstance(spec[1], Sequence)
            or not spec[1]
        ):
            raise ValueError(
                f"search[{name!r}]={spec!r}: a static field is searched by a choice, "
                "('choice', [A, B, ...]) (CLI: --search FIELD=choice:A,B)"
            )
        values = [_normalise(name, v) for v in spec[1]]
        for value in values:
            if values.count(value) > 1:
                raise ValueError(
                    f"search[{name!r}]: the value {static_text(value)!r} is given twice"
                )
            try:
                config.replace(**{name: value})
            except ValueError as err:
                raise ValueError(f"search[{name!r}] value {static_text(value)!r}: {err}") from None
        if name == "hidden_sizes" and config.recurrent is not None:
            raise ValueError(
                f"search['hidden_sizes'] with recurrent={config.recurrent!r}: the recurrent "
                "state's size follows hidden_sizes; pbt searches architectures of "
                "feed-forward policies only"
            )
        names.append(name)
        choices.append(tuple(values))
    space = StaticSpace(tuple(names), tuple(choices))
    if space.names:  # every group must be a valid run
        for combo in itertools.product(*space.choices):
            group_config(config, space, combo)
    return traced, space


def group_config(config: PPOConfig, space: StaticSpace, combo: Sequence[Any]) -> PPOConfig:
    """The config of the members whose static values are `combo` (one per field of
    `space`): `total_timesteps` is set so that every group has `config.num_updates`
    updates (a generation is K updates for every member, whatever its `num_steps`).

    Raises:
      ValueError: naming the combination, when the config cannot take it (e.g. a
        `num_minibatches` that does not divide `num_envs * num_steps`).
    """
    values = dict(zip(space.names, combo, strict=True))
    num_steps = values.get("num_steps", config.num_steps)
    total = config.num_updates * config.num_envs * num_steps
    try:
        return config.replace(**values, total_timesteps=total)
    except ValueError as err:
        shown = ", ".join(f"{k}={static_text(v)}" for k, v in values.items())
        raise ValueError(f"search: the static combination {shown}: {err}") from None


def check_static_options(config: PPOConfig, *, num_devices: int) -> None:
    """Refuses, in one line naming the option, what needs the single compiled program of a
    traced-only search: several devices, a warm start (`init_from`), evaluation fitness
    (`eval_freq` > 0). Checkpoints and resume work for both searches."""
    needs_one = {
        f"devices ({num_devices} devices)": num_devices > 1,
        f"init_from={config.init_from!r} (a warm start of one architecture)": (
            config.init_from is not None
        ),
        f"eval_freq={config.eval_freq} (evaluation fitness)": config.eval_freq > 0,
    }
    bad = [name for name, given in needs_one.items() if given]
    if bad:
        raise ValueError(
            f"search over static fields runs one program per group of members and cannot "
            f"be combined with {', '.join(bad)}: these need the single program of a "
            "traced-only search (use --devices 1, or search traced fields only)"
        )
