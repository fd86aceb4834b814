"""Checks that need a GPU (issue #36): skipped on CPU-only machines, with the reason.

CI has no GPU; these run where `jax.devices("gpu")` finds one (the GPU machines of
`benchmarks/gpu/`), as `python -m pytest tests/test_gpu.py`.
"""

from __future__ import annotations

import jax
import numpy as np
import pytest

import purejaxppo as pjp
from purejaxppo.loops import loop_plan


def _has_gpu() -> bool:
    try:
        return bool(jax.devices("gpu"))
    except RuntimeError:
        return False


pytestmark = pytest.mark.skipif(not _has_gpu(), reason="needs a GPU: jax.devices('gpu') is empty")


def test_auto_layout_is_unrolled_on_the_gpu():
    assert jax.default_backend() == "gpu"
    assert loop_plan("auto").layout == "unrolled"


def test_unrolled_training_on_the_gpu_follows_compact_training():
    """The GPU default ("unrolled") against "compact" on the same GPU, full float32
    matmuls (TF32 would differ by more than the layouts do)."""
    outs = {}
    with jax.default_matmul_precision("highest"):
        for layout in ("compact", "unrolled"):
            config = pjp.PPOConfig(total_timesteps=4 * 128 * 20, loop_layout=layout)
            outs[layout] = jax.jit(pjp.make_train(config))(jax.random.key(0))
    np.testing.assert_allclose(
        outs["unrolled"].metrics["episode_return"],
        outs["compact"].metrics["episode_return"],
        rtol=1e-4,
    )
