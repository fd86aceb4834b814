"""Where `tune`'s study lives: an Optuna RDB storage (an SQLite file by default) that every
worker shares, the study's own checks, the trial budget, and crash safety.

* The study records what it tunes (user attribute `purejaxppo`: search space, base
  config, objective, seed); a worker that joins or resumes it with anything else is
  refused, naming the difference, and a study without that record (made by another
  tool) is refused: tune never writes into it.
* The storage URL is checked before anything runs, and recorded with its password hidden
  (`storage`: `check_storage`, `hidden_url`, `with_password`).
* `--trials N` is the study's total, whoever runs the trials: a worker asks only while
  fewer than N trials are finished, running or waiting (`used`), under a lock (a file
  lock beside an SQLite file, an advisory lock on PostgreSQL), so that two workers never
  pass N between them. Workers that open a new SQLite file together create its tables
  one at a time, under the same file lock.
* Crash safety is Optuna's: every running trial has a heartbeat (`Heartbeat`); a trial
  whose process died is failed once its heartbeat is `GRACE_SECONDS` old
  (`fail_stale_trials`, before every ask) and re-queued as a waiting copy of itself
  (`RetryHeartbeatStaleTrialCallback`), which the next ask runs. A resumed output
  directory fails and re-queues its own dead process's trials at once (`fail_dead`). A
  stopped worker re-queues its running trials itself (`requeue`). Finished trials are
  told as they finish: nothing finished is ever lost.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import inspect
import json
import os
import socket
import threading
import time
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from purejaxppo.drivers.tune.space import import_optuna
from purejaxppo.drivers.tune.storage import (
    check_storage,
    file_lock,
    journal_file,
    parse_url,
    shown_url,
    sqlite_file,
)

#: Seconds between a running trial's heartbeats, and age at which it counts as dead.
HEARTBEAT_SECONDS = 30
GRACE_SECONDS = 300
#: Re-queues of a trial whose process died (a trial that kills its process each time
#: stops being retried); a stop request re-queues without limit.
MAX_RETRY = 3
#: The study's user attribute holding what it tunes.
ATTRIBUTE = "purejaxppo"
#: Seconds a worker waits for the record of a study another worker has just created
#: (Optuna creates a study, then its creator records what it tunes).
RECORD_WAIT_SECONDS = 10


@contextlib.contextmanager
def quiet_optuna() -> Iterator[None]:
    """Optuna's per-trial log lines and its experimental / heartbeat warnings silenced
    (the progress bar reports the trials); the verbosity comes back on exit."""
    optuna = import_optuna()
    level = optuna.logging.get_verbosity()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            warnings.filterwarnings("ignore", message="Heartbeat of storage is supposed")
            yield
    finally:
        optuna.logging.set_verbosity(level)


def retry_callback(max_retry: int | None = MAX_RETRY) -> Any:
    """Optuna's callback that re-queues a failed trial as a waiting copy of itself."""
    storages = import_optuna().storages
    cls = getattr(storages, "RetryHeartbeatStaleTrialCallback", None)
    return (cls or storages.RetryFailedTrialCallback)(max_retry=max_retry)


def open_storage(url: str | None, *, reading: bool = False) -> Any:
    """An Optuna storage: in memory for None, else an `RDBStorage` with heartbeats and
    retries of dead trials (see the module docstring). `reading`: the checks before
    anything is created read an SQLite file that exists, without the lock file beside it
    (`FILE.lock`, which a refused request must not leave behind).

    Raises:
      ValueError: one line naming the URL when it cannot be opened.
    """
    optuna = import_optuna()
    if url is None:
        return optuna.storages.InMemoryStorage()
    check_storage(url)
    journal = journal_file(url)
    if journal is not None:  # a file on NFS: the open lock holds there
        journals = optuna.storages.journal
        lock = journals.JournalFileOpenLock(str(journal))
        return journals.JournalStorage(journals.JournalFileBackend(str(journal), lock_obj=lock))
    sqlite = sqlite_file(url) is not None
    parameters = inspect.signature(optuna.storages.RDBStorage).parameters
    name = "heartbeat_stale_trial_callback"
    name = name if name in parameters else "failed_trial_callback"
    for attempt in range(SCHEMA_ATTEMPTS):
        try:
            # workers that open a new SQLite file together would race on Optuna's schema
            # creation ("UNIQUE constraint failed: alembic_version.version_num")
            lock = contextlib.nullcontext() if reading else file_lock(url)
            with lock, quiet_optuna():
                callback = {name: retry_callback()}
                return optuna.storages.RDBStorage(
                    url,
                    engine_kwargs={"connect_args": {"timeout": 60}} if sqlite else None,
                    heartbeat_interval=HEARTBEAT_SECONDS,
                    grace_period=GRACE_SECONDS,
                    **callback,
                )
        except Exception as err:
            first = (str(err).strip().splitlines() or [type(err).__name__])[0][:300]
            if _schema_race(err) and attempt + 1 < SCHEMA_ATTEMPTS:
                # another worker is creating the schema on the same server (PostgreSQL:
                # "duplicate key value violates unique constraint"): its tables are
                # there once it commits, and the next attempt finds them
                time.sleep(0.5 * (attempt + 1))
                continue
            raise ValueError(f"storage {shown_url(url)!r}: cannot open it ({first})") from None
    raise AssertionError("unreachable")  # the loop returns or raises


