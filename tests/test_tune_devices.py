"""`tune`'s lanes split over the local devices: a batch of 4 lanes on 2 CPU devices (2
lanes each) trains exactly what the same batch trains on one device. Each device count
runs in its own process (the count is fixed when JAX starts)."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np

#: Trains 4 lanes (learning rates and seeds of their own) 2 segments; saves every lane's
#: runner state and the last segment's metrics to argv[2].
LANES = """
import sys

import jax

jax.config.update("jax_num_cpu_devices", int(sys.argv[1]))
import numpy as np

import purejaxppo as pjp
from purejaxppo.drivers.tune.lanes import Lane, LaneGroup

config = pjp.PPOConfig(
    env_name="CartPole-v1", num_envs=4, num_steps=16, total_timesteps=4 * 16 * 6,
    hidden_sizes=(16,), update_epochs=1, num_minibatches=2,
)
group = LaneGroup(config, 4, 3, "episode_return")
assert group.mesh.devices.size == int(sys.argv[1]), group.mesh
group.place(
    {i: Lane(None, config.replace(learning_rate=1e-3 * (i + 1)), seed=i) for i in range(4)}
)
group.run_segment()
metrics = group.run_segment()
leaves = [
    jax.random.key_data(x) if jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key) else x
    for x in jax.tree.leaves(group.runner)
]
np.savez(sys.argv[2], *[np.asarray(x) for x in leaves], **{"m_" + k: v for k, v in metrics.items()})
"""


def _lanes(devices: int, path) -> dict[str, np.ndarray]:
    env = {k: v for k, v in os.environ.items() if k not in ("JAX_NUM_CPU_DEVICES", "XLA_FLAGS")}
    proc = subprocess.run(
        [sys.executable, "-c", LANES, str(devices), str(path)],
        capture_output=True,
        text=True,
        env=env,
        timeout=240,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    with np.load(path) as data:
        return {k: data[k] for k in data.files}


def test_lanes_on_two_devices_train_bitwise_what_one_device_trains(tmp_path):
    one = _lanes(1, tmp_path / "one.npz")
    two = _lanes(2, tmp_path / "two.npz")
    assert one.keys() == two.keys() and len(one) > 10
    different = [k for k in one if not np.array_equal(one[k], two[k])]
    assert different == []
    # the lanes trained apart: their learning rates gave them different losses
    assert len(set(np.round(one["m_v_loss"][:, -1], 4))) == 4
