"""`purejaxppo train --resume ROOT` of a `--num-seeds` run: all the seeds continue as one
program and end bitwise equal to the run that never stopped (CPU).

One real stop: `train --num-seeds 2` in a subprocess gets SIGTERM after its first
checkpoint (update 2 of 8); a hook there holds the run after that save until the test
has sent the signal, so the stop lands after the same segment on any machine. The run
that never stopped is computed in this process meanwhile (the same layout: 2 seeds on
1 device). Then copies of the stopped directory are resumed, refused or edited.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import jax
import numpy as np
import pandas as pd
import pytest

import purejaxppo as pjp
from purejaxppo.checkpoint import list_checkpoints, load_checkpoint
from purejaxppo.cli import main
from purejaxppo.drivers import seeds as seeds_driver
from purejaxppo.signals import StopNow

SEEDS = (3, 4)
#: 8 updates of 4 envs x 8 steps, a checkpoint every 2 (segments of 2: one program).
CONFIG = pjp.PPOConfig(
    num_envs=4,
    num_steps=8,
    total_timesteps=4 * 8 * 8,
    hidden_sizes=(8,),
    log_freq=2,
    save_freq=2,
    seed=SEEDS[0],
)
ARGS = [
    "--num-envs", "4", "--num-steps", "8", "--total-timesteps", str(4 * 8 * 8),
    "--hidden-sizes", "8", "--log-freq", "2", "--save-freq", "2", "--seed", str(SEEDS[0]),
    "--num-seeds", "2", "--devices", "1", "--no-progress", "--no-compile-cache",
]  # fmt: skip
#: The subprocess: `purejaxppo train`, held after its save of update 2 until the test
#: writes `signalled` (after its SIGTERM).
HELD = """
import sys, time
from pathlib import Path

import purejaxppo
from purejaxppo.cli import main
from purejaxppo.drivers import seeds

root, save = Path(sys.argv[1]), seeds._SeedsRun.save


def held_save(self, done, due):
    save(self, done, due)
    if done == 2:
        (root.parent / "saved").write_text("2")
        deadline = time.monotonic() + 120
        while not (root.parent / "signalled").exists() and time.monotonic() < deadline:
            time.sleep(0.05)


