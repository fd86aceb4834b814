"""#13 logging sinks: what each writes, a reader of its format reads back."""

import json
import struct
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from purejaxppo.sinks import make_sinks

ROWS = [
    {"episode_return": 9.5, "v_loss": 0.25, "action_frac/0": 0.5, "eval/train/return": np.nan},
    {"episode_return": np.nan, "v_loss": 0.125, "action_frac/0": 0.25, "eval/train/return": 3.0},
    {"episode_return": 21.0, "v_loss": 0.0625, "action_frac/0": 0.75, "eval/train/return": 4.5},
]
STEPS = [512, 1024, 1536]
CONFIG = {"env_name": "CartPole-v1", "learning_rate": 2.5e-4, "hidden_sizes": [64, 64], "x": None}


def wandb_records(run_path: Path, kind: str) -> list:
    """The `kind` records ("history", "artifact", ...) of an offline W&B run's record log.

    The log is LevelDB-style: a 7-byte file header (":W&B", magic, version), then 32 KiB
    blocks of records with a 7-byte header (crc32, length, type: 1 full, 2 first,
    3 middle, 4 last), each a serialized `wandb_internal_pb2.Record`.
    """
    from wandb.proto import wandb_internal_pb2

    data = next(run_path.glob("run-*.wandb")).read_bytes()
    assert data[:4] == b":W&B"
    pos, block, pending, records = 7, 32768, b"", []
    while pos + 7 <= len(data):
        if block - pos % block < 7:  # the rest of a block is padding
            pos += block - pos % block
            continue
        _, length, part = struct.unpack("<IHB", data[pos : pos + 7])
        pending += data[pos + 7 : pos + 7 + length]
        pos += 7 + length
        if part in (1, 4):
            record = wandb_internal_pb2.Record()
            record.ParseFromString(pending)
            pending = b""
            if record.WhichOneof("record_type") == kind:
                records.append(getattr(record, kind))
    return records


def wandb_history(run_path: Path) -> list[dict]:
    """History rows of an offline W&B run (`wandb_records`)."""
    return [
        {item.key or "/".join(item.nested_key): json.loads(item.value_json) for item in record.item}
        for record in wandb_records(run_path, "history")
    ]


@pytest.fixture(scope="module")
def logged(tmp_path_factory):
    import matplotlib
    import mlflow  # noqa: F401  (the test extra installs every backend)
    import tensorboardX  # noqa: F401
    import wandb  # noqa: F401

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    run_dir = tmp_path_factory.mktemp("run")
    mp = pytest.MonkeyPatch()
    mp.setenv("WANDB_MODE", "offline")
    mp.setenv("WANDB_SILENT", "true")
    sinks = make_sinks(["csv", "jsonl", "tensorboard", "wandb", "mlflow"], run_dir)
    sinks.log_config(CONFIG)
    for step, row in zip(STEPS, ROWS, strict=True):
        sinks.log_metrics(step, row)
    plt.plot([0, 1], [0, 1])
    plt.savefig(run_dir / "learning_curve.png")
    plt.close()
    sinks.log_image("learning_curve", run_dir / "learning_curve.png", STEPS[-1])
    wandb_path = next(s for s in sinks.sinks if type(s).__name__ == "WandbSink").run_path
    sinks.close()
    mp.undo()
    return run_dir, wandb_path


def finite_rows():
    """(name, step) -> value of every finite value logged."""
    return {
        (name, step): value
        for step, row in zip(STEPS, ROWS, strict=True)
        for name, value in row.items()
        if np.isfinite(value)
    }


def test_csv_and_jsonl(logged):
    run_dir, _ = logged
    table = pd.read_csv(run_dir / "metrics.csv")
    assert list(table["env_steps"]) == STEPS
    for name in ROWS[0]:
        np.testing.assert_array_equal(table[name].to_numpy(), [r[name] for r in ROWS])
    # metrics.jsonl is the metrics table: one record per update, nothing else.
    jsonl = pd.read_json(run_dir / "metrics.jsonl", lines=True)
    assert list(jsonl["env_steps"]) == STEPS and list(jsonl.columns) == list(table.columns)
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert records[1]["episode_return"] is None and records[2]["eval/train/return"] == 4.5
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    assert events[0] == {"config": CONFIG}
    assert events[-1]["image"] == "learning_curve"


def test_tensorboard_scalars_equal_the_csv(logged):
    from tbparse import SummaryReader

    run_dir, _ = logged
    reader = SummaryReader(str(run_dir / "tensorboard"))
    scalars = {(r.tag, r.step): r.value for r in reader.scalars.itertuples()}
    table = pd.read_csv(run_dir / "metrics.csv")
    from_csv = {
        (name, int(step)): value
        for name in ROWS[0]
        for step, value in zip(table["env_steps"], table[name], strict=True)
        if np.isfinite(value)
    }
    assert scalars.keys() == from_csv.keys()
    for key, value in from_csv.items():
        assert scalars[key] == pytest.approx(value)
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(run_dir / "tensorboard"), size_guidance={"images": 0})
    events.Reload()
    assert "learning_curve" in events.Tags()["images"]
    hparams = events.PluginTagToContent("hparams")["_hparams_/session_start_info"]
    assert b"env_name" in hparams and b"learning_rate" in hparams


