"""What a JaxMARL env takes as kwargs, and a quiet `import jaxmarl`.

`check_kwargs_known(name, kwargs)` refuses a kwarg that the env class `jaxmarl.make(name)`
builds does not take (MPE's constructors take `**kwargs`, so a typo such as `num_agent`
would otherwise be ignored), with the closest known key; `check_kwargs_ranges(name, kwargs)`
refuses a count or length out of its range (`max_steps: 0` would train on 1-step
episodes); `import_jaxmarl()` imports jaxmarl without the lines it prints and without
undoing stream redirections.
"""

from __future__ import annotations

import ast
import difflib
import inspect
import io
import sys
import textwrap
from collections.abc import Mapping
from typing import Any

from purejaxppo import memory
from purejaxppo.errors import short

__all__ = [
    "ADAPTER_KWARGS",
    "AGENT_KWARGS",
    "INT_KWARGS",
    "check_kwargs_known",
    "check_kwargs_ranges",
    "import_jaxmarl",
]


#: The kwargs `make` takes itself (not passed to JaxMARL).
ADAPTER_KWARGS = ("agent_ids", "world_state_ids", "shared_reward")

#: Integer kwargs of JaxMARL's envs (jaxmarl 0.2.0) and their smallest value: episode
#: lengths (MPE, SMAX, Overcooked, JaxNav: `max_steps`; STORM, Coin Game: inner / outer
#: steps), counts of agents of each kind, landmarks and obstacles (MPE, SMAX, Hanabi,
#: STORM), Hanabi's deck and tokens, grid and map sizes, lidar beams.
INT_KWARGS = {
    **dict.fromkeys(("max_steps", "num_inner_steps", "num_outer_steps"), 1),
    **dict.fromkeys(("num_agents", "num_good_agents", "num_adversaries"), 1),
    **dict.fromkeys(("num_allies", "num_enemies", "num_landmarks"), 1),
    **dict.fromkeys(("num_obs", "num_food", "num_forests", "num_coins"), 0),
    **dict.fromkeys(("hand_size", "num_colors", "num_ranks", "max_life_tokens"), 1),
    "max_info_tokens": 0,
    **dict.fromkeys(("grid_size", "map_width", "map_height", "agent_view_size"), 1),
    **dict.fromkeys(("world_steps_per_env_step", "lidar_num_beams", "dim_p"), 1),
    "dim_c": 0,
}

#: The `INT_KWARGS` that count agents (`memory` charges a rollout's observations to them).
AGENT_KWARGS = ("num_agents", "num_good_agents", "num_adversaries", "num_allies", "num_enemies")
memory.AGENT_COUNT_KWARGS.extend(k for k in AGENT_KWARGS if k not in memory.AGENT_COUNT_KWARGS)


def import_jaxmarl() -> Any:
    """`import jaxmarl` (with its environments and registry) quietly.

    The import of `jaxmarl.environments` prints two lines to stdout ("Importing
    submoduled environments..."), and its MABrax module resets `sys.stdout` /
    `sys.stderr` to `sys.__stdout__` / `sys.__stderr__` after importing Brax, which
    would undo any redirection in force (pytest's capture, `contextlib.redirect_stdout`).
    Here `sys.__stdout__` is a sink and `sys.__stderr__` the current stderr while it
    imports, and all four streams are restored afterwards.
    """
    saved = sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__
    sink = io.StringIO()
    try:
        sys.stdout = sys.__stdout__ = sink
        sys.__stderr__ = sys.stderr
        import jaxmarl
        import jaxmarl.environments
        import jaxmarl.registration  # noqa: F401
    finally:
        sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__ = saved
    return jaxmarl


def check_kwargs_known(name: str, kwargs: Mapping[str, Any]) -> None:
    """Raises a one-line ValueError for a kwarg that `jaxmarl.make(name)`'s env does not
    take, with the closest known key (`num_agent` -> `num_agents`). Nothing is checked
    where the accepted keys cannot be told (`_accepted_kwargs` gives None)."""
    if not kwargs:
        return
    factory = _env_factory(name)
    accepted = None if factory is None else _accepted_kwargs(factory)
    if accepted is None:
        return
    for key in sorted(set(kwargs) - accepted):
        known = sorted(accepted | set(ADAPTER_KWARGS))
        close = difflib.get_close_matches(key, known, n=1, cutoff=0.6)
        hint = f"did you mean {close[0]!r}? " if close else ""
        raise ValueError(
            f"env_kwargs of jaxmarl:{name}: unknown key {key!r} ({hint}"
            f"{getattr(factory, '__name__', factory)} takes {', '.join(known)})"
        )


