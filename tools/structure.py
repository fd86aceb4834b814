"""Checks the package's structure; stdlib only, reads the source with `ast`.

    python tools/structure.py        # prints "structure: ok" or the offences; exit 1 on any

Rules, for every module under purejaxppo/:
  * at most MAX_MODULE_LINES lines (LONG_MODULES may exceed it while they still do);
  * no function (or method) over MAX_FUNCTION_LINES lines, from `def` to its last line;
  * no import cycle between purejaxppo modules, counting imports inside functions (an
    import of `a.b.c` is an edge to `a.b.c` only, not to the packages above it);
  * the progress bar (tqdm) is constructed in one module, matplotlib imported in one;
  * the drivers (DRIVERS, under purejaxppo/drivers/) never import each other;
  * no module imports a module on a higher floor (LAYERS), counting imports inside
    functions. Bottom up: 0 ground (config, errors, signals, types, metrics, the PPO math
    ...: every module LAYERS does not list, and the package root, whose public names load
    lazily by name), 1 `envs` (the suites, the rows adapters), 2 `networks` (reads the
    env's spaces), 3 `kinds` (the kinds' table; multi-agent PPO's env and networks),
    4 the training program, 5 what runs and uses it (checkpoint, policy, `acting`:
    evaluation, videos, datasets; parallel, export, stored programs), 6 `drivers`, 7 `cli`. A module's floor is that of the longest
    prefix of its name under purejaxppo/ in LAYERS (a package: all its modules), so
    `envs/` imports nothing above it and only `cli/` imports `drivers/`. UPWARD_ALLOWED
    names the few arrows that still run up, each with its reason;
  * at most MAX_FMT_SKIP `# fmt: skip` pragmas in the whole package: a size limit is met by
    finding the seam (keyword arguments, a NamedTuple of options, a helper, a table as a
    module constant), not by packing lines where `ruff format` cannot see them;
  * the longest chain of imports between the package's parts (a top-level module, or a
    subpackage with all its modules) is at most MAX_IMPORT_DEPTH parts long;
  * no function (or method) with more than MAX_POSITIONAL positional parameters (`self` /
    `cls` and keyword-only parameters not counted): beyond that, name them (`*`) or group
    them (POSITIONAL_PENDING: a temporary allow-list of functions being converted).

And for the shipped text (SHIPPED_TEXT: the package's sources, configs, docs, README.md,
the notebooks and their generators), the project speaks of itself alone: no absolute path
of the machine it was built on, no citation of a seed document, no issue number and no
"helpers" meaning the people who wrote it (SELF_REFERENCES). A value taken from another
library cites that library, its class and field; a design reason is stated, not ticketed.
docs/changelog.md keeps its history (only machine paths are refused there); docs/results/
holds data files and is not read.

PENDING_CORE lists offences in files of core modules (config, train, envs, export,
networks) being reworked in parallel; they are reported as pending and do not fail the
check. The integrator empties it after merging "core".
"""

from __future__ import annotations

