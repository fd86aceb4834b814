"""docs/make_config_reference.py: the `PPOConfig` field reference of docs/api.md is what the
config gives (one row per field: type, default, group, traced / static, the docstring's
description), `--check` names the first stale line, and the API page hides the members
that mkdocstrings' inspection would list for the config's fields and NamedTuple fields.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import inspect
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

import purejaxppo as pjp
from purejaxppo.config import FIELD_GROUPS, TRACED_FIELDS

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "docs" / "make_config_reference.py"
API = ROOT / "docs" / "api.md"


@pytest.fixture(scope="module")
def ref():
    spec = importlib.util.spec_from_file_location("make_config_reference", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def api_copy(tmp_path):
    path = tmp_path / "api.md"
    shutil.copy(API, path)
    return path


def table_rows(block: str) -> dict[str, list[str]]:
    """field name -> its row's cells, from a generated block."""
    rows = {}
    for line in block.splitlines():
        match = re.match(r'\| <span id="purejaxppo\.PPOConfig\.(\w+)"></span>', line)
        if match:
            rows[match.group(1)] = cells(line)
    return rows


def cells(line: str) -> list[str]:
    """A table row's cells, split at the borders: not at a `|` in a code span or escaped."""
    out, cell, code, i = [], "", False, 0
    body = line.strip()[1:-1]
    while i < len(body):
        char = body[i]
        if char == "\\" and not code:
            cell, i = cell + body[i : i + 2], i + 2
            continue
        if char == "`":
            code = not code
        if char == "|" and not code:
            out, cell = [*out, cell.strip()], ""
        else:
            cell += char
        i += 1
    return [*out, cell.strip()]


def test_the_api_page_is_current(ref):
    assert ref.run(API, check=True) == []


def test_check_command_exits_zero():
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--check"], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr


def test_one_row_per_field_with_type_default_group_and_kind(ref):
    text = API.read_text()
    body, end = ref.find_block(text)
    block = text[body:end]
    rows = table_rows(block)
    fields = dataclasses.fields(pjp.PPOConfig)
    assert list(rows) == [n for group in ref.GROUP_TITLES for n in FIELD_GROUPS[group]]
    assert sorted(rows) == sorted(f.name for f in fields)
    assert len(re.findall(r'id="purejaxppo\.PPOConfig\.', block)) == len(fields) == 80
    # Spot checks against the declarations in purejaxppo/config.py.
    assert rows["clip_coef"][1:4] == ["`float`", "`0.2`", "traced"]
    assert rows["target_kl"][1:4] == ["`float | None`", "`None`", "traced"]
    assert rows["hidden_sizes"][1:4] == ["`tuple[int, ...]`", "`(64, 64)`", "static"]
    assert rows["env_kwargs"][1:4] == ["`dict[str, Any]`", "`{}`", "static"]
    assert rows["env_name"][1:4] == ["`str`", "`'CartPole-v1'`", "static"]
    assert [n for n, cells in rows.items() if cells[3] == "traced"] == [
        n for group in ref.GROUP_TITLES for n in FIELD_GROUPS[group] if n in TRACED_FIELDS
    ]
    # Each group's section lists its fields, under its heading.
    sections = re.split(r"^#### ", block, flags=re.MULTILINE)[1:]
    for section, (group, title) in zip(sections, ref.GROUP_TITLES.items(), strict=True):
        assert section.startswith(f"{title} (`{group}`)\n")
        assert list(table_rows(section)) == list(FIELD_GROUPS[group])
    # The docstring's text, one line, escaped for a table cell; a shared entry documents both.
    assert (
        rows["num_steps"][4]
        == r"T, steps per environment per rollout. One update uses N\*T transitions."
    )
    assert (
        rows["obs_clip"][4]
        == rows["reward_clip"][4]
        == "Clip bounds (> 0; `inf` turns clipping off)."
    )
    assert '"&lt;prefix>:&lt;name>"' in rows["env_name"][4]