def check_kwargs_ranges(name: str, kwargs: Mapping[str, Any]) -> None:
    """Raises a one-line ValueError naming the kwarg for an `INT_KWARGS` kwarg that is not
    an integer (a bool or a float is refused) or is below its smallest value
    (`max_steps >= 1`, `num_agents >= 1`, ...)."""
    for key, low in INT_KWARGS.items():
        if key not in kwargs:
            continue
        value = kwargs[key]
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise ValueError(
                f"env_kwargs of jaxmarl:{name}: {key}={short(value)} must be an integer >= {low}"
            )


def _env_factory(name: str) -> Any:
    """The class (or function) `jaxmarl.make(name)` calls, read from `make`'s
    `if env_id == "<name>": env = <Class>(**env_kwargs)` branches; None if not found."""
    from jaxmarl import registration

    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(registration.make)))
    except (OSError, TypeError, SyntaxError):
        return None
    for node in ast.walk(tree):
        test = getattr(node, "test", None)
        if not (isinstance(node, ast.If) and isinstance(test, ast.Compare)):
            continue
        right = test.comparators[0]
        if not (
            isinstance(test.left, ast.Name)
            and isinstance(test.ops[0], ast.Eq)
            and isinstance(right, ast.Constant)
            and right.value == name
        ):
            continue
        for statement in node.body:
            call = getattr(statement, "value", None)
            if isinstance(statement, ast.Assign) and isinstance(call, ast.Call):
                if isinstance(call.func, ast.Name):
                    return registration.make.__globals__.get(call.func.id)
    return None


def _accepted_kwargs(factory: Any, depth: int = 0) -> frozenset[str] | None:
    """The keyword arguments `factory(**kwargs)` takes: the explicit parameters of each
    `__init__` along the class's MRO, plus the keys an `__init__` reads from its
    `**kwargs` (`kwargs["rad"]`, `"rad" in kwargs`, `kwargs.get("rad")`), following
    where it passes them on (`super().__init__(**kwargs)`: the next class; `SMAX(**kwargs)`:
    that class). None when that cannot be told (the `**kwargs` go to another callable,
    e.g. a Brax env, or the source cannot be read)."""
    if depth > 4:
        return None
    names: set[str] = set()
    functions = (
        [c.__dict__["__init__"] for c in factory.__mro__ if "__init__" in c.__dict__]
        if isinstance(factory, type)
        else [factory]
    )
    for function in functions:
        try:
            parameters = list(inspect.signature(function).parameters.values())
        except (TypeError, ValueError):
            return None
        if isinstance(factory, type):
            parameters = parameters[1:]  # self
        names.update(p.name for p in parameters if p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL))
        var = next((p.name for p in parameters if p.kind is p.VAR_KEYWORD), None)
        if var is None:
            return frozenset(names)
        try:
            tree = ast.parse(textwrap.dedent(inspect.getsource(function)))
        except (OSError, TypeError, SyntaxError):
            return None
        names.update(_keys_read(tree, var))
        forwarded = [
            node
            for node in ast.walk(tree)
            if isinstance(node, ast.Call)
            and any(
                k.arg is None and isinstance(k.value, ast.Name) and k.value.id == var
                for k in node.keywords
            )
        ]
        if not forwarded:  # only read, never passed on
            return frozenset(names)
        if len(forwarded) > 1:
            return None
        callee = forwarded[0].func
        if isinstance(callee, ast.Attribute) and callee.attr == "__init__":
            continue  # super().__init__(**kwargs) / Base.__init__(self, **kwargs)
        target = function.__globals__.get(callee.id) if isinstance(callee, ast.Name) else None
        if not isinstance(target, type):
            return None
        rest = _accepted_kwargs(target, depth + 1)
        return None if rest is None else frozenset(names | rest)
    return frozenset(names)


def _keys_read(tree: ast.AST, var: str) -> set[str]:
    """String keys read from the dict named `var`: `var["k"]`, `"k" in var`,
    `var.get("k")` / `var.pop("k")`."""
    keys = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name):
            if node.value.id == var and isinstance(node.slice, ast.Constant):
                keys.add(node.slice.value)
        elif isinstance(node, ast.Compare) and isinstance(node.left, ast.Constant):
            right = node.comparators[0]
            if isinstance(right, ast.Name) and right.id == var:
                keys.add(node.left.value)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            owner = node.func.value
            if isinstance(owner, ast.Name) and owner.id == var and node.args:
                if node.func.attr in ("get", "pop") and isinstance(node.args[0], ast.Constant):
                    keys.add(node.args[0].value)
    return {k for k in keys if isinstance(k, str)}
