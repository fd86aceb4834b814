"""`purejaxppo train --num-seeds N` (#16): one program over the seeds, one run directory.

The run itself happens once per module, in a subprocess with 2 CPU devices (the device
count must be set before JAX starts): 3 seeds (4, 5, 6) over 2 devices, so the runs are
padded to 4. Its per-seed numbers are compared with one-call `train` runs of the same
seeds in this process (which `purejaxppo train --seed s` equals bitwise, tests/test_cli.py).
"""

from __future__ import annotations

import os
import subprocess
import sys

import jax
import numpy as np
import pandas as pd
import pytest
import yaml

import purejaxppo as pjp
from purejaxppo.cli import main
from purejaxppo.drivers.report import final_return, iqm

SEEDS = (4, 5, 6)
#: 6 updates of 4 envs x 16 steps, in segments of 3: one compile of the segment program.
TINY = {
    "num_envs": 4,
    "num_steps": 16,
    "total_timesteps": 4 * 16 * 6,
    "log_freq": 3,
    "hidden_sizes": (16, 16),
}
CONFIG = pjp.PPOConfig(**TINY, seed=SEEDS[0])
ARGS = [
    "--num-envs", "4", "--num-steps", "16", "--total-timesteps", str(4 * 16 * 6),
    "--log-freq", "3", "--hidden-sizes", "16,16", "--no-progress", "--no-compile-cache",
]  # fmt: skip


@pytest.fixture(scope="module")
def launched(tmp_path_factory):
    """(run directory, process) of `train --num-seeds 3 --devices 2 --seed 4`, started in
    the background (it compiles while this process compiles the single runs)."""
    run_dir = tmp_path_factory.mktemp("seeds") / "run"
    env = {k: v for k, v in os.environ.items() if k != "JAX_NUM_CPU_DEVICES"}
    flags = "--xla_force_host_platform_device_count=2"
    env["XLA_FLAGS"] = f"{env.get('XLA_FLAGS', '')} {flags}".strip()
    command = [sys.executable, "-m", "purejaxppo.cli", "train", "--num-seeds", "3"]
    command += ["--devices", "2", "--seed", "4", "--run-dir", str(run_dir), *ARGS]
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )
    yield run_dir, process
    if process.poll() is None:
        process.kill()
        process.communicate()


@pytest.fixture(scope="module")
def single_runs(launched):
    """seed -> one-call `train` output (one compile: the seed is only the key)."""
    train = jax.jit(pjp.make_train(CONFIG))
    return {seed: jax.device_get(train(jax.random.key(seed))) for seed in SEEDS}


@pytest.fixture(scope="module")
def seeds_run(launched, single_runs):
    """(run directory, stdout) of the finished `launched` run."""
    run_dir, process = launched
    stdout, stderr = process.communicate(timeout=300)
    assert process.returncode == 0, stderr[-4000:]
    return run_dir, stdout


def test_layout_and_per_seed_run_directories(seeds_run):
    run_dir, stdout = seeds_run
    names = {p.name for p in run_dir.iterdir()}
    assert names == {
        "config.yaml", "seeds.yaml", "metrics.csv", "summary.csv", "learning_curve.png",
        "seed_4", "seed_5", "seed_6", ".purejaxppo-run", ".purejaxppo-lock",
        ".purejaxppo-fingerprint.json",
    }  # fmt: skip
    spec = yaml.safe_load((run_dir / "seeds.yaml").read_text())
    assert spec["seeds"] == list(SEEDS) and spec["num_seeds"] == 3
    assert spec["num_devices"] == 2 and len(spec["devices"]) == 2
    assert spec["padding_runs"] == 1  # 3 seeds over 2 devices: one padding run
    assert pjp.PPOConfig.from_yaml(run_dir / "config.yaml") == CONFIG
    for seed in SEEDS:
        seed_dir = run_dir / f"seed_{seed}"
        assert pjp.PPOConfig.from_yaml(seed_dir / "config.yaml") == CONFIG.replace(seed=seed)
        assert list(pd.read_csv(seed_dir / "metrics.csv")["update"]) == [1, 2, 3, 4, 5, 6]
        assert (seed_dir / "checkpoints" / "last" / "6").is_dir()
    table = pd.read_csv(run_dir / "metrics.csv")
    assert list(table.columns[:2]) == ["seed", "update"]
    assert set(pjp.METRICS) <= set(table.columns)
    assert list(table["seed"]) == [s for s in SEEDS for _ in range(6)]
    # The final print: per-seed returns, mean ± std, the directory.
    for seed in SEEDS:
        assert f"seed {seed}: " in stdout
    assert "mean ± std over 3 seeds:" in stdout and f"run directory: {run_dir}" in stdout


