"""The training setup: `train.py` builds on `train_setup.py`, which does not import
`train.py` back."""

import ast
from pathlib import Path

import pytest

import purejaxppo as pjp
from purejaxppo.train_setup import prepare

PACKAGE = Path(pjp.__file__).parent


def imported_modules(path: Path) -> set[str]:
    """Every `purejaxppo.*` module imported by the file, at the top or inside functions."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return {name for name in found if name.startswith("purejaxppo")}


def test_no_train_setup_circle():
    assert "purejaxppo.train" not in imported_modules(PACKAGE / "train_setup.py")
    assert "purejaxppo.train_setup" in imported_modules(PACKAGE / "train.py")


def test_prepare_checks_before_compiling():
    config = pjp.PPOConfig(num_envs=4, num_steps=8, total_timesteps=64, num_minibatches=2)
    setup = prepare(config)
    assert (setup.num_envs, setup.num_steps, setup.kind.name) == (4, 8, "jax")
    assert setup.metric_names == pjp.METRICS
    with pytest.raises(ValueError, match="callback_every=0"):
        prepare(config, callback_every=0)
    with pytest.raises(ValueError, match="num_envs=4 must be divisible by the number of devices 3"):
        prepare(config, num_shards=3, axis_name="d")
    with pytest.raises(ValueError, match="num_shards=2 needs an axis_name"):
        prepare(config, num_shards=2)
    with pytest.raises(ValueError, match="action_histogram=True: needs Discrete"):
        prepare(config.replace(env_name="Pendulum-v1", action_histogram=True))
    hist = prepare(config.replace(action_histogram=True))
    assert hist.num_actions == 2 and hist.metric_names[-2:] == ("action_frac/0", "action_frac/1")
