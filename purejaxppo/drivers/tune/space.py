"""The search space of `tune`: `search=` specs as Optuna distributions, and trial
parameters back to configs.

A spec has the syntax of `sweep(random=...)` and `pbt(search=...)` (the command line's
`--search FIELD=DIST:...`, parsed by `cli.values.parse_random`), and is checked by the
same rules (`drivers.settings`): `("uniform", low, high)` and `("log_uniform", low,
high)` -> `FloatDistribution`, `("int_uniform", low, high)` (inclusive) ->
`IntDistribution`, `("choice", [A, B, ...])` -> `CategoricalDistribution`. Traced fields
(`TRACED_FIELDS`) vary between the lanes of one compiled program; a static field (sizes,
the network) takes `choice` or `int_uniform`, and each of its values compiles its own
program. Architectures are choices written as widths joined by "-" ("64-64"), which is
also how Optuna stores them (its categorical values are scalars).

`search="ppo-default"` (`--search ppo-default`) is `PPO_DEFAULT`, RL Zoo's PPO space over
the fields that one program can vary; fields given beside it replace its entries.
"""

from __future__ import annotations

import dataclasses
import itertools
import typing
from collections.abc import Mapping, Sequence
from typing import Any

from purejaxppo.config import TRACED_FIELDS, PPOConfig
from purejaxppo.drivers.settings import check_field, sample_random

#: How to install what `tune` needs (named by every ImportError of a missing Optuna).
TUNE_EXTRA = "pip install 'purejaxppo[tune]'"
#: Static combinations checked one by one before anything runs (beyond: bounds only).
MAX_CHECKED_COMBINATIONS = 4096
#: The most values of a static field's int_uniform range: each is checked before anything
#: runs (building a config takes about 1 ms) and compiles its own program; a wider range
#: is refused.
MAX_STATIC_VALUES = 4096
#: Refused values named in a refusal (the rest are counted).
SHOWN_VALUES = 8

_HINTS = typing.get_type_hints(PPOConfig)

#: The name of the default PPO search space (`PPO_DEFAULT`).
PPO_DEFAULT_NAME = "ppo-default"
#: RL Zoo's `sample_ppo_params` (rl_zoo3/hyperparams_opt.py, 2.x) over the traced fields,
#: so that one program trains every trial: its learning rate (log 1e-5..2e-3), entropy
#: coefficient (log 1e-8..0.1), clip range (0.1, 0.2, 0.3, 0.4) and max grad norm
#: (0.3..2) as it samples them; gamma and GAE lambda uniform over the ranges its
#: log-uniform `1 - gamma` (1e-4..0.03) and `1 - lambda` (1e-4..0.1) cover. Left out:
#: its static fields (n_steps, batch_size, n_epochs, net_arch, activation_fn), each of
#: whose combinations would compile its own program; search them beside it.
PPO_DEFAULT: dict[str, tuple] = {
    "learning_rate": ("log_uniform", 1e-5, 2e-3),
    "ent_coef": ("log_uniform", 1e-8, 0.1),
    "clip_coef": ("choice", [0.1, 0.2, 0.3, 0.4]),
    "max_grad_norm": ("uniform", 0.3, 2.0),
    "gamma": ("uniform", 0.97, 0.9999),
    "gae_lambda": ("uniform", 0.9, 0.9999),
}


def expand_default(search: Any) -> Any:
    """`search` with "ppo-default" (the string, or a key of a mapping whose value is
    None) replaced by `PPO_DEFAULT`'s entries, the given fields winning."""
    if search == PPO_DEFAULT_NAME:
        return dict(PPO_DEFAULT)
    if isinstance(search, Mapping) and PPO_DEFAULT_NAME in search:
        rest = {k: v for k, v in search.items() if k != PPO_DEFAULT_NAME}
        return {**PPO_DEFAULT, **rest}
    return search


def import_optuna() -> Any:
    """The `optuna` module.

    Raises:
      ImportError: Optuna is not installed (naming `pip install 'purejaxppo[tune]'`).
    """
    try:
        import optuna
    except ImportError:
        raise ImportError(f"tune needs Optuna: {TUNE_EXTRA}") from None
    return optuna


def _is_sizes_field(name: str) -> bool:
    """Whether the PPOConfig field holds a tuple of ints (hidden_sizes, cnn_channels)."""
    hint = _HINTS[name]
    options = typing.get_args(hint) if typing.get_origin(hint) is not tuple else (hint,)
    return any(typing.get_origin(o) is tuple and typing.get_args(o)[0] is int for o in options)


