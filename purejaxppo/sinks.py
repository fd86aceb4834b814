"""Logging sinks: one small interface over CSV / JSONL, TensorBoard, W&B and MLflow.

Every sink gets the resolved config as hyperparameters (`log_config`), every per-update
metric keyed by env steps (`log_metrics`), and media (`log_image` for the learning-curve
PNG, `log_video` for recorded episodes). `make_sinks(["tensorboard", "wandb"], run_dir,
...)` builds them; `purejaxppo train --loggers tensorboard,wandb` (config field `loggers`)
uses them. The optional backends need their extras (`pip install "purejaxppo[tensorboard]"`,
`[wandb]`, `[mlflow]`); a missing one raises `ImportError` naming it.

The built-in sinks are one table, `SINKS` (name -> class, kept beside the classes at the
end of `purejaxppo.sink_types`): each class carries its name, the package and extra of an
optional backend, and `for_run`, how `make_sinks` builds it for a run directory; `LOGGERS`
(the names `PPOConfig.loggers` and `--logger` take) is its keys.

Where each writes (under `run_dir`) and how to open it:

| sink | files | open with |
| --- | --- | --- |
| csv | `metrics.csv` | pandas, a spreadsheet |
| jsonl | `metrics.jsonl` (one JSON object per update), `events.jsonl` (config, media) | `pandas.read_json(..., lines=True)` |
| tensorboard | `tensorboard/events.out.tfevents.*` | `tensorboard --logdir RUN_DIR/tensorboard` |
| wandb | `wandb/offline-run-*` (offline unless `WANDB_MODE=online`) | `wandb sync RUN_DIR/wandb/offline-run-*` |
| mlflow | `mlruns/` (file store) | `mlflow ui --backend-store-uri file:RUN_DIR/mlruns` |

NaN values (no episode ended in an update, no evaluation at this update) are skipped by
TensorBoard, W&B and MLflow, and written as empty cells / `null` by CSV / JSONL.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from purejaxppo.errors import did_you_mean
from purejaxppo.sink_types import (
    LOGGERS,
    SINKS,
    CSVSink,
    JSONLSink,
    MLflowSink,
    Sink,
    SinkSettings,
    TensorBoardSink,
    WandbSink,
    require,
)

__all__ = [
    "LOGGERS",
    "SINKS",
    "CSVSink",
    "JSONLSink",
    "MLflowSink",
    "MultiSink",
    "Sink",
    "SinkSettings",
    "TensorBoardSink",
    "WandbSink",
    "check_sinks",
    "make_sinks",
    "require",
]


class MultiSink(Sink):
    """Fans every call out to several sinks (closing all even if one fails)."""

    def __init__(self, sinks: Iterable[Sink]):
        self.sinks = list(sinks)

    def log_config(self, config: Mapping[str, Any]) -> None:
        for sink in self.sinks:
            sink.log_config(config)

    def log_metrics(self, step: int, metrics: Mapping[str, float]) -> None:
        for sink in self.sinks:
            sink.log_metrics(step, metrics)

    def log_image(self, name: str, path: str | Path, step: int) -> None:
        for sink in self.sinks:
            sink.log_image(name, path, step)

    def log_video(self, name: str, path: str | Path, step: int) -> None:
        for sink in self.sinks:
            sink.log_video(name, path, step)

    def log_checkpoint(
        self, name: str, path: str | Path, step: int, aliases: Sequence[str] = ()
    ) -> None:
        for sink in self.sinks:
            sink.log_checkpoint(name, path, step, aliases)

    def close(self) -> None:
        errors = []
        for sink in self.sinks:
            try:
                sink.close()
            except Exception as err:  # noqa: BLE001 - close the others, then re-raise
                errors.append(err)
        if errors:
            raise errors[0]


def check_loggers(names: Sequence[str]) -> tuple[str, ...]:
    """Validates logger names (ValueError naming the unknown one and the choices)."""
    for name in names:
        if name not in LOGGERS:
            hint = did_you_mean(name, LOGGERS, n=2)
            raise ValueError(f"unknown logger {name!r}: must be one of {LOGGERS}{hint}")
    return tuple(names)


def check_sinks(names: Sequence[str]) -> None:
    """Validates names and imports every backend's package, creating nothing.

    Raises:
      ValueError: an unknown name. ImportError: naming the extra of a missing package.
    """
    check_loggers(names)
    for logger in names:
        sink = SINKS[logger]
        if sink.package is not None:
            require(sink.package, sink.extra)


def make_sinks(
    names: Sequence[str],
    run_dir: str | Path,
    *,
    name: str | None = None,
    group: str | None = None,
    tags: Mapping[str, Any] | None = None,
    csv_path: str | Path | None = None,
    append: bool = False,
    upload_checkpoints: bool = False,
) -> MultiSink:
    """Builds the sinks `names` (any of `LOGGERS`) writing under `run_dir`.

    Args:
      names: e.g. `["csv", "tensorboard"]`.
      run_dir: the run directory (created).
      name: run name for W&B / MLflow (default: the directory's name).
      group: W&B group (sweeps).
      tags: tags (W&B: "key=value" strings; MLflow: run tags).
      csv_path: where "csv" writes (default `run_dir/metrics.csv`); `purejaxppo train`
        writes metrics.csv itself and leaves "csv" out here.
      append: continue metrics.jsonl (a resumed run); TensorBoard adds an event file,
        W&B and MLflow start a new run.
      upload_checkpoints: W&B uploads the checkpoints given to `log_checkpoint` as
        model artifacts (`WandbSink`); the other sinks ignore them.

    Raises:
      ValueError: for an unknown name (nothing is created then).
      ImportError: naming the extra to install for a missing backend.
    """
    check_sinks(names)
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    settings = SinkSettings(
        run_dir=run_dir,
        name=name or run_dir.name,
        group=group,
        tags=dict(tags or {}),
        csv_path=None if csv_path is None else Path(csv_path),
        append=append,
        upload_checkpoints=upload_checkpoints,
    )
    sinks: list[Sink] = []
    try:
        for logger in dict.fromkeys(names):
            sinks.append(SINKS[logger].for_run(settings))
    except BaseException:
        MultiSink(sinks).close()
        raise
    return MultiSink(sinks)