#: Attempts to open a storage whose schema another worker is creating at the same time.
SCHEMA_ATTEMPTS = 6


def _schema_race(err: Exception) -> bool:
    """Whether `err` is the loser's error of two workers creating Optuna's schema at once
    (a unique violation or "already exists" while creating tables)."""
    text = f"{type(err).__name__} {err}".lower()
    return any(
        marker in text
        for marker in ("integrityerror", "uniqueviolation", "duplicate key", "already exists")
    )


def study_exists(url: str | None, name: str) -> bool:
    """Whether `url` holds a study named `name` (an SQLite file that does not exist yet
    holds none and is not created)."""
    if url is None:
        return False
    path = journal_file(url) or sqlite_file(url)
    if path is not None and not path.exists():
        return False
    optuna = import_optuna()
    with quiet_optuna():
        return name in optuna.study.get_all_study_names(open_storage(url, reading=True))


def check_request(stored: Mapping[str, Any], request: Mapping[str, Any], where: str) -> None:
    """Raises a `ValueError` naming the first difference between the request a study
    recorded and this one (search space, objective, base config field)."""
    if stored.get("search") != request["search"]:
        raise ValueError(
            f"{where} searches {stored.get('search')}, not {request['search']}: continue it "
            "with the same --search, or name another --study-name"
        )
    if stored.get("objective") != request["objective"]:
        raise ValueError(
            f"{where} has the objective {stored.get('objective')}, not "
            f"{request['objective']}: continue it with the same --objective / --direction"
        )
    old, new = stored.get("config", {}), request["config"]
    for field in sorted(set(old) | set(new)):
        if old.get(field) != new.get(field):
            raise ValueError(
                f"{where} tunes a config with {field}={old.get(field)!r}, not "
                f"{new.get(field)!r}: continue it with the same base config"
            )


def stored_request(study: Any, where: str, *, wait: float | None = None) -> dict:
    """What an existing `study` tunes (its `ATTRIBUTE` record). A study without trials
    may have just been created by another worker that records it next: it is read again
    for up to `wait` seconds (default `RECORD_WAIT_SECONDS`, read at the call).

    Raises:
      ValueError: one line naming `where`: the study has no record (another tool made
        it); tune does not write into it.
    """
    import time

    deadline = time.monotonic() + (RECORD_WAIT_SECONDS if wait is None else wait)
    while True:
        stored = study.user_attrs.get(ATTRIBUTE)
        if isinstance(stored, dict) and "search" not in stored:  # the short record
            full = study._storage.get_study_system_attrs(study._study_id).get(ATTRIBUTE)
            if full is not None:
                return full
        if stored is not None:  # a study recorded whole in its user attribute (older)
            return stored
        trials = len(study.get_trials(deepcopy=False))
        if trials or time.monotonic() >= deadline:
            raise ValueError(
                f"{where} was not made by purejaxppo tune (no {ATTRIBUTE!r} record of what "
                f"it tunes; {trials} trial(s)): tune does not write into it; name another "
                "--study-name or --storage"
            )
        time.sleep(0.2)


def short_record(request: Mapping[str, Any]) -> dict[str, Any]:
    """What a study shows of its request among its user attributes, one short line in
    Optuna's listings (`optuna studies`, optuna-dashboard): the study's seed and a hash of
    the whole request (held in the system attribute `ATTRIBUTE`)."""
    text = json.dumps(request, sort_keys=True, default=repr)
    return {"seed": request["seed"], "sha256": hashlib.sha256(text.encode()).hexdigest()[:12]}


def load_stored_request(url: str, name: str, where: str) -> dict:
    """`stored_request` of the study `name` in `url` (which holds it)."""
    optuna = import_optuna()
    with quiet_optuna():
        study = optuna.load_study(study_name=name, storage=open_storage(url, reading=True))
    return stored_request(study, where)