def encode(name: str, value: Any) -> Any:
    """A choice as Optuna stores it: a scalar; sizes as "64-64".

    Raises:
      ValueError: naming the field and value, for sizes that are no widths or a value
        Optuna cannot store (a list of another field, a mapping).
    """
    if _is_sizes_field(name) and value is not None:
        if isinstance(value, str):
            parts = value.split("-")
            if not all(p.strip().isdigit() for p in parts):
                raise ValueError(
                    f"search[{name!r}]: {value!r} is not a list of sizes; write them joined "
                    "by '-', e.g. 64-64 or 256-256-256"
                )
            value = [int(p) for p in parts]
        if isinstance(value, int) and not isinstance(value, bool):
            value = [value]
        if isinstance(value, Sequence) and all(isinstance(v, int) for v in value):
            return "-".join(str(int(v)) for v in value)
        raise ValueError(f"search[{name!r}]: {value!r} is not a list of sizes (e.g. 64-64)")
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    raise ValueError(
        f"search[{name!r}]: the choice {value!r} is not a number, a string or a boolean"
    )


def _decode(name: str, value: Any) -> Any:
    """The config value of a stored choice ("64-64" -> (64, 64))."""
    if _is_sizes_field(name) and isinstance(value, str):
        return tuple(int(p) for p in value.split("-"))
    return value