import ast
import io
import json
import re
import sys
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "purejaxppo"
MAX_MODULE_LINES = 500
MAX_FUNCTION_LINES = 100
MAX_FMT_SKIP = 10
MAX_POSITIONAL = 8
#: The longest chain of imports between the package's parts (`part_of`: a top-level
#: module, or a subpackage with all its modules), counted in parts, from `cli/` down to
#: the ground floor's leaves. A new arrow that lengthens it puts a helper above what uses
#: it: move the helper down (a message helper lives with the errors, not the config checks).
MAX_IMPORT_DEPTH = 11
#: Modules allowed over MAX_MODULE_LINES while they still are (self-contained files).
LONG_MODULES = {"purejaxppo/export/torch_modules.py"}
#: The drivers, side by side over drivers/segments, report, plots, settings: none imports
#: another (a package driver counts with all its modules).
DRIVERS = ("single", "seeds", "sweeps", "population", "tune", "check")
#: The floors, bottom up: (name, the prefixes on it, each a module or a package with all
#: its modules). A module not listed, and the package root, are on the ground floor.
FLOORS: tuple[tuple[str, str], ...] = (
    ("ground", ""),
    ("envs", "envs"),
    ("networks", "networks"),
    ("kinds", "kinds"),
    (
        "program",
        "actions acting_checks policy_parts rollout update windows learning train_setup train",
    ),
    ("runs", "checkpoint policy acting export parallel stored_programs"),
    ("drivers", "drivers"),
    ("cli", "cli"),
)
#: Prefix under purejaxppo/ -> its floor: a module imports only its own floor and below.
LAYERS: dict[str, int] = {
    prefix: floor for floor, (_, prefixes) in enumerate(FLOORS) for prefix in prefixes.split()
}
#: Arrows that still run up a floor: (importer, imported) -> why. Each is a lazy import.
UPWARD_ALLOWED: dict[tuple[str, str], str] = {}
#: Where the progress bar and the figures live (each in exactly one module).
ONE_MODULE_IMPORTS = {"tqdm": "progress bar (tqdm)", "matplotlib": "matplotlib"}
#: The shipped text read for SELF_REFERENCES (globs under the root; docs/notebooks is a
#: link to notebooks/, each file is read once).
SHIPPED_TEXT = (
    "purejaxppo/**/*.py",
    "configs/**/*.yaml",
    "docs/**/*.md",
    "README.md",
    "notebooks/*.ipynb",
    "notebooks/make_*.py",
    "docs/notebooks/*.ipynb",
    "docs/notebooks/make_*.py",
)
#: Shipped text not read: data files (path prefixes).
SHIPPED_DATA = ("docs/results/",)
#: Shipped text that keeps its history: only these kinds of SELF_REFERENCES are refused.
HISTORY = {"docs/changelog.md": ("machine path",)}
#: References to things outside the project: kind -> pattern (case-insensitive).
SELF_REFERENCES = {
    "machine path": re.compile(r"/work/|shared/seeds", re.IGNORECASE),
    "seed document": re.compile(r"\bseeds? 0\d\d\b|\bseed documents?\b", re.IGNORECASE),
    # The word issue(s) before a number, a hash-number alone or in parentheses; not a
    # format spec (`{x:#04x}`) nor a page anchor (`page.md#2`).
    "issue reference": re.compile(
        r"\bissues? #?\d+|\(#\d+\)|(?<![\w&:/.#])#\d+\b(?![\w-])", re.IGNORECASE
    ),
    # The people, not a helper function: the plural possessive, the possessive before
    # side / job / task / work, or core / other / fellow before the word.
    "helpers (the team)": re.compile(
        r"\bhelpers'|\bhelper's\s+(?:side|jobs?|tasks?|work|sessions?)\b"
        r"|\b(?:core|other|fellow)\s+helpers?\b",
        re.IGNORECASE,
    ),
}

# Files of the core modules being reworked in parallel: path -> why. Every
# offence in them (an import cycle: when all its modules are here) is reported as pending
# and does not fail the check. The integrator empties this after merging "core"; the
# drivers / CLI files need no entry.
PENDING_CORE: dict[str, str] = {}

# Temporary: functions allowed over MAX_POSITIONAL while another engineer converts them:
# "path:function" -> why. Remove each entry with its conversion.
POSITIONAL_PENDING: dict[str, str] = {}


def module_name(path: Path, root: Path = ROOT) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imported_modules(tree: ast.AST, name: str, is_package: bool, known: set[str]) -> set[str]:
    """purejaxppo modules that `tree` imports anywhere (module level or inside functions)."""
    return set(import_lines(tree, name, is_package, known))


def import_lines(tree: ast.AST, name: str, is_package: bool, known: set[str]) -> dict[str, int]:
    """`imported_modules` with the (1-based) line of each one's first import."""
    found: dict[str, int] = {}
    package = name if is_package else name.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            # `from a.b import c`: an edge to the module a.b.c where c is one, else to a.b.
            submodules = [f"{base}.{alias.name}" for alias in node.names]
            targets = [m for m in submodules if m in known]
            if len(targets) < len(submodules):
                targets.append(base)
        else:
            continue
        for target in targets:
            if target in known and target != name:
                found[target] = min(found.get(target, node.lineno), node.lineno)
    return found


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan), each as one
    closed path through it, starting from its smallest name."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    sys.setrecursionlimit(10_000)
    for node in sorted(graph):
        if node not in index:
            visit(node)
    return [_path_through(component, graph) for component in components]


def _path_through(component: list[str], graph: dict[str, set[str]]) -> list[str]:
    """A shortest cycle from the component's first module back to it (breadth first)."""
    start, members = component[0], set(component)
    previous: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for nxt in sorted(graph[node] & members):
                if nxt == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(previous[path[-1]])
                    return [*reversed(path), start]
                if nxt not in previous:
                    previous[nxt] = node
                    following.append(nxt)
        frontier = following
    return [*component, start]  # pragma: no cover - a component always has a cycle