def open_study(
    storage: Any, name: str, request: Mapping[str, Any], *, resume: bool, sampler: Any, pruner: Any
) -> tuple[Any, bool]:
    """Creates the study, or (with `resume`) loads it and checks that it tunes `request`;
    returns (study, whether this call created it).

    Raises:
      ValueError: the study exists and `resume` is False, it was not made by tune
        (`stored_request`), or it tunes something else.
    """
    optuna = import_optuna()
    where = f"study {name!r}"
    direction = request["objective"]["direction"]
    with quiet_optuna():
        try:
            study = optuna.create_study(
                storage=storage,
                study_name=name,
                direction=direction,
                sampler=sampler,
                pruner=pruner,
            )
            created = True
        except optuna.exceptions.DuplicatedStudyError:
            if not resume:
                raise ValueError(
                    f"{where} already exists in this storage: pass --resume to continue or "
                    "join it, or name another --study-name"
                ) from None
            study = optuna.load_study(
                study_name=name, storage=storage, sampler=sampler, pruner=pruner
            )
            created = False
    if created:  # the request in a system attribute, its short record last (`stored_request`)
        storage.set_study_system_attr(study._study_id, ATTRIBUTE, dict(request))
        study.set_user_attr(ATTRIBUTE, short_record(request))
        with quiet_optuna():  # Optuna's tools name the value (not "Objective Value")
            study.set_metric_names([request["objective"]["metric"]])
        return study, True
    check_request(stored_request(study, where), request, where)
    stored = study.direction.name.lower()
    if stored != direction:
        raise ValueError(f"{where} {stored}s its objective: continue it with --direction {stored}")
    return study, False


def _tpe(samplers: Any, seed: int, startup: int | None) -> Any:
    start = {} if startup is None else {"n_startup_trials": startup}
    return samplers.TPESampler(seed=seed, constant_liar=True, **start)


def _cmaes(samplers: Any, seed: int, startup: int | None) -> Any:
    if importlib.util.find_spec("cmaes") is None:
        raise ImportError("sampler 'cmaes' needs the cmaes package: pip install 'purejaxppo[tune]'")
    start = {} if startup is None else {"n_startup_trials": startup}
    return samplers.CmaEsSampler(seed=seed, **start)


#: Sampler name -> factory(optuna.samplers, seed, n_startup_trials or None).
SAMPLER_FACTORIES: dict[str, Callable[[Any, int, int | None], Any]] = {
    "tpe": _tpe,
    "cmaes": _cmaes,
    "random": lambda samplers, seed, _: samplers.RandomSampler(seed=seed),
    "qmc": lambda samplers, seed, _: samplers.QMCSampler(seed=seed),
}
SAMPLERS = tuple(SAMPLER_FACTORIES)