def test_wandb_offline_history_has_every_metric(logged):
    _, run_path = logged
    rows = wandb_history(run_path)
    got = {(n, r["env_steps"]): v for r in rows for n, v in r.items() if n in ROWS[0]}
    assert got == finite_rows()
    assert any("learning_curve/_type" in r or "learning_curve" in r for r in rows)


def test_mlflow_store_has_params_and_metrics(logged):
    from mlflow.tracking import MlflowClient

    run_dir, _ = logged
    client = MlflowClient((run_dir / "mlruns").resolve().as_uri())
    experiment = client.get_experiment_by_name("purejaxppo")
    (run,) = client.search_runs([experiment.experiment_id])
    assert run.data.params["env_name"] == "CartPole-v1"
    assert run.data.params["hidden_sizes"] == "[64, 64]"
    got = {
        (name, m.step): m.value
        for name in ROWS[0]
        for m in client.get_metric_history(run.info.run_id, name)
    }
    assert got == finite_rows()
    assert [a.path for a in client.list_artifacts(run.info.run_id, "media")] == [
        "media/learning_curve.png"
    ]


def test_unknown_logger_and_missing_extra(tmp_path, monkeypatch):
    with pytest.raises(ValueError, match="unknown logger 'tensorbord'.*did you mean tensorboard"):
        make_sinks(["csv", "tensorbord"], tmp_path / "run")
    assert not (tmp_path / "run").exists()  # nothing created
    monkeypatch.setitem(sys.modules, "tensorboardX", None)  # import fails
    with pytest.raises(ImportError, match=r'pip install "purejaxppo\[tensorboard\]"'):
        make_sinks(["csv", "tensorboard"], tmp_path / "run")
    assert not (tmp_path / "run").exists()


