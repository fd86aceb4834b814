"""Logging sinks: one small interface over CSV / JSONL, TensorBoard, W&B and MLflow.

Every sink gets the resolved config as hyperparameters (`log_config`), every per-update
metric keyed by env steps (`log_metrics`), and media (`log_image` for the learning-curve
PNG, `log_video` for recorded episodes). `make_sinks(["tensorboard", "wandb"], run_dir,
...)` builds them; `purejaxppo train --loggers tensorboard,wandb` (config field `loggers`)
uses them. The optional backends need their extras (`pip install "purejaxppo[tensorboard]"`,
`[wandb]`, `[mlflow]`); a missing one raises `ImportError` naming it.

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

import csv
import importlib
import json
import math
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from purejaxppo.config import LOGGERS

__all__ = [
    "LOGGERS",
    "CSVSink",
    "JSONLSink",
    "MLflowSink",
    "MultiSink",
    "Sink",
    "TensorBoardSink",
    "WandbSink",
    "check_sinks",
    "make_sinks",
    "require",
]

#: extra -> (module to import, pip requirement) for the optional backends.
EXTRAS = {
    "tensorboard": "tensorboardX",
    "wandb": "wandb",
    "mlflow": "mlflow",
    "video": "imageio",
    "minari": "minari",
}


def require(module: str, extra: str) -> Any:
    """Imports `module`, or raises ImportError naming `pip install "purejaxppo[extra]"`."""
    try:
        return importlib.import_module(module)
    except ImportError as err:
        raise ImportError(
            f"{module} is not installed; it is an optional dependency of purejaxppo: "
            f'pip install "purejaxppo[{extra}]"'
        ) from err


def _finite(metrics: Mapping[str, Any]) -> dict[str, float]:
    out = {}
    for name, value in metrics.items():
        value = float(value)
        if math.isfinite(value):
            out[name] = value
    return out


def flat_config(config: Mapping[str, Any]) -> dict[str, Any]:
    """A config dict with lists / dicts as strings (hyperparameter tables want scalars)."""
    out = {}
    for name, value in config.items():
        if value is None or isinstance(value, (bool, int, float, str)):
            out[name] = value if value is not None else "null"
        else:
            out[name] = json.dumps(value, sort_keys=True)
    return out


class Sink:
    """The interface: every method is optional to override (the defaults do nothing).

    `step` is the env-step count (`UpdateMetrics.env_steps`) the values belong to.
    """

    def log_config(self, config: Mapping[str, Any]) -> None:
        """The resolved config (`PPOConfig.to_dict()`) and tags, once, at the start."""

    def log_metrics(self, step: int, metrics: Mapping[str, float]) -> None:
        """One row of metrics (floats; NaN where there is no value)."""

    def log_image(self, name: str, path: str | Path, step: int) -> None:
        """A PNG file (e.g. the learning curve)."""

    def log_video(self, name: str, path: str | Path, step: int) -> None:
        """A GIF / MP4 file of a recorded episode."""

    def log_checkpoint(
        self, name: str, path: str | Path, step: int, aliases: Sequence[str] = ()
    ) -> None:
        """A checkpoint directory (`path`, e.g. `run_dir/checkpoints/best/<step>`) saved
        at env step `step`; `name` is its role ("best", "final"), `aliases` extra labels."""

    def close(self) -> None:
        """Flush and release files / runs; the sink must not be used afterwards."""

    def __enter__(self) -> Sink:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class CSVSink(Sink):
    """`path` (default `run_dir/metrics.csv`): header from the first row, later new
    columns are dropped (a table has one set of columns); NaN as an empty cell."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self._file = None
        self._writer: csv.DictWriter | None = None

    def log_metrics(self, step: int, metrics: Mapping[str, float]) -> None:
        row = {"env_steps": step, **{k: float(v) for k, v in metrics.items()}}
        if self._writer is None:
            self._file = self.path.open("w", newline="")
            self._writer = csv.DictWriter(self._file, fieldnames=list(row), extrasaction="ignore")
            self._writer.writeheader()
        self._writer.writerow({k: "" if math.isnan(v) else v for k, v in row.items()})
        self._file.flush()

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


class JSONLSink(Sink):
    """`path` (default `run_dir/metrics.jsonl`): one JSON object per update (`null` for
    NaN), nothing else, so `pandas.read_json(path, lines=True)` is the metrics table. The
    config (`{"config": ...}`) and media (`{"image" / "video": name, "path": ...}`) records
    go to `events.jsonl` beside it (the config is also in `config.yaml`)."""

    def __init__(self, path: str | Path, append: bool = False):
        self.path = Path(path)
        self.events_path = self.path.with_name("events.jsonl")
        mode = "a" if append else "w"
        self._file = self.path.open(mode)
        self._events = self.events_path.open(mode)

    @staticmethod
    def _write(file: Any, record: Mapping[str, Any]) -> None:
        file.write(json.dumps(record) + "\n")
        file.flush()

    def log_config(self, config: Mapping[str, Any]) -> None:
        self._write(self._events, {"config": dict(config)})

    def log_metrics(self, step: int, metrics: Mapping[str, float]) -> None:
        values = {k: (None if math.isnan(float(v)) else float(v)) for k, v in metrics.items()}
        self._write(self._file, {"env_steps": step, **values})

    def log_image(self, name: str, path: str | Path, step: int) -> None:
        self._write(self._events, {"env_steps": step, "image": name, "path": str(path)})

    def log_video(self, name: str, path: str | Path, step: int) -> None:
        self._write(self._events, {"env_steps": step, "video": name, "path": str(path)})

    def close(self) -> None:
        self._file.close()
        self._events.close()


