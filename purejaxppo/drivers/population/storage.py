"""PBT checkpoints: the whole population, saved and restored with orbax (atomic).

One layout for both searches: `state` (the arrays that continue the run), `history` (the
records `[G, P, ...]` and metrics `[P, U]` so far) and `meta` (JSON: the arguments and the
generation). A traced search saves its `PopulationState` (`save_population`); a static
search saves every member's runner by slot (their shapes differ by group) with the
members' static choices in `meta` (`save_arrays`, restored with an `abstract` built from
that `meta`). A full disk is an `OSError` (ENOSPC) naming the directory, checked before
orbax writes and mapped from orbax's own report, so the command line exits 4 in one line.
"""

from __future__ import annotations

import errno
import sys
from collections.abc import Callable
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

#: `meta` key of the history arrays that orbax cannot store (zero size): name -> [shape,
#: dtype], rebuilt as zeros on restore (e.g. `record/values` `[G, P, 0]` of a search
#: over static fields only).
EMPTY = "empty_history"


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
    during the write leaves the previous checkpoint the newest complete one).

    Raises:
      OSError: ENOSPC, the disk is full (`save_arrays`).
    """
    save_arrays(directory, saveable(state), generation, history, meta)


def save_arrays(
    directory: str | Path,
    arrays: Any,
    generation: int,
    history: dict[str, np.ndarray],
    meta: dict[str, Any],
) -> None:
    """Saves `arrays` (a pytree of host arrays), `history` and `meta` as the checkpoint of
    `generation` (orbax, atomic; the newest `KEEP` stay). A generation saved already (a
    resumed run that had saved it) is kept as it is.

    Raises:
      OSError: ENOSPC when the disk has less than twice the checkpoint's size free
        (checked before orbax writes anything) or orbax's write fails for a full disk.
    """
    import orbax.checkpoint as ocp

    from purejaxppo.paths import check_free_space, is_disk_full

    if jax.process_index() != 0:
        return
    empty = {k: [list(v.shape), str(v.dtype)] for k, v in history.items() if v.size == 0}
    history = {k: v for k, v in history.items() if v.size}
    nbytes = sum(np.asarray(x).nbytes for x in jax.tree.leaves((arrays, history)))
    check_free_space(
        directory, nbytes, f"population checkpoint {Path(directory) / str(generation)}"
    )
    try:
        with make_manager(directory, keep=KEEP, writer=True) as manager:
            if generation in manager.all_steps():
                return
            manager.save(
                generation,
                args=ocp.args.Composite(
                    state=ocp.args.StandardSave(arrays),
                    history=ocp.args.StandardSave(history),
                    meta=ocp.args.JsonSave({**meta, EMPTY: empty, "generation": generation}),
                ),
                force=True,
            )
            manager.wait_until_finished()
    except Exception as err:  # orbax reports a full disk as a ValueError of its writers
        if is_disk_full(err) and not isinstance(err, OSError):
            raise OSError(errno.ENOSPC, "No space left on device", str(directory)) from err
        raise


def load_population(
    directory: str | Path, abstract: dict[str, Any] | Callable[[dict[str, Any]], Any]
) -> tuple:
    """(generation, state of host arrays, history, meta) of the newest checkpoint.

    `abstract`: the state's structure (arrays of its shapes and dtypes), or a function
    of the checkpoint's `meta` that gives it (read first).

    Raises:
      ValueError: no complete checkpoint under `directory`, or only damaged ones.
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
        for index, step in enumerate(steps):
            try:
                structure = abstract
                if callable(abstract):
                    meta_only = ocp.args.Composite(meta=ocp.args.JsonRestore())
                    structure = abstract(manager.restore(step, args=meta_only)["meta"])
                args = ocp.args.Composite(
                    state=ocp.args.StandardRestore(structure),
                    history=ocp.args.StandardRestore(),
                    meta=ocp.args.JsonRestore(),
                )
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
            meta = dict(restored["meta"])
            history = {k: np.asarray(v) for k, v in restored["history"].items()}
            for name, (shape, dtype) in meta.pop(EMPTY, {}).items():
                history[name] = np.zeros(shape, dtype)
            return step, restored["state"], history, meta
    raise AssertionError("unreachable")  # pragma: no cover


def resume_hint(checkpoint_dir: str | Path) -> str:
    """How to continue a stopped population from Python (the command line gives its own
    `purejaxppo pbt --resume OUT`)."""
    return (
        f"pbt(...) again with the same arguments, checkpoint_dir={str(checkpoint_dir)!r} and "
        "resume=True"
    )
