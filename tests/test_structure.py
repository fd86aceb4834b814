"""tools/structure.py: the package's size, import and single-home rules hold, the shipped
text speaks of the project alone, and the checker finds each kind of offence in a small
synthetic tree."""

import importlib.util
import json
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TOOL = ROOT / "tools" / "structure.py"


def load_tool():
    spec = importlib.util.spec_from_file_location("structure", TOOL)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_package_passes():
    done = subprocess.run([sys.executable, str(TOOL)], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.strip().endswith("structure: ok")


def write(root: Path, rel: str, text: str) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))


def test_each_offence_is_found(tmp_path):
    tool = load_tool()
    write(tmp_path, "purejaxppo/__init__.py", "")
    # A cycle through an import inside a function: a -> b (module level), b -> a (inside).
    write(tmp_path, "purejaxppo/a.py", "from purejaxppo import b\n")
    write(tmp_path, "purejaxppo/b.py", "def f():\n    from purejaxppo.a import x\n")
    # tqdm and matplotlib in two modules each.
    write(tmp_path, "purejaxppo/bars.py", "from tqdm.auto import tqdm\nimport matplotlib\n")
    write(tmp_path, "purejaxppo/more_bars.py", "import tqdm\nimport matplotlib.pyplot\n")
    # A 101-line function and a 501-line module.
    body = "".join(f"    x{i} = {i}\n" for i in range(100))
    write(tmp_path, "purejaxppo/long.py", "def long():\n" + body + "\n" * 400)
    found = [line for _, line in tool.offences(tmp_path)]
    assert "purejaxppo/long.py: 501 lines (> 500)" in found
    assert "purejaxppo/long.py:1 long: 101 lines (> 100)" in found
    assert "import cycle: purejaxppo.a -> purejaxppo.b -> purejaxppo.a" in found
    assert any(line.startswith("progress bar (tqdm) in 2 modules") for line in found)
    assert any(line.startswith("matplotlib in 2 modules") for line in found)
    assert len(found) == 5, found


def test_a_package_importing_its_own_submodules_is_no_cycle(tmp_path):
    tool = load_tool()
    write(tmp_path, "purejaxppo/__init__.py", "")
    write(tmp_path, "purejaxppo/pkg/__init__.py", "from purejaxppo.pkg.driver import run\n")
    write(tmp_path, "purejaxppo/pkg/driver.py", "from purejaxppo.pkg import storage\n")
    write(tmp_path, "purejaxppo/pkg/storage.py", "import numpy\n")
    assert tool.offences(tmp_path) == []


def test_a_driver_importing_another_driver_is_found(tmp_path):
    tool = load_tool()
    write(tmp_path, "purejaxppo/__init__.py", "")
    write(tmp_path, "purejaxppo/drivers/__init__.py", "")
    write(tmp_path, "purejaxppo/drivers/report.py", "")
    write(tmp_path, "purejaxppo/drivers/seeds.py", "from purejaxppo.drivers import report\n")
    write(tmp_path, "purejaxppo/drivers/sweeps/__init__.py", "")
    write(
        tmp_path,
        "purejaxppo/drivers/sweeps/driver.py",
        "def f():\n    import purejaxppo.drivers.seeds\n",
    )
    found = [line for _, line in tool.offences(tmp_path)]
    assert found == [
        "driver imports another driver: purejaxppo.drivers.sweeps.driver -> purejaxppo.drivers.seeds"
    ]


def test_an_import_from_a_higher_floor_is_found(tmp_path):
    tool = load_tool()
    for package in ("", "envs/", "networks/", "drivers/", "cli/"):
        write(tmp_path, f"purejaxppo/{package}__init__.py", "")
    write(tmp_path, "purejaxppo/networks/factory.py", "from purejaxppo.envs import spaces\n")
    write(tmp_path, "purejaxppo/envs/spaces.py", "from purejaxppo import config\n")
    write(tmp_path, "purejaxppo/config.py", "")  # ground: not listed in LAYERS
    write(tmp_path, "purejaxppo/drivers/seeds.py", "from purejaxppo.networks import factory\n")
    write(tmp_path, "purejaxppo/cli/main.py", "from purejaxppo.drivers import seeds\n")
    assert tool.offences(tmp_path) == []  # every arrow runs down (or along a floor)
    # envs (floor 1) -> networks (floor 2), inside a function too; ground -> drivers.
    write(
        tmp_path,
        "purejaxppo/envs/kinds.py",
        "import numpy\n\n\ndef f():\n    from purejaxppo.networks import factory\n",
    )
    write(tmp_path, "purejaxppo/sinks.py", "import purejaxppo.drivers.seeds\n")
    found = [line for _, line in tool.offences(tmp_path)]
    assert found == [
        "purejaxppo/envs/kinds.py:5 upward import: purejaxppo.envs.kinds (floor 1, envs) "
        "-> purejaxppo.networks.factory (floor 2, networks)",
        "purejaxppo/sinks.py:1 upward import: purejaxppo.sinks (floor 0, ground) "
        "-> purejaxppo.drivers.seeds (floor 6, drivers)",
    ]
    # An arrow in UPWARD_ALLOWED is no offence.
    key = ("purejaxppo.sinks", "purejaxppo.drivers.seeds")
    tool.UPWARD_ALLOWED[key] = "test"
    try:
        assert [line for _, line in tool.offences(tmp_path)] == found[:1]
    finally:
        del tool.UPWARD_ALLOWED[key]