def part_of(module: str) -> str:
    """The part `module` belongs to: `purejaxppo.drivers.tune.study` -> `purejaxppo.drivers`."""
    return ".".join(module.split(".")[:2])


def longest_chain(graph: dict[str, set[str]]) -> list[str]:
    """The longest chain of imports between parts (`part_of`), top down. An import inside
    a part is not a step, and one that would close a circle of parts is not followed."""
    parts: dict[str, set[str]] = {}
    for module, imported in graph.items():
        edges = parts.setdefault(part_of(module), set())
        edges.update(part_of(other) for other in imported if part_of(other) != part_of(module))
    below: dict[str, list[str]] = {}
    visiting: set[str] = set()

    def chain(part: str) -> list[str]:
        if part not in below:
            visiting.add(part)
            steps = [chain(nxt) for nxt in sorted(parts.get(part, ())) if nxt not in visiting]
            below[part] = [part, *max(steps, key=len, default=[])]
            visiting.discard(part)
        return below[part]

    return max((chain(part) for part in sorted(parts)), key=len, default=[])


def fmt_skips(text: str) -> list[int]:
    """Lines of `text` with a `# fmt: skip` comment (comments only, not strings)."""
    tokens = tokenize.generate_tokens(io.StringIO(text).readline)
    return [
        token.start[0]
        for token in tokens
        if token.type == tokenize.COMMENT  # `# noqa: E501  # fmt: skip` counts too
        and any(part.strip().replace(" ", "") == "fmt:skip" for part in token.string.split("#"))
    ]


