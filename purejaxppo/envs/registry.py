"""`make_env`: one entry point for gymnax ids, the purejaxppo probe ids and the suite ids
(`"brax:..."`, `"jumanji:..."`, ..., see `purejaxppo.envs.suites`)."""

from __future__ import annotations

import dataclasses
import difflib
import inspect
import math
from collections.abc import Mapping
from typing import Any

import gymnax

from purejaxppo.envs.pomdp import POMDP_ENVS
from purejaxppo.envs.probes import PROBE_ENVS, PROBE_PART_ENVS, PROBE_VARIANT_ENVS
from purejaxppo.errors import short

# The probe (and POMDP) envs join gymnax's registry, so `gymnax.make("Probe1-v0")` works.
for _env_id, _cls in {**PROBE_ENVS, **PROBE_VARIANT_ENVS, **PROBE_PART_ENVS, **POMDP_ENVS}.items():
    if _env_id not in gymnax.registered_envs:
        gymnax.register(_env_id, _cls)


def registered_env_ids() -> list[str]:
    """The ids without a prefix that `make_env` accepts (gymnax's registry, which includes
    the probe ids). Suite ids `"<prefix>:<name>"` come on top: the prefixes are the keys
    of `purejaxppo.envs.suites.SUITES`, the names those of each suite's own registry."""
    return list(gymnax.registered_envs)


def env_family(env_id: str) -> str:
    """The family of an id without a prefix, for suggestions: "probe" (Probe*), the
    suffix of a gymnax group ("minatar", "bsuite", "misc"), else "classic" (classic
    control, "<Name>-v<N>"). Case-insensitive."""
    lowered = env_id.lower()
    if lowered.startswith("probe"):
        return "probe"
    _, sep, suffix = lowered.rpartition("-")
    if sep and suffix and not (suffix[0] == "v" and suffix[1:].isdigit()):
        return suffix
    return "classic"


def close_env_ids(env_id: str, ids: list[str], n: int = 5, cutoff: float = 0.5) -> list[str]:
    """Up to `n` ids like `env_id`, most similar first (difflib ratio, case-insensitive):
    those of `env_id`'s family (`env_family`) when any is close enough, else any close id.
    So "CartPol-v1" gets "CartPole-v1", not probe ids."""

    def ranked(candidates: list[str]) -> list[str]:
        scores = {
            i: difflib.SequenceMatcher(None, env_id.lower(), i.lower()).ratio() for i in candidates
        }
        close = [i for i in candidates if scores[i] >= cutoff]
        return sorted(close, key=lambda i: -scores[i])[:n]

    family = env_family(env_id)
    return ranked([i for i in ids if env_family(i) == family]) or ranked(ids)


#: gym's and gymnasium's Atari ids (CleanRL's and SB3's `PongNoFrameskip-v4`, ALE's
#: `ALE/Pong-v5`) -> the suffix of EnvPool's id of that game (`Pong-v5`: frame skip 4).
ATARI_ALIASES = ("NoFrameskip-v4", "-v5")


def envpool_atari_id(env_id: str) -> str:
    """EnvPool's id of a gym / gymnasium Atari id ("PongNoFrameskip-v4", "ALE/Pong-v5" ->
    "Pong-v5"), or `env_id` itself."""
    name = env_id.removeprefix("ALE/")
    for suffix in ATARI_ALIASES:
        if name.endswith(suffix) and len(name) > len(suffix):
            return name[: -len(suffix)] + "-v5"
    return env_id


def suite_ids_of(env_id: str) -> list[str]:
    """The prefixed ids under which an installed suite knows `env_id` (an id without a
    prefix that gymnax does not know): "envpool:<id>" for EnvPool's MuJoCo and Atari
    tasks (a gym / gymnasium Atari id under EnvPool's name, `envpool_atari_id`), then
    "gymnasium:<id>" for gymnasium's registry. A suite that is not installed is skipped
    (its extra is named by `make_env` once the prefixed id is used)."""
    found = []
    try:
        import envpool

        pool_id = envpool_atari_id(env_id)
        if pool_id in envpool.list_all_envs():
            config = envpool.make_spec(pool_id).config._asdict()
            if "stack_num" in config or "xml_file" in config:  # Atari, MuJoCo (as make)
                found.append(f"envpool:{pool_id}")
    except Exception:  # not installed, or a spec it cannot build: no suggestion
        pass
    try:
        import gymnasium

        if env_id in gymnasium.envs.registry:
            found.append(f"gymnasium:{env_id}")
    except Exception:  # not installed
        pass
    return found


def unknown_id_message(env_id: str) -> str:
    """The one line for an id without a prefix that gymnax does not know: the prefixed
    ids of the suites that know it (`suite_ids_of`), else gymnax's close matches, else
    every known id."""
    others = suite_ids_of(env_id)
    if others:
        also = f" (or {', '.join(repr(i) for i in others[1:])})" if len(others) > 1 else ""
        return (
            f"env_name={env_id!r} is not a gymnax id, but another suite knows it: use "
            f"env_name={others[0]!r}{also}"
        )
    ids = registered_env_ids()
    close = close_env_ids(env_id, ids)
    hint = f" Close matches: {', '.join(close)}." if close else f" Known ids: {', '.join(ids)}."
    return f"env_name={env_id!r} is not a known environment id.{hint}"