def test_the_floors_of_the_package():
    tool = load_tool()
    floors = {name: floor for floor, (name, _) in enumerate(tool.FLOORS)}
    assert floors["envs"] < floors["networks"] < floors["kinds"] < floors["program"]
    assert floors["program"] < floors["runs"] < floors["drivers"] < floors["cli"]
    assert tool.floor_of("purejaxppo.envs.suites.jaxmarl") == floors["envs"]
    assert tool.floor_of("purejaxppo.kinds.agents") == floors["kinds"]
    assert tool.floor_of("purejaxppo.train_setup") == floors["program"]
    assert tool.floor_of("purejaxppo.config") == tool.floor_of("purejaxppo") == 0
    # The real tree: no arrow runs up a floor, and none is excused.
    upward = [line for _, line in tool.offences(ROOT) if "upward import" in line]
    assert upward == []
    assert tool.UPWARD_ALLOWED == {}


def test_the_longest_import_chain_counts_parts_not_modules(tmp_path):
    tool = load_tool()
    graph = {
        "purejaxppo.cli.main": {"purejaxppo.cli.options", "purejaxppo.drivers.single"},
        "purejaxppo.cli.options": {"purejaxppo.config"},
        "purejaxppo.drivers.single": {"purejaxppo.drivers.record", "purejaxppo.config"},
        "purejaxppo.drivers.record": {"purejaxppo.errors"},
        "purejaxppo.config": {"purejaxppo.errors", "purejaxppo.drivers.single"},  # a circle
        "purejaxppo.errors": set(),
    }
    # cli -> config -> drivers -> errors or cli -> drivers -> config -> errors: the circle is
    # walked once, and drivers.single -> drivers.record is no step.
    chain = tool.longest_chain(graph)
    assert len(chain) == 4, chain
    assert (chain[0], chain[-1]) == ("purejaxppo.cli", "purejaxppo.errors")
    # A tree one part deeper than the limit is an offence naming the chain.
    depth = tool.MAX_IMPORT_DEPTH + 1
    write(tmp_path, "purejaxppo/__init__.py", "")
    for i in range(depth):
        below = f"from purejaxppo import m{i + 1}\n" if i + 1 < depth else ""
        write(tmp_path, f"purejaxppo/m{i}.py", below)
    found = [line for _, line in tool.offences(tmp_path) if "import chain" in line]
    assert found == [
        f"import chain of {depth} parts (> {tool.MAX_IMPORT_DEPTH}): "
        + " -> ".join(f"purejaxppo.m{i}" for i in range(depth))
    ]


def test_more_than_max_fmt_skip_pragmas_is_found(tmp_path):
    tool = load_tool()
    write(tmp_path, "purejaxppo/__init__.py", "")
    # MAX_FMT_SKIP (10) pragmas: allowed; strings and prose that mention it do not count.
    packed = "x = (1,  2)  # fmt: skip\n"
    write(tmp_path, "purejaxppo/a.py", packed * 6 + 'y = "# fmt: skip"\n# fmt: skip is banned\n')
    write(tmp_path, "purejaxppo/b.py", "z = [1,  2]  # noqa: E231  # fmt: skip\n" * 4)
    assert tool.offences(tmp_path) == []
    # One more, anywhere in the package: 11 > 10.
    write(tmp_path, "purejaxppo/c.py", packed)
    found = [line for _, line in tool.offences(tmp_path)]
    assert found == [
        "11 `# fmt: skip` pragmas (> 10): purejaxppo/a.py 6, purejaxppo/b.py 4, purejaxppo/c.py 1"
    ]


def test_more_than_max_positional_parameters_is_found(tmp_path):
    tool = load_tool()
    write(tmp_path, "purejaxppo/__init__.py", "")
    # 8 positional (self / cls, *args and keyword-only ones not counted): allowed.
    write(
        tmp_path,
        "purejaxppo/ok.py",
        """\
        def f(a, b, c, d, e, f, g, h, *args, i=0, **kwargs): ...
        def g(a, b, /, c, d, e, f, g, h, *, i, j, k): ...
        class C:
            def m(self, a, b, c, d, e, f, g, h): ...
            @classmethod
            def n(cls, a, b, c, d, e, f, g, h): ...
        """,
    )
    assert tool.offences(tmp_path) == []
    write(
        tmp_path,
        "purejaxppo/bad.py",
        """\
        def helper(a, b, c, d, e, f, g, h, i): ...
        class C:
            def method(self, a, b, /, c, d, e, f, g, h, i=0): ...
        """,
    )
    found = [line for _, line in tool.offences(tmp_path)]
    assert found == [
        "purejaxppo/bad.py:1 helper: 9 positional parameters (> 8)",
        "purejaxppo/bad.py:3 method: 9 positional parameters (> 8)",
    ]
    # The temporary allow-list (POSITIONAL_PENDING) names a function by file and name.
    write(tmp_path, "purejaxppo/bad.py", "")
    write(tmp_path, "purejaxppo/drivers/__init__.py", "")
    write(tmp_path, "purejaxppo/drivers/sweeps/__init__.py", "")
    write(
        tmp_path,
        "purejaxppo/drivers/sweeps/driver.py",
        "def _run_group(a, b, c, d, e, f, g, h, i): ...\n",
    )
    assert tool.POSITIONAL_PENDING == {}  # nothing is pending today
    assert len(tool.offences(tmp_path)) == 1
    tool.POSITIONAL_PENDING["purejaxppo/drivers/sweeps/driver.py:_run_group"] = "test"
    try:
        assert tool.offences(tmp_path) == []
    finally:
        tool.POSITIONAL_PENDING.clear()


