"""Kernel / op counts per loop body of a compiled XLA program, read from its HLO text
(`jax.jit(f).lower(...).compile().as_text()`): what `profile_update.py --ops` reports.

`count_ops(text)` counts, for the entry computation and every while loop (with its depth,
parent and trip count), the fusions, custom-calls and other kernels its body launches;
`per_repetition` and `named_loop` pick the loops of one timed repetition and the rollout /
minibatch step loops out of that.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

#: Opcodes that launch nothing on their own: data plumbing and control flow (the
#: computations control flow calls are counted where they run).
STRUCTURAL = frozenset(
    {
        "parameter",
        "get-tuple-element",
        "tuple",
        "constant",
        "bitcast",
        "while",
        "conditional",
        "call",
        "after-all",
        "add-dependency",
        "opt-barrier",
        "optimization-barrier",
        "partition-id",
        "replica-id",
        "domain",
        "get-dimension-size",
    }
)

_HEADER = re.compile(r"^(ENTRY\s+)?%?([\w.\-]+)\s+\(.*\{\s*$")
_INSTRUCTION = re.compile(r"^\s*(?:ROOT\s+)?%?[\w.\-]+\s*=\s*(.*)$")
_OPCODE = re.compile(r"\s*([a-z][\w\-]*)\(")


def _opcode(rhs: str) -> str | None:
    """The opcode of an instruction's right-hand side `<shape> <opcode>(...)`."""
    if rhs.startswith("("):  # a tuple shape: skip to its closing parenthesis
        depth = 0
        for end, char in enumerate(rhs):
            depth += {"(": 1, ")": -1}.get(char, 0)
            if depth == 0:
                rhs = rhs[end + 1 :]
                break
    else:
        rhs = rhs.split(" ", 1)[1] if " " in rhs else ""
    match = _OPCODE.match(rhs)
    return match.group(1) if match else None


def parse_hlo(text: str) -> tuple[dict[str, list[tuple[str, str]]], str]:
    """`({computation: [(opcode, line), ...]}, entry name)` of an HLO module's text."""
    computations: dict[str, list[tuple[str, str]]] = {}
    entry, current = None, None
    for line in text.splitlines():
        if current is None:
            header = _HEADER.match(line)
            if header:
                current = header.group(2)
                computations[current] = []
                if header.group(1):
                    entry = current
            continue
        if line.strip() == "}":
            current = None
            continue
        instruction = _INSTRUCTION.match(line)
        if instruction:
            opcode = _opcode(instruction.group(1))
            if opcode is not None:
                computations[current].append((opcode, line))
    if entry is None:
        raise ValueError("HLO text without an ENTRY computation")
    return computations, entry


def _called(line: str, *attributes: str) -> list[str]:
    names = []
    for attribute in attributes:
        match = re.search(rf"\b{attribute}=(\{{[^}}]*\}}|%?[\w.\-]+)", line)
        if match:
            names += [n.strip().lstrip("%") for n in match.group(1).strip("{}").split(",")]
    return [n for n in names if n]


def _trip_count(line: str) -> int | None:
    match = re.search(r'"known_trip_count":\{"n":"(\d+)"', line)
    return int(match.group(1)) if match else None


def _kind(opcode: str) -> str:
    if opcode == "fusion":
        return "fusions"
    if opcode == "custom-call":
        return "custom_calls"
    return "other"


def _counts(ops: Counter) -> dict[str, int]:
    kernels = ops["fusions"] + ops["custom_calls"] + ops["other"]
    return {
        "fusions": ops["fusions"],
        "custom_calls": ops["custom_calls"],
        "other": ops["other"],
        "kernels": kernels,
    }


