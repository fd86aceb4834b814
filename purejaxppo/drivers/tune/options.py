"""`TuneOptions`: what a study is asked to do, declared once.

The one frozen dataclass that `tune` takes, that `purejaxppo tune` turns into flags (each
field's metadata holds its argparse settings: `--seeds-per-trial K`, ...) and that the
command records in OUT/request.yaml (`record` / `from_record`). Where a tune writes and
whether it continues a study (`out`, `resume`) are `tune`'s own arguments, not options.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any

#: How a trial's seeds make its value (`aggregate`).
AGGREGATES = ("mean", "median", "iqm")


def _field(default: Any, help: str, **argparse_kwargs: Any) -> Any:
    """A field whose metadata are its flag's argparse settings (`cli.options.option`)."""
    metadata = {"help": help, **argparse_kwargs}
    if argparse_kwargs.get("action") == "append":
        return dataclasses.field(default_factory=list, metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


@dataclasses.dataclass(frozen=True)
class TuneOptions:
    """`tune`'s options (the flags of `purejaxppo tune`, the fields of request.yaml).

    Attributes:
      trials: the study's total of trials (finished, running or waiting, by any worker);
        required (None is refused).
      batch: trials trained at once, B >= 1 (the program's lanes: B x seeds_per_trial);
        a host env ("envpool:", "gymnasium:") trains one trial at a time, its seeds as
        the lanes of one pool / vector env (`lanes`).
      sampler: "tpe" (with `constant_liar`, for batches), "cmaes", "random", "qmc", or an
        Optuna sampler object (`study.SAMPLER_FACTORIES`).
      pruner: "median", "halving", "hyperband", "none", or an Optuna pruner object
        (`study.PRUNER_FACTORIES`).
      objective: "METRIC[:WINDOW]" (`objective.parse_objective`): default the mean
        episode return over the last 10% of a trial's updates; "eval_return[:EPISODES]":
        greedy evaluation at every report (`evaluation`).
      direction: "maximize" or "minimize".
      storage: an Optuna RDB storage URL ("sqlite:///study.db",
        "postgresql://user:password@host/db") or "journal:PATH" (Optuna's JournalStorage
        in a file, for a network file system); default `sqlite:///OUT/study.db` with
        `out`, in memory without (refused with `out`).
      study_name: the study's name in the storage.
      reports: intermediate values (pruning checks) per trial: segments of the largest
        divisor of num_updates at most num_updates / reports.
      seeds_per_trial: K >= 1 seeds trained per trial, as K lanes of the program; the
        trial's value and every intermediate value is `aggregate` over its K seeds'
        values (CleanRL's tuner: `num_seeds`).
      aggregate: "mean", "median" or "iqm" (the interquartile mean: the mean of the
        middle half, as rliable's, Agarwal et al. 2021) of the seeds' values.
      n_startup_trials: trials the sampler draws at random before it models the study
        (tpe, cmaes); None: Optuna's default (TPE: 10, CMA-ES: 1).
      timeout: seconds this worker tunes, compile included; then it stops asking for
        trials and ends as a stop does (the running trials re-queued, the outputs
        written); None: no limit.
      enqueue: settings queued as the new study's first trials: mappings `{field:
        value}` or "FIELD=VALUE,..." texts (`enqueue.parse_enqueued`; fields left out
        are sampled).
      enqueue_base: the base config's values of the searched fields (those in the
        space) are trial 0 of a new study.
      task: "ENV_ID:LOW:HIGH" entries (`tasks.parse_task`): each trial trains on every
        task and is told its mean normalised score (CleanRL's `target_scores`); empty:
        the base config's env alone.
    """

    trials: int | None = _field(
        None, "trials in the study, all workers together (required)", type=int, metavar="N"
    )
    batch: int = _field(8, "trials trained at once (default 8)", type=int, metavar="B")
    sampler: Any = _field("tpe", "tpe (default), cmaes, random or qmc")
    pruner: Any = _field("median", "median (default), halving, hyperband or none")
    objective: str = _field(
        "episode_return",
        "the metric averaged over the last WINDOW fraction of a trial's updates "
        "(default episode_return:0.1), or eval_return[:EPISODES]: the mean return of "
        "greedy evaluation episodes at each report (default 10)",
        metavar="METRIC[:WINDOW]",
    )
    direction: str = _field("maximize", "maximize (default) or minimize")
    storage: str | None = _field(
        None,
        "an Optuna RDB storage, e.g. postgresql://user:password@host/db, or "
        "journal:///shared/study.log (a file on NFS), shared by workers (default: "
        "sqlite:///OUT/study.db); OUT/request.yaml records it without "
        "its password: --resume OUT takes it from --storage given again or from "
        "PUREJAXPPO_STORAGE_PASSWORD",
        metavar="URL",
    )
    study_name: str = _field("tune", "the study's name (default tune)", metavar="NAME")
    reports: int = _field(
        10, "intermediate values (pruning checks) per trial", type=int, metavar="N"
    )
    seeds_per_trial: int = _field(
        1,
        "seeds trained per trial (K lanes each); the trial's value is --aggregate over "
        "them (default 1)",
        type=int,
        metavar="K",
    )
    aggregate: str = _field(
        "mean", "mean (default), median or iqm of a trial's seeds' values", choices=AGGREGATES
    )
    n_startup_trials: int | None = _field(
        None,
        "random trials before tpe / cmaes model the study (default Optuna's: tpe 10, cmaes 1)",
        type=int,
        metavar="N",
    )
    timeout: float | None = _field(
        None,
        "tune this long, compile included, then stop as Ctrl-C does (the running trials "
        "re-queued; continue with --resume OUT)",
        type=float,
        metavar="SECONDS",
    )

    enqueue: list = _field(
        None,
        "queue FIELD=VALUE,... as one of the new study's first trials (repeatable; "
        "searched fields left out are sampled)",
        action="append",
        metavar="FIELD=VALUE,...",
    )
    enqueue_base: bool = _field(
        True,
        "do not run the base config's values of the searched fields as trial 0",
        action="store_false",
        flag="--no-enqueue-base",
    )

    task: list = _field(
        None,
        "train every trial on ENV_ID too, its objective normalised to (score - LOW) / "
        "(HIGH - LOW); the trial's value is the mean over the tasks (repeatable)",
        action="append",
        metavar="ENV_ID:LOW:HIGH",
    )

    def check(self) -> None:
        """Refuses a bad count, aggregate, start-up count or timeout (one line naming the
        field and value); the sampler, pruner, objective and storage are checked where
        they are made.

        Raises:
          ValueError: trials / batch / reports / seeds_per_trial not an integer >= 1,
            an unknown aggregate, n_startup_trials < 0 or with a sampler that has no
            random start (random, qmc), a timeout that is not a number of seconds > 0.
        """
        for name in ("trials", "batch", "reports", "seeds_per_trial"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name}={value!r}: must be an integer >= 1")
        if self.aggregate not in AGGREGATES:
            raise ValueError(
                f"aggregate={self.aggregate!r}: must be one of {', '.join(AGGREGATES)}"
            )
        startup = self.n_startup_trials
        if startup is not None:
            if isinstance(startup, bool) or not isinstance(startup, int) or startup < 0:
                raise ValueError(f"n_startup_trials={startup!r}: must be an integer >= 0")
            if self.sampler not in ("tpe", "cmaes"):
                raise ValueError(
                    f"n_startup_trials={startup}: sampler {self.sampler!r} has no random "
                    "start-up trials (tpe and cmaes have)"
                )
        if isinstance(self.enqueue, (str, bytes)) or not isinstance(self.enqueue, (list, tuple)):
            raise ValueError(f"enqueue={self.enqueue!r}: must be a list of settings")
        if isinstance(self.task, (str, bytes)) or not isinstance(self.task, (list, tuple)):
            raise ValueError(f"task={self.task!r}: must be a list of ENV_ID:LOW:HIGH")
        if not isinstance(self.enqueue_base, bool):
            raise ValueError(f"enqueue_base={self.enqueue_base!r}: must be True or False")
        timeout = self.timeout
        number = isinstance(timeout, (int, float)) and not isinstance(timeout, bool)
        if timeout is not None and not (number and math.isfinite(timeout) and timeout > 0):
            raise ValueError(f"timeout={timeout!r}: must be a number of seconds > 0")

    def record(self) -> dict[str, Any]:
        """The options as request.yaml holds them (every field)."""
        return dataclasses.asdict(self)

    @classmethod
    def from_record(cls, saved: Mapping[str, Any]) -> TuneOptions:
        """The options of a request.yaml (fields it lacks take their defaults: a request
        written before they existed)."""
        return cls(**{f.name: saved[f.name] for f in dataclasses.fields(cls) if f.name in saved})
