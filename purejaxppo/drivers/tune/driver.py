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

import collections
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
from purejaxppo.drivers.segments import compiling, progress_bar
from purejaxppo.drivers.tune import storage as storages
from purejaxppo.drivers.tune import study as studies
from purejaxppo.drivers.tune.lanes import Lane, LaneGroup, segment_updates
from purejaxppo.drivers.tune.objective import Objective, parse_objective
from purejaxppo.drivers.tune.outputs import best_config, write_outputs
from purejaxppo.drivers.tune.space import SearchSpace, import_optuna, parse_space
from purejaxppo.guards import LOSS_METRICS
from purejaxppo.signals import TrainingInterrupted, hinted, run_responsively, stop_requests

#: The first line of a stop request.
STOPPING = (
    "stopping after the running segment (its finished trials are told, the running ones re-queued)"
)


class TuneSetup(NamedTuple):
    """A checked `tune` request (`check_tune`)."""

    space: SearchSpace
    objective: Objective
    url: str | None  # the storage URL (None: in memory)
    request: dict[str, Any]  # what the study records (`study.ATTRIBUTE`)


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


def check_tune(
    config: PPOConfig,
    search: Mapping[str, Sequence[Any]] | None,
    *,
    trials: int,
    batch: int,
    sampler: Any = "tpe",
    pruner: Any = "median",
    objective: str = "episode_return",
    direction: str = "maximize",
    storage: str | None = None,
    study_name: str = "tune",
    resume: bool = False,
    out: str | Path | None = None,
    reports: int = 10,
    overwrite: bool = False,
) -> TuneSetup:
    """Every refusal of `tune`, before anything is created or compiled (see `tune`).

    `overwrite`: the caller empties `out` before tuning (`purejaxppo tune --overwrite`),
    so the study of its default storage (`out`/study.db) is not checked.
    """
    import_optuna()
    for name, value in (("trials", trials), ("batch", batch), ("reports", reports)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name}={value!r}: must be an integer >= 1")
    space = parse_space(search, config)
    goal = parse_objective(objective, direction)
    studies.make_sampler(sampler, 0)
    studies.make_pruner(pruner, 1, 1)
    from purejaxppo import kinds

    kind = kinds.check("sweep", config.env_name, multi_agent=config.multi_agent)
    if kind.vmap_init_runs:  # the lanes share one env instance (EnvPool, gymnasium)
        raise ValueError(
            f"env_name={config.env_name!r} ({kind.title}): tune starts new trials in single "
            "lanes between segments, which one host env shared by all lanes cannot do; "
            "tune a JAX env, or search with purejaxppo sweep --random"
        )
    url = storage if storage is not None else None if out is None else storages.default_url(out)
    request = json.loads(
        json.dumps(
            {
                "search": space.to_lists(),
                "objective": {"metric": goal.metric, "window": goal.window, "direction": direction},
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
        where = f"study {study_name!r} in {shown}"
        if studies.study_exists(url, study_name):
            if not resume:
                raise ValueError(
                    f"{where} already exists: pass --resume to continue or join it, or name "
                    "another --study-name"
                )
            stored = studies.load_stored_request(url, study_name, where)
            studies.check_request(stored, request, where)
        elif out is not None and not overwrite:
            results = [n for n in ("trials.csv", "best.yaml") if (Path(out) / n).exists()]
            if results:
                raise ValueError(missing_study(out, study_name, url))
    return TuneSetup(space=space, objective=goal, url=url, request=request)


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
    *,
    trials: int,
    batch: int = 8,
    sampler: Any = "tpe",
    pruner: Any = "median",
    objective: str = "episode_return",
    direction: str = "maximize",
    storage: str | None = None,
    study_name: str = "tune",
    resume: bool = False,
    out: str | Path | None = None,
    progress: bool = True,
    reports: int = 10,
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
        choice or int_uniform; sizes as "64-64" or lists).
      trials: the study's total of trials (finished, running or waiting, by any worker).
      batch: lanes per program, B >= 1.
      sampler: "tpe" (with `constant_liar`, for batches), "cmaes", "random", "qmc", or
        an Optuna sampler.
      pruner: "median", "halving", "hyperband", "none", or an Optuna pruner.
      objective: "METRIC[:WINDOW]" (`objective.parse_objective`): default the mean
        episode return over the last 10% of a trial's updates.
      direction: "maximize" or "minimize".
      storage: an Optuna RDB storage URL ("sqlite:///study.db",
        "postgresql://user:password@host/db"); default `sqlite:///OUT/study.db` with `out`,
        in memory without (refused with `out`).
      study_name: the study's name in the storage.
      resume: load the study if it exists (continue it, or join it as one more worker);
        without, an existing study is refused.
      out: where trials.csv, best.yaml and the figures go (`outputs.write_outputs`),
        also after a stop; None: nothing written.
      progress: a progress bar over the trials, with the best value so far.
      reports: intermediate values (pruning checks) per trial: segments of the largest
        divisor of num_updates at most num_updates / reports.

    Returns:
      `TuneResult`.

    Raises:
      ImportError: Optuna is not installed (`pip install 'purejaxppo[tune]'`); "cmaes"
        without the cmaes package.
      ValueError: before anything is created, naming the value: a bad search space
        (`space.parse_space`), trials / batch / reports < 1, an unknown objective,
        sampler or pruner, an env stepped on the host, an unreachable storage (naming
        the URL, its password hidden), an in-memory storage with `out`, an existing
        study without `resume`, a study that tune did not create (no record of what it
        tunes: another tool's), one that tunes another space, objective or base config,
        or an `out` holding results (trials.csv, best.yaml) whose study is not in the
        storage.
      signals.TrainingInterrupted: after SIGINT / SIGTERM: the running segment finishes,
        its finished trials are told, the running ones failed and re-queued (they run
        again when the study continues), the outputs are written (exit code 130 / 143
        on the command line).
    """
    options = _Options(
        trials=trials,
        batch=batch,
        sampler=sampler,
        pruner=pruner,
        objective=objective,
        direction=direction,
        storage=storage,
        study_name=study_name,
        resume=resume,
        out=out,
        reports=reports,
    )
    return _tune(config, search, options, progress=progress)


class _Options(NamedTuple):
    """`tune`'s options (`check_tune`'s keyword arguments)."""

    trials: int
    batch: int
    sampler: Any
    pruner: Any
    objective: str
    direction: str
    storage: str | None
    study_name: str
    resume: bool
    out: str | Path | None
    reports: int


def _tune(config: PPOConfig, search: Any, options: _Options, *, progress: bool) -> TuneResult:
    """`tune`: check, open the study, run, write."""
    setup = check_tune(config, search, **options._asdict())
    store, study = _open(setup, config, options)
    out = options.out
    hint = None if out is None else f"tune(..., out={str(out)!r}, resume=True)"
    try:
        _run(study, store, setup, config, options, progress=progress, hint=hint)
    except TrainingInterrupted:
        if out is not None:
            write_outputs(study, config, setup.space, out)
        raise
    written = [] if out is None else write_outputs(study, config, setup.space, out)
    return TuneResult(
        study=study,
        best_config=best_config(study, config, setup.space),
        trials=study.trials_dataframe(),
        written=written,
    )


def _open(setup: TuneSetup, config: PPOConfig, options: _Options) -> tuple[Any, Any]:
    """(storage, study): the study created or loaded, with its sampler and pruner; a
    resumed output directory's dead trials failed and re-queued (`study.fail_dead`)."""
    if options.out is not None:
        Path(options.out).mkdir(parents=True, exist_ok=True)
    store = studies.open_storage(setup.url)
    first = segment_updates(config.num_updates, options.reports) * config.batch_size
    study, created = studies.open_study(
        store,
        options.study_name,
        setup.request,
        resume=options.resume,
        sampler=studies.make_sampler(options.sampler, config.seed),
        pruner=studies.make_pruner(options.pruner, first, config.num_updates * config.batch_size),
    )
    if not created:  # a worker that joins or resumes a study draws other samples
        seed = int(np.random.SeedSequence([config.seed, os.getpid()]).generate_state(1)[0])
        study.sampler = studies.make_sampler(options.sampler, seed)
    if options.out is not None and options.resume:
        studies.fail_dead(study, options.out)
    return store, study


def _run(
    study: Any, store: Any, setup: TuneSetup, config: PPOConfig, options: _Options, **kwargs: Any
) -> None:
    """The ask / train / tell loop under one stop request and a progress bar (`kwargs`:
    progress, hint)."""
    trials = options.trials
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
        tuner = _Tuner(
            study=study,
            space=setup.space,
            objective=setup.objective,
            config=config,
            budget=budget,
            batch=options.batch,
            reports=options.reports,
            bar=bar,
            requested=requested,
            heartbeat=heartbeat,
            init_params=warm.load_warm_start(config),
            out=options.out,
            hint=kwargs["hint"],
        )
        tuner.run()


@dataclasses.dataclass
class _Tuner:
    """The scheduler: queues of asked trials per static combination, one `LaneGroup`
    (compiled once) per combination, run one at a time until its lanes are empty."""

    study: Any
    space: SearchSpace
    objective: Objective
    config: PPOConfig
    budget: studies.Budget
    batch: int
    reports: int
    bar: Any
    requested: list[str]  # the stop request (`stop_requests`)
    heartbeat: studies.Heartbeat
    init_params: Any
    out: str | Path | None
    hint: str | None
    queues: dict[tuple, collections.deque] = dataclasses.field(default_factory=dict)
    groups: dict[tuple, LaneGroup] = dataclasses.field(default_factory=dict)
    seeds: dict[int, int] = dataclasses.field(default_factory=dict)  # trial number -> seed

    def __post_init__(self) -> None:
        self.seed = self.study.user_attrs[studies.ATTRIBUTE]["seed"]
        self.me = studies.worker_identity(self.out)

    def run(self) -> None:
        while True:
            if not any(self.queues.values()) and not self._ask(self.batch):
                return
            key = max(self.queues, key=lambda k: len(self.queues[k]))
            self._run_group(key)

    def _ask(self, n: int) -> int:
        """Asks up to `n` trials (the budget allows fewer) into their queues."""
        asked = self.budget.ask(n)
        for trial in asked:
            self.heartbeat.add(trial._trial_id)
            self.seeds[trial.number] = (self.seed + trial.number) % 2**32
            trial.set_user_attr("seed", self.seeds[trial.number])
            trial.set_user_attr("worker", self.me)
            self.queues.setdefault(self.space.static_key(trial.params), collections.deque()).append(
                trial
            )
        return len(asked)

    def _run_group(self, key: tuple) -> None:
        group = self.groups.get(key)
        self.bar.set_description(compiling("tune") if group is None else "tune")
        if group is None:
            config = self.space.static_config(self.config, key)
            group = LaneGroup(
                config, self.batch, self.reports, self.objective.metric, self.init_params
            )
            self.groups[key] = group
        self._fill(group, key)
        while group.active():
            if not group.compiled:
                self.bar.set_description(compiling("tune"))
            metrics = run_responsively(group.run_segment)
            self.bar.set_description("tune")
            self._boundary(group, metrics)
            if self.requested:
                self._stop(group)
            self._fill(group, key)

    def _fill(self, group: LaneGroup, key: tuple) -> None:
        """Gives the free lanes queued trials of this combination, asking for more."""
        free = group.free()
        queue = self.queues.setdefault(key, collections.deque())
        if len(queue) < len(free):
            self._ask(len(free) - len(queue))  # trials of other combinations wait in theirs
        placed = {}
        for index in free[: len(queue)]:
            trial = queue.popleft()
            config = self.space.config(self.config, trial.params)
            placed[index] = Lane(trial=trial, config=config, seed=self.seeds[trial.number])
        if placed:
            group.place(placed)

    def _boundary(self, group: LaneGroup, metrics: Mapping[str, np.ndarray]) -> None:
        """After a segment: each lane's report, prune, or tell."""
        states = import_optuna().trial.TrialState
        for index, lane in enumerate(group.lanes):
            if lane is None:
                continue
            lane.values.append(metrics[self.objective.metric][index])
            lane.counts.append(metrics["episode_count"][index])
            lane.done += group.segment
            values, counts = lane.curve()
            value = self.objective.value(values, counts, group.num_updates)
            step = lane.done * group.config.batch_size
            bad = [n for n in LOSS_METRICS if not np.isfinite(metrics[n][index]).all()]
            trial = lane.trial
            if bad:
                first = int(np.argmin(np.isfinite(metrics[bad[0]][index]))) + 1
                trial.set_user_attr("diverged", lane.done - group.segment + first)
                self._tell(group, index, state=states.FAIL)
                continue
            if np.isfinite(value):
                trial.report(value, step)
            if lane.done >= group.num_updates:
                if np.isfinite(value):
                    self._tell(group, index, values=value)
                else:
                    trial.set_user_attr("failed", "no episode ended in the objective's window")
                    self._tell(group, index, state=states.FAIL)
            elif np.isfinite(value) and trial.should_prune():
                self._tell(group, index, state=states.PRUNED)

    def _tell(self, group: LaneGroup, index: int, **outcome: Any) -> None:
        lane = group.lanes[index]
        lane.trial.set_user_attr("updates", lane.done)
        self.study.tell(lane.trial, **outcome)
        self.heartbeat.discard(lane.trial._trial_id)
        group.lanes[index] = None
        self.bar.update(1)
        with contextlib.suppress(ValueError):  # no completed trial yet
            self.bar.set_postfix(best=f"{self.study.best_value:.4g}", refresh=False)

    def _stop(self, group: LaneGroup) -> None:
        """Re-queues the running and queued trials, then raises `TrainingInterrupted`."""
        running = [lane.trial for lane in group.lanes if lane is not None]
        running += [trial for queue in self.queues.values() for trial in queue]
        studies.requeue(self.study, [trial.number for trial in running])
        for trial in running:
            self.heartbeat.discard(trial._trial_id)
        finished = studies.finished(self.study.get_trials(deepcopy=False))
        print(
            f"\ntune: stopped by {self.requested[0]}: {finished} trial(s) of the study "
            f"finished; {len(running)} running or queued trial(s) re-queued: they run again "
            "when the study continues",
            file=sys.stderr,
            flush=True,
        )
        raise TrainingInterrupted(finished, self.requested[0], self.hint, unit="trial")