def count_ops(text: str) -> dict[str, Any]:
    """Op counts of a compiled program's optimised HLO text (`compile().as_text()`).

    Returns `{"launches": int, "top": {...}, "loops": [...]}`. `top` counts the entry
    computation's own ops: `fusions`, `custom_calls`, `other` and `kernels` (their sum);
    ops of the conditionals (their larger branch) and calls it makes count with it,
    loops apart. Each of `loops` (outermost first, in program order) is one while loop:
    `index` (in the list), `parent` (the index of the loop it is in, None at the top),
    `depth` (0 at the top), `trip_count` (None where XLA does not know it), `body` (its
    body computation's name), its body's own
    counts (as `top`), and `launches_per_iteration` (its body and condition, nested loops
    times their trip counts included). `launches`: the program's estimated kernel
    launches per call (a loop of unknown trip count counts once).

    Raises:
      ValueError: for text without an ENTRY computation.
    """
    computations, entry = parse_hlo(text)
    loops: list[dict[str, Any]] = []

    def walk(name: str, parent: int | None, own: Counter, stack: tuple[str, ...]) -> int:
        """Adds `name`'s own ops to `own`; returns its launches (nested loops included)."""
        if name in stack or name not in computations:  # recursion guard / unknown callee
            return 0
        stack = (*stack, name)
        launches = 0
        for opcode, line in computations[name]:
            if opcode == "while":
                trip = _trip_count(line)
                depth = 0 if parent is None else loops[parent]["depth"] + 1
                index = len(loops)
                bodies = _called(line, "body")
                loops.append(
                    {
                        "index": index,
                        "parent": parent,
                        "depth": depth,
                        "trip_count": trip,
                        "body": bodies[0] if bodies else None,
                    }
                )
                body_ops: Counter = Counter()
                per_iteration = sum(walk(b, index, body_ops, stack) for b in bodies)
                per_iteration += sum(
                    walk(c, index, Counter(), stack) for c in _called(line, "condition")
                )
                loops[index].update(_counts(body_ops), launches_per_iteration=per_iteration)
                launches += (trip or 1) * per_iteration
            elif opcode == "conditional":
                branches = _called(
                    line, "branch_computations", "true_computation", "false_computation"
                )
                costs = []
                for branch in branches:
                    branch_ops: Counter = Counter()
                    costs.append((walk(branch, parent, branch_ops, stack), branch_ops))
                if costs:
                    cost, branch_ops = max(costs, key=lambda c: c[0])
                    own.update(branch_ops)
                    launches += cost
            elif opcode in ("call", "async-start"):
                callees = _called(line, "to_apply", "calls")
                launches += sum(walk(c, parent, own, stack) for c in callees)
            elif opcode not in STRUCTURAL and not opcode.startswith("async-"):
                own[_kind(opcode)] += 1
                launches += 1
        return launches

    top: Counter = Counter()
    launches = walk(entry, None, top, ())
    return {"launches": launches, "top": _counts(top), "loops": loops}


def per_repetition(ops: dict[str, Any], reps: int) -> dict[str, Any] | None:
    """`count_ops` of one repetition of a program that repeats a phase `reps` times in a
    top-level scan (`_repeat`): the scan's body as the top, the loops inside it one level
    up. None when no top-level loop of `reps` trips is found (e.g. XLA unrolled it)."""
    candidates = [
        loop for loop in ops["loops"] if loop["depth"] == 0 and loop["trip_count"] == reps
    ]
    if not candidates:
        return None
    outer = max(candidates, key=lambda loop: loop["launches_per_iteration"])
    inside: list[dict[str, Any]] = []
    renumber: dict[int, int] = {}
    for loop in ops["loops"]:
        parent = loop["parent"]
        if parent == outer["index"] or parent in renumber:
            renumber[loop["index"]] = len(inside)
            inside.append(
                {
                    **loop,
                    "index": len(inside),
                    "parent": None if parent == outer["index"] else renumber[parent],
                    "depth": loop["depth"] - 1,
                }
            )
    top = {k: outer[k] for k in ("fusions", "custom_calls", "other", "kernels")}
    return {"launches": outer["launches_per_iteration"], "top": top, "loops": inside}


def named_loop(ops: dict[str, Any], which: str, trip: int) -> dict[str, Any] | None:
    """One loop of a program's `count_ops`: with `which` = "outermost", the shallowest
    loop of `trip` trips (the rollout's step scan), with "innermost" the deepest (the
    epochs' minibatch scan); ties go to the loop with the most kernels (CPU programs also
    hold small loops of their own, e.g. threefry's rounds). Loops of unknown trip count
    are candidates when none has `trip`. None when there is no candidate (XLA removes a
    scan of one step)."""
    candidates = [loop for loop in ops["loops"] if loop["trip_count"] == trip]
    candidates = candidates or [loop for loop in ops["loops"] if loop["trip_count"] is None]
    if not candidates:
        return None
    sign = 1 if which == "innermost" else -1
    return max(candidates, key=lambda loop: (sign * loop["depth"], loop["kernels"]))


def update_summary(text: str, num_updates: int) -> dict[str, Any]:
    """Kernel launches and loop iterations (each a host round trip on a GPU) of one update
    of a training program that scans `num_updates` updates (compiled HLO `text`)."""
    ops = per_repetition(count_ops(text), num_updates)
    if ops is None:
        return {"error": f"no top-level loop of {num_updates} trips"}
    trips = {}
    for loop in ops["loops"]:
        outer = 1 if loop["parent"] is None else trips[loop["parent"]]
        trips[loop["index"]] = outer * (loop["trip_count"] or 1)
    return {
        "launches_per_update": ops["launches"],
        "loop_iterations_per_update": sum(trips.values()),
        "loops": [
            {k: loop[k] for k in ("depth", "trip_count", "kernels", "launches_per_iteration")}
            for loop in ops["loops"]
        ],
    }


# ---------------------------------------------------------------------------------------
# The phases
