"""One setting across several tasks (`TuneOptions.task`, CleanRL's `target_scores`).

A task is an env id with the score range that normalises its objective: `ENV_ID:LOW:HIGH`
(the id may hold colons: "envpool:Hopper-v4:0:3500"). Each trial trains on every task, a
static group per task (the base config with the task's `env_name`), and is told the mean
of its normalised scores `(score - LOW) / (HIGH - LOW)`; the user attribute
`task_scores` keeps each task's own score. Its intermediate values are the mean over the
tasks so far (the finished ones' finals and the running one's value), at the env steps of
the tasks before it plus the running one's. Without tasks a study has one task, the base
config's env, with the identity normalisation (LOW 0, HIGH 1): its values are the
objective's, bitwise.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any

import numpy as np


@dataclasses.dataclass(frozen=True)
class Task:
    """An env id and the scores that normalise to 0 and 1."""

    env_id: str
    low: float = 0.0
    high: float = 1.0

    def normalize(self, score: float) -> float:
        return (score - self.low) / (self.high - self.low)

    @property
    def text(self) -> str:
        return f"{self.env_id}:{self.low:g}:{self.high:g}"


def parse_task(item: Any) -> Task:
    """`"ENV_ID:LOW:HIGH"` or `(env_id, low, high)` -> `Task`.

    Raises:
      ValueError: one line naming the task: not ENV_ID:LOW:HIGH, LOW / HIGH not finite
        numbers, or LOW >= HIGH.
    """
    if isinstance(item, str):
        parts = item.rsplit(":", 2)
    elif isinstance(item, Sequence) and len(item) == 3:
        parts = list(item)
    else:
        parts = []
    if len(parts) != 3 or not str(parts[0]).strip():
        raise ValueError(f"task {item!r}: must be ENV_ID:LOW:HIGH, e.g. CartPole-v1:0:500")
    try:
        low, high = float(parts[1]), float(parts[2])
    except (TypeError, ValueError):
        low = high = math.nan
    if not (math.isfinite(low) and math.isfinite(high)):
        raise ValueError(f"task {item!r}: LOW and HIGH must be finite numbers")
    if low >= high:
        raise ValueError(f"task {item!r}: LOW {low:g} must be below HIGH {high:g}")
    return Task(str(parts[0]).strip(), low, high)


class TaskScores:
    """Each running trial's scores on the tasks it finished (see the module docstring)."""

    def __init__(self, tasks: Sequence[Task]):
        self.tasks = tuple(tasks)
        self.finals: dict[int, dict[int, float]] = {}

    def partial(self, number: int, task: int, score: float) -> float:
        """The mean normalised score of trial `number` with `score` on `task` so far."""
        values = {**self.finals.get(number, {}), task: score}
        return float(np.mean([self.tasks[t].normalize(v) for t, v in sorted(values.items())]))

    def finish(self, number: int, task: int, score: float) -> float | None:
        """Records `score` as trial `number`'s final on `task`; returns the trial's value
        once every task is finished (None before)."""
        self.finals.setdefault(number, {})[task] = score
        if len(self.finals[number]) < len(self.tasks):
            return None
        return self.partial(number, task, score)

    def scores(self, number: int) -> dict[str, float]:
        """Each finished task's own score of trial `number`, by env id."""
        return {self.tasks[t].env_id: v for t, v in sorted(self.finals.get(number, {}).items())}

    def drop(self, number: int) -> None:
        self.finals.pop(number, None)