class TensorBoardSink(Sink):
    """TensorBoard event file in `log_dir` (tensorboardX): scalars per metric, the config
    as hparams (HPARAMS tab) and as a YAML text, PNGs as images, GIFs as (animated) image
    summaries. Needs `purejaxppo[tensorboard]`."""

    def __init__(self, log_dir: str | Path):
        tensorboardx = require("tensorboardX", "tensorboard")
        self.log_dir = Path(log_dir)
        self._writer = tensorboardx.SummaryWriter(logdir=str(self.log_dir))

    def log_config(self, config: Mapping[str, Any]) -> None:
        import yaml
        from tensorboardX.summary import hparams

        for summary in hparams(flat_config(config), {}):
            self._writer.file_writer.add_summary(summary)
        text = yaml.safe_dump(dict(config), sort_keys=False)
        self._writer.add_text("config", "```\n" + text + "\n```", 0)

    def log_metrics(self, step: int, metrics: Mapping[str, float]) -> None:
        for name, value in _finite(metrics).items():
            self._writer.add_scalar(name, value, step)

    def _encoded_image(self, name: str, path: Path, step: int) -> None:
        from PIL import Image
        from tensorboardX.proto.summary_pb2 import Summary

        with Image.open(path) as image:
            width, height = image.size
        encoded = Summary.Image(
            height=height, width=width, colorspace=3, encoded_image_string=path.read_bytes()
        )
        summary = Summary(value=[Summary.Value(tag=name, image=encoded)])
        self._writer.file_writer.add_summary(summary, step)

    def log_image(self, name: str, path: str | Path, step: int) -> None:
        self._encoded_image(name, Path(path), step)

    def log_video(self, name: str, path: str | Path, step: int) -> None:
        path = Path(path)
        if path.suffix.lower() == ".gif":  # TensorBoard's image tab plays GIFs
            self._encoded_image(name, path, step)

    def close(self) -> None:
        self._writer.close()


class WandbSink(Sink):
    """A Weights & Biases run in `run_dir/wandb`. Offline unless `WANDB_MODE` says
    otherwise (sync later with `wandb sync`); never needs a network offline. Needs
    `purejaxppo[wandb]`.

    Args:
      run_dir: the run directory (W&B writes `run_dir/wandb/...`).
      project: W&B project (default "purejaxppo").
      name: the run's display name.
      group: W&B group (sweeps: one group per sweep, one run per (setting, seed)).
      tags: extra tags.
      upload_checkpoints: `log_checkpoint` uploads each checkpoint it is given as a W&B
        model artifact (duo_ai's `store_model_checkpoint`): artifact "<run id>-<name>"
        (e.g. "-best", "-final"), type "model", aliases "latest", "step-<env steps>" and
        the caller's, metadata `env_steps`. Offline runs stage the files with the run
        (`wandb sync` uploads them). False (default): checkpoints stay local.
    """

    def __init__(
        self,
        run_dir: str | Path,
        project: str = "purejaxppo",
        name: str | None = None,
        group: str | None = None,
        tags: Sequence[str] = (),
        upload_checkpoints: bool = False,
    ):
        wandb = require("wandb", "wandb")
        self._wandb = wandb
        self.upload_checkpoints = upload_checkpoints
        self._run = wandb.init(
            project=project,
            name=name,
            group=group,
            tags=list(tags),
            dir=str(run_dir),
            mode=os.environ.get("WANDB_MODE", "offline"),
            reinit="create_new",
            settings=wandb.Settings(silent=True, console="off", x_disable_stats=True),
        )
        self._run.define_metric("env_steps")
        self._run.define_metric("*", step_metric="env_steps")

    @property
    def run_path(self) -> Path:
        """The run's local directory (`run_dir/wandb/offline-run-...`)."""
        return Path(self._run.dir).parent

    def log_config(self, config: Mapping[str, Any]) -> None:
        self._run.config.update(dict(config), allow_val_change=True)

    def log_metrics(self, step: int, metrics: Mapping[str, float]) -> None:
        self._run.log({**_finite(metrics), "env_steps": step})

    def log_image(self, name: str, path: str | Path, step: int) -> None:
        self._run.log({name: self._wandb.Image(str(path)), "env_steps": step})

    def log_video(self, name: str, path: str | Path, step: int) -> None:
        fmt = Path(path).suffix.lstrip(".").lower()
        self._run.log({name: self._wandb.Video(str(path), format=fmt), "env_steps": step})

    def log_checkpoint(
        self, name: str, path: str | Path, step: int, aliases: Sequence[str] = ()
    ) -> None:
        if not self.upload_checkpoints:
            return
        path = Path(path)
        if not path.is_dir():
            raise FileNotFoundError(f"log_checkpoint: {path} is not a checkpoint directory")
        artifact = self._wandb.Artifact(
            name=f"{self._run.id}-{name}", type="model", metadata={"env_steps": int(step)}
        )
        artifact.add_dir(str(path))
        self._run.log_artifact(artifact, aliases=["latest", f"step-{int(step)}", *aliases])

    def close(self) -> None:
        self._run.finish()