def make_env(env_id: str, env_kwargs: Mapping[str, Any] | None = None) -> tuple[Any, Any]:
    """Builds a gymnax 1.0 environment and its params.

    Args:
      env_id: a gymnax id ("CartPole-v1", "Breakout-MinAtar", ...) or a probe id
        ("Probe1-v0" ... "Probe7-v0", "ProbeMultiDiscrete-v0", "ProbeMultiBinary-v0",
        "ProbeMaskedAction-v0"), or
        "PendulumNoVel-v1" (Pendulum without the angular velocity, `envs/pomdp.py`);
        or a suite id `"<prefix>:<name>"` built by `purejaxppo.envs.suites` with the
        same gymnax 1.0 API: "brax:inverted_pendulum", "playground:CartpoleBalance",
        "jumanji:Snake-v1", "craftax:Craftax-Classic-Symbolic-v1",
        "navix:Navix-Empty-5x5-v0", "xminigrid:MiniGrid-Empty-6x6", "gymnasium:<id>".
        A suite needs its optional extra (`pip install 'purejaxppo[brax]'`, ...).
      env_kwargs: keys that name a field of the env's `EnvParams` (for example
        `max_steps_in_episode`) replace that parameter; all other keys are passed to the
        environment's constructor (for example `num_bits` of "MemoryChain-bsuite").
        For suite ids, the keys each adapter takes (its `make` docstring), e.g.
        `episode_length` / `action_repeat` / `backend` for Brax.

    Returns:
      `(env, env_params)`: the environment object (gymnax `Environment` API, whose `step`
      returns `obs, state, reward, terminated, truncated, info`) and its `EnvParams`.

    Raises:
      ValueError: for an unknown id (the message lists close matches), an unknown suite
        prefix (the message lists the known ones), an env_kwargs key that is neither an
        `EnvParams` field nor a constructor argument (or that the suite rejects), or a
        value of the wrong type or range (see `check_overrides`).
      ImportError: for a suite id whose suite is not installed (naming the extra).
    """
    env_kwargs = dict(env_kwargs or {})
    if ":" in env_id:
        from purejaxppo.envs.suites import make_suite_env

        return make_suite_env(env_id, env_kwargs)
    if env_id not in gymnax.registered_envs:
        raise ValueError(unknown_id_message(env_id))

    # Split env_kwargs into EnvParams overrides and constructor arguments.
    default_env, _ = gymnax.make(env_id)
    param_fields = {f.name for f in dataclasses.fields(default_env.default_params)}
    param_overrides = {k: v for k, v in env_kwargs.items() if k in param_fields}
    ctor_kwargs = {k: v for k, v in env_kwargs.items() if k not in param_fields}

    param_overrides = check_overrides(
        default_env.default_params, param_overrides, f"env_kwargs of {env_id}"
    )
    env = default_env
    if ctor_kwargs:
        env = _constructed(env_id, type(default_env), ctor_kwargs, env_kwargs, param_fields)
    env_params = env.default_params
    if param_overrides:
        env_params = env_params.replace(**param_overrides)
    return env, env_params


def _constructed(
    env_id: str,
    env_class: type,
    ctor_kwargs: dict[str, Any],
    env_kwargs: dict[str, Any],
    param_fields: set[str],
) -> Any:
    """`make_env`'s gymnax env `env_id` built with the constructor arguments
    `ctor_kwargs` (the `env_kwargs` that name no `EnvParams` field), their values
    checked against the constructor's defaults.

    Raises:
      ValueError: a value of the wrong type or range; keys the constructor does not take.
    """
    signature = inspect.signature(env_class.__init__).parameters
    defaults = {
        name: p.default
        for name, p in signature.items()
        if name in ctor_kwargs and p.default is not inspect.Parameter.empty
    }
    ctor_kwargs = _check_values(defaults, ctor_kwargs, f"env_kwargs of {env_id} (constructor)")
    try:
        env, _ = gymnax.make(env_id, **ctor_kwargs)
    except TypeError as err:
        raise ValueError(
            f"env_kwargs={short(env_kwargs)} for {env_id}: {sorted(ctor_kwargs)} are neither "
            f"EnvParams fields ({sorted(param_fields)}) nor constructor arguments ({err})"
        ) from None
    return env


def check_overrides(env_params: Any, overrides: Mapping[str, Any], where: str) -> dict[str, Any]:
    """Checks `EnvParams` overrides by type and range against the env's default params.

    A field whose default is a bool takes a bool; an integer field takes an integer (a
    float like 1e3 that is whole is accepted), and one whose default is positive (such
    as `max_steps_in_episode`) must stay >= 1; a float field takes a finite number.
    Fields holding arrays are not checked. Returns the overrides, whole floats of integer
    fields converted to int.

    Raises:
      ValueError: naming `where`, the field and the value.
    """
    fields = {f.name: getattr(env_params, f.name) for f in dataclasses.fields(env_params)}
    unknown = sorted(set(overrides) - set(fields))
    if unknown:
        raise ValueError(f"{where}: {unknown} are not EnvParams fields ({sorted(fields)})")
    return _check_values(fields, overrides, where)


def _check_values(
    defaults: Mapping[str, Any], values: Mapping[str, Any], where: str
) -> dict[str, Any]:
    checked = dict(values)
    for name, value in values.items():
        if name not in defaults:
            continue
        default = defaults[name]
        if hasattr(default, "ndim") and getattr(default, "ndim", 0) == 0:
            default = default.item()  # a 0-d array default
        bad = f"{where}: {name}={short(value)}"
        is_bool = isinstance(value, bool)
        if isinstance(default, bool):
            if not is_bool:
                raise ValueError(f"{bad}: must be true or false")
        elif isinstance(default, int):
            whole = isinstance(value, float) and math.isfinite(value) and value.is_integer()
            if is_bool or not (isinstance(value, int) or whole):
                raise ValueError(f"{bad}: must be an integer (the default is {default})")
            if default > 0 and value < 1:
                raise ValueError(f"{bad}: must be >= 1 (the default is {default})")
            checked[name] = int(value)
        elif isinstance(default, float):
            if is_bool or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise ValueError(f"{bad}: must be a finite number (the default is {default})")
    return checked
