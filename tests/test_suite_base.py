"""Suite adapters take `name`, fixed spaces and `default_params` from the shared base
(`envs.suites._common.SuiteEnv`) instead of restating them; no suite needs to be
installed to check that."""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
from gymnax.environments import spaces

import purejaxppo.envs.suites as suites
from purejaxppo.envs.suites._common import SuiteEnv, SuiteParams, box

# jaxmarl.py is not a SuiteEnv adapter: its env keeps an agents axis and its own
# multi-agent reset / step (purejaxppo.kinds.agents), so it has no base to take them from.
ADAPTERS = sorted(
    p
    for p in Path(suites.__file__).parent.glob("*.py")
    if not p.name.startswith("_") and p.name != "jaxmarl.py"
)
RESTATED = {"default_params", "num_actions", "name"}


def test_adapters_do_not_restate_what_the_base_holds():
    assert len(ADAPTERS) >= 6
    for path in ADAPTERS:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef):
                defined = {n.name for n in node.body if isinstance(n, ast.FunctionDef)}
                assert not defined & RESTATED, (path.name, node.name, defined & RESTATED)
            if isinstance(node, ast.Attribute) and node.attr in ("name", "_default_params"):
                target = node.value
                assigned = isinstance(target, ast.Name) and target.id == "self"
                assert not (assigned and isinstance(node.ctx, ast.Store)), path.name


class _Demo(SuiteEnv):
    """The smallest adapter: the base is abstract in `reset_env` / `step_env`."""

    def reset_env(self, key, params):
        return np.zeros(3, np.float32), None

    def step_env(self, key, state, action, params):
        return np.zeros(3, np.float32), state, 0.0, False, False, {}


def test_base_holds_name_spaces_and_default_params():
    obs = box(-np.inf, np.inf, (3,), np.float32)
    env = _Demo("demo:x", obs_space=obs, action_space=spaces.Discrete(4))
    assert env.name == "demo:x" and repr(env) == "_Demo('demo:x')"
    assert env.default_params == SuiteParams() and env.num_actions == 4
    assert env.observation_space(env.default_params) is obs
    cont = _Demo("demo:y", action_space=box(-1.0, 1.0, (2, 3), np.float32), default_params=7)
    assert cont.num_actions == 6 and cont.default_params == 7


def test_base_is_abstract():
    """An adapter that forgets `reset_env` / `step_env` fails when built, naming them."""
    import pytest

    with pytest.raises(TypeError, match="reset_env, step_env"):
        SuiteEnv("demo:z")
