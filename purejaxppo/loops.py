"""How the update's loops are laid out for the platform: `PPOConfig.loop_layout`.

The math of an update is fixed (`rollout`, `gae`, `update`); how its loops compile is not.
On a GPU every iteration of a `lax.scan` / `while` costs a round trip to the host (the
loop condition is read back to decide whether to launch the next iteration) and every
`lax.cond` one more, so an update of 128 rollout steps, a 128-step GAE scan and 4 x 4
minibatch steps with a `cond` per epoch pays ~280 of them however small the batch
(`benchmarks/profile_update.py --ops`, `docs/guides/gpu-design.md`). On a CPU the same loops cost
next to nothing and the fewest operations win.

Two layouts:

* "compact" (CPU default): one scan step per env step, GAE as a T-step backward scan,
  the epochs as a scan of `lax.cond`-guarded epochs (an early-stopped epoch is skipped)
  of minibatch scans. The golden CPU tests pin its numbers bitwise.
* "unrolled" (GPU / TPU default): the rollout scan unrolled `ROLLOUT_UNROLL` steps per
  iteration, GAE as a parallel prefix scan (`lax.associative_scan`, log2 T dependent
  steps, no loop; float32 sums in another order, so advantages differ from "compact" by
  rounding only), and the `update_epochs x num_minibatches` Adam steps as one flat scan
  without a `cond`: after a `target_kl` early stop the remaining steps are computed and
  discarded (`jnp.where`), so the result equals "compact"'s up to GAE's rounding.

"auto" (default) picks "compact" on CPU and "unrolled" elsewhere, by JAX's default backend
when the program is built.

"unrolled" takes the rollout's values from one critic pass after the rollout scan
(`rollout.make_rollout`'s `batched_values`) where the critic shares nothing with the actor
(`rollout.critic_apart`: feed-forward, separate towers), so the scan steps only the actor:
per update the critic's weights are read once instead of once per env step, and the
unrolled scan body loses the critic's matmuls. The values are V(obs_t) as before, rounded
by one matmul of T*R rows instead of T of R rows. "compact" keeps them in the scan: on a
2-core CPU the batched pass measured no faster (docs/benchmarks.md, "Values after the
rollout"), and the CPU's runs stay bitwise those of before.
"""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["LAYOUTS", "LoopPlan", "loop_plan"]

#: `PPOConfig.loop_layout` values.
LAYOUTS = ("auto", "compact", "unrolled")

#: Rollout steps per scan iteration of the "unrolled" layout (H100 measurements:
#: docs/guides/gpu-design.md).
ROLLOUT_UNROLL = 8
#: Minibatch steps per scan iteration of the "unrolled" layout.
EPOCH_UNROLL = 2
#: The rollout's values from one critic pass after its scan, per layout.
COMPACT_BATCHED_VALUES = False
UNROLLED_BATCHED_VALUES = True


class LoopPlan(NamedTuple):
    """The loop layout of one compiled update (see the module docstring)."""

    layout: str  # "compact" or "unrolled"
    rollout_unroll: int  # env steps per iteration of the rollout scan
    gae: str  # "scan" (T-step backward scan) or "associative" (prefix scan)
    epochs: str  # "nested" (cond-guarded epochs of minibatch scans) or "flat"
    epoch_unroll: int  # minibatch steps per iteration of the flat scan
    # the rollout's values from one critic pass after its scan (`rollout.make_rollout`;
    # taken where `rollout.critic_apart`)
    batched_values: bool = False


def loop_plan(layout: str = "auto", backend: str | None = None) -> LoopPlan:
    """The `LoopPlan` of `layout` ("auto": by `backend`, default `jax.default_backend()`).

    Raises:
      ValueError: `layout` not in `LAYOUTS`.
    """
    if layout not in LAYOUTS:
        raise ValueError(f"loop_layout={layout!r}: must be one of {LAYOUTS}")
    if layout == "auto":
        if backend is None:
            import jax

            backend = jax.default_backend()
        layout = "compact" if backend == "cpu" else "unrolled"
    if layout == "compact":
        return LoopPlan("compact", 1, "scan", "nested", 1, COMPACT_BATCHED_VALUES)
    return LoopPlan(
        "unrolled", ROLLOUT_UNROLL, "associative", "flat", EPOCH_UNROLL, UNROLLED_BATCHED_VALUES
    )
