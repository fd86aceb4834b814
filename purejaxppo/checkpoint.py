"""Checkpoints of the full training state with orbax (atomic writes, exact resume).

A checkpoint holds everything `TrainFns.run` needs to continue a run bit for bit: the
`RunnerState` (params, optimizer state with Adam's count, env states and last
observations, episode counters, PRNG key, update counter), the per-update metrics so
far, and the resolved config. Orbax writes each checkpoint into a temporary directory and
renames it when complete, so a process killed at any moment (also during a save) leaves
the previous complete checkpoint loadable.

Layout: `<run_dir>/checkpoints/{last,best}/<update>/{state,history,meta}`; of each kind
the newest `keep` complete checkpoints are kept (`PPOConfig.keep_checkpoints`, default 3;
"best": best evaluation return so far). `load_checkpoint` restores the newest one that
reads back; when that is not the newest on disk (a damaged file), it warns naming it.
Readers (`load_checkpoint`, `list_checkpoints`, ...) never change the directory, so they
are safe beside a training run that is writing it; only `save_checkpoint` cleans up.
"""

from __future__ import annotations

import contextlib
import time
import warnings
from pathlib import Path
from typing import Any, NamedTuple

import jax
import numpy as np

from purejaxppo.checkpoint_noise import quiet_closed_loop
from purejaxppo.config import DRIVER_FIELDS, PPOConfig
from purejaxppo.types import RunnerState


class Checkpoint(NamedTuple):
    """A restored checkpoint."""

    runner_state: RunnerState
    metrics: dict[str, np.ndarray]  # per-update metrics so far, `[update_step]` each
    config: PPOConfig
    update_step: int
    eval_history: dict[str, list]  # split -> [[update, mean return], ...] so far


@contextlib.contextmanager
def make_manager(directory: str | Path, keep: int | None = None, *, writer: bool = False) -> Any:
    """The orbax `CheckpointManager` of every purejaxppo checkpoint (runs and PBT
    populations): synchronous writes. A context manager: waits for orbax's background
    threads and closes the manager on exit.

    Only a writer (`writer=True`, the save paths) changes the directory: it keeps at most
    `keep` steps (None: all) and removes the `*.orbax-checkpoint-tmp` leftovers of an
    interrupted write. A reader (the default) deletes nothing: the temporary directory
    it sees may be the save in progress of a training run writing there at the same
    time, which a cleanup would kill. Every read path uses a reader.
    """
    import orbax.checkpoint as ocp

    options = ocp.CheckpointManagerOptions(
        max_to_keep=keep if writer else None,
        enable_async_checkpointing=False,
        cleanup_tmp_directories=writer,
    )
    # a failed read / write: one line, not ~150 lines of tracebacks (`checkpoint_noise`)
    with quiet_closed_loop():
        manager = _open_manager(ocp, Path(directory).resolve(), options)
        try:
            yield manager
        finally:
            # Its background threads (tmp-directory cleanup) finish here, not at interpreter
            # exit, where they print tracebacks ("cannot schedule new futures ...").
            # (`_maybe_await_cleanup_tmp_directory`: orbax's own wait, called before a save.)
            await_cleanup = getattr(manager, "_maybe_await_cleanup_tmp_directory", None)
            with contextlib.suppress(Exception):
                if await_cleanup is not None:
                    await_cleanup()
                manager.wait_until_finished()
            manager.close()


def _open_manager(ocp: Any, directory: Path, options: Any) -> Any:
    """`ocp.CheckpointManager(directory)`, opened again when a step vanishes while it
    opens: orbax lists the step directories, then reads each one's timestamp, and a
    training run writing `directory` may rotate a step away in between (orbax raises
    `FileNotFoundError` naming the step).

    Raises:
      ValueError: steps still vanish after `_VANISHED_RETRIES` tries, naming the last.
    """
    for _ in range(_VANISHED_RETRIES):
        try:
            return ocp.CheckpointManager(directory, options=options)
        except FileNotFoundError as err:
            gone = err.filename
            time.sleep(0.05)  # the rotating writer's removal finishes
    raise ValueError(
        f"checkpoint {gone} vanished while the steps of {directory} were listed, again after "
        f"{_VANISHED_RETRIES} tries (a training run writing there rotates them away: "
        "keep_checkpoints)"
    )


