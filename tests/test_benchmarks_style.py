"""benchmarks/ and tools/probes/ have one invocation style: `python -m benchmarks.NAME`,
`python -m tools.probes.NAME` from the repository root.

Their scripts import each other as modules of their package (`from benchmarks.harness
import ...`, `from tools.probes.faults_common import ...`), never by editing the module
search path or loading a file by its path, and never as a top-level sibling (`from harness
import ...`, which works only as `python benchmarks/NAME.py`). The commands the scripts,
shell scripts, claims and pages give run them the same way. No module is over
MAX_MODULE_LINES lines. Static checks: nothing is imported or run.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BENCHMARKS = ROOT / "benchmarks"
PROBES = ROOT / "tools" / "probes"
MAX_MODULE_LINES = 500

#: Module search path edits and path loaders.
FORBIDDEN = ("sys.path.insert", "sys.path.append", "spec_from_file_location")
FORBIDDEN += ("SourceFileLoader", "run_path")
#: An interpreter running a file of benchmarks/ or tools/probes/ by its path: `python
#: benchmarks/x.py`, `"$PY" benchmarks/gpu/y.py`, `"${PYTHON:-python3}" tools/probes/z.py`.
PATH_RUN = re.compile(
    r"(?:python3?\}?\"?|\"\$PY\"|\$PY\b|\$P\b)\s+(?:benchmarks|tools/probes)/[\w/]+\.py\b"
)


def trees() -> tuple[Path, Path]:
    """The folders of scripts run as modules: benchmarks/ and tools/probes/."""
    return BENCHMARKS, PROBES


def sources() -> list[Path]:
    return sorted(
        p
        for tree in trees()
        for p in tree.rglob("*.py")
        if "results" not in p.relative_to(tree).parts
    )


def sibling_names(path: Path) -> set[str]:
    """Names a top-level import would take from the file's tree (benchmarks/ or
    tools/probes/) or its own folder when that folder is first on the module search path:
    modules and subpackages."""
    tree = next(tree for tree in trees() if path.is_relative_to(tree))
    names = set()
    for folder in {tree, path.parent}:
        names |= {p.stem for p in folder.glob("*.py") if p.stem != "__init__"}
        names |= {p.name for p in folder.iterdir() if (p / "__init__.py").is_file()}
    return names


def sibling_imports(path: Path) -> list[str]:
    """`file:line: import` for each top-level import of a module of the file's tree."""
    names = sibling_names(path)
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            modules = [node.module]
        else:
            continue
        for module in modules:
            if module.split(".")[0] in names:
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {module}")
    return found


def forbidden_lines(path: Path) -> list[str]:
    """`file:line: word` for each module search path edit or path loader in `path`."""
    return [
        f"{path.relative_to(ROOT)}:{number}: {word}"
        for number, line in enumerate(path.read_text().splitlines(), 1)
        for word in FORBIDDEN
        if word in line
    ]


def test_no_module_search_path_edits_or_path_loaders():
    assert [hit for path in sources() for hit in forbidden_lines(path)] == []


def test_no_top_level_imports_of_sibling_modules():
    assert [hit for path in sources() for hit in sibling_imports(path)] == []


def test_every_folder_of_scripts_is_a_package():
    # tools/ too: `python -m tools.probes.NAME` and `import tools.probes` in the tests
    folders = {path.parent for path in sources()} | {PROBES.parent}
    assert (
        sorted(str(f.relative_to(ROOT)) for f in folders if not (f / "__init__.py").is_file()) == []
    )


def long_modules() -> list[str]:
    """`file: N lines` for each script over MAX_MODULE_LINES lines."""
    lines = {path: len(path.read_text().splitlines()) for path in sources()}
    return [
        f"{path.relative_to(ROOT)}: {n} lines" for path, n in lines.items() if n > MAX_MODULE_LINES
    ]


def test_no_module_over_the_line_limit():
    assert long_modules() == []


def test_commands_run_the_scripts_as_modules():
    texts = [*sources(), *BENCHMARKS.rglob("*.sh"), BENCHMARKS / "README.md"]
    texts += [BENCHMARKS / "claims.yaml", ROOT / "README.md", ROOT / ".ci" / "run"]
    texts += sorted((ROOT / "docs").rglob("*.md"))
    found = [
        f"{path.relative_to(ROOT)}: {match.group(0)}"
        for path in texts
        for match in PATH_RUN.finditer(path.read_text())
    ]
    assert found == []


def test_the_checks_find_each_kind_of_offence(tmp_path, monkeypatch):
    # a synthetic benchmarks/ with one offence of each kind, and one import that is fine
    fake = tmp_path / "benchmarks"
    (fake / "experiments").mkdir(parents=True)
    (fake / "__init__.py").write_text("")
    (fake / "experiments" / "__init__.py").write_text("")
    (fake / "harness.py").write_text("import sys\n\nsys.path.insert(0, '.')\n")
    (fake / "experiments" / "variants.py").write_text("")
    (fake / "experiments" / "ab.py").write_text(
        "from harness import x\nimport variants\nfrom experiments import variants as v\n"
        "from benchmarks.harness import y\nimport numpy\n"
    )
    monkeypatch.setitem(globals(), "ROOT", tmp_path)
    monkeypatch.setitem(globals(), "BENCHMARKS", fake)
    monkeypatch.setitem(globals(), "PROBES", tmp_path / "tools" / "probes")
    (tmp_path / "tools" / "probes").mkdir(parents=True)
    (tmp_path / "tools" / "probes" / "kit.py").write_text("")
    (tmp_path / "tools" / "probes" / "faults.py").write_text(
        "import kit\nfrom tools.probes import kit as k\nimport harness\n"
    )
    assert forbidden_lines(fake / "harness.py") == ["benchmarks/harness.py:3: sys.path.insert"]
    assert sibling_imports(fake / "experiments" / "ab.py") == [
        "benchmarks/experiments/ab.py:1: harness",
        "benchmarks/experiments/ab.py:2: variants",
        "benchmarks/experiments/ab.py:3: experiments",
    ]
    (fake / "experiments" / "long.py").write_text("x = 1\n" * 501)
    assert long_modules() == ["benchmarks/experiments/long.py: 501 lines"]
    # a probe's siblings are its own tree's: `harness` is a module of benchmarks/ only
    assert sibling_imports(tmp_path / "tools" / "probes" / "faults.py") == [
        "tools/probes/faults.py:1: kit"
    ]
    text = 'x "$PY" benchmarks/gpu/a.py; python3 benchmarks/b.py; python -m benchmarks.a'
    text += "; python tools/probes/faults.py; python -m tools.probes.faults"
    text += "; python tools/structure.py"
    assert PATH_RUN.findall(text) == [
        '"$PY" benchmarks/gpu/a.py',
        "python3 benchmarks/b.py",
        "python tools/probes/faults.py",
    ]