#: Pruner name -> factory(optuna.pruners, first_step, last_step); steps are env steps.
PRUNER_FACTORIES: dict[str, Callable[[Any, int, int], Any]] = {
    "median": lambda p, first, last: p.MedianPruner(n_startup_trials=5, n_warmup_steps=last // 3),
    "halving": lambda p, first, last: p.SuccessiveHalvingPruner(min_resource=first),
    "hyperband": lambda p, first, last: p.HyperbandPruner(
        min_resource=first, max_resource=max(last, first)
    ),
    "none": lambda p, first, last: p.NopPruner(),
}
PRUNERS = tuple(PRUNER_FACTORIES)


def make_sampler(sampler: Any, seed: int, n_startup_trials: int | None = None) -> Any:
    """An Optuna sampler from its name (`SAMPLER_FACTORIES`), seeded, with
    `n_startup_trials` random trials first (tpe, cmaes; None: Optuna's default); a
    sampler object as is.

    Raises:
      ValueError: an unknown name.
      ImportError: "cmaes" without the `cmaes` package.
    """
    if not isinstance(sampler, str):
        return sampler
    if sampler not in SAMPLER_FACTORIES:
        raise ValueError(f"sampler={sampler!r}: must be one of {', '.join(SAMPLERS)}")
    return SAMPLER_FACTORIES[sampler](import_optuna().samplers, seed, n_startup_trials)


def make_pruner(pruner: Any, first_step: int, last_step: int) -> Any:
    """An Optuna pruner from its name (`PRUNER_FACTORIES`); a pruner object as is. Steps
    are env steps: `first_step` the first report's, `last_step` a whole trial's.

    median: `MedianPruner` once 5 trials completed, past a third of a trial's steps;
    halving: `SuccessiveHalvingPruner` from the first report; hyperband:
    `HyperbandPruner` between the first report and the last step; none: `NopPruner`.

    Raises:
      ValueError: an unknown name.
    """
    if not isinstance(pruner, str):
        return pruner
    if pruner not in PRUNER_FACTORIES:
        raise ValueError(f"pruner={pruner!r}: must be one of {', '.join(PRUNERS)}")
    return PRUNER_FACTORIES[pruner](import_optuna().pruners, first_step, last_step)


def used(trials: Sequence[Any]) -> int:
    """Trials that count against the budget: finished, running or waiting; a failed
    trial counts unless a waiting copy replaced it (`retry_history`)."""
    states = import_optuna().trial.TrialState
    replaced = {n for t in trials for n in t.system_attrs.get("retry_history", [])}
    return sum(
        t.state in (states.COMPLETE, states.PRUNED, states.RUNNING, states.WAITING)
        or (t.state == states.FAIL and t.number not in replaced)
        for t in trials
    )


def finished(trials: Sequence[Any]) -> int:
    """Trials done for good: complete, pruned, or failed and not replaced."""
    states = import_optuna().trial.TrialState
    running = sum(t.state in (states.RUNNING, states.WAITING) for t in trials)
    return used(trials) - running


class Budget:
    """Asks the study for trials while it holds fewer than `total` (`used`)."""

    def __init__(self, study: Any, total: int, url: str | None, distributions: Mapping):
        self.study, self.total, self.distributions = study, total, dict(distributions)
        parsed = None if url is None else parse_url(url)
        if parsed is not None and parsed.get_backend_name() == "postgresql":
            self.lock = lambda: _advisory_lock(study)
        else:
            self.lock = lambda: file_lock(url)

    def ask(self, n: int) -> list[Any]:
        """Up to `n` trials: waiting copies first (Optuna pops them), then new ones."""
        optuna = import_optuna()
        states = optuna.trial.TrialState
        with self.lock(), quiet_optuna():
            optuna.storages.fail_stale_trials(self.study)
            trials = self.study.get_trials(deepcopy=False)
            waiting = sum(t.state == states.WAITING for t in trials)
            room = min(n, max(self.total - used(trials), 0) + waiting)
            return [self.study.ask(self.distributions) for _ in range(room)]


@contextlib.contextmanager
def _advisory_lock(study: Any) -> Iterator[None]:
    """A PostgreSQL session advisory lock of the study (key: "pure" and the study's id),
    held on a connection of its own; the server releases it if the process dies."""
    import sqlalchemy

    storage = getattr(study._storage, "_backend", study._storage)  # Optuna's cache wraps it
    key = {"key": 0x70757265 * 2**16 + study._study_id}
    with storage.engine.connect() as connection:
        connection.execute(sqlalchemy.text("SELECT pg_advisory_lock(:key)"), key)
        try:
            yield
        finally:
            connection.execute(sqlalchemy.text("SELECT pg_advisory_unlock(:key)"), key)


def worker_identity(out: str | Path | None) -> dict[str, Any]:
    """This process as a trial's `worker` attribute: host, process id, output directory."""
    where = "" if out is None else str(Path(out).resolve())
    return {"host": socket.gethostname(), "pid": os.getpid(), "out": where}


def requeue(study: Any, numbers: Sequence[int], max_retry: int | None = None) -> None:
    """Fails the running trials `numbers` and queues a waiting copy of each (same
    parameters), which the next ask of any worker runs."""
    states = import_optuna().trial.TrialState
    running = {t.number for t in study.get_trials(deepcopy=False, states=(states.RUNNING,))}
    with quiet_optuna():
        callback = retry_callback(max_retry)
        for number in numbers:
            if number in running:  # not failed (and re-queued) by another worker already
                callback(study, study.tell(number, state=states.FAIL, skip_if_finished=True))


def fail_dead(study: Any, out: str | Path) -> list[int]:
    """Fails and re-queues (up to `MAX_RETRY` times) the running trials of an earlier
    process of the output directory `out` (the caller holds its lock: that process is
    dead); returns their numbers."""
    states = import_optuna().trial.TrialState
    me = worker_identity(out)
    dead = [
        t.number
        for t in study.get_trials(deepcopy=False, states=(states.RUNNING,))
        if (w := t.user_attrs.get("worker"))
        and (w.get("host"), w.get("out")) == (me["host"], me["out"])
        and w.get("pid") != me["pid"]
    ]
    requeue(study, dead, MAX_RETRY)
    return dead


class Heartbeat:
    """Records a heartbeat of every trial this process runs, every `HEARTBEAT_SECONDS`,
    from a daemon thread (a long compile does not make its trials look dead)."""

    def __init__(self, storage: Any):
        self.storage = storage if getattr(storage, "heartbeat_interval", None) else None
        self.trial_ids: set[int] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, name="purejaxppo-heartbeat", daemon=True)

    def add(self, trial_id: int) -> None:
        self.trial_ids.add(trial_id)
        if self.storage is not None:
            self.storage.record_heartbeat(trial_id)

    def discard(self, trial_id: int) -> None:
        self.trial_ids.discard(trial_id)

    def _beat(self) -> None:
        while not self._stop.wait(HEARTBEAT_SECONDS):
            for trial_id in list(self.trial_ids):
                with contextlib.suppress(Exception):  # a busy database: the next beat
                    self.storage.record_heartbeat(trial_id)

    def __enter__(self) -> Heartbeat:
        if self.storage is not None:
            self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
