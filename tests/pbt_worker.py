"""Worker for tests/test_pbt.py: PBT on 1 and on 4 fake CPU devices, in its own process.

    python tests/pbt_worker.py OUT.npz

Saves the lineage (parents, replaced, fitness) and the best member's params of the same
PBT run (8 members, 4 generations) on 1 device and on 4 devices (2 members each), and the
error for a population that does not split over the 4 devices.
Not a test module (pytest collects only test_*.py).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

CONFIG = {"num_envs": 4, "num_steps": 16, "total_timesteps": 4 * 16 * 12}
SEARCH = {"learning_rate": ("log_uniform", 1e-4, 1e-2), "ent_coef": ("uniform", 0.0, 0.05)}


def main(out: Path) -> None:
    import jax

    jax.config.update("jax_num_cpu_devices", 4)
    import purejaxppo as pjp

    assert jax.device_count() == 4, jax.devices()
    config = pjp.PPOConfig(**CONFIG)
    results: dict[str, np.ndarray] = {}
    for devices in (1, 4):
        result = pjp.pbt(
            config, population=8, ready_every=3, search=SEARCH, seed=1, devices=devices
        )
        lineage = result.lineage
        shape = (-1, 8)
        results[f"parents_{devices}"] = lineage["parent"].to_numpy().reshape(shape)
        results[f"replaced_{devices}"] = lineage["replaced"].to_numpy().reshape(shape)
        results[f"fitness_{devices}"] = lineage["fitness"].to_numpy().reshape(shape)
        results[f"params_{devices}"] = np.concatenate(
            [np.ravel(x) for x in jax.tree.leaves(result.best_runner_state.train_state.params)]
        )
    try:
        pjp.pbt(config, population=6, ready_every=3, search=SEARCH, devices=4)
        results["error"] = np.array("no error")
    except ValueError as err:
        results["error"] = np.array(str(err))
    np.savez(out, **results)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