class MLflowSink(Sink):
    """An MLflow run in a local file store (`tracking_uri`, default
    `file:<run_dir>/mlruns`): the config as params, metrics with `step` = env steps,
    media as artifacts under `media/`. Needs `purejaxppo[mlflow]`. (MLflow >= 3.7 puts
    the file store in maintenance mode; this sink sets `MLFLOW_ALLOW_FILE_STORE=true` for
    it unless already set.)

    Args:
      run_dir: the run directory.
      experiment: MLflow experiment name (default "purejaxppo").
      name: the run's name.
      tags: tags of the run (sweeps: the setting's values).
      tracking_uri: any MLflow tracking URI (default the local file store).
    """

    def __init__(
        self,
        run_dir: str | Path,
        experiment: str = "purejaxppo",
        name: str | None = None,
        tags: Mapping[str, str] | None = None,
        tracking_uri: str | None = None,
    ):
        require("mlflow", "mlflow")
        from mlflow.tracking import MlflowClient

        self.tracking_uri = tracking_uri or (Path(run_dir).resolve() / "mlruns").as_uri()
        if self.tracking_uri.startswith("file:"):
            # MLflow >= 3.7 refuses the file store unless told (it is in maintenance mode,
            # still read by `mlflow ui`); pass tracking_uri="sqlite:///..." to use a DB.
            os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
        self._client = MlflowClient(tracking_uri=self.tracking_uri)
        found = self._client.get_experiment_by_name(experiment)
        experiment_id = found.experiment_id if found else self._client.create_experiment(experiment)
        self._run = self._client.create_run(experiment_id, run_name=name, tags=dict(tags or {}))
        self.run_id = self._run.info.run_id

    def log_config(self, config: Mapping[str, Any]) -> None:
        from mlflow.entities import Param

        params = [Param(k, str(v)[:6000]) for k, v in flat_config(config).items()]
        for start in range(0, len(params), 100):  # MLflow's batch limit
            self._client.log_batch(self.run_id, params=params[start : start + 100])

    def log_metrics(self, step: int, metrics: Mapping[str, float]) -> None:
        import time

        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        rows = [Metric(k, v, now, int(step)) for k, v in _finite(metrics).items()]
        for start in range(0, len(rows), 1000):
            self._client.log_batch(self.run_id, metrics=rows[start : start + 1000])

    def log_image(self, name: str, path: str | Path, step: int) -> None:
        self._client.log_artifact(self.run_id, str(path), artifact_path="media")

    log_video = log_image

    def close(self) -> None:
        self._client.set_terminated(self.run_id)


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
    import difflib

    for name in names:
        if name not in LOGGERS:
            close = difflib.get_close_matches(name, LOGGERS, n=2)
            hint = f"; did you mean {', '.join(close)}?" if close else ""
            raise ValueError(f"unknown logger {name!r}: must be one of {LOGGERS}{hint}")
    return tuple(names)


def check_sinks(names: Sequence[str]) -> None:
    """Validates names and imports every backend's package, creating nothing.

    Raises:
      ValueError: an unknown name. ImportError: naming the extra of a missing package.
    """
    check_loggers(names)
    for logger in names:
        if logger in ("tensorboard", "wandb", "mlflow"):
            require(EXTRAS[logger], logger)


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
    name = name or run_dir.name
    tags = tags or {}
    build: dict[str, Callable[[], Sink]] = {  # each of `LOGGERS` (`check_sinks` checked)
        "csv": lambda: CSVSink(csv_path or run_dir / "metrics.csv"),
        "jsonl": lambda: JSONLSink(run_dir / "metrics.jsonl", append=append),
        "tensorboard": lambda: TensorBoardSink(run_dir / "tensorboard"),
        "wandb": lambda: WandbSink(
            run_dir,
            name=name,
            group=group,
            tags=[f"{k}={v}" for k, v in tags.items()],
            upload_checkpoints=upload_checkpoints,
        ),
        "mlflow": lambda: MLflowSink(run_dir, name=name, tags={k: str(v) for k, v in tags.items()}),
    }
    sinks: list[Sink] = []
    try:
        for logger in dict.fromkeys(names):
            sinks.append(build[logger]())
    except BaseException:
        MultiSink(sinks).close()
        raise
    return MultiSink(sinks)