def _to_saveable(runner: RunnerState) -> RunnerState:
    # Typed PRNG keys are stored as their uint32 key data.
    return runner.replace(key=jax.random.key_data(runner.key))


KINDS = ("last", "best")


def _directory(run_dir: str | Path, kind: str) -> Path:
    if kind not in KINDS:
        raise ValueError(f"checkpoint kind={kind!r}: must be one of {KINDS}")
    return Path(run_dir) / "checkpoints" / kind


def save_checkpoint(
    run_dir: str | Path,
    runner_state: RunnerState,
    metrics: dict[str, np.ndarray],
    config: PPOConfig,
    eval_history: dict[str, list] | None = None,
    kind: str = "last",
    *,
    keep: int | None = None,
) -> Path:
    """Saves `runner_state` (one agent), the metrics so far and `config` under `run_dir`.

    The step is `runner_state.update_step`; `kind` is "last" (the newest state) or "best"
    (the best evaluation so far). Returns the checkpoint directory. The write is atomic:
    a crash during it leaves the previous checkpoint of that kind as the latest. Of each
    kind the newest `keep` checkpoints stay on disk (default `config.keep_checkpoints`).

    Raises:
      ValueError: if the parameters hold a NaN or Inf (a diverged run is never saved).
      OSError: ENOSPC when the disk has less than twice the checkpoint's size free
        (checked before orbax writes anything; `purejaxppo.paths.check_free_space`).
    """
    import orbax.checkpoint as ocp

    from purejaxppo.guards import check_finite_params
    from purejaxppo.paths import check_free_space

    step = int(runner_state.update_step)
    directory = _directory(run_dir, kind)
    check_finite_params(runner_state.train_state.params, f"save_checkpoint (update {step})")
    keep = config.keep_checkpoints if keep is None else keep
    state = jax.device_get(_to_saveable(runner_state))
    nbytes = sum(np.asarray(x).nbytes for x in jax.tree.leaves((state, metrics)))
    check_free_space(directory, nbytes, f"checkpoint {directory / str(step)}")
    with make_manager(directory, None if keep == "all" else keep, writer=True) as manager:
        manager.save(
            step,
            args=ocp.args.Composite(
                state=ocp.args.StandardSave(state),
                history=ocp.args.StandardSave(_history_item(metrics)),
                meta=ocp.args.JsonSave(
                    {
                        "format_version": FORMAT_VERSION,
                        "config": config.to_dict(),
                        "update_step": step,
                        "eval_history": eval_history or {},
                    }
                ),
            ),
            force=True,
        )
        manager.wait_until_finished()
    return directory / str(step)


#: The history item of a checkpoint without metrics (update 0): orbax refuses an empty
#: item and zero-size arrays, so it holds this one placeholder, dropped on load.
_NO_HISTORY = "_no_history"


