"""`tune`'s scheduler: queues of asked trials per static combination, one `LaneGroup`
(compiled once) per combination, run one at a time until its lanes are empty (see
`driver` for the model).

With `seeds_per_trial` K > 1 a trial takes K neighbouring lanes (a slot), trained with the
keys of the seeds `seed + K * number + k` (k < K), and is told the `aggregate` of their
values (`objective.aggregate`); each seed's value is its user attribute `seed_values`.
`timeout` ends the worker as a stop request does, once its seconds are spent. With
several tasks (`tasks`), a trial is a run per task, queued in the task's groups, and is
told once every run finished (`tasks.TaskScores`).

A trial whose sampled config is refused (a static combination the checks before the
start could not cover, a program that cannot be built) is told FAIL with the user
attribute `refused` naming the reason, and the study goes on. When the budget is spent
but trials of other workers still run, the worker waits for them (`Tuner.wait`): a dead
worker's trials are failed once their heartbeat is `study.GRACE_SECONDS` old and
re-queued, and this worker runs them.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from purejaxppo.config import PPOConfig
from purejaxppo.drivers.segments import compiling, leave_out_of_rate
from purejaxppo.drivers.tune import study as studies
from purejaxppo.drivers.tune.lanes import Lane, LaneGroup
from purejaxppo.drivers.tune.objective import Objective, aggregate
from purejaxppo.drivers.tune.options import TuneOptions
from purejaxppo.drivers.tune.space import SearchSpace, import_optuna
from purejaxppo.drivers.tune.tasks import Task, TaskScores
from purejaxppo.guards import LOSS_METRICS
from purejaxppo.signals import TrainingInterrupted, run_responsively

#: Seconds between two looks at the study while other workers' trials run (`Tuner.wait`).
POLL_SECONDS = 5.0


@dataclasses.dataclass
class Tuner:
    """The scheduler: queues of asked trials per static combination, one `LaneGroup`
    (compiled once) per combination, run one at a time until its lanes are empty."""

    study: Any
    space: SearchSpace
    objective: Objective
    config: PPOConfig
    budget: studies.Budget
    options: TuneOptions  # its `batch`: the trials trained at once (slots)
    bar: Any
    requested: list[str]  # the stop request (`stop_requests`)
    heartbeat: studies.Heartbeat
    init_params: Any
    out: str | Path | None
    hint: str | None
    tasks: tuple[Task, ...] = ()  # () : the base config's env, identity normalisation
    queues: dict[tuple, collections.deque] = dataclasses.field(default_factory=dict)
    groups: dict[tuple, LaneGroup] = dataclasses.field(default_factory=dict)
    seeds: dict[int, int] = dataclasses.field(default_factory=dict)  # trial number -> seed
    # (trial number, task) -> its config
    configs: dict[tuple[int, int], PPOConfig] = dataclasses.field(default_factory=dict)
    shown: dict[int, float] = dataclasses.field(default_factory=dict)  # the bar's share

    def __post_init__(self) -> None:
        self.seed = self.study.user_attrs[studies.ATTRIBUTE]["seed"]
        self.me = studies.worker_identity(self.out)
        self.k = self.options.seeds_per_trial  # lanes per trial
        self.started = time.monotonic()
        self.tasks = self.tasks or (Task(self.config.env_name),)
        self.scores = TaskScores(self.tasks)

    def run(self) -> None:
        """Asks, trains and tells until the budget is spent and no trial of another
        worker runs (`wait`), or until the timeout is spent."""
        try:
            while True:
                if not any(self.queues.values()):
                    if self.expired() or (not self._ask(self.options.batch) and not self.wait()):
                        return
                    continue
                key = max(self.queues, key=lambda k: len(self.queues[k]))
                self._run_group(key)
        except _TimeUp:
            return

    def expired(self) -> bool:
        """Whether the `timeout` (seconds since this worker started) is spent."""
        timeout = self.options.timeout
        return timeout is not None and time.monotonic() - self.started >= timeout

    def wait(self) -> bool:
        """With the budget spent: waits while trials of other workers run (polling every
        `POLL_SECONDS`; a stop request ends the wait); True once one of them was failed
        and re-queued (its worker died: this worker runs it), False when none runs."""
        states = import_optuna().trial.TrialState
        shown = None
        while True:
            trials = self.study.get_trials(deepcopy=False)
            running = [t.number for t in trials if t.state == states.RUNNING]
            if any(t.state == states.WAITING for t in trials):
                return True
            if not running:
                return False
            if self.heartbeat.storage is None:  # a journal: no heartbeat tells a dead worker
                print(
                    f"tune: every trial is asked; trial(s) {', '.join(map(str, running))} "
                    "still run in other workers, and this storage keeps no heartbeats to tell "
                    "a dead worker: done here (a dead worker's trials run again with its "
                    "purejaxppo tune --resume OUT)",
                    file=sys.stderr,
                    flush=True,
                )
                return False
            if shown != running:
                if shown is None:
                    print(
                        f"tune: every trial is asked; waiting for the running trial(s) "
                        f"{', '.join(map(str, running))} of other workers (a dead worker's "
                        f"run here once their heartbeat is {studies.GRACE_SECONDS} s old)",
                        file=sys.stderr,
                        flush=True,
                    )
                shown = running
                self.bar.set_description(f"tune: waiting for {len(running)} running trial(s)")
            deadline = time.monotonic() + POLL_SECONDS
            while time.monotonic() < deadline:
                if self.requested:
                    self._stop(None)
                if self.expired():
                    return False
                time.sleep(0.1)
            with self.budget.lock(), studies.quiet_optuna():
                import_optuna().storages.fail_stale_trials(self.study)

    def _ask(self, n: int) -> int:
        """Asks up to `n` trials (the budget allows fewer) into their queues; a trial whose
        config is refused is told FAIL at once (`_refuse`). Returns the trials asked."""
        asked = self.budget.ask(n)
        for trial in asked:
            self.heartbeat.add(trial._trial_id)
            self.seeds[trial.number] = (self.seed + self.k * trial.number) % 2**32
            trial.set_user_attr("seed", self.seeds[trial.number])
            if self.k > 1:
                seeds = [(self.seeds[trial.number] + i) % 2**32 for i in range(self.k)]
                trial.set_user_attr("seeds", seeds)
            trial.set_user_attr("worker", self.me)
            try:
                for t in range(len(self.tasks)):
                    config = self.space.config(self._task_config(t), trial.params)
                    self.configs[trial.number, t] = config
            except ValueError as err:
                self._refuse(trial, err)
                continue
            static = self.space.static_key(trial.params)
            for t in range(len(self.tasks)):
                self.queues.setdefault((t, static), collections.deque()).append(trial)
        return len(asked)

    def _task_config(self, t: int) -> PPOConfig:
        """The base config of task `t` (its env id)."""
        env_id = self.tasks[t].env_id
        return (
            self.config if env_id == self.config.env_name else self.config.replace(env_name=env_id)
        )

    def _drop(self, number: int) -> None:
        """Removes trial `number`'s queued runs of other tasks (it was told)."""
        for key, queue in self.queues.items():
            self.queues[key] = collections.deque(t for t in queue if t.number != number)
        for t in range(len(self.tasks)):
            self.configs.pop((number, t), None)
        self.scores.drop(number)

    def _refuse(self, trial: Any, err: Exception) -> None:
        """Tells `trial` FAIL, its user attribute `refused` saying why (the study goes on)."""
        states = import_optuna().trial.TrialState
        reason = (str(err).strip().splitlines() or [type(err).__name__])[0][:500]
        trial.set_user_attr("refused", reason)
        self.study.tell(trial, state=states.FAIL)
        self.heartbeat.discard(trial._trial_id)
        self._drop(trial.number)
        self.bar.update(1)
        self._say(f"tune: trial {trial.number} refused: {reason}")

    def _say(self, line: str) -> None:
        """One stderr line above the progress bar (a trial refused or failed by its own
        training: the study goes on)."""
        self.bar.write(line, file=sys.stderr)

    def _run_group(self, key: tuple) -> None:
        """Runs the group of `key` (built and compiled on first use) until its lanes are
        empty; a new group's build, init and first segment (its compile) are left out of
        the bar's rate and ETA."""
        group = self.groups.get(key)
        since = self.bar._time() if hasattr(self.bar, "_time") else 0.0
        self.bar.set_description(compiling("tune") if group is None else "tune")
        if group is None:
            try:
                config = self.space.static_config(self._task_config(key[0]), key[1])
                group = LaneGroup(
                    config,
                    self.options.batch * self.k,
                    self.options.reports,
                    self.objective.metric,
                    self.init_params,
                    self.objective.episodes,
                )
            except ValueError as err:  # the combination's program cannot be built
                queue = self.queues.pop(key)
                while queue:
                    trial = queue.popleft()
                    self._refuse(trial, err)
                return
            self.groups[key] = group
        self._fill(group, key)
        while group.active():
            if not group.compiled:
                self.bar.set_description(compiling("tune"))
            compiling_now = not group.compiled
            metrics = run_responsively(group.run_segment)
            if compiling_now:  # the ETA counts running, not compiling
                leave_out_of_rate(self.bar, since)
            self.bar.set_description("tune")
            self._boundary(group, metrics)
            if self.requested or self.expired():
                self._stop(group)
            self._fill(group, key)

    def _fill(self, group: LaneGroup, key: tuple) -> None:
        """Gives the free slots (K free neighbouring lanes) queued trials of this
        combination, asking for more."""
        free = [j for j in range(group.width // self.k) if not any(self._slot(group, j))]
        queue = self.queues.setdefault(key, collections.deque())
        if len(queue) < len(free):
            self._ask(len(free) - len(queue))  # trials of other combinations wait in theirs
        placed = {}
        for j in free[: len(queue)]:
            trial = queue.popleft()
            config = self.configs.pop((trial.number, key[0]))
            for i in range(self.k):
                seed = (self.seeds[trial.number] + i) % 2**32
                lane = Lane(trial=trial, config=config, seed=seed, task=key[0])
                placed[j * self.k + i] = lane
        if placed:
            group.place(placed)

    def _slot(self, group: LaneGroup, j: int) -> list[Lane | None]:
        """The K lanes of slot `j` (one trial's seeds, or all None)."""
        return group.lanes[j * self.k : (j + 1) * self.k]

    def _boundary(self, group: LaneGroup, metrics: Mapping[str, np.ndarray]) -> None:
        """After a segment: each trial's report (the aggregate over its seeds' lanes),
        prune, or tell."""
        for j in range(group.width // self.k):
            if group.lanes[j * self.k] is not None:
                self._report(group, j, metrics)

    def _report(self, group: LaneGroup, j: int, metrics: Mapping[str, np.ndarray]) -> None:
        """Slot `j`'s segment: its seeds' values, the divergence check, the trial's
        intermediate value (`tasks.TaskScores.partial`), then finish, prune or go on."""
        states = import_optuna().trial.TrialState
        lanes, indices = self._slot(group, j), slice(j * self.k, (j + 1) * self.k)
        for index, lane in zip(range(indices.start, indices.stop), lanes, strict=True):
            lane.values.append(np.atleast_1d(metrics[self.objective.metric][index]))
            lane.counts.append(metrics["episode_count"][index])
            lane.done += group.segment
        seeds = np.array([self.objective.value(*lane.curve(), group.num_updates) for lane in lanes])
        score = aggregate(seeds, self.options.aggregate)
        lane, trial = lanes[0], lanes[0].trial
        bad = [n for n in LOSS_METRICS if not np.isfinite(metrics[n][indices]).all()]
        if bad:
            first = int(np.argmin(np.isfinite(metrics[bad[0]][indices]).all(axis=0))) + 1
            update = lane.done - group.segment + first
            trial.set_user_attr("diverged", update)
            self._tell(group, j, state=states.FAIL)
            self._say(
                f"tune: trial {trial.number} failed, diverged: a non-finite {bad[0]} at "
                f"update {update}"
            )
            return
        steps = group.num_updates * group.config.batch_size  # a task's whole run
        step = lane.task * steps + lane.done * group.config.batch_size
        value = self.scores.partial(trial.number, lane.task, score)
        if np.isfinite(value):
            trial.report(value, step)
        if lane.done >= group.num_updates:
            self._finish(group, j, seeds, score)
        elif np.isfinite(value) and trial.should_prune():
            self._tell(group, j, state=states.PRUNED)
        else:  # the bar counts the running trials' share of their updates
            share = (lane.task + lane.done / group.num_updates) / len(self.tasks)
            self.bar.update(share - self.shown.get(trial.number, 0.0))
            self.shown[trial.number] = share

    def _finish(self, group: LaneGroup, j: int, seeds: np.ndarray, score: float) -> None:
        """Slot `j`'s run is done: its task's score recorded; the trial told once every
        task is (FAIL when no episode ended in the objective's window)."""
        states = import_optuna().trial.TrialState
        lane = group.lanes[j * self.k]
        trial = lane.trial
        if self.k > 1 and len(self.tasks) == 1:
            trial.set_user_attr("seed_values", [float(v) for v in seeds])
        if not np.isfinite(score):
            task = f" of task {self.tasks[lane.task].env_id}" if len(self.tasks) > 1 else ""
            trial.set_user_attr("failed", f"no episode ended in the objective's window{task}")
            self._tell(group, j, state=states.FAIL)
            self._say(f"tune: trial {trial.number} failed, {self._no_episode(group, task)}")
            return
        value = self.scores.finish(trial.number, lane.task, score)
        if len(self.tasks) > 1:
            trial.set_user_attr("task_scores", self.scores.scores(trial.number))
        if value is None:  # its other tasks run in their own groups
            group.lanes[j * self.k : (j + 1) * self.k] = [None] * self.k
            return
        self._tell(group, j, values=value)

    def _no_episode(self, group: LaneGroup, task: str) -> str:
        """Why a trial whose objective is NaN failed, and what gives it episodes."""
        objective, updates = self.objective, group.num_updates
        if objective.evaluates:
            return f"its greedy evaluation{task} gave no finite return"
        wider = f"{objective.metric}:{min(1.0, 4 * objective.window):g}"
        return (
            f"no episode ended in the objective's window{task} (its last "
            f"{objective.updates(updates)} of {updates} updates): train longer, or widen "
            f"the window (objective {wider})"
        )

    def _tell(self, group: LaneGroup, j: int, **outcome: Any) -> None:
        """Tells slot `j`'s trial `outcome`, frees its lanes and drops its other runs."""
        lane = group.lanes[j * self.k]
        lane.trial.set_user_attr("updates", lane.done)
        self.study.tell(lane.trial, **outcome)
        self.heartbeat.discard(lane.trial._trial_id)
        group.lanes[j * self.k : (j + 1) * self.k] = [None] * self.k
        self._drop(lane.trial.number)
        self.bar.update(1 - self.shown.pop(lane.trial.number, 0.0))
        with contextlib.suppress(ValueError):  # no completed trial yet
            self.bar.set_postfix(best=f"{self.study.best_value:.4g}", refresh=False)

    def _stop(self, group: LaneGroup | None) -> None:
        """Re-queues the running (in `group`) and queued trials, then raises
        `TrainingInterrupted` (a stop request) or `_TimeUp` (the timeout)."""
        lanes = [] if group is None else group.lanes[:: self.k]
        running = [lane.trial for lane in lanes if lane is not None]
        running += [trial for queue in self.queues.values() for trial in queue]
        running = list({trial.number: trial for trial in running}.values())
        studies.requeue(self.study, [trial.number for trial in running])
        for trial in running:
            self.heartbeat.discard(trial._trial_id)
        finished = studies.finished(self.study.get_trials(deepcopy=False))
        why = f"stopped by {self.requested[0]}" if self.requested else ""
        if not why:
            why = f"the timeout of {self.options.timeout:g} s is spent"
        print(
            f"\ntune: {why}: {finished} trial(s) of the study "
            f"finished; {len(running)} running or queued trial(s) re-queued: they run again "
            "when the study continues",
            file=sys.stderr,
            flush=True,
        )
        if not self.requested:
            raise _TimeUp
        raise TrainingInterrupted(finished, self.requested[0], self.hint, unit="trial")


class _TimeUp(Exception):
    """The timeout is spent: `Tuner.run` returns (the trials were re-queued)."""