def positional_count(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """Positional parameters of a function: positional-only and ordinary ones, without a
    leading `self` / `cls`, `*args` and the keyword-only ones."""
    names = [arg.arg for arg in (*node.args.posonlyargs, *node.args.args)]
    if names and names[0] in ("self", "cls"):
        names = names[1:]
    return len(names)


def floor_of(module: str) -> int:
    """The floor (LAYERS) of a purejaxppo module: its longest listed prefix's, else 0."""
    parts = module.split(".")[1:]
    for end in range(len(parts), 0, -1):
        if ".".join(parts[:end]) in LAYERS:
            return LAYERS[".".join(parts[:end])]
    return 0


def upward_imports(
    lines: dict[str, dict[str, int]], files: dict[str, str]
) -> list[tuple[list[str], str]]:
    """The imports of a module on a higher floor than the importer's (LAYERS), less
    UPWARD_ALLOWED: `lines` is module -> imported module -> line, `files` module -> path."""
    found = []
    for module, imported in sorted(lines.items()):
        mine = floor_of(module)
        for other, line in sorted(imported.items()):
            theirs = floor_of(other)
            if theirs > mine and (module, other) not in UPWARD_ALLOWED:
                where = f"{files[module]}:{line}"
                text = f"{where} upward import: {module} (floor {mine}, {FLOORS[mine][0]}) "
                found.append(
                    ([files[module]], f"{text}-> {other} (floor {theirs}, {FLOORS[theirs][0]})")
                )
    return found


def _driver_of(module: str) -> str | None:
    parts = module.split(".")
    if len(parts) > 2 and parts[:2] == [PACKAGE, "drivers"] and parts[2] in DRIVERS:
        return parts[2]
    return None


def self_references(
    text: str, kinds: dict[str, re.Pattern] = SELF_REFERENCES
) -> list[tuple[int, str, str]]:
    """Every match of `kinds` (default SELF_REFERENCES) in `text`: (1-based line, kind,
    the matched text), in the order of the text."""
    found = []
    for number, line in enumerate(text.splitlines(), start=1):
        for kind, pattern in kinds.items():
            found.extend((number, kind, match.group(0)) for match in pattern.finditer(line))
    return found


def _texts(path: Path, rel: str) -> list[tuple[str, str]]:
    """(where, text) pairs of a shipped file: the whole file (`rel`), or per notebook cell
    (`rel cell N`, 1-based) its source and text outputs, not its images."""
    if path.suffix != ".ipynb":
        return [(rel, path.read_text())]
    texts = []
    for index, cell in enumerate(json.loads(path.read_text())["cells"], start=1):
        parts = [cell.get("source", "")]
        for output in cell.get("outputs", []):
            parts += [output.get("text", ""), "\n".join(output.get("traceback", []))]
            parts += [v for k, v in output.get("data", {}).items() if k.startswith("text/")]
        text = "\n".join("".join(part) if isinstance(part, list) else part for part in parts)
        texts.append((f"{rel} cell {index}", text))
    return texts


def reference_offences(root: Path = ROOT) -> list[tuple[list[str], str]]:
    """SELF_REFERENCES in the shipped text under `root` (SHIPPED_TEXT), one offence per
    match: `path:line kind: 'match'` (a notebook: `path cell N:line ...`)."""
    seen: set[Path] = set()
    found = []
    for pattern in SHIPPED_TEXT:
        for path in sorted(root.glob(pattern)):
            rel = path.relative_to(root).as_posix()
            if path.resolve() in seen or rel.startswith(SHIPPED_DATA):
                continue
            seen.add(path.resolve())
            kinds = {k: SELF_REFERENCES[k] for k in HISTORY.get(rel, SELF_REFERENCES)}
            for where, text in _texts(path, rel):
                for line, kind, match in self_references(text, kinds):
                    found.append(([rel], f"{where}:{line} {kind}: {match!r}"))
    return found


def offences(root: Path = ROOT) -> list[tuple[list[str], str]]:
    """Every rule broken under `root / purejaxppo` and in the shipped text under `root`:
    (the files involved, one line)."""
    files = sorted((root / PACKAGE).rglob("*.py"))
    trees = {path: ast.parse(path.read_text(), filename=str(path)) for path in files}
    names = {path: module_name(path, root) for path in files}
    known = set(names.values())
    found = []
    graph: dict[str, set[str]] = {}
    import_at: dict[str, dict[str, int]] = {}
    users: dict[str, list[str]] = {key: [] for key in ONE_MODULE_IMPORTS}
    skips: dict[str, int] = {}
    for path, tree in trees.items():
        rel = path.relative_to(root).as_posix()
        text = path.read_text()
        lines = len(text.splitlines())
        if lines > MAX_MODULE_LINES and rel not in LONG_MODULES:
            found.append(([rel], f"{rel}: {lines} lines (> {MAX_MODULE_LINES})"))
        if fmt_skips(text):
            skips[rel] = len(fmt_skips(text))
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = node.end_lineno - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    line = f"{rel}:{node.lineno} {node.name}: {length} lines"
                    found.append(([rel], f"{line} (> {MAX_FUNCTION_LINES})"))
                count = positional_count(node)
                if count > MAX_POSITIONAL and f"{rel}:{node.name}" not in POSITIONAL_PENDING:
                    line = f"{rel}:{node.lineno} {node.name}: {count} positional parameters"
                    found.append(([rel], f"{line} (> {MAX_POSITIONAL})"))
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                modules = (
                    [alias.name for alias in node.names]
                    if isinstance(node, ast.Import)
                    else [node.module or ""]
                )
                for key in ONE_MODULE_IMPORTS:
                    if any(m == key or m.startswith(key + ".") for m in modules):
                        if rel not in users[key]:
                            users[key].append(rel)
        import_at[names[path]] = import_lines(tree, names[path], path.name == "__init__.py", known)
        graph[names[path]] = set(import_at[names[path]])
    if sum(skips.values()) > MAX_FMT_SKIP:
        where = ", ".join(f"{rel} {count}" for rel, count in skips.items())
        line = f"{sum(skips.values())} `# fmt: skip` pragmas (> {MAX_FMT_SKIP}): {where}"
        found.append((sorted(skips), line))
    for key, modules in users.items():
        if len(modules) > 1:
            text = f"{ONE_MODULE_IMPORTS[key]} in {len(modules)} modules: {modules}"
            found.append((modules, text))
    files = {name: path.relative_to(root).as_posix() for path, name in names.items()}
    for module, imported in sorted(graph.items()):
        mine = _driver_of(module)
        for other in sorted(imported):
            theirs = _driver_of(other)
            if mine and theirs and mine != theirs:
                text = f"driver imports another driver: {module} -> {other}"
                found.append(([files[module]], text))
    found += upward_imports(import_at, files)
    for cycle in cycles(graph):
        found.append(([files[m] for m in cycle], "import cycle: " + " -> ".join(cycle)))
    chain = longest_chain(graph)
    if len(chain) > MAX_IMPORT_DEPTH:
        text = f"import chain of {len(chain)} parts (> {MAX_IMPORT_DEPTH}): " + " -> ".join(chain)
        found.append(([], text))
    return found + reference_offences(root)


def main() -> int:
    failing = 0
    for paths, line in offences():
        pending = [PENDING_CORE[p] for p in paths if p in PENDING_CORE]
        if pending and len(pending) == len(paths):
            print(f"pending ({pending[0]}): {line}")
        else:
            print(line)
            failing += 1
    if failing:
        print(f"structure: {failing} offence(s)")
        return 1
    print("structure: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