def test_a_stale_block_fails_naming_the_line_and_rewriting_restores_it(ref, api_copy):
    text = api_copy.read_text()
    row = next(ln for ln in text.splitlines() if '"purejaxppo.PPOConfig.clip_coef"' in ln)
    api_copy.write_text(text.replace(row, row.replace("`0.2`", "`0.3`")))
    problems = ref.run(api_copy, check=True)
    assert len(problems) == 1
    assert "stale at its line" in problems[0] and "`0.3`" in problems[0] and "`0.2`" in problems[0]
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--check", "--path", str(api_copy)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 1 and "clip_coef" in proc.stderr
    assert ref.run(api_copy) == []
    assert api_copy.read_text() == text
    # Text outside the markers is left alone.
    api_copy.write_text(text.replace("## Training", "## Training!"))
    assert ref.run(api_copy, check=True) == []


def test_missing_markers_are_errors(ref, api_copy):
    api_copy.write_text(api_copy.read_text().replace(ref.BEGIN, ""))
    with pytest.raises(ValueError, match="no '<!-- generated by docs/make_config_reference.py"):
        ref.run(api_copy, check=True)


def test_field_docs_name_the_undocumented_and_the_unknown(ref):
    @dataclasses.dataclass
    class Config:
        """A config.

        Attributes:
          alpha: the first
            field.
          beta, gamma: two at once.

        Raises:
          ValueError: never.
        """

        alpha: int = 1
        beta: int = 2
        gamma: int = 3

    assert ref.field_docs(Config) == {
        "alpha": "The first field.",
        "beta": "Two at once.",
        "gamma": "Two at once.",
    }
    Config.__doc__ = Config.__doc__.replace("  beta, gamma:", "  beta, delta:")
    with pytest.raises(ValueError, match=r"documents \['delta'\], not fields"):
        ref.field_docs(Config)
    Config.__doc__ = Config.__doc__.replace("  beta, delta:", "  beta:")
    with pytest.raises(ValueError, match=r"does not document the fields \['gamma'\]"):
        ref.field_docs(Config)


def test_a_group_without_a_title_is_an_error(ref, monkeypatch):
    titles = {k: v for k, v in ref.GROUP_TITLES.items() if k != "metrics"}
    monkeypatch.setattr(ref, "GROUP_TITLES", titles)
    with pytest.raises(ValueError, match="give GROUP_TITLES a title for each group"):
        ref.reference()


def api_options() -> dict[str, dict]:
    """`::: purejaxppo.NAME` of docs/api.md -> its mkdocstrings options."""
    found = re.findall(r"^::: purejaxppo\.(\w+)\n((?:    .*\n)*)", API.read_text(), re.MULTILINE)
    return {
        name: (yaml.safe_load(textwrap.dedent(block)) or {}).get("options", {})
        for name, block in found
    }


def test_the_api_page_hides_the_inspected_field_members():
    """PPOConfig lists exactly its properties and methods (its fields are the table), and
    every NamedTuple its members besides its fields, so none shows Python's `int` docstring
    or a `_tuplegetter` alias; a member added later fails here until the page lists it."""
    options = api_options()
    config = pjp.PPOConfig
    fields = {f.name for f in dataclasses.fields(config)}
    assert options["PPOConfig"]["members"] == [
        k for k in vars(config) if not k.startswith("_") and k not in fields
    ]
    assert options["PPOConfig"]["show_docstring_attributes"] is False
    named_tuples = [
        n
        for n in options
        if inspect.isclass(getattr(pjp, n)) and hasattr(getattr(pjp, n), "_fields")
    ]
    assert len(named_tuples) >= 8
    for name in named_tuples:
        cls = getattr(pjp, name)
        extra = [k for k in vars(cls) if not k.startswith("_") and k not in cls._fields]
        assert options[name].get("members") == (extra or False), name
