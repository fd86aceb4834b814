"""The sink interface (`Sink`) and the built-in sinks: CSV, JSONL, TensorBoard, W&B,
MLflow, and their table (`SINKS`, name -> class; `LOGGERS`, its keys). `purejaxppo.sinks`
builds them (`make_sinks`); import them from there.
"""

from __future__ import annotations

import csv
import importlib
import json
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar


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


@dataclass(frozen=True)
class SinkSettings:
    """What a built-in sink's `for_run` gets from `make_sinks` (see its Args)."""

    run_dir: Path
    name: str
    group: str | None = None
    tags: Mapping[str, Any] = field(default_factory=dict)
    csv_path: Path | None = None
    append: bool = False
    upload_checkpoints: bool = False


class Sink:
    """The interface: every method is optional to override (the defaults do nothing).

    `step` is the env-step count (`UpdateMetrics.env_steps`) the values belong to.

    A built-in sink (one of `SINKS`) also sets `name` (its name in `loggers`), for an
    optional backend `package` (imported by `check_sinks` before a run starts) and
    `extra` (the `pip install "purejaxppo[extra]"` that brings it), and `for_run`.
    """

    name: ClassVar[str] = ""
    package: ClassVar[str | None] = None
    extra: ClassVar[str | None] = None

    @classmethod
    def for_run(cls, settings: SinkSettings) -> Sink:
        """The sink of a run (`make_sinks`); a built-in sink overrides it."""
        raise NotImplementedError(f"{cls.__name__} is not a built-in sink (SINKS)")

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

    name = "csv"

    @classmethod
    def for_run(cls, settings: SinkSettings) -> Sink:
        return cls(settings.csv_path or settings.run_dir / "metrics.csv")

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

    name = "jsonl"

    @classmethod
    def for_run(cls, settings: SinkSettings) -> Sink:
        return cls(settings.run_dir / "metrics.jsonl", append=settings.append)

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

    name, package, extra = "tensorboard", "tensorboardX", "tensorboard"

    @classmethod
    def for_run(cls, settings: SinkSettings) -> Sink:
        return cls(settings.run_dir / "tensorboard")

    def __init__(self, log_dir: str | Path):
        tensorboardx = require(self.package, self.extra)
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

    name, package, extra = "wandb", "wandb", "wandb"

    @classmethod
    def for_run(cls, settings: SinkSettings) -> Sink:
        return cls(
            settings.run_dir,
            name=settings.name,
            group=settings.group,
            tags=[f"{k}={v}" for k, v in settings.tags.items()],
            upload_checkpoints=settings.upload_checkpoints,
        )

    def __init__(
        self,
        run_dir: str | Path,
        project: str = "purejaxppo",
        name: str | None = None,
        group: str | None = None,
        tags: Sequence[str] = (),
        upload_checkpoints: bool = False,
    ):
        wandb = require(self.package, self.extra)
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

    name, package, extra = "mlflow", "mlflow", "mlflow"

    @classmethod
    def for_run(cls, settings: SinkSettings) -> Sink:
        tags = {k: str(v) for k, v in settings.tags.items()}
        return cls(settings.run_dir, name=settings.name, tags=tags)

    def __init__(
        self,
        run_dir: str | Path,
        experiment: str = "purejaxppo",
        name: str | None = None,
        tags: Mapping[str, str] | None = None,
        tracking_uri: str | None = None,
    ):
        require(self.package, self.extra)
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


#: The built-in sinks: name -> class (a new one is a `Sink` subclass with its `name`,
#: `package`, `extra` and `for_run`, added here).
SINKS: dict[str, type[Sink]] = {
    sink.name: sink for sink in (CSVSink, JSONLSink, TensorBoardSink, WandbSink, MLflowSink)
}
#: The names `PPOConfig.loggers`, `--logger` and `make_sinks` take.
LOGGERS: tuple[str, ...] = tuple(SINKS)