def test_sweep_logs_one_run_per_setting_and_seed(tmp_path):
    """`purejaxppo sweep --loggers jsonl,tensorboard`: each (setting, seed) is its own run
    under out/runs/, with the table's metrics keyed by env steps and its setting as config."""
    import subprocess

    from tbparse import SummaryReader

    exe = Path(sys.executable).parent / "purejaxppo"
    out = tmp_path / "sweep"
    args = ["sweep", "--seeds", "2", "--grid", "ent_coef=0,0.01", "--total-timesteps", "256",
            "--num-steps", "16", "--hidden-sizes", "8", "--loggers", "jsonl,tensorboard",
            "--no-progress", "--out", str(out)]  # fmt: skip
    done = subprocess.run([str(exe), *args], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    table = pd.read_csv(out / "table.csv")
    runs = sorted((out / "runs").iterdir())
    assert [p.name for p in runs] == [f"run_{k:04d}" for k in range(4)]
    for run_id, run_dir in enumerate(runs):
        rows = table[table["run"] == run_id]
        records = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
        config = next(r for r in records if "config" in r)["config"]
        assert config["ent_coef"] == rows["config/ent_coef"].iloc[0]
        assert config["seed"] == rows["seed"].iloc[0]
        scalars = SummaryReader(str(run_dir / "tensorboard")).scalars
        v_loss = scalars[scalars["tag"] == "v_loss"].sort_values("step")
        np.testing.assert_array_equal(v_loss["step"], rows["env_steps"])
        np.testing.assert_allclose(v_loss["value"], rows["v_loss"], rtol=1e-6)
    bad = subprocess.run([str(exe), *args[:-1], str(tmp_path / "bad"), "--loggers", "tensorbord"],
                         capture_output=True, text=True, timeout=600)  # fmt: skip
    assert bad.returncode == 2 and "tensorbord" in bad.stderr
    assert not (tmp_path / "bad").exists()


@pytest.mark.parametrize("upload", [True, False])
def test_wandb_uploads_checkpoints_only_when_asked(tmp_path, monkeypatch, upload):
    """duo_ai's `store_model_checkpoint`: a checkpoint directory becomes a model artifact."""
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    checkpoint = tmp_path / "checkpoints" / "best" / "2048"
    checkpoint.mkdir(parents=True)
    (checkpoint / "params.bin").write_bytes(b"0123")
    sinks = make_sinks(["wandb"], tmp_path / "run", upload_checkpoints=upload)
    run = sinks.sinks[0]._run
    logged = []  # what the sink hands W&B (the real call still runs)
    real = run.log_artifact
    monkeypatch.setattr(
        run, "log_artifact", lambda a, **kw: logged.append((a, kw)) or real(a, **kw)
    )
    sinks.log_metrics(2048, {"episode_return": 1.0})
    sinks.log_checkpoint("best", checkpoint, 2048, aliases=["best"])
    run_path = sinks.sinks[0].run_path
    sinks.close()
    if not upload:
        assert logged == [] and wandb_records(run_path, "artifact") == []
        return
    # An offline run's record log sometimes lacks the artifact record (wandb 0.31's
    # service publishes it apart from the run's records, and `finish` can win the race,
    # about 1 run in 10 here), so the artifact is checked as the sink handed it over.
    [(artifact, kwargs)] = logged
    assert artifact.name == f"{run.id}-best" and artifact.type == "model"
    assert set(kwargs["aliases"]) >= {"latest", "step-2048", "best"}
    assert artifact.metadata == {"env_steps": 2048}
    assert sorted(artifact.manifest.entries) == ["params.bin"]


def test_log_checkpoint_names_a_missing_directory(tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "offline")
    with make_sinks(["wandb"], tmp_path / "run", upload_checkpoints=True) as sinks:
        with pytest.raises(FileNotFoundError, match="nope"):
            sinks.log_checkpoint("final", tmp_path / "nope", 1)


def test_train_uploads_best_and_final_checkpoints_to_wandb(tmp_path, monkeypatch):
    """`upload_checkpoints`: each new `best/` and the finished run's last checkpoint."""
    from purejaxppo.cli import main

    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    run = tmp_path / "run"
    argv = ["train", "--run-dir", str(run), "--logger", "wandb", "--upload-checkpoints", "true"]
    argv += ["--num-envs", "2", "--num-steps", "16", "--total-timesteps", str(2 * 16 * 4)]
    argv += ["--eval-freq", "2", "--eval-episodes", "2", "--no-progress", "--name", "my-run"]
    assert main(argv) == 0
    run_path = next((run / "wandb").glob("offline-run-*"))
    artifacts = wandb_records(run_path, "artifact")
    kinds = [a.name.rsplit("-", 1)[-1] for a in artifacts]
    assert kinds[-1] == "final" and "best" in kinds  # best at update 2 (and 4 if better)
    final = artifacts[-1]
    assert json.loads(final.metadata) == {"env_steps": 2 * 16 * 4}
    assert len(final.manifest.contents) > 0  # the checkpoint's files
    run_info = wandb_records(run_path, "run")
    assert run_info and run_info[0].display_name == "my-run"


def test_upload_checkpoints_without_wandb_is_refused_naming_the_field(tmp_path):
    import purejaxppo as pjp
    from purejaxppo.drivers.single import train_and_log

    config = pjp.PPOConfig(upload_checkpoints=True, total_timesteps=512)
    with pytest.raises(ValueError, match="upload_checkpoints=True.*--logger wandb"):
        train_and_log(config, tmp_path / "run", progress=False)
    assert not (tmp_path / "run" / "checkpoints").exists()
    with pytest.raises(ValueError, match="name"):
        pjp.PPOConfig(name="a/b").validate()


def test_one_table_names_every_built_in_sink_its_package_and_extra(capsys):
    """`SINKS` is the one list: its keys are the names the config, the command line and
    `make_sinks` take, and an optional backend's package is in its extra."""
    import tomllib

    from purejaxppo import config_checks, sinks
    from purejaxppo.cli.parser import build_parser

    assert sinks.LOGGERS == tuple(sinks.SINKS) == config_checks.LOGGERS
    assert sinks.LOGGERS == ("csv", "jsonl", "tensorboard", "wandb", "mlflow")
    pyproject = tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text())
    extras = pyproject["project"]["optional-dependencies"]
    for name, sink in sinks.SINKS.items():
        assert sink.name == name
        if sink.package is not None:
            assert any(r.startswith(sink.package) for r in extras[sink.extra]), (name, sink)
    with pytest.raises(SystemExit):
        build_parser().parse_args(["train", "--help"])
    train_help = " ".join(capsys.readouterr().out.split())
    assert "also log to jsonl / tensorboard / wandb / mlflow (repeat" in train_help


def test_a_new_sink_is_one_class_in_the_table(tmp_path, monkeypatch):
    from purejaxppo import sinks

    class RowsSink(sinks.Sink):
        name = "rows"

        def __init__(self, settings):
            self.settings, self.rows = settings, []

        @classmethod
        def for_run(cls, settings):
            return cls(settings)

        def log_metrics(self, step, metrics):
            self.rows.append((step, dict(metrics)))

    monkeypatch.setitem(sinks.SINKS, "rows", RowsSink)
    monkeypatch.setattr(sinks, "LOGGERS", (*sinks.LOGGERS, "rows"))
    with make_sinks(["rows", "jsonl"], tmp_path / "run", tags={"seed": 1}) as sink:
        sink.log_metrics(STEPS[0], ROWS[0])
    rows_sink = sink.sinks[0]
    assert rows_sink.settings.run_dir == tmp_path / "run" and rows_sink.settings.name == "run"
    assert rows_sink.settings.tags == {"seed": 1}
    assert rows_sink.rows[0][0] == STEPS[0] and (tmp_path / "run" / "metrics.jsonl").exists()
    # an optional backend whose package is missing fails before anything is created
    monkeypatch.setattr(RowsSink, "package", "no_such_package_for_rows")
    monkeypatch.setattr(RowsSink, "extra", "rows")
    with pytest.raises(ImportError, match=r"purejaxppo\[rows\]"):
        make_sinks(["rows"], tmp_path / "other")
    assert not (tmp_path / "other").exists()
