"""A warm start (`PPOConfig.init_from`) in the batched drivers (`--num-seeds`, `sweep`,
`pbt`): the source's params are loaded once and passed to the init program as an
ARGUMENT, replicated on every device (`P()`), not closed over as constants. Every run of
the batch starts from them; the compiled program does not depend on which source it was,
so another source of the same shapes reuses it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
from jax.sharding import PartitionSpec as P

from purejaxppo import parallel
from purejaxppo.checkpoint import load_init_params
from purejaxppo.config import PPOConfig

__all__ = [
    "check_warm_start",
    "init_runs",
    "load_warm_start",
    "program_and_start",
    "program_config",
    "replicate",
    "runs_specs",
]


def load_warm_start(config: PPOConfig) -> Any:
    """The warm start's `init_params` (a params tree, or a `TrainState` when
    `config.init_parts` has "optimizer"), read on the host from `config.init_from`'s
    checkpoint `config.init_step` (newest when None); None without `init_from`.

    Raises:
      ValueError: `init_from` not a run directory, no complete checkpoint, a step that
        was not kept (`checkpoint.load_init_params`).
    """
    if config.init_from is None:
        return None
    init_params, _ = load_init_params(config.init_from, config.init_parts, config.init_step)
    return init_params


def program_config(config: PPOConfig) -> PPOConfig:
    """`config` for building the programs: without `init_from` / `init_step`, so that
    `make_train_fns` neither loads nor bakes the source (it comes as an argument)."""
    return config.replace(init_from=None, init_step=None)


def program_and_start(config: PPOConfig, *, resume: bool = False) -> tuple[PPOConfig, Any]:
    """`(program_config(config), load_warm_start(config))`: the config a driver builds its
    programs from, and the warm start's parameters to give them (None without
    `init_from`, and None when `resume`: a resumed run continues from its own
    checkpoint, not from its warm start's source).

    Raises:
      ValueError: from `load_warm_start` (a bad `init_from` / `init_step`).
    """
    program = program_config(config)
    return program, None if resume else load_warm_start(config)


def check_warm_start(fns: Any, init_params: Any) -> None:
    """Raises the `ValueError` of `warm_start.check_init` (the first layer whose shape
    differs) when `init_params` does not fit `fns`' network / env; traces `init` only
    (`jax.eval_shape`), compiles nothing."""
    if init_params is not None:
        jax.eval_shape(fns.init, jax.random.key(0), init_params)


def replicate(init_params: Any, mesh: Any) -> Any:
    """`init_params` as global arrays replicated on every device of `mesh` (None stays
    None: an empty pytree)."""
    return parallel.to_global(init_params, mesh, P())


def init_runs(init: Callable, run: Callable, *, vmap_init: bool = False) -> Callable:
    """`(key_data [R, 2], init_params, *args [R]) -> run(init(key, init_params), *args)`:
    `parallel.batch_runs` with the warm start as a shared argument (`lax.map` over the
    inits, or `vmap` with `vmap_init`, e.g. for "envpool:" ids; `vmap` over `run`). Give
    it `in_specs=runs_specs(n)` in `make_runs_program`."""

    def batched(key_data: jax.Array, init_params: Any, *args: Any) -> Any:
        start = parallel.batch_runs(lambda key: init(key, init_params), run, vmap_init=vmap_init)
        return start(key_data, *args)

    return batched


def runs_specs(num_run_args: int) -> tuple:
    """`in_specs` of an `init_runs` program: key data split along the runs, the warm
    start replicated, then `num_run_args` arguments split along the runs."""
    return (P(parallel.RUNS_AXIS), P(), *[P(parallel.RUNS_AXIS)] * num_run_args)
