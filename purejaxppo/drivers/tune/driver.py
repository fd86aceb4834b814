"""`tune`: Bayesian hyperparameter search with Optuna, a batch of trials per program.

Optuna drives nothing here: the driver asks the study for B trials (`study.ask` with the
search space's distributions), trains them as the B lanes of one compiled program
(`lanes.LaneGroup`: `jit(vmap(run))` over segments of updates), and tells each trial its
objective when its lane has trained `num_updates` updates of its own. Trials that differ
in a static field (hidden_sizes, num_envs, ...) go to the program of their combination:
one compile per combination.

Pruning keeps the batch full: after every segment each lane reports its intermediate
value (`trial.report`, step = its env steps) and asks `trial.should_prune()`; a pruned
lane is told PRUNED and, at the same boundary, takes a NEW trial from the sampler (fresh
parameters and optimizer state in that lane only), while the other lanes go on. RL Zoo
prunes the same way but trains each trial as its own model: a pruned trial frees a
thread, not a lane of a running program.

The study lives in its storage (`study`): several workers share it, a killed worker's
running trials are failed and re-queued, and nothing finished is lost.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from purejaxppo.config import DRIVER_FIELDS, PPOConfig
from purejaxppo.drivers import warm
from purejaxppo.drivers.segments import progress_bar
from purejaxppo.drivers.tune import storage as storages
from purejaxppo.drivers.tune import study as studies
from purejaxppo.drivers.tune.enqueue import base_params, parse_enqueued
from purejaxppo.drivers.tune.lanes import check_lanes_memory, segment_updates
from purejaxppo.drivers.tune.objective import Objective, parse_objective
from purejaxppo.drivers.tune.options import TuneOptions
from purejaxppo.drivers.tune.outputs import best_config, write_outputs
from purejaxppo.drivers.tune.scheduler import Tuner
from purejaxppo.drivers.tune.space import SearchSpace, import_optuna, parse_space
from purejaxppo.drivers.tune.tasks import Task, parse_task
from purejaxppo.signals import TrainingInterrupted, hinted, stop_requests

#: The first line of a stop request.
STOPPING = (
    "stopping after the running segment (its finished trials are told, the running ones re-queued)"
)
#: The first line of a signal while the outputs are written.
WRITING = "writing trials.csv, best.yaml and the figures first (each file whole)"


class TuneSetup(NamedTuple):
    """A checked `tune` request (`check_tune`)."""

    space: SearchSpace
    objective: Objective
    url: str | None  # the storage URL (None: in memory)
    request: dict[str, Any]  # what the study records (`study.ATTRIBUTE`)
    options: TuneOptions
    enqueued: list[dict[str, Any]]  # a new study's first trials (`enqueue`)
    tasks: tuple[Task, ...]  # () : the base config's env alone


class TuneResult(NamedTuple):
    """What `tune` returns.

    Attributes:
      study: the `optuna.Study` (its trials, `best_trial`, `best_value`).
      best_config: the base config with the best trial's parameters and `seed` (what
        `best.yaml` holds); None while no trial completed.
      trials: `study.trials_dataframe()` (one row per trial).
      written: the files written in `out`.
    """

    study: Any
    best_config: PPOConfig | None
    trials: Any
    written: list[Path]


def make_options(options: TuneOptions | None, fields: Mapping[str, Any]) -> TuneOptions:
    """`options` (default `TuneOptions()`) with `fields` replaced: `tune(config, search,
    trials=8)` and `tune(config, search, TuneOptions(trials=8))` are the same call.

    Raises:
      TypeError: a field `TuneOptions` does not have.
    """
    base = TuneOptions() if options is None else options
    unknown = sorted(set(fields) - {f.name for f in dataclasses.fields(TuneOptions)})
    if unknown:
        raise TypeError(f"tune: unknown option(s) {', '.join(unknown)} (see TuneOptions)")
    return dataclasses.replace(base, **fields)


def check_tune(
    config: PPOConfig,
    search: Mapping[str, Sequence[Any]] | None,
    options: TuneOptions | None = None,
    *,
    resume: bool = False,
    out: str | Path | None = None,
    overwrite: bool = False,
    **fields: Any,
) -> TuneSetup:
    """Every refusal of `tune`, before anything is created or compiled (see `tune`).

    `overwrite`: the caller empties `out` before tuning (`purejaxppo tune --overwrite`),
    so the study of its default storage (`out`/study.db) is not checked.
    """
    import_optuna()
    o = make_options(options, fields)
    o.check()
    space = parse_space(search, config)
    goal = parse_objective(o.objective, o.direction)
    enqueued = parse_enqueued(o.enqueue, space)
    base = base_params(config, space) if o.enqueue_base else {}
    enqueued = [base, *enqueued] if base else enqueued
    studies.make_sampler(o.sampler, 0, o.n_startup_trials)
    studies.make_pruner(o.pruner, 1, 1)
    from purejaxppo import kinds

    tasks = tuple(parse_task(item) for item in o.task)
    for env_id in [config.env_name] if not tasks else [t.env_id for t in tasks]:
        kind = kinds.check("tune", env_id, multi_agent=config.multi_agent)
        if kind.host_calls:  # one trial at a time (`lanes`)
            o = dataclasses.replace(o, batch=1)
    for env_id in [config.env_name] if not tasks else [t.env_id for t in tasks]:
        task_config = config if env_id == config.env_name else config.replace(env_name=env_id)
        # lanes beyond the trials never run
        check_lanes_memory(task_config, min(o.batch, o.trials) * o.seeds_per_trial)
    storage = o.storage
    url = storage if storage is not None else None if out is None else storages.default_url(out)
    objective = {"metric": goal.metric, "window": goal.window, "direction": o.direction}
    if goal.evaluates:
        objective["episodes"] = goal.episodes
    if tasks:
        objective["tasks"] = [t.text for t in tasks]
    if o.seeds_per_trial > 1:  # (a study of one seed per trial records neither)
        objective.update(seeds_per_trial=o.seeds_per_trial, aggregate=o.aggregate)
    request = json.loads(
        json.dumps(
            {
                "search": space.to_lists(),
                "objective": objective,
                "config": {
                    k: v
                    for k, v in config.to_dict().items()
                    if k not in DRIVER_FIELDS and k != "seed"
                },
                "seed": config.seed,
            },
            default=repr,
        )
    )
    if storage is not None:  # the default, in OUT, is made with OUT
        storages.check_storage(storage)
    shown = storages.shown_url(url) if url is not None else None
    if out is not None and storages.in_memory(url):
        raise ValueError(
            f"storage {shown!r} is in memory: its study would end with this process and "
            f"could not be resumed from {out}; drop --storage (default {out}/study.db) or "
            "name a database file or server"
        )
    if url is not None and not (overwrite and storage is None):
        where = f"study {o.study_name!r} in {shown}"
        if studies.study_exists(url, o.study_name):
            if not resume:
                raise ValueError(
                    f"{where} already exists: pass --resume to continue or join it, or name "
                    "another --study-name"
                )
            stored = studies.load_stored_request(url, o.study_name, where)
            studies.check_request(stored, request, where)
        elif out is not None and not overwrite:
            results = [n for n in ("trials.csv", "best.yaml") if (Path(out) / n).exists()]
            if results:
                raise ValueError(missing_study(out, o.study_name, url))
    return TuneSetup(
        space=space,
        objective=goal,
        url=url,
        request=request,
        options=o,
        enqueued=enqueued,
        tasks=tasks,
    )


def missing_study(out: str | Path, study_name: str, url: str) -> str:
    """The refusal of an output directory whose study is gone (one line)."""
    return (
        f"{out}: no study {study_name!r} in {storages.shown_url(url)} (deleted, renamed or "
        f"moved?); tune does not start a new study over its results: restore the study, "
        "or start anew with --overwrite or another --out"
    )


def tune(
    config: PPOConfig,
    search: Mapping[str, Sequence[Any]],
    options: TuneOptions | None = None,
    *,
    resume: bool = False,
    out: str | Path | None = None,
    progress: bool = True,
    **fields: Any,
) -> TuneResult:
    """Searches hyperparameters with Optuna, training `batch` trials at once.

    Trial `n` trains `config` with the trial's parameters and the key
    `jax.random.key(seed)`, `seed = (config.seed + n) mod 2**32` (the study's seed: its
    creator's `config.seed`), for `config.num_updates` updates, as one lane of a
    `jit(vmap(...))` program of `batch` lanes, split over the local devices that divide
    `batch` (its numbers are those of `jax.vmap(make_train(trial_config))`, on one device
    or several). See the module docstring for batches, static
    groups, pruning and workers; docs/guides/tuning.md for the command line.

    Args:
      config: the base configuration; its `seed` seeds the study and the sampler.
      search: field -> distribution: `("uniform", low, high)`, `("log_uniform", low,
        high)`, `("int_uniform", low, high)` or `("choice", [values])` (static fields:
        choice or int_uniform; sizes as "64-64" or lists); or "ppo-default" (RL Zoo's
        PPO space over the traced fields, `space.PPO_DEFAULT`), also as a key (value
        None) beside fields that replace its entries.
      options: `TuneOptions` (trials, batch, sampler, pruner, objective, direction,
        storage, study_name, reports, seeds_per_trial, aggregate, n_startup_trials,
        timeout); `**fields` replace single ones: `tune(config, search, trials=32)`.
      resume: load the study if it exists (continue it, or join it as one more worker);
        without, an existing study is refused. A resumed study may be given more
        `trials` than before: its budget grows.
      out: where trials.csv, best.yaml and the figures go (`outputs.write_outputs`),
        also after a stop; None: nothing written.
      progress: a progress bar over the trials (finished ones plus the running ones'
        share of their updates), with the best value so far.

    Returns:
      `TuneResult`.

    Raises:
      ImportError: Optuna is not installed (`pip install 'purejaxppo[tune]'`); "cmaes"
        without the cmaes package.
      ValueError: before anything is created, naming the value: a bad search space
        (`space.parse_space`), a bad option (`TuneOptions.check`), an unknown
        objective, sampler or pruner, an env stepped on the host, an unreachable storage (naming
        the URL, its password hidden), an in-memory storage with `out`, an existing
        study without `resume`, a study that tune did not create (no record of what it
        tunes: another tool's), one that tunes another space, objective or base config,
        or an `out` holding results (trials.csv, best.yaml) whose study is not in the
        storage; a value of a static range the config refuses; a batch whose estimated
        memory exceeds the device's (`lanes.check_lanes_memory`; `batch` is clamped to
        the trials left).
      OSError: ENOSPC when the disk under the study's storage or `out` is full (every
        finished trial is kept in the study: continue with `resume=True`).
      signals.TrainingInterrupted: after SIGINT / SIGTERM: the running segment finishes,
        its finished trials are told, the running ones failed and re-queued (they run
        again when the study continues), the outputs are written (exit code 130 / 143
        on the command line); also after a signal while the outputs are written (they
        are written first).
      signals.StopNow: another signal while the outputs are written (each file whole, as
        it was, or absent).
    """
    return _tune(config, search, make_options(options, fields), resume, out, progress=progress)


def _tune(
    config: PPOConfig,
    search: Any,
    options: TuneOptions,
    resume: bool,
    out: str | Path | None,
    *,
    progress: bool,
) -> TuneResult:
    """`tune`: check, open the study, run, write."""
    setup = check_tune(config, search, options, resume=resume, out=out)
    hint = None if out is None else f"tune(..., out={str(out)!r}, resume=True)"
    with storages.disk_full_as_os_error(setup.url):
        store, study = _open(setup, config, resume, out)
        try:
            _run(study, store, setup, config, out, progress=progress, hint=hint)
        except TrainingInterrupted:
            _write(study, config, setup.space, out, hint)
            raise
        written, signal_name = _write(study, config, setup.space, out, hint)
    if signal_name is not None:  # a signal while the outputs were written: they were
        done = studies.finished(study.get_trials(deepcopy=False))
        raise TrainingInterrupted(done, signal_name, hint, unit="trial")
    return TuneResult(
        study=study,
        best_config=best_config(study, config, setup.space),
        trials=study.trials_dataframe(),
        written=written,
    )


def _write(
    study: Any, config: PPOConfig, space: SearchSpace, out: str | Path | None, hint: str | None
) -> tuple[list[Path], str | None]:
    """(files written, the signal received meanwhile or None): `write_outputs` with a
    SIGINT / SIGTERM held off until the files are written; another one stops at once
    (`StopNow`), each file left whole, as it was, or absent."""
    if out is None:
        return [], None
    with stop_requests(WRITING) as requested, hinted(hint):
        written = write_outputs(study, config, space, out)
    return written, requested[0] if requested else None


def _open(setup: TuneSetup, config: PPOConfig, resume: bool, out: Any) -> tuple[Any, Any]:
    """(storage, study): the study created or loaded, with its sampler and pruner; a
    resumed output directory's dead trials failed and re-queued (`study.fail_dead`)."""
    o = setup.options
    if out is not None:
        Path(out).mkdir(parents=True, exist_ok=True)
    store = studies.open_storage(setup.url)
    first = segment_updates(config.num_updates, o.reports) * config.batch_size
    study, created = studies.open_study(
        store,
        o.study_name,
        setup.request,
        resume=resume,
        sampler=studies.make_sampler(o.sampler, config.seed, o.n_startup_trials),
        pruner=studies.make_pruner(o.pruner, first, config.num_updates * config.batch_size),
    )
    if created:  # its first trials: the base config's values, then `enqueue`
        for params in setup.enqueued:
            study.enqueue_trial(params)
    else:  # a worker that joins or resumes a study draws other samples
        seed = int(np.random.SeedSequence([config.seed, os.getpid()]).generate_state(1)[0])
        study.sampler = studies.make_sampler(o.sampler, seed, o.n_startup_trials)
    if out is not None and resume:
        studies.fail_dead(study, out)
    return store, study


