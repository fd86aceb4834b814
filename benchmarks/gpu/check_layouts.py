"""GPU-only checks, run on a GPU machine (CI has none; on a machine without a
GPU this exits 2 saying so, it never passes there):

* `loop_layout: auto` compiles the "unrolled" layout on the GPU;
* 20 updates of CartPole with "unrolled" follow "compact" on the same GPU to rounding, with
  full float32 matmuls (`jax.default_matmul_precision("highest")`: TF32 would differ by
  more than the layouts do).

    python -m benchmarks.gpu.check_layouts        # with purejaxppo importable
"""

from __future__ import annotations

import sys


def main() -> int:
    import jax
    import numpy as np

    import purejaxppo as pjp
    from purejaxppo.loops import loop_plan

    try:
        gpus = jax.devices("gpu")
    except RuntimeError:
        gpus = []
    if not gpus:
        print("check_layouts: needs a GPU (jax.devices('gpu') is empty): nothing checked")
        return 2
    assert loop_plan("auto").layout == "unrolled", loop_plan("auto")
    returns = {}
    with jax.default_matmul_precision("highest"):
        for layout in ("compact", "unrolled"):
            config = pjp.PPOConfig(total_timesteps=4 * 128 * 20, loop_layout=layout)
            out = jax.jit(pjp.make_train(config))(jax.random.key(0))
            returns[layout] = np.asarray(out.metrics["episode_return"])
    np.testing.assert_allclose(returns["unrolled"], returns["compact"], rtol=1e-4)
    print(f"check_layouts: ok on {gpus[0].device_kind}: unrolled follows compact for 20 updates")
    return 0


if __name__ == "__main__":
    sys.exit(main())