def test_each_seed_equals_its_single_run(seeds_run, single_runs):
    run_dir, _ = seeds_run
    top = pd.read_csv(run_dir / "metrics.csv")
    for seed, single in single_runs.items():
        own = pd.read_csv(run_dir / f"seed_{seed}" / "metrics.csv")
        rows = top[top["seed"] == seed]
        for name in pjp.METRICS:
            want = np.asarray(single.metrics[name], np.float64)
            np.testing.assert_allclose(own[name], want, rtol=1e-5, atol=1e-6, err_msg=name)
            np.testing.assert_allclose(rows[name], want, rtol=1e-5, atol=1e-6, err_msg=name)
        policy = pjp.Policy.load(run_dir / f"seed_{seed}")
        assert policy.config.seed == seed
        jax.tree.map(
            lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6),
            jax.device_get(policy.get_params()),
            single.train_state.params,
        )


def test_policy_loads_and_acts_and_the_top_level_is_refused_clearly(seeds_run):
    run_dir, _ = seeds_run
    policy = pjp.Policy.load(run_dir / "seed_5")
    actions = policy.act(np.zeros((3, 4), np.float32), jax.random.key(0))
    assert actions.shape == (3,) and set(np.asarray(actions).tolist()) <= {0, 1}
    with pytest.raises(ValueError, match="holds several seeds.*seed_4, seed_5, seed_6"):
        pjp.Policy.load(run_dir)


def test_summary_holds_the_per_seed_final_returns_and_their_statistics(seeds_run):
    run_dir, _ = seeds_run
    top = pd.read_csv(run_dir / "metrics.csv")
    rows = [top[top["seed"] == s] for s in SEEDS]
    finals = np.array([final_return(r["episode_return"], r["episode_count"]) for r in rows])
    summary = pd.read_csv(run_dir / "summary.csv", dtype={"seed": str}).set_index("seed")
    assert list(summary.index) == ["4", "5", "6", "mean", "std", "iqm", "min", "max"]
    np.testing.assert_allclose(summary.loc[["4", "5", "6"], "final_return"], finals)
    assert (summary.loc[["4", "5", "6"], "diverged"] == 0).all()
    for name, value in [
        ("mean", finals.mean()),
        ("std", finals.std()),  # ddof=0, as pjp.sweep's summary
        ("iqm", iqm(finals)),  # 3 seeds: fewer than 4, the mean of all
        ("min", finals.min()),
        ("max", finals.max()),
    ]:
        np.testing.assert_allclose(summary.loc[name, "final_return"], value, err_msg=name)


def test_plot_is_a_png(seeds_run):
    png = (seeds_run[0] / "learning_curve.png").read_bytes()
    assert png.startswith(b"\x89PNG") and len(png) > 10_000


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--num-seeds", "0"], "--num-seeds 0: must be >= 1"),
        (["--num-seeds", "2", "--eval-freq", "5"], "--eval-freq 5 (evaluation during training) is not available with --num-seeds 2"),
        (["--num-seeds", "2", "--video-freq", "5"], "--video-freq 5 (videos during training) is not available with --num-seeds 2"),
        (["--num-seeds", "2", "--collect-freq", "5"], "--collect-freq 5 (datasets during training) is not available with --num-seeds 2"),
        (["--num-seeds", "2", "--logger", "tensorboard"], "--logger tensorboard (loggers=['csv', 'tensorboard']) is not available with --num-seeds 2"),
        (["--num-seeds", "2", "--loggers", "csv,wandb"], "--logger wandb"),
        (["--devices", "2"], "--devices 2: splits the seeds of --num-seeds N > 1"),
        (["--num-seeds", "2", "--devices", "3"], "--devices 3 is more than --num-seeds 2"),
        (["--num-seeds", "2", "--devices", "0"], "--devices 0: must be >= 1"),
    ],
)  # fmt: skip
def test_refusals_come_before_anything_runs(argv, message, tmp_path, capsys, monkeypatch):
    # Should a refusal come after the device setup, it must not change this process's.
    monkeypatch.setenv("JAX_NUM_CPU_DEVICES", "1")
    run_dir = tmp_path / "run"
    with pytest.raises(SystemExit) as exit_info:
        main(["train", "--run-dir", str(run_dir), *ARGS, *argv])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert f"purejaxppo: error: {message}" in err and "Traceback" not in err
    assert not run_dir.exists()


def test_resume_and_a_non_empty_directory_are_refused(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["train", "--num-seeds", "8", "--resume", str(tmp_path), *ARGS])
    assert exit_info.value.code == 2
    assert (
        "purejaxppo: error: --resume cannot be combined with --num-seeds 8"
        in capsys.readouterr().err
    )
    (tmp_path / "notes.txt").write_text("keep me")
    with pytest.raises(SystemExit) as exit_info:
        main(["train", "--num-seeds", "2", "--run-dir", str(tmp_path), *ARGS])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert f"run directory {tmp_path} already exists and is not empty" in err
    assert [p.name for p in tmp_path.iterdir()] == ["notes.txt"]