def _run(
    study: Any, store: Any, setup: TuneSetup, config: PPOConfig, out: Any, **kwargs: Any
) -> None:
    """The ask / train / tell loop under one stop request and a progress bar (`kwargs`:
    progress, hint)."""
    o = setup.options
    trials = o.trials
    from purejaxppo import kinds

    kind = kinds.kind_of_id(config.env_name, config.multi_agent)
    if kind.host_calls:
        print(
            f"tune: {config.env_name} ({kind.title}): {kind.notes['tune']} "
            f"({o.seeds_per_trial} seed(s) x {config.num_envs} envs)",
            file=sys.stderr,
            flush=True,
        )
    budget = studies.Budget(study, trials, setup.url, setup.space.distributions())
    done = min(studies.finished(study.get_trials(deepcopy=False)), trials)
    with contextlib.ExitStack() as stack:
        stack.enter_context(studies.quiet_optuna())
        bar = progress_bar(
            trials, unit="trial", desc="tune", initial=done, enabled=kwargs["progress"]
        )
        stack.enter_context(bar)
        heartbeat = stack.enter_context(studies.Heartbeat(store))
        requested = stack.enter_context(stop_requests(STOPPING))
        stack.enter_context(hinted(kwargs["hint"]))
        tuner = Tuner(
            study=study,
            space=setup.space,
            objective=setup.objective,
            config=config,
            budget=budget,
            options=dataclasses.replace(o, batch=min(o.batch, max(trials - done, 1))),
            bar=bar,
            requested=requested,
            heartbeat=heartbeat,
            init_params=warm.load_warm_start(config),
            out=out,
            hint=kwargs["hint"],
            tasks=setup.tasks,
        )
        tuner.run()
