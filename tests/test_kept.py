"""Nothing lost, nothing silent (issue #15): what a user did, and what must survive it.

Each test does what the user did (the CLI in a subprocess where the user used the CLI;
in-process `main([...])` for input errors that fail before anything is computed).
"""

from __future__ import annotations

import ast
import os
import shutil
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path

import jax
import numpy as np
import pandas as pd
import pytest

import purejaxppo as pjp
from purejaxppo import checkpoint as ckpt
from purejaxppo import guards, rundir
from purejaxppo._xla_flag import accelerator_plugin_installed
from purejaxppo.cli import main
from purejaxppo.drivers.single import train_and_log
from purejaxppo.drivers.sweeps import groups as sweep_groups

REPO = Path(__file__).resolve().parents[1]
EXE = os.path.join(os.path.dirname(sys.executable), "purejaxppo")
ENV = {**os.environ, "PYTHONPATH": f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
TINY = ["--num-envs", "4", "--num-steps", "16", "--hidden-sizes", "8", "--no-progress"]
TINY_CONFIG = pjp.PPOConfig(num_envs=4, num_steps=16, hidden_sizes=(8,), total_timesteps=256)


def cli(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([EXE, *args], capture_output=True, text=True, timeout=timeout, env=ENV)


def snapshot(path: Path) -> dict[str, bytes]:
    return {str(p.relative_to(path)): p.read_bytes() for p in path.rglob("*") if p.is_file()}


def steps_on_disk(run_dir: Path) -> list[int]:
    last = run_dir / "checkpoints" / "last"
    return sorted(int(p.name) for p in last.iterdir() if p.name.isdigit()) if last.is_dir() else []


def fake_run_dir(path: Path) -> Path:
    (path / "checkpoints" / "last" / "7").mkdir(parents=True)
    (path / "checkpoints" / "last" / "7" / "state").write_bytes(b"weights")
    (path / "metrics.csv").write_text("update,episode_return\n1,20.0\n")
    (path / "config.yaml").write_text("env_name: CartPole-v1\n")
    return path


# ---------------------------------------------------------------- 1, 7, 8: run directories
def test_existing_run_dir_keeps_every_file_whatever_fails(tmp_path, capsys):
    run_dir = fake_run_dir(tmp_path / "run")
    before = snapshot(run_dir)
    # A fresh run into it, as the user typed it: refused, naming both ways out.
    proc = cli("train", "--run-dir", str(run_dir), *TINY)
    assert proc.returncode == 2, proc.stderr
    assert "--resume" in proc.stderr and "--overwrite" in proc.stderr
    assert "Traceback" not in proc.stderr
    # --overwrite with input that fails validation: nothing changes on disk.
    for argv, message in [
        (["--seed", "99999999999999999999"], "seed=99999999999999999999: must be in"),
        (["--env-kwargs", "{max_steps_in_episode: abc}"], "max_steps_in_episode='abc'"),
        (["--env-kwargs", "{max_steps_in_episode: -5}"], "max_steps_in_episode=-5: must be >= 1"),
        (["--env-kwargs", "{gravity: [1]}"], "gravity=[1]: must be a finite number"),
        (["--env-name", "CartPol-v1"], "Close matches: CartPole-v1"),
    ]:
        with pytest.raises(SystemExit) as exit_info:
            main(["train", "--run-dir", str(run_dir), "--overwrite", *TINY, *argv])
        err = capsys.readouterr().err
        assert exit_info.value.code == 2 and message in err, err
        assert snapshot(run_dir) == before, argv
    # --overwrite never deletes a directory that is not a run directory.
    other = tmp_path / "notes"
    other.mkdir()
    (other / "thesis.tex").write_text("precious")
    with pytest.raises(SystemExit):
        main(["train", "--run-dir", str(other), "--overwrite", *TINY])
    assert "is not a purejaxppo run directory" in capsys.readouterr().err
    assert (other / "thesis.tex").read_text() == "precious"
    # A valid --overwrite replaces the old run (after validation) and warns about the
    # dropped remainder of total_timesteps (160 = 2 updates of 64 + 32).
    assert main(["train", "--run-dir", str(run_dir), "--overwrite", *TINY,
                 "--total-timesteps", "160"]) == 0  # fmt: skip
    err = capsys.readouterr().err
    assert "rounded down to 128 (2 updates of num_envs*num_steps = 64" in err
    assert "removing" in err
    assert len(pd.read_csv(run_dir / "metrics.csv")) == 2
    assert steps_on_disk(run_dir) == [2]


def test_default_run_dirs_are_unique(tmp_path):
    dirs = [rundir.default_run_dir("CartPole-v1", 0, root=tmp_path) for _ in range(20)]
    assert len(set(dirs)) == 20 and all(d.is_dir() for d in dirs)  # same second, same seed
    assert all(d.name.startswith("CartPole-v1-") and "-seed0-" in d.name for d in dirs)


# ---------------------------------------------------------------- 2: checkpoints by default
def test_default_config_killed_mid_run_resumes_bitwise(tmp_path):
    # The default config (save_freq=0), but a save interval short enough for a test:
    # the time-based default is what makes a killed run resumable.
    run_dir = tmp_path / "run"
    args = [*TINY, "--total-timesteps", str(64 * 60), "--log-freq", "1", "--seed", "7"]
    proc = subprocess.Popen(
        [EXE, "train", "--run-dir", str(run_dir), *args, "--save-minutes", "0.0005"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=ENV,
    )
    deadline = time.time() + 240
    while not steps_on_disk(run_dir) and proc.poll() is None and time.time() < deadline:
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    killed_at = steps_on_disk(run_dir)
    assert killed_at and killed_at[-1] < 60, killed_at  # killed half way, with a checkpoint
    done = cli("train", "--resume", str(run_dir), "--no-progress")
    assert done.returncode == 0, done.stderr
    assert len(steps_on_disk(run_dir)) <= 3  # keep_checkpoints=3

    config = pjp.PPOConfig(
        num_envs=4, num_steps=16, hidden_sizes=(8,), total_timesteps=64 * 60, seed=7
    )
    uninterrupted = jax.device_get(jax.jit(pjp.make_train(config))(jax.random.key(7)))
    final = ckpt.load_checkpoint(run_dir)
    assert final.update_step == 60
    jax.tree.map(
        np.testing.assert_array_equal,
        jax.device_get(final.runner_state.train_state),
        uninterrupted.train_state,
    )
    table = pd.read_csv(run_dir / "metrics.csv")
    assert list(table["update"]) == list(range(1, 61))
    np.testing.assert_array_equal(table["env_steps"], uninterrupted.metrics["env_steps"])


# ---------------------------------------------------------------- 3: damaged newest checkpoint
def test_damaged_newest_checkpoint_falls_back_to_the_previous(tmp_path):
    config = TINY_CONFIG.replace(save_freq=1, log_freq=1)  # 4 updates, a save after each
    run_dir = tmp_path / "run"
    reference = train_and_log(config, run_dir, progress=False, plot=False)
    assert steps_on_disk(run_dir) == [2, 3, 4]  # the newest 3 are kept
    for path in (run_dir / "checkpoints" / "last" / "4" / "state").rglob("*"):
        if path.is_file() and path.stat().st_size > 0:
            path.write_bytes(b"\0damaged" * 8)
    damaged = str(run_dir / "checkpoints" / "last" / "4")
    with pytest.warns(UserWarning, match=f"checkpoint {damaged} is damaged") as record:
        assert ckpt.load_checkpoint(run_dir).update_step == 3
    assert str(run_dir / "checkpoints" / "last" / "3") in str(record[0].message)
    # Resume continues from 3, sets the damaged 4 aside, ends equal to the reference.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        resumed = train_and_log(config, run_dir, progress=False, plot=False, resume=True)
    assert (run_dir / "checkpoints" / "damaged" / "last-4").is_dir()
    jax.tree.map(
        np.testing.assert_array_equal,
        jax.device_get(resumed.runner_state.train_state.params),
        jax.device_get(reference.runner_state.train_state.params),
    )
    assert ckpt.load_checkpoint(run_dir).update_step == 4

    # A meta file without `config` (every step): a ValueError, not a bare KeyError.
    for meta in (run_dir / "checkpoints" / "last").glob("*/meta/metadata"):
        meta.write_text('{"update_step": 1}')
    with pytest.raises(ValueError, match="holds no 'config'"):
        ckpt.load_checkpoint(run_dir)


# ---------------------------------------------------------------- 4: divergence
def test_nan_run_exits_3_and_keeps_its_last_finite_checkpoint(tmp_path, capsys, monkeypatch):
    # The learning rate is annealed from 2.5e-4 to 1e30: update 1 is finite, update 2 NaN.
    run_dir = tmp_path / "nan"
    proc = cli("train", "--run-dir", str(run_dir), *TINY, "--total-timesteps", "512",
               "--log-freq", "1", "--end-learning-rate", "1e30", "--max-grad-norm", "1e30")  # fmt: skip
    assert proc.returncode == 3, proc.stderr
    assert "training diverged at update 2: pg_loss is not finite" in proc.stderr
    assert "final mean episode_return" not in proc.stdout
    assert steps_on_disk(run_dir) == [1]  # the last finite state; no NaN checkpoint
    kept = ckpt.load_checkpoint(run_dir)
    assert guards.nonfinite_leaf(kept.runner_state.train_state.params) is None

    # The user's own case: NaN from the first update -> exit 3, nothing saved.
    with pytest.raises(SystemExit) as exit_info:
        main(["train", "--run-dir", str(tmp_path / "nan1"), *TINY, "--learning-rate", "1e30",
              "--max-grad-norm", "1e30", "--total-timesteps", "128"])  # fmt: skip
    assert exit_info.value.code == 3
    assert "diverged at update 1" in capsys.readouterr().err
    assert steps_on_disk(tmp_path / "nan1") == []

    # Non-finite params are never saved, and `eval` refuses them.
    nan_runner = kept.runner_state.replace(
        train_state=kept.runner_state.train_state.replace(
            params=jax.tree.map(lambda x: x * np.nan, kept.runner_state.train_state.params)
        )
    )
    with pytest.raises(ValueError, match="parameters are not finite"):
        ckpt.save_checkpoint(run_dir, nan_runner, kept.metrics, kept.config)
    monkeypatch.setattr(guards, "check_finite_params", lambda *args: None)
    ckpt.save_checkpoint(tmp_path / "forged", nan_runner, kept.metrics, kept.config)
    monkeypatch.undo()
    with pytest.raises(SystemExit) as exit_info:
        main(["eval", str(tmp_path / "forged"), "--episodes", "2"])
    assert exit_info.value.code == 2
    assert "parameters are not finite (NaN or Inf in" in capsys.readouterr().err


def test_sweep_marks_diverged_runs_and_continues_the_others():
    config = TINY_CONFIG.replace(max_grad_norm=1e30)
    result = pjp.sweep(config, seeds=2, grid={"end_learning_rate": [0.0, 1e30]}, verbose=False)
    assert result.runs["diverged"].tolist() == [0, 0, 2, 2]
    assert result.summary["num_diverged"].tolist() == [0, 2]
    healthy = result.table[result.table["setting"] == 0]
    assert np.isfinite(healthy[list(guards.LOSS_METRICS)].to_numpy()).all()


# ---------------------------------------------------------------- 5: sweeps that survive
def test_sweep_output_paths_are_checked_before_computing(tmp_path, capsys, monkeypatch):
    def no_compile(*args, **kwargs):
        raise AssertionError("computed before checking the output path")

    monkeypatch.setattr(sweep_groups, "make_train_fns", no_compile)
    existing_file = tmp_path / "results.csv"
    existing_file.write_text("keep me")
    full_dir = fake_run_dir(tmp_path / "full")
    for out, message in [(existing_file, "is not a directory"), (full_dir, "--resume")]:
        with pytest.raises(SystemExit) as exit_info:
            main(["sweep", "--seeds", "1", *TINY, "--out", str(out)])
        assert exit_info.value.code == 2
        assert message in capsys.readouterr().err
    assert existing_file.read_text() == "keep me"


def test_killed_sweep_resumes_to_identical_tables(tmp_path):
    # 4 runs, one per chunk; a chunk file is written as each finishes.
    args = ["sweep", "--seeds", "2", "--grid", "ent_coef=0,0.01", "--max-runs-per-chunk", "1",
            *TINY, "--total-timesteps", str(64 * 150)]  # fmt: skip
    killed = tmp_path / "killed"
    proc = subprocess.Popen(
        [EXE, *args, "--out", str(killed)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=ENV,
    )
    chunks = killed / "chunks"
    deadline = time.time() + 240
    while proc.poll() is None and time.time() < deadline:
        if chunks.is_dir() and any(p.suffix == ".npz" for p in chunks.iterdir()):
            break
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    done = sorted(p.name for p in chunks.glob("*.npz"))
    assert 1 <= len(done) < 4, done  # killed between chunks
    assert not (killed / "table.csv").exists()

    resumed = cli("sweep", "--resume", str(killed), "--no-progress")
    assert resumed.returncode == 0, resumed.stderr
    assert len(list(chunks.glob("*.npz"))) == 4
    assert main([*args, "--out", str(tmp_path / "whole")]) == 0
    for name in ("table.csv", "runs.csv", "summary.csv"):
        assert (killed / name).read_bytes() == (tmp_path / "whole" / name).read_bytes(), name


# ---------------------------------------------------------------- 6: the XLA flag
def test_xla_flag_warning_when_gymnax_is_imported_first():
    env = {k: v for k, v in ENV.items() if k != "XLA_FLAGS"}

    def python(code: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120
        )

    late = python("import gymnax, purejaxppo")
    assert late.returncode == 0, late.stderr
    assert "JAX's CPU backend started before purejaxppo was imported" in late.stderr
    assert 'export XLA_FLAGS="--xla_cpu_enable_concurrency_optimized_scheduler=false"' in (
        late.stderr
    )
    early = python("import os, purejaxppo, gymnax; print(os.environ['XLA_FLAGS'])")
    assert early.returncode == 0 and "RuntimeWarning" not in early.stderr, early.stderr
    level = [] if accelerator_plugin_installed() else ["--xla_backend_optimization_level=2"]
    assert early.stdout.split() == [
        "--xla_cpu_enable_concurrency_optimized_scheduler=false",
        *level,  # on a CPU-only install
    ]


@pytest.mark.parametrize(
    ("environ", "expected"),
    [
        ({}, "" if accelerator_plugin_installed() else "--xla_backend_optimization_level=2"),
        ({"JAX_PLATFORMS": "cpu"}, "--xla_backend_optimization_level=2"),
        ({"XLA_FLAGS": "--xla_backend_optimization_level=3"}, "--xla_backend_optimization_level=3"),
        ({"JAX_PLATFORMS": "cuda"}, ""),  # an accelerator: XLA's own default
        ({"JAX_PLATFORMS": "cpu,cuda"}, ""),
    ],
)
def test_xla_level_2_on_the_cpu_unless_the_user_chose(environ, expected):
    """`import purejaxppo` sets XLA's optimisation level 2 where only the CPU runs, never
    over the user's own level, and never where JAX may pick an accelerator."""
    env = {k: v for k, v in ENV.items() if k not in ("XLA_FLAGS", "JAX_PLATFORMS")}
    code = "import os, purejaxppo; print(os.environ.get('XLA_FLAGS', ''))"
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={**env, **environ},
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    levels = [f for f in out.stdout.split() if f.startswith("--xla_backend_optimization_level")]
    assert levels == ([expected] if expected else []), out.stdout


# ---------------------------------------------------------------- 7: small ones
def test_yaml_errors_name_file_and_line(tmp_path, capsys):
    broken = tmp_path / "broken.yaml"
    broken.write_text("env_name: CartPole-v1\nhidden_sizes: [64, 64\nnum_envs: 4\n")
    twice = tmp_path / "twice.yaml"
    twice.write_text("learning_rate: 1e-3\nnum_envs: 4\nlearning_rate: 3e-4\n")
    cases = [
        (["--config", str(broken)], f"{broken}, line 3"),
        (["--config", str(twice)], f"{twice}, line 3: duplicate key 'learning_rate'"),
        (["--env-kwargs", "{gravity: 1, gravity: 2}"], "duplicate key 'gravity'"),
    ]
    for argv, message in cases:
        with pytest.raises(SystemExit) as exit_info:
            main(["train", "--run-dir", str(tmp_path / "r"), *argv])
        err = capsys.readouterr().err
        assert exit_info.value.code == 2 and message in err and "Traceback" not in err, err
    assert not (tmp_path / "r").exists()


# ---------------------------------------------------------------- 10: CI guarantees
HUNG_TEST = """
import ctypes

def test_hangs_in_native_code():
    libc = ctypes.CDLL(None)  # releases the GIL, like an XLA wait
    mutex = ctypes.create_string_buffer(64)  # a zeroed pthread_mutex_t: default, unlocked
    libc.pthread_mutex_lock(mutex)
    libc.pthread_mutex_lock(mutex)  # self-deadlock: signals cannot interrupt it
"""


def test_hung_native_call_fails_within_timeout(tmp_path):
    (tmp_path / "test_hung.py").write_text(HUNG_TEST)
    start = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-c", str(REPO / "pyproject.toml"), "--rootdir",
         str(tmp_path), "-p", "no:cacheprovider", "--timeout", "5", str(tmp_path)],
        capture_output=True, text=True, timeout=120, cwd=tmp_path,
    )  # fmt: skip
    elapsed = time.monotonic() - start
    assert proc.returncode != 0
    assert "Timeout" in proc.stdout + proc.stderr, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert elapsed < 60, elapsed


def test_every_imported_package_is_a_declared_dependency():
    import tomllib  # Python >= 3.11 (CI runs 3.11)

    declared = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    names = {
        spec.split(">")[0].split("=")[0].split("<")[0].split("[")[0].strip().lower()
        for spec in declared["dependencies"]
        + [s for extra in declared["optional-dependencies"].values() for s in extra]
    }
    distribution = {
        "yaml": "pyyaml",
        "orbax": "orbax-checkpoint",
        "sklearn": "scikit-learn",
        "PIL": "pillow",
        "tensorboardX": "tensorboardx",
        "mujoco_playground": "playground",
    }
    local = set(sys.stdlib_module_names) | {"purejaxppo", "__future__"}
    imported = set()
    for path in (REPO / "purejaxppo").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                imported |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                imported.add(node.module.split(".")[0])
    missing = {distribution.get(name, name) for name in imported - local} - names
    assert not missing, f"imported but not declared in pyproject.toml: {sorted(missing)}"
    assert shutil.which("ruff") is None or "ruff check ." in (REPO / ".ci" / "run").read_text()


def test_a_named_run_gets_a_directory_of_its_name(tmp_path):
    path = rundir.default_run_dir("CartPole-v1", 0, root=tmp_path, name="lr-sweep-a")
    assert path.parent == tmp_path and path.name.startswith("lr-sweep-a-")
    assert path.is_dir() and len(path.name) == len("lr-sweep-a-") + 6
