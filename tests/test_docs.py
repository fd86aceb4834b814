"""Every code block of README.md and docs/**/*.md runs (Sybil); the rules are in
docs/testing.md ("The documentation's examples are tests").

One mechanism keeps the examples short: PJP_DOCS_TIMESTEPS (default 20,480 env steps, 40
updates of the default config). Python blocks get every literal `total_timesteps=N`
replaced by min(N, PJP_DOCS_TIMESTEPS); `purejaxppo train | sweep | pbt` commands get
`--total-timesteps PJP_DOCS_TIMESTEPS` appended (the last value of a flag wins), except with
`--resume` (the run's own config). Each file runs in its own temporary directory, its
blocks in order, sharing one namespace, so a run trained by one block is loaded by the next.
"""

import contextlib
import io
import os
import re
import shlex
from pathlib import Path

import pytest
import yaml
from sybil import Sybil
from sybil.parsers.markdown import CodeBlockParser

import purejaxppo as pjp
from purejaxppo.cli import main

ROOT = Path(__file__).resolve().parent.parent
TIMESTEPS = int(os.environ.get("PJP_DOCS_TIMESTEPS", "20480"))
#: First line of a block that is shown but not run; the reason follows the colon.
NOT_RUN = "# not run by the docs tests:"
#: Set-up steps of shell blocks, not run: the tests already run inside such an environment.
SETUP = (
    "python3 -m venv",
    ". .venv/bin/activate",
    "pip install",
    "export ",
    "pytest",
)
LANGUAGES = {"python", "bash", "yaml", "text"}
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def shrink(source: str) -> str:
    """`total_timesteps=N` -> `total_timesteps=min(N, TIMESTEPS)` (N a literal)."""

    def cap(match: re.Match) -> str:
        value = float(match.group(2).replace("_", ""))
        return f"{match.group(1)}{min(int(value), TIMESTEPS)}"

    return re.sub(r"(total_timesteps\s*=\s*)([0-9][0-9_]*(?:\.[0-9]*)?(?:e[0-9]+)?)", cap, source)


def run_python(example) -> None:
    source = example.parsed
    if source.lstrip().startswith(NOT_RUN):
        return
    code = compile(shrink(source), f"{example.path}:{example.line}", "exec")
    exec(code, example.namespace)


def run_cli(args: list[str], where: str) -> None:
    """Runs one `purejaxppo ...` command in this process (`cli.main`, as the CLI's own tests
    do): a fresh interpreter per command would spend most of its time importing JAX and
    the env suites, and its programs are the ones this process already compiled."""
    if args[0] in ("train", "sweep", "pbt") and "--resume" not in args:
        args = [*args, "--total-timesteps", str(TIMESTEPS)]
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(args)
        except SystemExit as stop:  # argparse's and the commands' parser.exit
            code = stop.code
    assert code in (0, None), (
        f"{where}: purejaxppo {shlex.join(args)} exited {code}\n"
        f"{out.getvalue()[-2000:]}\n{err.getvalue()[-3000:]}"
    )


def run_bash(example) -> None:
    source = example.parsed
    if source.lstrip().startswith(NOT_RUN):
        return
    where = f"{example.path}:{example.line}"
    for line in source.replace("\\\n", " ").splitlines():
        for part in line.split("&&"):
            args = shlex.split(part, comments=True)
            if not args:
                continue
            if args[0] == "purejaxppo":
                run_cli(args[1:], where)
            elif not part.strip().startswith(SETUP):
                raise AssertionError(
                    f"{where}: the docs tests cannot run {part.strip()!r}: make it a "
                    f"`purejaxppo` command, or start the block with '{NOT_RUN} <reason>'"
                )


def check_yaml(example) -> None:
    pjp.PPOConfig(**yaml.safe_load(example.parsed))  # ValueError on a bad field


SYBIL = Sybil(
    parsers=[
        CodeBlockParser(language="python", evaluator=run_python),
        CodeBlockParser(language="bash", evaluator=run_bash),
        CodeBlockParser(language="yaml", evaluator=check_yaml),
    ]
)


def test_shrink_caps_only_total_timesteps():
    text = "pjp.PPOConfig(total_timesteps=512_000, num_envs=4); x(total_timesteps=1e6)"
    small = (
        f"pjp.PPOConfig(total_timesteps={TIMESTEPS}, num_envs=4); x(total_timesteps={TIMESTEPS})"
    )
    assert shrink(text) == small
    assert shrink("total_timesteps=512") == "total_timesteps=512"


@pytest.mark.parametrize("path", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_block_has_a_known_language(path):
    fences = re.findall(r"^ *```(\S*)", path.read_text(), flags=re.MULTILINE)
    openings = fences[::2]  # fences alternate: opening, closing
    assert all(not closing for closing in fences[1::2]), (path, fences)
    unknown = [language for language in openings if language not in LANGUAGES]
    assert not unknown, f"{path}: code blocks in {unknown}; use one of {sorted(LANGUAGES)}"


@pytest.mark.parametrize("path", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_doc_examples_run(path, tmp_path, monkeypatch):
    work = tmp_path / "work"
    work.mkdir()
    (work / "configs").symlink_to(ROOT / "configs")
    monkeypatch.chdir(work)
    document = SYBIL.parse(path)
    examples = list(document.examples())
    for example in examples:
        example.evaluate()
    print(f"{path.relative_to(ROOT)}: {len(examples)} blocks run or checked")
