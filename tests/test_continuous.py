"""Pendulum-v1 (continuous actions, episodes end only by truncation) learns."""

from pathlib import Path

import jax
import numpy as np

import purejaxppo as pjp

# configs/pendulum.yaml with a CPU-sized budget: 300k steps per seed, 2 seeds in one vmap.
CONFIG = pjp.PPOConfig.from_yaml(
    Path(__file__).resolve().parent.parent / "configs" / "pendulum.yaml", total_timesteps=300_000
)
# A random policy scores about -1200; 1M steps reach about -200. Measured (2 shared CPU
# cores, 2026-11-25; seeds split(key(k), 2) for k = 0, 1): first 5 updates -1209 / -1291 /
# -1248 / -1178; last 10 updates -428 / -330 / -266 / -294, so the test's 2-seed mean is -379
# (the other pair: -280). The old threshold -400 sat 21 below it, inside the per-seed spread
# (162); -600 leaves 172 below the worst seed and is still half-way from random to solved.
THRESHOLD = -600.0


def test_pendulum_learns():
    out = jax.jit(jax.vmap(pjp.make_train(CONFIG)))(jax.random.split(jax.random.key(0), 2))
    returns = np.asarray(out.metrics["episode_return"])
    first = np.nanmean(returns[:, :5])
    final = np.nanmean(returns[:, -10:], axis=1)
    print(f"Pendulum: first updates {first:.0f}, final per seed {final}")
    assert first < -900.0  # starts near the random policy
    assert final.mean() >= THRESHOLD, final
    # Every Pendulum episode ends by truncation at 200 steps.
    lengths = np.asarray(out.metrics["episode_length"])
    np.testing.assert_array_equal(lengths[~np.isnan(lengths)], 200.0)
