"""benchmarks/tables.py (issue #39): the marked tables of README.md and docs/ equal what
their results files give, and `--check` names the table and cell when they do not; a claim
with a `figure:` entry gets its PNG (benchmarks/plots.py) and the link to it, and `--check`
names the claim whose figure is missing; every file in benchmarks/results/ is cited by a
claim or a page, and every claim's file exists.

The failure cases run on copies in tmp_path (the Markdown files and results files the
claims name), passing the root to tables.py's functions; the real files are never edited.
"""

from __future__ import annotations

import csv
import importlib
import io
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def tables():
    return importlib.import_module("benchmarks.tables")


def run_tables(*args: str) -> subprocess.CompletedProcess:
    """`python -m benchmarks.tables ARGS` from the repository root."""
    return subprocess.run(
        [sys.executable, "-m", "benchmarks.tables", *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )


@pytest.fixture
def repo_copy(tables, tmp_path):
    """tmp_path holding the claims' Markdown files and results files, as in the repo."""
    for claim in tables.load_claims(tables.CLAIMS, ROOT):
        for rel in claim.files:
            (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(ROOT / rel, tmp_path / rel)
        figure_files = []
        if claim.figure is not None:
            figure_files = [*claim.figure.results.values(), ROOT / claim.figure.path]
        for path in [*claim.results.values(), *figure_files]:
            rel = path.relative_to(ROOT)
            (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(path, tmp_path / rel)
    return tmp_path


def test_check_passes_on_repo(tables):
    assert tables.run(tables.CLAIMS, ROOT, check=True) == []


def test_check_command_exits_zero():
    proc = run_tables("--check")
    assert proc.returncode == 0, proc.stderr


def test_the_published_target_helpers(tables, tmp_path):
    # Issue #41's target: mean >= the published mean and no seed below its mean - std.
    path = tmp_path / "r.csv"
    path.write_text(
        "name,final_mean,finals,published\n"
        "ok,758.5,710.3 866.4 698.7,716.11 ± 49.08 (CleanRL)\n"
        "edge,720.0,667.03 700 792.97,716.11 ± 49.08 (CleanRL)\n"
        "low_seed,776.7,628.9 818.1 883.1,716.11 ± 49.08 (CleanRL)\n"
        "low_mean,700.0,690 700 710,716.11 ± 49.08 (CleanRL)\n"
    )
    ns = tables._namespace({"r": path})
    row, meets = ns["row"], ns["meets_published"]
    assert ns["vs_published"](row("r", name="ok")) == pytest.approx(758.5 / 716.11)
    assert [meets(row("r", name=n)) for n in ("ok", "edge", "low_seed", "low_mean")] == [
        "yes",
        "yes",
        "no",
        "no",
    ]


def test_every_claim_is_complete(tables):
    claims = tables.load_claims(tables.CLAIMS, ROOT)
    assert {c.name for c in claims} >= {"cartpole-speed", "brax-h100"}
    for claim in claims:
        assert claim.command and claim.hardware and claim.expected_time, claim.name
        assert all(p.is_file() for p in claim.results.values()), claim.name
        for rel in claim.files:
            assert tables.find_block((ROOT / rel).read_text(), claim.name), (rel, claim.name)


def test_changed_digit_in_markdown_fails_naming_table_and_cell(tables, repo_copy):
    readme = repo_copy / "README.md"
    text = readme.read_text()
    row = "| `hopper` (`configs/brax_hopper.yaml`) | 10M | 1461.5 ± 11.1 | 1461.8 ± 88.2 | 15.2 | 51.7 |"
    assert row in text
    readme.write_text(text.replace(row, row.replace("| 51.7 |", "| 51.8 |")))
    problems = tables.run(tables.CLAIMS, repo_copy, check=True)
    assert len(problems) == 1, problems
    assert "README.md" in problems[0] and "brax-h100" in problems[0]
    assert "Brax s / seed" in problems[0] and "'51.8'" in problems[0] and "'51.7'" in problems[0]
    # Rewriting restores the table from the results; the check then passes.
    assert tables.run(tables.CLAIMS, repo_copy) == []
    assert row in readme.read_text()
    assert tables.run(tables.CLAIMS, repo_copy, check=True) == []


def test_perturbed_results_file_fails_naming_table_and_cell(tables, repo_copy):
    results = repo_copy / "benchmarks/results/cartpole-cpu-20261207-222137.csv"
    with open(results, newline="") as f:
        rows = list(csv.DictReader(f))
    for row in rows:
        if row["library"] == "rejax" and row["agents"] == "1":
            row["final_return"] = "488.1"  # the tables say 497.2
    with open(results, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    problems = tables.run(tables.CLAIMS, repo_copy, check=True)
    named = {p.split(": ")[1] for p in problems}
    assert named == {"table cartpole-speed", "table cartpole-speed-rounds"}, problems
    for p in problems:
        assert "row 2 (rejax)" in p and "'final return'" in p, p
        assert "the file has '497.2'" in p and "the results give '488.1'" in p, p


def test_missing_marker_is_reported(tables, repo_copy):
    readme = repo_copy / "README.md"
    readme.write_text(
        readme.read_text().replace("<!-- generated by benchmarks/tables.py: brax-h100 -->", "")
    )
    problems = tables.run(tables.CLAIMS, repo_copy, check=True)
    assert problems == ["README.md: table brax-h100: no begin marker"]


def test_check_command_fails_on_a_copy(repo_copy):
    docs = repo_copy / "docs" / "benchmarks.md"
    docs.write_text(docs.read_text().replace("| 7,080 |", "| 7,090 |"))
    proc = run_tables("--check", "--root", str(repo_copy))
    assert proc.returncode == 1
    assert "atari-cpu" in proc.stderr and "EnvPool alone" in proc.stderr


# --- Figures: a claim's `figure:` entry draws a PNG and links it; --check needs the file.

SPEED_CSV = """library,agents,env_steps_per_s
ours,1,100000
ours,8,700000
peer,1,90000
peer,8,400000
"""
#: Two seeds; seed 1 ends no episode at 2048 steps (an empty cell: not drawn).
CURVES_CSV = """seed,env_steps,episode_return
0,1024,10
0,2048,30
1,1024,20
1,2048,
"""
FIGURE_CLAIMS = """
tables:
  speed:
    command: python bench.py
    hardware: 2-core CPU
    expected_time: 1 min
    results: {s: results/speed.csv, c: results/curves.csv}
    in: [docs/guides/page.md]
    header: [library, env steps/s]
    rows:
      - [ours, '{row("s", library="ours", agents=8).env_steps_per_s / 1e3:.0f}k']
    figure:
      kind: speed
      path: docs/figures/speed.png
      alt: speed against agents
      x: agents
      y: env_steps_per_s
      series:
        - {label: ours, from: s, where: {library: ours}}
        - {label: peer, from: s, where: {library: peer}}
  curve:
    command: python bench.py
    hardware: 2-core CPU
    expected_time: 1 min
    results: {c: results/curves.csv}
    in: [docs/guides/page.md]
    header: [seeds]
    rows: [['{len(rows("c", env_steps=1024))}']]
    figure:
      kind: curve
      path: docs/figures/curve.png
      x: env_steps
      y: episode_return
      panels:
        - title: a curve
          series: [{label: ours, from: c, by: seed}]
          reference: {value: '{row("c", seed=0, env_steps=2048).episode_return}', label: published}
"""
PAGE = """# A page

<!-- generated by benchmarks/tables.py: speed -->
<!-- end generated -->

<!-- generated by benchmarks/tables.py: curve -->
<!-- end generated -->
"""


@pytest.fixture
def figure_repo(tmp_path):
    """tmp_path holding two claims with figures (speed against agents, a learning curve)."""
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "speed.csv").write_text(SPEED_CSV)
    (tmp_path / "results" / "curves.csv").write_text(CURVES_CSV)
    (tmp_path / "docs" / "guides").mkdir(parents=True)
    (tmp_path / "docs" / "guides" / "page.md").write_text(PAGE)
    (tmp_path / "claims.yaml").write_text(FIGURE_CLAIMS)
    return tmp_path


def test_a_claim_with_a_figure_draws_a_png_and_links_it(tables, figure_repo):
    root, claims = figure_repo, figure_repo / "claims.yaml"
    # Before the first run: the blocks are empty, the figures missing.
    problems = tables.run(claims, root, check=True)
    assert any("table speed: its figure docs/figures/speed.png is missing" in p for p in problems)
    out = io.StringIO()
    assert tables.run(claims, root, out=out) == []
    for name in ("speed", "curve"):
        png = root / "docs" / "figures" / f"{name}.png"
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", name
    page = (root / "docs" / "guides" / "page.md").read_text()
    # The link closes the block, relative to the page (docs/guides/ -> docs/figures/).
    assert "| ours | 700k |\n\n![speed against agents](../figures/speed.png)\n\n<!-- end" in page
    assert "![curve](../figures/curve.png)" in page
    assert tables.run(claims, root, check=True) == []
    # A second run draws the same bytes and so writes nothing.
    out = io.StringIO()
    assert tables.run(claims, root, out=out) == []
    assert out.getvalue() == ""


def test_a_missing_figure_fails_the_check_naming_the_claim(tables, figure_repo):
    root, claims = figure_repo, figure_repo / "claims.yaml"
    assert tables.run(claims, root) == []
    (root / "docs" / "figures" / "curve.png").unlink()
    assert tables.run(claims, root, check=True) == [
        "table curve: its figure docs/figures/curve.png is missing "
        "(`python -m benchmarks.tables` draws it)"
    ]
    proc = run_tables("--check", "--claims", str(claims), "--root", str(root))
    assert proc.returncode == 1 and "table curve" in proc.stderr and "curve.png" in proc.stderr
    # A link edited away fails too, naming the table.
    assert tables.run(claims, root) == []
    page = root / "docs" / "guides" / "page.md"
    page.write_text(page.read_text().replace("![curve](../figures/curve.png)\n", ""))
    problems = tables.run(claims, root, check=True)
    assert len(problems) == 1 and "table curve: figure links [] in the file" in problems[0]


def test_a_repo_figure_missing_fails_the_check(tables, repo_copy):
    assert tables.run(tables.CLAIMS, repo_copy, check=True) == []
    (repo_copy / "docs" / "figures" / "cartpole-gpu-speed.png").unlink()
    problems = tables.run(tables.CLAIMS, repo_copy, check=True)
    assert problems == [
        "table cartpole-gpu: its figure docs/figures/cartpole-gpu-speed.png is missing "
        "(`python -m benchmarks.tables` draws it)"
    ]


def test_the_repo_figures(tables):
    """The figures the issue asks for exist: speed against agents (CPU, H100) and the
    learning curves with the published reference (MuJoCo)."""
    figures = {c.name: c.figure for c in tables.load_claims(tables.CLAIMS, ROOT) if c.figure}
    assert figures["cartpole-gpu"].kind == figures["cartpole-speed"].kind == "speed"
    assert figures["mujoco-reference"].kind == "curve"
    assert all(p.references for p in figures["mujoco-reference"].panels)
    for figure in figures.values():
        assert (ROOT / figure.path).is_file(), figure.path


def test_figure_entry_errors_name_the_claim(tables):
    with pytest.raises(ValueError, match="table t: figure: kind must be one of"):
        tables.parse_figure("t", {"kind": "bars", "path": "x.png", "x": "a", "y": "b"}, [])
    with pytest.raises(ValueError, match="table t: figure: missing 'y'"):
        tables.parse_figure("t", {"kind": "curve", "path": "x.png", "x": "a"}, [])
    with pytest.raises(ValueError, match="table t: figure, panel 1: a series needs `from`"):
        spec = {"kind": "curve", "path": "x.png", "x": "a", "y": "b", "series": [{"label": "l"}]}
        tables.parse_figure("t", spec, [])


def test_links_are_relative_to_the_page(tables):
    spec = {"kind": "speed", "path": "docs/figures/f.png", "x": "a", "y": "b", "alt": "F"}
    spec["series"] = [{"from": "s"}]
    figure = tables.parse_figure("t", spec, ["README.md"])
    assert tables.link(figure, "README.md") == "![F](docs/figures/f.png)"
    assert tables.link(figure, "docs/benchmarks.md") == "![F](figures/f.png)"
    assert tables.link(figure, "docs/guides/gpu.md") == "![F](../figures/f.png)"


def test_moving_mean(tables):
    plots = importlib.import_module("benchmarks.plots")
    # window 2: [1], [1, 3], [3, 5], [5, 7] -> 1, 2, 4, 6
    assert plots._moving_mean(np.array([1.0, 3.0, 5.0, 7.0]), 2).tolist() == [1.0, 2.0, 4.0, 6.0]
    assert plots._moving_mean(np.array([1.0, 3.0]), 1).tolist() == [1.0, 3.0]


# --- Only current results: every file in benchmarks/results/ is cited, every cited file exists.

#: The pages that may cite a results file (besides a claim's `results`): the READMEs and
#: the docs. A results file citing another does not count, nor does a glob (`name-*`).
PAGES = ("README.md", "benchmarks/README.md")
#: Files a run writes beside its main file: `NAME-curves.csv` (reference.py) and
#: `NAME-cells.csv` (brax_peer.py) belong to run NAME and are cited with it.
COMPANIONS = ("-curves", "-cells")


def _expand_braces(token: str) -> list[str]:
    """`a-{1,2}.{csv,md}` -> a-1.csv, a-1.md, a-2.csv, a-2.md (shell-style, nested left first)."""
    start = token.find("{")
    end = token.find("}", start)
    if start < 0 or end < 0:
        return [token]
    head, alternatives, tail = token[:start], token[start + 1 : end], token[end + 1 :]
    return [x for alt in alternatives.split(",") for x in _expand_braces(head + alt + tail)]


def page_paths(root: Path) -> list[Path]:
    docs = sorted(
        p for p in (root / "docs").rglob("*.md") if "results" not in p.relative_to(root).parts
    )
    return [root / p for p in PAGES if (root / p).is_file()] + docs


def cited_text(root: Path) -> str:
    """The pages' text with every `{a,b}` group expanded (one line per expansion)."""
    lines = []
    for path in page_paths(root):
        for line in path.read_text().splitlines():
            lines.append(line)
            for token in re.findall(r"[\w.{},-]*\{[\w.,-]+\}[\w.{},-]*", line):
                lines.extend(_expand_braces(token))
    return "\n".join(lines)


def run_name(name: str) -> str:
    """A results file's run: its name up to the first dot, less a companion suffix."""
    stem = name.split(".", 1)[0]
    for suffix in COMPANIONS:
        if stem.endswith(suffix):
            return stem[: -len(suffix)]
    return stem


def uncited_results(tables, root: Path) -> list[str]:
    """Entries of benchmarks/results/ that no claim and no page cites (by full run name,
    not as a prefix of a longer name: `faults-2026-11-25` is not cited by
    `faults-2026-11-25-after-damaged.md`)."""
    claimed = {
        run_name(p.name)
        for claim in tables.load_claims(root / "benchmarks" / "claims.yaml", root)
        for p in [*claim.results.values(), *(claim.figure.results.values() if claim.figure else [])]
    }
    text = cited_text(root)
    uncited = []
    for entry in sorted((root / "benchmarks" / "results").iterdir()):
        name = run_name(entry.name)
        if name in claimed:
            continue
        if not re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", text):
            uncited.append(entry.name)
    return uncited


def missing_claim_results(tables, root: Path) -> list[str]:
    return [
        f"{claim.name}: {p.relative_to(root)}"
        for claim in tables.load_claims(root / "benchmarks" / "claims.yaml", root)
        for p in claim.results.values()
        if not p.is_file()
    ]


@pytest.fixture
def pages_copy(tmp_path):
    """tmp_path holding the pages, claims.yaml and all of benchmarks/results/, as in the repo."""
    for path in page_paths(ROOT):
        rel = path.relative_to(ROOT)
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(path, tmp_path / rel)
    shutil.copy(ROOT / "benchmarks" / "claims.yaml", tmp_path / "benchmarks" / "claims.yaml")
    shutil.copytree(ROOT / "benchmarks" / "results", tmp_path / "benchmarks" / "results")
    return tmp_path


def test_expand_braces_and_run_names():
    assert _expand_braces("r-{1,2}.{csv,md}") == ["r-1.csv", "r-1.md", "r-2.csv", "r-2.md"]
    assert run_name("reference-cpu-1-curves.csv") == "reference-cpu-1"
    assert run_name("brax-peer-h100-1-cells.csv") == "brax-peer-h100-1"
    assert run_name("mujoco-peers-cpu-1933") == "mujoco-peers-cpu-1933"  # a folder


def test_every_results_file_is_cited_and_every_claim_file_exists(tables):
    assert uncited_results(tables, ROOT) == [], (
        "results files that no claim in benchmarks/claims.yaml and no page (README.md, "
        "benchmarks/README.md, docs/) cites: cite them, or delete superseded runs"
    )
    assert missing_claim_results(tables, ROOT) == []


def test_a_stray_results_file_fails(tables, pages_copy):
    assert uncited_results(tables, pages_copy) == []
    results = pages_copy / "benchmarks" / "results"
    shutil.copy(
        results / "cartpole-cpu-20261127-025053.csv", results / "cartpole-cpu-20990101-000000.csv"
    )
    # A run whose name only extends a cited one is not cited by it.
    (results / "faults-2026-11-25-rerun.md").write_text("# a stray rerun\n")
    assert uncited_results(tables, pages_copy) == [
        "cartpole-cpu-20990101-000000.csv",
        "faults-2026-11-25-rerun.md",
    ]
    # Citing it on a page (here in a brace group) makes it current.
    readme = pages_copy / "benchmarks" / "README.md"
    readme.write_text(readme.read_text() + "\n`results/cartpole-cpu-{20990101-000000,x}.csv`\n")
    assert uncited_results(tables, pages_copy) == ["faults-2026-11-25-rerun.md"]


def test_a_claims_missing_results_file_fails(tables, pages_copy):
    assert missing_claim_results(tables, pages_copy) == []
    (pages_copy / "benchmarks" / "results" / "atari-cpu-20261125-190232.json").unlink()
    assert missing_claim_results(tables, pages_copy) == [
        "atari-cpu: benchmarks/results/atari-cpu-20261125-190232.json"
    ]


def test_a_results_file_gets_the_mode_a_plain_open_gives(tmp_path):
    # mkstemp's 0600 left every benchmark's results readable by their writer only
    import os

    from tools.common import write_text

    umask = os.umask(0o022)
    try:
        write_text(tmp_path / "results.csv", "a,b\n1,2\n")
        assert (tmp_path / "results.csv").stat().st_mode & 0o777 == 0o644
        assert (tmp_path / "results.csv").read_text() == "a,b\n1,2\n"
        assert [p.name for p in tmp_path.iterdir()] == ["results.csv"]  # no stray temp file
    finally:
        os.umask(umask)
