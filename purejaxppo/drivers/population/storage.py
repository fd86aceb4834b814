"""PBT checkpoints: the whole population, saved and restored with orbax (atomic)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import jax
import numpy as np

from purejaxppo import parallel
from purejaxppo.checkpoint import make_manager
from purejaxppo.drivers.population.program import PopulationState

#: Population checkpoints kept: the newest, and the one before it in case the newest is
#: damaged (`load_population` falls back to it).
KEEP = 2


def saveable(state: PopulationState) -> dict[str, Any]:
    runner, hparams = parallel.to_host(
        (state.runner.replace(key=jax.random.key_data(state.runner.key)), state.hparams)
    )
    return {
        "runner": runner,
        "hparams": hparams,
        "key": np.asarray(jax.random.key_data(state.key)),
    }


def save_population(
    directory: str | Path,
    state: PopulationState,
    generation: int,
    history: dict[str, np.ndarray],
    meta: dict[str, Any],
) -> None:
    """Saves the whole population after `generation` generations (orbax, atomic: a crash
    during the write leaves the previous checkpoint the newest complete one)."""
    import orbax.checkpoint as ocp

    arrays = saveable(state)
    if jax.process_index() != 0:
        return
    with make_manager(directory, keep=KEEP, writer=True) as manager:
        if generation in manager.all_steps():  # a resumed run that had saved it already
            return
        manager.save(
            generation,
            args=ocp.args.Composite(
                state=ocp.args.StandardSave(arrays),
                history=ocp.args.StandardSave(history),
                meta=ocp.args.JsonSave({**meta, "generation": generation}),
            ),
            force=True,
        )
        manager.wait_until_finished()


def load_population(directory: str | Path, abstract: dict[str, Any]) -> tuple:
    """(generation, state dict of host arrays, history, meta) of the newest checkpoint.

    Raises:
      ValueError: no complete checkpoint under `directory`.
    """
    import orbax.checkpoint as ocp

    directory = Path(directory)
    if not directory.is_dir():
        raise ValueError(f"resume: no population checkpoint under {directory}")
    with make_manager(directory) as manager:  # a reader: deletes nothing
        steps = sorted(manager.all_steps(), reverse=True)
        if not steps:
            raise ValueError(
                f"resume: no complete population checkpoint under {directory}; rerun "
                "without --resume, or with --overwrite"
            )
        args = ocp.args.Composite(
            state=ocp.args.StandardRestore(abstract),
            history=ocp.args.StandardRestore(),
            meta=ocp.args.JsonRestore(),
        )
        for index, step in enumerate(steps):
            try:
                restored = manager.restore(step, args=args)
            except Exception as err:  # orbax raises several types for unreadable files
                if index + 1 == len(steps):
                    raise ValueError(
                        f"resume: the population checkpoint {directory / str(step)} is "
                        f"damaged ({type(err).__name__}: {str(err)[:200]})"
                    ) from None
                print(
                    f"purejaxppo: warning: the population checkpoint {directory / str(step)} "
                    f"is damaged ({type(err).__name__}); resuming from generation "
                    f"{steps[index + 1]}",
                    file=sys.stderr,
                )
                continue
            return step, restored["state"], restored["history"], restored["meta"]
    raise AssertionError("unreachable")  # pragma: no cover
