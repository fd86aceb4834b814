"""`purejaxppo train --resume ROOT` of a `--num-seeds` run: the checkpoint every seed has.

`drivers.seeds` saves every seed's checkpoint at the same update steps (each a
single-run checkpoint in `ROOT/seed_<s>/checkpoints/last`). A resume continues all the
seeds as one program from the newest update step that every seed has a complete
checkpoint of (`common_steps`); a seed's newer checkpoints (a stop between two seeds'
saves) are set aside under `checkpoints/set_aside/` (nothing is deleted), so the resumed
run saves those steps again. The seeds' states are stacked into the runs' state `[R]`
(the padding runs repeat the last seed, as at the start), so the resumed run computes
bitwise what the uninterrupted one computes on CPU (tests/test_seeds_resume.py).
"""

from __future__ import annotations

import sys
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

import jax
import numpy as np
from jax.sharding import PartitionSpec as P

from purejaxppo import parallel
from purejaxppo.checkpoint import list_checkpoints, load_checkpoint
from purejaxppo.config import PPOConfig
from purejaxppo.drivers import warm
from purejaxppo.drivers.seed_checks import read_seeds_root
from purejaxppo.drivers.segments import RESUME_KEY_STREAM

__all__ = [
    "FRESH_EPISODES",
    "ResumeSeeds",
    "Resumed",
    "check_resumable",
    "common_steps",
    "fresh_envs",
    "load_seeds",
    "to_runner",
]

#: The note of a resume whose envs live on the host (`fresh_envs`); `{}`: the env id.
FRESH_EPISODES = (
    "resume: {} keeps its episodes on the host, outside the checkpoints: the envs start "
    "fresh episodes (params, optimizer state and statistics continue from the checkpoints)"
)


class Resumed(NamedTuple):
    """What `load_seeds` returns.

    Attributes:
      step: the update step every seed continues from.
      host: the runs' `RunnerState`, numpy leaves `[R, ...]` (seed k in run k; the
        padding runs repeat the last seed), its key as uint32 key data `[R, 2]`.
      history: metric name -> float `[S, step]`, every seed's metrics so far (NaN for a
        metric its checkpoint has no history of).
    """

    step: int
    host: Any
    history: dict[str, np.ndarray]


class ResumeSeeds:
    """The resume of the seeds driver's run (`drivers.seeds._SeedsRun`, a mixin as
    rejax's `OnPolicyMixin`): it sets the run's state from the checkpoints. The run
    provides `config`, `fns`, `seeds`, `mesh`, `run_dir`, `seed_dirs`, `seed_configs`,
    `num_seeds`, `num_devices`, `num_runs`, `names`, `saved_step`, `init_program()` and
    `record(ensure)`."""

    def resume_hint(self) -> str | None:
        """`purejaxppo train --resume <run_dir>`, or None while a seed has no checkpoint
        (`--resume` would have nothing to continue)."""
        return f"purejaxppo train --resume {self.run_dir}" if min(self.saved_step) else None

    def resume(self, verbose: bool) -> None:
        """Continues every seed from the newest update step that all of them have a
        checkpoint of (`load_seeds`); records the fingerprints where the run directory
        has none (a run started before they existed)."""
        resumed = load_seeds(
            self.run_dir,
            self.seed_dirs,
            self.seed_configs,
            self.num_runs,
            self.names,
            setup=self.fns.setup,
        )
        step = self.done = self.first_done = resumed.step
        self.saved_step = [step] * self.num_seeds
        self.history = [resumed.history]  # one "segment" of `step` updates
        self.host = resumed.host
        self.runner = to_runner(resumed.host, self.mesh)
        if self.fns.kind.episodes_restart_on_resume:  # the host's envs: fresh episodes
            fresh = fresh_envs(self.init_program(), self.seeds, self.num_runs, self.mesh, step)
            self.runner = self.runner.replace(env=fresh)
            print(FRESH_EPISODES.format(self.config.env_name), file=sys.stderr)
        self.record(ensure=True)
        if verbose:
            seeds = self.seeds
            print(
                f"resumed {self.num_seeds} seeds ({seeds[0]}..{seeds[-1]}) from update "
                f"{step} (step {step * self.config.batch_size}) in {self.run_dir}, in one "
                f"program on {self.num_devices} device(s)",
                file=sys.stderr,
            )


def check_resumable(run_dir: Any, overwrite: bool, devices: Any) -> Any:
    """Refuses a resume of anything but a `--num-seeds` run directory (and together with
    `overwrite`); returns the devices to use: `devices`, or for None the run's own count
    (its `seeds.yaml`).

    Raises:
      ValueError: one line naming `run_dir`.
    """
    if overwrite:
        raise ValueError("resume=True and overwrite=True exclude each other")
    spec = None if run_dir is None else read_seeds_root(run_dir)
    if spec is None:
        raise ValueError(
            f"resume: {run_dir} is not a purejaxppo train --num-seeds run directory (no seeds.yaml)"
        )
    return spec["num_devices"] if devices is None else devices


def common_steps(root: Path, seed_dirs: Sequence[Path]) -> list[int]:
    """The update steps that every seed directory has a complete "last" checkpoint of,
    newest first.

    Raises:
      ValueError: one line naming `root`: a seed without any complete checkpoint
        (nothing to resume), or seeds without a step in common (naming each one's).
    """
    kept = {seed_dir.name: list_checkpoints(seed_dir) for seed_dir in seed_dirs}
    empty = [name for name, steps in kept.items() if not steps]
    if empty:
        raise ValueError(
            f"nothing to resume in {root}: no complete checkpoint in {', '.join(empty)} "
            "(the run stopped before its first save); start it again with --overwrite"
        )
    common = set.intersection(*(set(steps) for steps in kept.values()))
    if not common:
        each = "; ".join(f"{name}: {steps}" for name, steps in kept.items())
        raise ValueError(
            f"--resume {root}: its seeds have no checkpoint of the same update step ({each}), "
            "so they cannot continue as one program; resume a copy of one seed's directory "
            "on its own, or start again with --overwrite"
        )
    return sorted(common, reverse=True)