def _history_item(metrics: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    return {k: np.asarray(v) for k, v in metrics.items()} or {_NO_HISTORY: np.zeros((1,))}


def latest_checkpoint_step(run_dir: str | Path, kind: str = "last") -> int | None:
    """Update step of the newest complete checkpoint of `kind` in `run_dir`, or None."""
    directory = _directory(run_dir, kind)
    if not directory.is_dir():
        return None
    with make_manager(directory) as manager:
        return manager.latest_step()


def list_checkpoints(run_dir: str | Path, kind: str = "last") -> list[int]:
    """The update steps of the complete checkpoints of `kind` kept in `run_dir`, oldest
    first (`[]` when there are none). With `keep_checkpoints: all` this is the run's
    checkpoint series; multiply by `config.batch_size` for env steps.

    Raises:
      ValueError: an unknown `kind`.
    """
    directory = _directory(run_dir, kind)
    if not directory.is_dir():
        return []
    with make_manager(directory) as manager:
        return sorted(int(step) for step in manager.all_steps())


def load_checkpoint(
    run_dir: str | Path,
    config: PPOConfig | None = None,
    env: Any = None,
    env_params: Any = None,
    kind: str = "last",
    *,
    networks: Any = None,
    step: int | None = None,
) -> Checkpoint:
    """Restores the newest complete checkpoint of `run_dir` (or the one of update `step`).

    Args:
      run_dir: a run directory written by `purejaxppo train`.
      config: the config the caller expects; default: the checkpoint's own. Fields that
        change the computation must match the saved ones (`log_freq`, `save_freq` and the
        `eval_*` fields may differ).
      env, env_params: optional environment object, as for `make_train`; or as `env` the
        run's resolved setup (`TrainFns.setup`), used as it is (`train_setup.make_init`).
      kind: "last" (default) or "best" (best evaluation return, when `eval_freq` > 0).
      networks: the run's `Networks` when it trained custom ones (`make_train(config,
        networks=...)`); default the config's built-in network.
      step: the update step of a kept checkpoint (`list_checkpoints`); None: the newest.

    When the newest checkpoint does not read back (damaged files, a meta file without
    `config`) but an older one does, the older one is returned with a `UserWarning`
    naming the damaged one.

    Raises:
      ValueError: no checkpoint in `run_dir`; a checkpoint of another format version
        (naming it); a config that differs from the saved one (naming the fields); or no checkpoint whose arrays match the network / env of
        the config (corrupt files, another network shape), naming what failed for the
        newest; a `step` that was not kept (naming the kept steps); a `step` whose
        directory vanished while it was read (a training run writing `run_dir` rotated
        it away), naming it. Without `step`, a checkpoint that vanishes so is no error:
        the steps are listed again and the newest complete one is restored.

    A reader: it never deletes anything under `run_dir` (`make_manager`), so loading
    while a training run writes there is safe.
    """
    directory = _directory(run_dir, kind)
    if not directory.is_dir():
        raise ValueError(_no_checkpoints(run_dir, directory))
    requested, vanished = step, None
    for _ in range(_VANISHED_RETRIES):  # a step rotated away under us: list them again
        with make_manager(directory) as manager:
            steps = sorted(manager.all_steps(), reverse=True)
            if not steps:
                raise ValueError(
                    f"nothing to resume: no complete checkpoint under {directory} (none "
                    "finished writing); rerun without --resume, or with --overwrite"
                )
            if requested is not None:
                if requested not in steps:
                    kept = ", ".join(str(s) for s in sorted(steps))
                    raise ValueError(
                        f"step {requested} was not kept in {directory}: the kept steps are "
                        f"{kept} (keep_checkpoints: all keeps every saved one)"
                    )
                try:
                    return _restore(
                        manager, directory, requested, config, env, env_params, networks
                    )
                except _Vanished as err:
                    raise ValueError(f"{err}: the kept steps were {sorted(steps)}") from None
                except _ConfigMismatch as err:
                    raise ValueError(str(err)) from None
            first_error = None
            for step in steps:
                try:
                    checkpoint = _restore(
                        manager, directory, step, config, env, env_params, networks
                    )
                except _Vanished as err:
                    vanished = err
                    break
                except _ConfigMismatch as err:
                    raise ValueError(str(err)) from None
                except ValueError as err:
                    first_error = first_error or err
                    continue
                if step != steps[0]:
                    warnings.warn(
                        f"checkpoint {directory / str(steps[0])} is damaged ({first_error}); "
                        f"using the previous one, {directory / str(step)}",
                        stacklevel=2,
                    )
                return checkpoint
            else:
                raise first_error
    raise ValueError(f"{vanished} (again after {_VANISHED_RETRIES} tries)")


def _no_checkpoints(run_dir: str | Path, directory: Path) -> str:
    """The error of a `run_dir` without the checkpoint directory `directory`."""
    if (Path(run_dir) / "seeds.yaml").is_file():  # `purejaxppo train --num-seeds N`
        found = [p.name for p in Path(run_dir).glob("seed_*") if p.name[5:].isdigit()]
        seeds = sorted(found, key=lambda name: int(name[5:]))
        return (
            f"{run_dir} holds several seeds (purejaxppo train --num-seeds), not one run: "
            f"read one of its seed directories ({', '.join(seeds[:4])}"
            f"{', ...' if len(seeds) > 4 else ''}); continue the run with purejaxppo train "
            f"--resume {run_dir}"
        )
    return f"no complete checkpoint under {directory}"


def load_init_params(
    run_dir: str | Path, parts: Any = ("params", "normalization"), step: int | None = None
) -> tuple[Any, int]:
    """`(init_params, step)` for a warm start from `run_dir` (`PPOConfig.init_from`):
    the params tree of its newest checkpoint (or of update `step`), or its `TrainState`
    when `parts` has "optimizer", restored with the source run's own config.

    Raises:
      ValueError: one line naming `run_dir` when it is not a run directory (no
        `config.yaml` and no `checkpoints/last`); no complete checkpoint; a `step` that
        was not kept (naming the kept ones).
    """
    path = Path(run_dir)
    if not (path / "config.yaml").is_file() and not (path / "checkpoints" / "last").is_dir():
        raise ValueError(
            f"init_from={str(run_dir)!r}: not a run directory (no config.yaml, no "
            "checkpoints/last): give a directory written by purejaxppo train"
        )
    checkpoint = load_checkpoint(path, step=step)
    state = jax.device_get(checkpoint.runner_state.train_state)
    return (state if "optimizer" in parts else state.params), checkpoint.update_step


class _ConfigMismatch(ValueError):
    """The checkpoint reads back but belongs to another config: no fallback."""


class _Vanished(ValueError):
    """The checkpoint's directory disappeared while it was read (a training run writing
    the same directory rotated it away, `keep_checkpoints`): list the steps again."""


#: Times `load_checkpoint` lists the steps again after one vanished while it was read.
_VANISHED_RETRIES = 3


#: Version of the checkpoint layout. 2: the `Networks` interface (explicit parameter
#: names, `EnvCarry.policy_state` / `reset`, per-group optimizer state). Checkpoints
#: without a version are version 1 (purejaxppo before the networks package).
FORMAT_VERSION = 2


#: Config fields that may differ between a checkpoint and the config resuming it.
RESUME_MAY_CHANGE = DRIVER_FIELDS


def _restore(manager, directory, step, config, env, env_params, networks) -> Checkpoint:
    import orbax.checkpoint as ocp

    from purejaxppo.train_setup import make_init

    where = directory / str(step)
    meta = _read_meta(manager, step, where)
    try:
        saved = PPOConfig.from_dict(meta["config"])
    except ValueError as err:
        raise ValueError(f"checkpoint {where}: its saved config is invalid: {err}") from None
    if config is None:
        config = saved
    given = config.to_dict()
    diff = {
        k: (v, given[k])
        for k, v in saved.to_dict().items()
        if k not in RESUME_MAY_CHANGE and given[k] != v
    }
    if diff:
        details = ", ".join(f"{k}: saved {a!r} vs given {b!r}" for k, (a, b) in diff.items())
        raise _ConfigMismatch(f"checkpoint {where} is from a different config ({details})")

    init = make_init(config, env, env_params, networks=networks)
    abstract = jax.eval_shape(lambda k: _to_saveable(init(k)), jax.random.key(0))
    try:
        restored = manager.restore(
            step,
            args=ocp.args.Composite(
                state=ocp.args.StandardRestore(abstract),
                history=ocp.args.StandardRestore(),
            ),
        )
    except Exception as err:
        _check_still_there(where)
        raise ValueError(
            f"checkpoint {where} does not match the network / env of "
            f"this config (hidden_sizes={list(config.hidden_sizes)}, "
            f"env_name={config.env_name!r}) or is corrupt (a run trained with custom "
            f"networks loads with networks=...; custom networks are not exportable): {err}"
        ) from None
    state = restored["state"]
    try:
        _check_shapes(abstract, state, where)
    except ValueError:
        _check_still_there(where)
        raise
    runner = state.replace(key=jax.random.wrap_key_data(np.asarray(state.key)))
    metrics = {k: np.asarray(v) for k, v in restored["history"].items() if k != _NO_HISTORY}
    return Checkpoint(
        runner_state=runner,
        metrics=metrics,
        config=config,
        update_step=step,
        eval_history=meta.get("eval_history", {}),
    )


def _read_meta(manager: Any, step: int, where: Path) -> dict:
    """The meta data of the checkpoint of `step` (at `where`), checked: a mapping with a
    'config' mapping, of a single run, in this `FORMAT_VERSION`.

    Raises:
      ValueError: unreadable or without a config; `_ConfigMismatch` for a PBT
        population checkpoint or another format version.
    """
    import orbax.checkpoint as ocp

    try:
        meta = manager.restore(step, args=ocp.args.Composite(meta=ocp.args.JsonRestore()))["meta"]
    except Exception as err:  # orbax raises several types for unreadable files
        _check_still_there(where)
        raise ValueError(f"checkpoint {where} is unreadable: {err}") from None
    if not isinstance(meta, dict) or not isinstance(meta.get("config"), dict):
        _check_still_there(where)  # a writer removing it mid-read: not a bad config
        raise ValueError(f"checkpoint {where}: its meta data holds no 'config' mapping")
    if "generation" in meta and "search" in meta:  # storage.save_population's meta
        raise _ConfigMismatch(
            f"checkpoint {where} is a PBT population checkpoint (purejaxppo pbt, generation "
            f"{meta['generation']}), not a single run's: continue it with `purejaxppo pbt "
            "--resume`, or use the run in the pbt directory's best/"
        )
    version = meta.get("format_version", 1)
    if version != FORMAT_VERSION:
        raise _ConfigMismatch(
            f"checkpoint {where} has format version {version}; this purejaxppo reads version "
            f"{FORMAT_VERSION} (parameter names and the runner state changed in version 2: "
            "retrain, or load it with the purejaxppo release that wrote it)"
        )
    return meta


def _check_still_there(where: Path, wait: float = 0.3) -> None:
    """Raises `_Vanished` when the step directory `where` is gone, or goes within `wait`
    seconds, or lost orbax's commit marker (a reading error then means a writer is
    rotating it away, not a damaged checkpoint or another config). Readers racing a
    rotating writer so always get the one `_Vanished` message, and `load_checkpoint`
    lists the steps again."""
    deadline = time.monotonic() + wait
    while True:
        gone = not where.is_dir() or not any(
            (where / marker).exists() for marker in ("commit_success.txt", "_CHECKPOINT_METADATA")
        )
        if gone or time.monotonic() >= deadline:
            break
        time.sleep(0.05)
    if gone:
        raise _Vanished(
            f"checkpoint {where} vanished while it was read (a training run writing "
            f"{where.parent} rotated it away: keep_checkpoints)"
        ) from None


def _check_shapes(abstract: Any, restored: Any, where: Path) -> None:
    """Orbax may restore arrays of another shape without complaint: compare explicitly."""
    paths_a = jax.tree_util.tree_flatten_with_path(abstract)[0]
    leaves_r = jax.tree.leaves(restored)
    for (path, want), got in zip(paths_a, leaves_r, strict=True):
        if tuple(want.shape) != tuple(np.shape(got)):
            name = jax.tree_util.keystr(path)
            raise ValueError(
                f"checkpoint {where}: {name} has shape {tuple(np.shape(got))}, "
                f"this config's network/env needs {tuple(want.shape)}"
            )
