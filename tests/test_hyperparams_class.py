"""`Hyperparams` is written out as a class (type checkers see its fields), and its fields
stay `config.TRACED_FIELDS`, in order (#37)."""

import dataclasses
import inspect

import jax
import numpy as np
import pytest

from purejaxppo.config import TRACED_FIELDS, PPOConfig
from purejaxppo.hyperparams import Hyperparams


def test_fields_are_the_traced_fields_in_order():
    assert tuple(f.name for f in dataclasses.fields(Hyperparams)) == TRACED_FIELDS
    # One pytree leaf per field, in the same order (vmap / stack rely on it).
    hparams = Hyperparams.from_config(PPOConfig())
    leaves = jax.tree.leaves(hparams)
    assert len(leaves) == len(TRACED_FIELDS)
    for name, leaf in zip(TRACED_FIELDS, leaves, strict=True):
        assert leaf is getattr(hparams, name)


def test_the_class_is_written_in_the_source():
    source = inspect.getsource(Hyperparams)
    assert source.startswith("@struct.dataclass\nclass Hyperparams:")
    for name in TRACED_FIELDS:
        assert f"    {name}: jax.Array\n" in source


def test_replace_is_the_checked_one():
    hparams = Hyperparams.from_config(PPOConfig())
    with pytest.raises(ValueError, match=r"Hyperparams: gamma=1.5"):
        hparams.replace(gamma=1.5)
    changed = hparams.replace(gamma=np.float32(0.9))
    assert float(changed.gamma) == np.float32(0.9) and changed.clip_coef is hparams.clip_coef
