"""Every resume checks what it resumes: a sweep whose request or base config changed since
it ran is refused in one line naming the field, never reported under the new settings."""

from __future__ import annotations

import shutil

import pytest
import yaml

import purejaxppo as pjp
from purejaxppo import fingerprint
from purejaxppo.cli import main

TINY = ["--num-envs", "4", "--num-steps", "16", "--hidden-sizes", "8", "--no-progress"]
CONFIG = pjp.PPOConfig(num_envs=4, num_steps=16, hidden_sizes=(8,), total_timesteps=64 * 4)


def test_fingerprint_names_the_first_changed_field(tmp_path):
    fields = {"config": {"gamma": 0.99, "hidden_sizes": (8,)}, "seeds": [0, 1]}
    assert fingerprint.check(tmp_path, fields, what="sweep") is False  # no record yet
    fingerprint.record(tmp_path, fields)
    assert fingerprint.check(tmp_path, fields, what="sweep") is True  # tuples as lists
    changed = {"config": {"gamma": 0.95, "hidden_sizes": (8,)}, "seeds": [0, 1, 2]}
    with pytest.raises(fingerprint.FingerprintMismatch) as err:
        fingerprint.check(tmp_path, changed, what="sweep")
    assert "was started with config.gamma=0.99, now config.gamma=0.95" in str(err.value)
    assert "(and 1 more field(s))" in str(err.value)
    assert [name for name, *_ in err.value.changes] == ["config.gamma", "seeds"]
    settings = {"settings": [{"learning_rate": 0.1}, {"learning_rate": 0.5}]}
    fingerprint.record(tmp_path, settings)
    with pytest.raises(ValueError, match=r"settings\[1\].learning_rate=0.5, now .*=0.25"):
        fingerprint.check(
            tmp_path, {"settings": [{"learning_rate": 0.1}, {"learning_rate": 0.25}]}, what="s"
        )
    with pytest.raises(ValueError, match=r"settings.length=2, now settings.length=1"):
        fingerprint.check(tmp_path, {"settings": [{"learning_rate": 0.1}]}, what="s")


def test_a_longer_resume_of_a_run_names_the_warm_start_instead(tmp_path, capsys):
    """SB3 users extend a run with `learn(more)`; here the schedules are the run's, so
    `--resume` with more steps is refused, and the line says how to train on."""
    run = tmp_path / "run"
    assert main(["train", *TINY, "--total-timesteps", "128", "--run-dir", str(run)]) == 0
    capsys.readouterr()
    with pytest.raises(SystemExit) as stop:
        main(["train", "--resume", str(run), "--total-timesteps", "256", "--no-progress"])
    assert stop.value.code == 2
    [line] = capsys.readouterr().err.strip().splitlines()[-1:]
    assert "was started with config.total_timesteps=128, now config.total_timesteps=256" in line
    assert line.endswith(f"or train on from its parameters in a new run: --init-from {run}")


def test_sweep_progress_dir_refuses_other_settings_and_foreign_chunks(tmp_path):
    progress = tmp_path / "a"
    first = pjp.sweep(CONFIG, seeds=2, grid={"ent_coef": [0.0, 0.01]}, progress_dir=progress)
    # The same call again loads every chunk: the same tables.
    again = pjp.sweep(CONFIG, seeds=2, grid={"ent_coef": [0.0, 0.01]}, progress_dir=progress)
    assert first.runs.equals(again.runs)
    # Another base config or grid value: refused, naming the field, nothing computed.
    with pytest.raises(
        fingerprint.FingerprintMismatch, match="config.gamma=0.99, now config.gamma=0.9"
    ):
        pjp.sweep(
            CONFIG.replace(gamma=0.9),
            seeds=2,
            grid={"ent_coef": [0.0, 0.01]},
            progress_dir=progress,
        )
    with pytest.raises(
        ValueError, match=r"settings\[1\].ent_coef=0.01, now settings\[1\].ent_coef=0.5"
    ):
        pjp.sweep(CONFIG, seeds=2, grid={"ent_coef": [0.0, 0.5]}, progress_dir=progress)
    # A chunk file of other settings under the same run numbers (its record gone): its
    # own digest refuses it.
    other = tmp_path / "b"
    other.mkdir()
    for chunk in progress.glob("*.npz"):
        shutil.copy(chunk, other / chunk.name)
    with pytest.raises(ValueError, match="holds the results of other settings or seeds"):
        pjp.sweep(CONFIG, seeds=2, grid={"ent_coef": [0.0, 0.5]}, progress_dir=other)


@pytest.mark.parametrize(
    ("edit", "field"),
    [
        (lambda r: r["grid"].update(learning_rate=[0.5]), "settings[0].learning_rate"),
        (lambda r: r["config"].update(gamma=0.9), "config.gamma"),
        (lambda r: r.update(seeds=[0, 1, 2]), "seeds"),
    ],
)
def test_cli_sweep_resume_refuses_an_edited_request(tmp_path, capsys, edit, field):
    out = tmp_path / "sweep"
    argv = ["sweep", "--seeds", "2", "--grid", "learning_rate=0.001", *TINY]
    assert main([*argv, "--total-timesteps", "256", "--out", str(out)]) == 0
    runs = (out / "runs.csv").read_text()
    request = yaml.safe_load((out / "request.yaml").read_text())
    edit(request)
    (out / "request.yaml").write_text(yaml.safe_dump(request, sort_keys=False))
    capsys.readouterr()
    with pytest.raises(SystemExit) as stop:
        main(["sweep", "--resume", str(out), "--no-progress"])
    assert stop.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"was started with {field}=" in err[0], err
    assert (out / "runs.csv").read_text() == runs  # the old results are untouched
