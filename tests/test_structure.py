"""tools/structure.py (#23): the package's size, import and single-home rules hold, and
the checker finds each kind of offence in a small synthetic package."""

import importlib.util
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
