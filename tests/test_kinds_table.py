"""The kinds table (`purejaxppo.kinds`): the docs' capability table is the code's,
every refusal is one line naming the operation, the kind and what to do instead, settings
a kind cannot take are refused from the table, the core imports nothing of one kind, and
the branches on the env's kind outside `envs/` and `kinds/` are few. The cells that work
are run in `tests/test_kinds.py`."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import purejaxppo as pjp
from purejaxppo import kinds
from purejaxppo.train import make_train_fns

ROOT = Path(__file__).resolve().parent.parent
GYM = "gymnasium:CartPole-v1"
#: The core: it never imports what one kind of env needs (the kinds adapt below it).
CORE = ("train", "train_setup", "learning", "rollout", "update", "losses", "gae")
EXAMPLE_IDS = {
    "jax": "CartPole-v1",
    "envpool": "envpool:Hopper-v4",
    "agents": "jaxmarl:MPE_simple_spread_v3",
    "host": GYM,
}
#: Where the kind is decided (the suites and the kinds' table): asking it there is no branch.
DECIDED_IN = {"envs", "kinds"}
KIND_SPECIFIC = (
    "purejaxppo.kinds.agents",
    "purejaxppo.checkpoint",
    "purejaxppo.envs.host",
    "purejaxppo.envs.suites.envpool",
)


def test_the_docs_table_is_the_code():
    import importlib.util

    spec = importlib.util.spec_from_file_location("capabilities", ROOT / "tools/capabilities.py")
    capabilities = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(capabilities)
    assert capabilities.main(["--check"]) == 0
    page = capabilities.PAGE.read_text()
    assert kinds.capability_table() in page
    # A stale page (one cell edited by hand) fails the check.
    stale = page.replace("| yes | yes | yes | yes |", "| yes | yes | no | yes |", 1)
    assert stale != page
    assert capabilities.render(stale) == page


@pytest.mark.parametrize("kind", kinds.KINDS, ids=lambda k: k.name)
def test_every_refusal_is_one_line_naming_operation_kind_and_alternative(kind):
    env_id = EXAMPLE_IDS[kind.name]
    assert kinds.kind_of_id(env_id) is kind
    for operation, label in kinds.OPERATIONS.items():
        if kind.supports(operation):
            assert kinds.check(operation, env_id) is kind
            continue
        with pytest.raises(ValueError) as info:
            kinds.check(operation, env_id)
        message = str(info.value)
        assert "\n" not in message
        assert env_id in message and kind.title in message and label in message
        assert message.endswith(kind.refusals[operation])  # what to do instead
    with pytest.raises(ValueError, match="operation='bogus'"):
        kind.supports("bogus")


def test_the_kind_of_an_env_object():
    assert kinds.kind_of(pjp.make_env("CartPole-v1")[0]) is kinds.JAX
    assert kinds.kind_of(pjp.make_env(GYM)[0]) is kinds.HOST
    assert kinds.kind_of(pjp.make_env("jaxmarl:MPE_simple_spread_v3")[0]) is kinds.AGENTS
    assert kinds.kind_of_id("CartPole-v1", multi_agent="ippo") is kinds.AGENTS


def test_the_core_imports_nothing_of_one_kind():
    for name in CORE:
        tree = ast.parse((ROOT / "purejaxppo" / f"{name}.py").read_text())
        imported = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module:
                imported |= {node.module} | {f"{node.module}.{a.name}" for a in node.names}
            elif isinstance(node, ast.Import):
                imported |= {a.name for a in node.names}
        assert not imported & set(KIND_SPECIFIC), (name, imported & set(KIND_SPECIFIC))


def test_every_kind_with_host_calls_says_how_tune_runs_it():
    """`tune` prints a host kind's `notes["tune"]` (its layout: trials one at a time)."""
    for kind in kinds.KINDS:
        if kind.host_calls:
            assert "one at a time" in kind.notes.get("tune", ""), kind.name


def test_kind_checks_outside_envs_are_few():
    """The kind is asked in few places outside `envs/` and `kinds/` (at most 10)."""
    asks = ("kind_of(", "kind_of_id(", "is_host_env(", "is_envpool_id(", "is_multi_agent_env(")
    count = 0
    for path in (ROOT / "purejaxppo").rglob("*.py"):
        if DECIDED_IN & set(path.relative_to(ROOT / "purejaxppo").parts):
            continue
        text = path.read_text()
        count += sum(text.count(f" {ask}") + text.count(f".{ask}") for ask in asks)
    assert count <= 10, count


#: What a branch on the env's kind reads: the kind itself, whether it steps on the host,
#: an EnvPool task's Atari-ness, the env's type. Reading the capability table (`supports`,
#: `episodes_restart_on_resume`, `vmap_init_runs`) is no kind branch: it is the table.
KIND_READS = re.compile(
    r"kind is (not )?(kinds\.)?(JAX|ENVPOOL|AGENTS|HOST)\b|\.in_program\b|\.loop ==|"
    r"\b(fns|setup)\.host\b|\.atari\b|\bis_(host_env|multi_agent_env|envpool_id)\(|"
    r"config\.multi_agent else"
)


def _kind_branches() -> dict[str, list[int]]:
    """module path -> lines of the `if` statements / expressions outside `envs/` and
    `kinds/` whose test reads the env's kind (`KIND_READS`)."""
    found: dict[str, list[int]] = {}
    for path in sorted((ROOT / "purejaxppo").rglob("*.py")):
        relative = path.relative_to(ROOT / "purejaxppo")
        if relative.parts[0] in DECIDED_IN:
            continue
        text = path.read_text()
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.If, ast.IfExp)):
                test = ast.get_source_segment(text, node.test) or ""
                if isinstance(node, ast.IfExp):  # `a if test else b`: the test is enough
                    test = test + " else"
                if KIND_READS.search(test):
                    found.setdefault(str(relative), []).append(node.lineno)
    return found


def test_kind_branches_outside_envs_are_at_most_ten():
    """Branches on the env's kind outside `envs/` and `kinds/`: at most 10, and none in the
    core modules (every kind, host envs included, trains in `make_rollout`'s one scan)."""
    found = _kind_branches()
    count = sum(len(lines) for lines in found.values())
    assert count <= 10, found
    core = {m: lines for m, lines in found.items() if m.removesuffix(".py") in CORE}
    assert not core, core


@pytest.mark.parametrize(
    "kind, field, value",
    [
        (kinds.HOST, "info_metrics", ("lives",)),
        (kinds.HOST, "reset_ratio", 2),
        (kinds.ENVPOOL, "reset_ratio", 2),
        (kinds.AGENTS, "reset_ratio", 2),
        (kinds.AGENTS, "info_metrics", ("lives",)),
    ],
    ids=lambda v: getattr(v, "name", str(v)),
)
def test_settings_a_kind_cannot_take_are_refused_from_the_table(kind, field, value):
    env_id = EXAMPLE_IDS[kind.name]
    config = pjp.PPOConfig(env_name=env_id, num_envs=4, num_steps=8, total_timesteps=64)
    with pytest.raises(ValueError) as info:
        make_train_fns(config.replace(**{field: value}))
    assert str(info.value) == str(kind.error(field, env_id))