seeds._SeedsRun.save = held_save
sys.exit(main(["train", "--run-dir", str(root), *sys.argv[2:]]))
"""


def _wait_for(path: Path, process: subprocess.Popen, seconds: float = 240) -> None:
    deadline = time.monotonic() + seconds
    while not path.exists():
        if process.poll() is not None or time.monotonic() > deadline:
            _, err = process.communicate(timeout=30)
            raise AssertionError(f"no {path.name}: {err[-3000:]}")
        time.sleep(0.05)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """{"stopped": ROOT after SIGTERM, "err": its stderr, "code": its exit code,
    "reference": the `SeedsResult` of the same run uninterrupted, "full": its dir}."""
    tmp = tmp_path_factory.mktemp("seeds_resume")
    stopped = tmp / "stopped" / "root"
    stopped.parent.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("JAX_NUM_CPU_DEVICES", "XLA_FLAGS")}
    process = subprocess.Popen(
        [sys.executable, "-c", HELD, str(stopped), *ARGS],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        full = tmp / "full"
        reference = pjp.train_seeds(
            CONFIG, full, 2, devices=1, progress=False, plot=False, verbose=False
        )
        _wait_for(stopped.parent / "saved", process)
        process.send_signal(signal.SIGTERM)
        (stopped.parent / "signalled").write_text("")
        _, err = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    kept = tmp / "kept"  # an untouched copy of the stopped run, for the other tests
    shutil.copytree(stopped, kept)
    return {
        "stopped": stopped,
        "kept": kept,
        "err": err,
        "code": process.returncode,
        "reference": reference,
        "full": full,
    }


def _copy(runs: dict, tmp_path: Path) -> Path:
    root = tmp_path / "root"
    shutil.copytree(runs["kept"], root)
    return root


def _refused(argv: list[str], capsys) -> str:
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("purejaxppo: error: "), lines
    return lines[0]


def test_sigterm_after_the_first_checkpoint_names_the_root_to_resume(runs):
    root, err = runs["stopped"], runs["err"]
    assert runs["code"] == 143, err[-3000:]
    last = err.strip().splitlines()[-1]
    assert last == (
        "purejaxppo: train: stopped by SIGTERM after update 2, saved; continue with: "
        f"purejaxppo train --resume {root}"
    )
    assert "one seed at a time" not in err
    for seed in SEEDS:
        assert list_checkpoints(root / f"seed_{seed}") == [2]
    assert not (root / "summary.csv").exists()  # written when the run ends
    assert (root / ".purejaxppo-fingerprint.json").is_file()


def test_resume_root_is_bitwise_the_uninterrupted_run(runs, capsys):
    root, full, reference = runs["stopped"], runs["full"], runs["reference"]
    # seed_4 saved a newer step than seed_3 (a stop between the two saves): the common
    # newest step, 2, is resumed and seed_4's step 4 is set aside, not deleted.
    last = root / "seed_4" / "checkpoints" / "last"
    shutil.copytree(last / "2", last / "4")
    assert main(["train", "--resume", str(root), "--no-progress", "--no-compile-cache"]) == 0
    captured = capsys.readouterr()
    assert f"resumed 2 seeds (3..4) from update 2 (step 64) in {root}" in captured.err
    assert (root / "seed_4" / "checkpoints" / "set_aside" / "last-4").is_dir()
    assert f"run directory: {root} (seeds in seed_<s>/)" in captured.out
    for name in ["metrics.csv", "summary.csv"]:
        assert (root / name).read_bytes() == (full / name).read_bytes(), name
    for k, seed in enumerate(SEEDS):
        own, want = root / f"seed_{seed}", full / f"seed_{seed}"
        assert (own / "metrics.csv").read_bytes() == (want / "metrics.csv").read_bytes()
        assert list_checkpoints(own) == [4, 6, 8]
        params = jax.device_get(load_checkpoint(own).runner_state.train_state.params)
        mine = jax.tree.map(lambda x, k=k: x[k], reference.runner_state.train_state.params)
        jax.tree.map(np.testing.assert_array_equal, params, mine)
    assert list(pd.read_csv(root / "metrics.csv")["seed"]) == [3] * 8 + [4] * 8


def test_an_edited_config_is_refused_naming_the_field(runs, tmp_path, capsys):
    root = _copy(runs, tmp_path)
    seed_config = root / "seed_4" / "config.yaml"
    seed_config.write_text(seed_config.read_text().replace("gamma: 0.99", "gamma: 0.9"))
    line = _refused(["train", "--resume", str(root), "--no-progress"], capsys)
    assert line.startswith(
        f"purejaxppo: error: train --resume: {root / 'seed_4'} was started with "
        "config.gamma=0.99, now config.gamma=0.9: "
    )
    (root / "seed_4" / "config.yaml").write_text(
        (runs["kept"] / "seed_4" / "config.yaml").read_text()
    )
    line = _refused(["train", "--resume", str(root), "--clip-coef", "0.3"], capsys)
    assert f"train --resume: {root} was started with config.clip_coef=0.2, now " in line
    line = _refused(["train", "--resume", str(root), "--devices", "2"], capsys)
    assert "was started with layout.num_devices=1, now layout.num_devices=2" in line
    assert list_checkpoints(root / "seed_4") == [2]  # nothing changed


def test_a_seed_directory_alone_is_refused_a_copy_checks_its_config(runs, tmp_path, capsys):
    root = _copy(runs, tmp_path)
    line = _refused(["train", "--resume", str(root / "seed_3")], capsys)
    assert line == (
        f"purejaxppo: error: --resume {root / 'seed_3'}: a seed of the --num-seeds run "
        f"{root}, whose seeds train as one program: continue them together with "
        f"`purejaxppo train --resume {root}` (or copy this directory out of it to "
        "continue the seed on its own)"
    )
    alone = tmp_path / "alone"
    shutil.copytree(root / "seed_3", alone)
    config = alone / "config.yaml"
    config.write_text(config.read_text().replace("ent_coef: 0.01", "ent_coef: 0.02"))
    line = _refused(["train", "--resume", str(alone)], capsys)
    assert f"train --resume: {alone} was started with config.ent_coef=0.01, now " in line
    assert list_checkpoints(alone) == [2]


def test_a_stop_at_once_before_any_checkpoint_promises_nothing(tmp_path, monkeypatch, capsys):
    def stop_at_once(self, done, length):
        raise StopNow("SIGINT")

    monkeypatch.setattr(seeds_driver._SeedsRun, "prepare", stop_at_once)
    root = tmp_path / "root"
    with pytest.raises(StopNow) as stop:
        pjp.train_seeds(CONFIG, root, 2, devices=1, progress=False, plot=False, verbose=False)
    assert stop.value.resume_hint is None
    monkeypatch.undo()
    line = _refused(["train", "--resume", str(root), "--no-progress"], capsys)
    assert line == (
        f"purejaxppo: error: nothing to resume in {root}: no complete checkpoint in seed_3, "
        "seed_4 (the run stopped before its first save); start it again with --overwrite"
    )