@dataclasses.dataclass(frozen=True)
class SearchSpace:
    """The searched fields and their distributions (checked, choices encoded).

    Attributes:
      spec: field -> `(distribution, *parameters)`, in the order given.
    """

    spec: dict[str, tuple]

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self.spec)

    @property
    def static(self) -> tuple[str, ...]:
        """The searched static fields: each combination of their values is one program."""
        return tuple(name for name in self.spec if name not in TRACED_FIELDS)

    def distributions(self) -> dict[str, Any]:
        """field -> its Optuna distribution (for `study.ask`)."""
        distributions = import_optuna().distributions
        out = {}
        for name, (kind, *params) in self.spec.items():
            if kind == "choice":
                out[name] = distributions.CategoricalDistribution(list(params[0]))
            elif kind == "int_uniform":
                out[name] = distributions.IntDistribution(int(params[0]), int(params[1]))
            else:
                low, high = float(params[0]), float(params[1])
                out[name] = distributions.FloatDistribution(low, high, log=kind == "log_uniform")
        return out

    def values(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """A trial's parameters as config values (sizes as tuples)."""
        return {name: _decode(name, params[name]) for name in self.spec}

    def config(self, base: PPOConfig, params: Mapping[str, Any]) -> PPOConfig:
        """`base` with a trial's parameters (validated by `PPOConfig`)."""
        return base.replace(**self.values(params))

    def static_config(self, base: PPOConfig, key: tuple) -> PPOConfig:
        """`base` with the static values of a combination (`static_key`)."""
        return base.replace(**{name: _decode(name, value) for name, value in key})

    def static_key(self, params: Mapping[str, Any]) -> tuple:
        """The static combination of a trial: `((field, stored value), ...)`."""
        return tuple((name, params[name]) for name in self.static)

    def to_lists(self) -> dict[str, list]:
        """The spec as plain lists (YAML / JSON)."""
        return {
            name: [kind, *(list(p) if isinstance(p, (list, tuple)) else p for p in params)]
            for name, (kind, *params) in self.spec.items()
        }


def parse_space(search: Mapping[str, Sequence[Any]] | None, config: PPOConfig) -> SearchSpace:
    """Checks `search` (field -> `(distribution, *parameters)`) against `config`.

    Raises:
      ValueError: naming the field and value, for an empty search, an unknown field (with
        close names) or one that cannot be searched (`seed`, logging fields), an unknown
        distribution or wrong parameters (`settings.sample_random`'s checks), a range with
        low >= high, a uniform / log_uniform range on a static field, a choice given twice,
        or a value (a bound, a choice, a static combination) that the config refuses.
    """
    search = expand_default(search)
    if not search:
        raise ValueError(
            "search: tune needs at least one field to search, e.g. "
            "{'learning_rate': ('log_uniform', 1e-4, 1e-2)} "
            "(CLI: --search learning_rate=log_uniform:1e-4:1e-2), or "
            f"{PPO_DEFAULT_NAME!r} for RL Zoo's PPO space (CLI: --search {PPO_DEFAULT_NAME})"
        )
    spec = {}
    for name, given in search.items():
        check_field(name, "search")
        if isinstance(given, str) or not isinstance(given, Sequence) or not given:
            raise ValueError(f"search[{name!r}]={given!r}: must be (distribution, *parameters)")
        kind, *params = given
        if kind == "choice" and params and isinstance(params[0], (list, tuple)):
            params = [[encode(name, value) for value in params[0]]]
        try:  # the distribution, its parameters and their order: the sweep's rules
            sample_random({name: (kind, *params)}, 1)
        except ValueError as err:
            raise ValueError(str(err).replace("random[", "search[", 1)) from None
        spec[name] = (kind, *params)
        _check_values(name, spec[name], config)
    space = SearchSpace(spec)
    _check_combinations(space, config)
    return space


def _check_values(name: str, spec: tuple, config: PPOConfig) -> None:
    """Refuses a spec whose values the field cannot take (see `parse_space`)."""
    kind, *params = spec
    static = name not in TRACED_FIELDS
    if kind != "choice" and not params[0] < params[1]:
        raise ValueError(f"search[{name!r}]={spec!r}: needs low < high")
    if static and kind in ("uniform", "log_uniform"):
        raise ValueError(
            f"search[{name!r}]={spec!r}: {name} is static (each value compiles its own "
            "program): search it with choice:A,B,... or int_uniform:LOW:HIGH; ranges of "
            f"real numbers are for the traced fields ({', '.join(TRACED_FIELDS)})"
        )
    if kind == "choice":
        values = list(params[0])
        for index, value in enumerate(values):
            if value in values[:index]:
                raise ValueError(f"search[{name!r}]: the choice {value!r} is given twice")
    elif kind == "int_uniform" and static:
        count = int(params[1]) - int(params[0]) + 1
        if count > MAX_STATIC_VALUES:
            raise ValueError(
                f"search[{name!r}]={spec!r}: {count} values of the static field {name} (each "
                f"compiles its own program), more than the {MAX_STATIC_VALUES} tune checks "
                "before it starts: narrow the range, or list values with choice:A,B,..."
            )
        values = list(range(int(params[0]), int(params[1]) + 1))
    else:
        values = list(params)
    _refuse_values(name, spec, values, config)


def _refuse_values(name: str, spec: tuple, values: Sequence[Any], config: PPOConfig) -> None:
    """Raises one line naming the values of `spec` that `config` refuses (every one is
    built: a value refused mid-study would fail its trials), with the first reason."""
    refused, reason = [], ""
    for value in values:
        try:
            config.replace(**{name: _decode(name, value)})
        except ValueError as err:
            refused.append(value)
            reason = reason or str(err)
    if not refused:
        return
    if spec[0] in ("uniform", "log_uniform") or (len(refused) == 1 and spec[0] == "choice"):
        raise ValueError(f"search[{name!r}] value {refused[0]!r}: {reason}")
    shown = ", ".join(map(repr, refused[:SHOWN_VALUES]))
    more = f", ... ({len(refused)} in all)" if len(refused) > SHOWN_VALUES else ""
    taken = [v for v in values if v not in refused]
    fix = (
        f"search it with choice:{','.join(map(str, taken[:SHOWN_VALUES]))}"
        + (",..." if len(taken) > SHOWN_VALUES else "")
        if taken
        else "change the range"
    )
    raise ValueError(
        f"search[{name!r}]={spec!r}: the config refuses {len(refused)} of its {len(values)} "
        f"values ({shown}{more}; {reason}); {fix}"
    )


def _check_combinations(space: SearchSpace, config: PPOConfig) -> None:
    """Every combination of the static fields' values is a valid config (checked one by
    one up to `MAX_CHECKED_COMBINATIONS`)."""
    choices = []
    for name in space.static:
        kind, *params = space.spec[name]
        if kind == "choice":
            choices.append(list(params[0]))
        else:
            choices.append(list(range(int(params[0]), int(params[1]) + 1)))
    total = 1
    for values in choices:
        total *= len(values)
    if len(choices) < 2 or total > MAX_CHECKED_COMBINATIONS:
        return
    for combo in itertools.product(*choices):
        params = dict(zip(space.static, combo, strict=True))
        try:
            config.replace(**{n: _decode(n, v) for n, v in params.items()})
        except ValueError as err:
            shown = ", ".join(f"{n}={v}" for n, v in params.items())
            raise ValueError(f"search: the static combination {shown}: {err}") from None