# Built from pieces: a search of the tree for machine paths or ticket numbers skips this file.
SLASH_WORK, HASH = "/" + "work/", "#"
OFFENDING = (
    f"See {SLASH_WORK}shared/seeds/000_x.txt, seed 000 line 80.\n"
    f"Readers delete nothing (issue {HASH}38); warm start (Issue 26); the core side of {HASH}23\n"
    f"# fmt change ({HASH}37), measured beside 2 helpers' jobs\n"
    "the core helper's side; beside other helpers; each helper's session\n"
)
# Prose that mentions seeds, issues, helpers and paths and is fine.
PLAIN = (
    "seed 0 and seeds 0-5; the observation / coin / info helpers; a helper's return value\n"
    "f'{byte:#04x}'; see guides/acting.md#2; /tmp/profile; an issue with NaNs in 3 seeds\n"
    "The env's state #s; duo_ai PPOAlgorithmConfig.gamma = 0.999\n"
)


def test_self_references_are_found_in_a_string():
    tool = load_tool()
    assert tool.self_references(OFFENDING) == [
        (1, "machine path", SLASH_WORK),
        (1, "machine path", "shared/seeds"),
        (1, "seed document", "seed 000"),
        (2, "issue reference", f"issue {HASH}38"),
        (2, "issue reference", "Issue 26"),
        (2, "issue reference", f"{HASH}23"),
        (3, "issue reference", f"({HASH}37)"),
        (3, "helpers (the team)", "helpers'"),
        # One offence per reference: "core helper's side" is one.
        (4, "helpers (the team)", "core helper"),
        (4, "helpers (the team)", "other helpers"),
        (4, "helpers (the team)", "helper's session"),
    ]
    assert tool.self_references(PLAIN) == []


def test_self_references_are_found_in_the_shipped_text(tmp_path):
    tool = load_tool()
    write(tmp_path, "purejaxppo/__init__.py", "")
    write(tmp_path, "purejaxppo/a.py", f"# cleanup would kill a save (issue {HASH}38)\n")
    write(tmp_path, "configs/presets/x.yaml", "gamma: 0.999 # seed 000 line 83\n")
    write(tmp_path, "docs/guides/x.md", PLAIN + f"Before {HASH}37 a host loop.\n")
    write(tmp_path, "README.md", f"Built in {SLASH_WORK}main.\n")
    # The changelog keeps its history (issue numbers), not machine paths; results are data.
    write(tmp_path, "docs/changelog.md", f"- fixed (issue {HASH}38) in {SLASH_WORK}main\n")
    write(tmp_path, "docs/results/run.md", f"issue {HASH}38 {SLASH_WORK}\n")
    write(tmp_path, "tests/test_x.py", f"# issue {HASH}38\n")  # not shipped
    # A notebook: cell sources and text outputs are read (cell 2's stored warning).
    warning = {"output_type": "stream", "name": "stderr", "text": [f"{SLASH_WORK}x.py: W\n"]}
    cells = [
        {"cell_type": "markdown", "source": ["# Title\n", "seed 0"]},
        {"cell_type": "code", "source": "print(1)", "outputs": [warning]},
    ]
    write(tmp_path, "notebooks/nb.ipynb", json.dumps({"cells": cells}))
    write(tmp_path, "notebooks/make_nb.py", "# the core helper's side\n")
    # docs/notebooks is a link to notebooks/: each file is read once.
    (tmp_path / "docs" / "notebooks").symlink_to("../notebooks")
    assert [line for _, line in tool.offences(tmp_path)] == [
        f"purejaxppo/a.py:1 issue reference: 'issue {HASH}38'",
        "configs/presets/x.yaml:1 seed document: 'seed 000'",
        f"docs/changelog.md:1 machine path: '{SLASH_WORK}'",
        f"docs/guides/x.md:4 issue reference: '{HASH}37'",
        f"README.md:1 machine path: '{SLASH_WORK}'",
        f"notebooks/nb.ipynb cell 2:2 machine path: '{SLASH_WORK}'",
        "notebooks/make_nb.py:1 helpers (the team): 'core helper'",
    ]


def test_the_shipped_text_has_no_self_references():
    assert load_tool().reference_offences(ROOT) == []