def load_seeds(
    root: Path,
    seed_dirs: Sequence[Path],
    seed_configs: Sequence[PPOConfig],
    num_runs: int,
    names: Sequence[str],
    *,
    setup: Any = None,
) -> Resumed:
    """Loads every seed's checkpoint of the newest common step (`common_steps`); where one
    of them does not read back, the next older common step, with a `UserWarning`.

    Args:
      root: the `--num-seeds` run directory.
      seed_dirs, seed_configs: each seed's directory and config, in run order `[S]`.
      num_runs: R >= S, the runs of the program (the seeds padded to the device count).
      names: the metric names of the history.
      setup: the run's resolved setup (`TrainFns.setup`): every checkpoint is restored
        against it, not against an env and networks resolved again per seed.

    Raises:
      ValueError: `common_steps`' errors; a checkpoint of another config (naming the
        fields, `checkpoint.load_checkpoint`); no common step that reads back for every
        seed (the newest one's error).
    """
    steps = common_steps(root, seed_dirs)
    first_error = None
    for step in steps:
        try:
            checkpoints = [
                load_checkpoint(seed_dir, seed_config, setup, step=step)
                for seed_dir, seed_config in zip(seed_dirs, seed_configs, strict=True)
            ]
        except ValueError as err:  # another config fails at every step: raised below
            first_error = first_error or err
            continue
        if step != steps[0]:
            warnings.warn(
                f"{root}: the checkpoints of update {steps[0]} do not all read back "
                f"({first_error}); resuming from update {step}",
                stacklevel=2,
            )
        for seed_dir in seed_dirs:
            _set_aside_newer(seed_dir, step)
        history = _history(checkpoints, names)
        return Resumed(step=step, host=_stack(checkpoints, num_runs), history=history)
    raise first_error


def _stack(checkpoints: Sequence[Any], num_runs: int) -> Any:
    """The seeds' runner states as one `[R, ...]` numpy tree (key data for the key)."""
    states = [
        jax.device_get(c.runner_state.replace(key=jax.random.key_data(c.runner_state.key)))
        for c in checkpoints
    ]
    pick = np.minimum(np.arange(num_runs), len(states) - 1)
    return jax.tree.map(lambda *leaves: np.stack([np.asarray(x) for x in leaves])[pick], *states)


def _history(checkpoints: Sequence[Any], names: Sequence[str]) -> dict[str, np.ndarray]:
    step = checkpoints[0].update_step
    missing = sorted({n for c in checkpoints for n in names if n not in c.metrics})
    if missing:
        print(f"resume: the checkpoints have no history of {missing} (NaN)", file=sys.stderr)
    return {
        name: np.stack(
            [c.metrics.get(name, np.full(step, np.nan, np.float32)) for c in checkpoints]
        )
        for name in names
    }


def _set_aside_newer(seed_dir: Path, step: int) -> None:
    """Moves `seed_dir`'s "last" checkpoints newer than `step` (saved before the other
    seeds saved theirs) to `checkpoints/set_aside/last-<step>`; nothing is deleted."""
    last = seed_dir / "checkpoints" / "last"
    for entry in sorted(last.iterdir()):
        if entry.name.isdigit() and int(entry.name) > step:
            target = seed_dir / "checkpoints" / "set_aside" / f"last-{entry.name}"
            target.parent.mkdir(parents=True, exist_ok=True)
            suffix = 1
            while target.exists():
                target = target.with_name(f"last-{entry.name}-{suffix}")
                suffix += 1
            entry.rename(target)
            print(
                f"resume: set aside {entry} (newer than update {step}, the newest every "
                f"seed has) as {target}",
                file=sys.stderr,
            )


def to_runner(host: Any, mesh: Any) -> Any:
    """`Resumed.host` as the runs' state on `mesh` (split along `parallel.RUNS_AXIS`, the
    key typed again), laid out as the init program lays out a fresh one."""
    wrap = parallel.make_runs_program(
        lambda state: state.replace(key=jax.random.wrap_key_data(state.key)), mesh
    )
    return wrap(parallel.to_global(host, mesh, P(parallel.RUNS_AXIS)))


def fresh_envs(init_program: Any, seeds: Sequence[int], num_runs: int, mesh: Any, step: int) -> Any:
    """The env state `[R]` of fresh episodes for a resume whose envs live on the host
    (EnvPool, gymnasium: not in the checkpoints): seed s's from
    `fold_in(fold_in(key(s), RESUME_KEY_STREAM), step)`, as a resumed single run.
    `init_program`: the seeds driver's `(key data [R, 2], warm start) -> runner [R]`."""

    def fresh_key(seed: int) -> np.ndarray:
        key = jax.random.fold_in(jax.random.key(seed), RESUME_KEY_STREAM)
        return np.asarray(jax.random.key_data(jax.random.fold_in(key, step)))

    pick = np.minimum(np.arange(num_runs), len(seeds) - 1)
    key_data = np.stack([fresh_key(seed) for seed in seeds])[pick]
    key_data = parallel.to_global(key_data, mesh, P(parallel.RUNS_AXIS))
    return init_program(key_data, warm.replicate(None, mesh)).env
