"""One writer per output directory, nothing deleted that purejaxppo did not write (issue #24).

Each test fails on the code before issue #24: `--overwrite` deleted any directory holding a
`config.yaml`; two writers on one directory were not locked out; `pbt` wrote into a
non-empty `--out` and crashed resuming a finished run.
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import pytest

import purejaxppo as pjp
from purejaxppo import rundir
from purejaxppo.cli import main

REPO = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
TINY = ["--num-envs", "4", "--num-steps", "16", "--hidden-sizes", "8", "--no-progress"]
TINY += ["--total-timesteps", "128"]


def snapshot(path: Path) -> dict[str, bytes]:
    return {str(p.relative_to(path)): p.read_bytes() for p in path.rglob("*") if p.is_file()}


# ---------------------------------------------------------------- 4: the marker
def test_overwrite_refuses_a_project_with_a_config_yaml(tmp_path, capsys):
    project = tmp_path / "project"
    (project / ".git").mkdir(parents=True)
    (project / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (project / "src").mkdir()
    (project / "src" / "model.py").write_text("precious = 1\n")
    (project / "config.yaml").write_text("env_name: CartPole-v1\n")
    before = snapshot(project)
    with pytest.raises(SystemExit) as exit_info:
        main(["train", "--run-dir", str(project), "--overwrite", *TINY])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2
    assert "holds entries purejaxppo does not write (.git, src)" in err, err
    assert snapshot(project) == before


def test_a_run_writes_the_marker_and_overwrite_keeps_foreign_dirs_safe(tmp_path, capsys):
    run_dir = tmp_path / "run"
    assert main(["train", "--run-dir", str(run_dir), *TINY]) == 0
    assert rundir.read_marker(run_dir) == {"format": str(rundir.FORMAT_VERSION), "kind": "run"}
    assert not (run_dir / rundir.LOCK_PID).exists()  # released at the end
    # Marked: --overwrite replaces it.
    (run_dir / "notes.txt").write_text("the user's notes, inside a run dir")
    assert main(["train", "--run-dir", str(run_dir), "--overwrite", *TINY]) == 0
    assert "removing the previous contents" in capsys.readouterr().err
    assert not (run_dir / "notes.txt").exists() and (run_dir / "metrics.csv").is_file()
    # A directory without the marker is refused, naming what it holds.
    other = tmp_path / "data"
    other.mkdir()
    (other / "a.npz").write_bytes(b"x")
    with pytest.raises(
        rundir.DirectoryNotEmpty, match=r"no \.purejaxppo-run marker; it holds a\.npz"
    ):
        rundir.check_fresh(other, overwrite=True)
    # A sweep directory is not a run directory.
    rundir.write_marker(other, "sweep")
    with pytest.raises(rundir.DirectoryNotEmpty, match="holds a purejaxppo 'sweep' output"):
        rundir.check_fresh(other, overwrite=True, what="run")
    assert (other / "a.npz").is_file()


def test_default_names_are_sanitised(tmp_path):
    path = rundir.default_run_dir("gymnasium:phys2d/CartPole-v1", 0, root=tmp_path)
    assert path.parent == tmp_path and path.name.startswith("gymnasium_phys2d_CartPole-v1-")


# ---------------------------------------------------------------- 3: one writer
HOLDER = textwrap.dedent(
    """
    import sys, time
    from purejaxppo import rundir
    with rundir.claim(sys.argv[1], "run"):
        print("claimed", flush=True)
        time.sleep(120)
    """
)


def test_a_second_writer_is_refused_and_a_killed_writer_does_not_block_resume(tmp_path, capsys):
    run_dir = tmp_path / "run"
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(run_dir)], stdout=subprocess.PIPE, text=True, env=ENV
    )
    try:
        assert holder.stdout.readline().strip() == "claimed"
        assert (run_dir / rundir.LOCK_PID).read_text().strip() == str(holder.pid)
        with pytest.raises(rundir.DirectoryLocked, match=f"in use by process {holder.pid}"):
            with rundir.claim(run_dir, "run", resume=True):
                pass
        # The CLI: a one-line error naming the directory and the process id.
        (run_dir / "config.yaml").write_text("env_name: CartPole-v1\n")
        with pytest.raises(SystemExit) as exit_info:
            main(["train", "--resume", str(run_dir), "--no-progress"])
        err = capsys.readouterr().err
        assert exit_info.value.code == 2 and err.count("\n") == 1, err
        assert f"{run_dir} is in use by process {holder.pid}" in err
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    # The lock file and the pid file are left behind, but the OS lock died with it.
    assert (run_dir / rundir.LOCK).exists() and (run_dir / rundir.LOCK_PID).exists()
    with rundir.claim(run_dir, "run", resume=True):
        assert (run_dir / rundir.LOCK_PID).read_text().strip() == str(os.getpid())


def test_two_fresh_writers_never_share_a_directory(tmp_path):
    run_dir = tmp_path / "run"
    with rundir.claim(run_dir, "run"):
        (run_dir / "metrics.csv").write_text("update\n1\n")
    # The first finished: a second fresh claim sees its files (re-checked under the lock).
    with pytest.raises(rundir.DirectoryNotEmpty, match="--resume"):
        with rundir.claim(run_dir, "run"):
            pass
    # Resuming a directory purejaxppo did not write is refused.
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    with pytest.raises(rundir.DirectoryNotEmpty, match="not a purejaxppo run directory"):
        with rundir.claim(foreign, "run", resume=True):
            pass


# ---------------------------------------------------------------- 1, 2: pbt --out
PBT = ["pbt", "--population", "2", "--ready-every", "2", "--devices", "1", "--no-progress"]
PBT += ["--search", "learning_rate=log_uniform:1e-4:1e-2"]
PBT += ["--num-envs", "4", "--num-steps", "8", "--hidden-sizes", "8"]
PBT += ["--total-timesteps", str(4 * 8 * 6)]


def test_pbt_refuses_a_non_empty_out_and_resumes_a_finished_run_quietly(tmp_path, capsys):
    out = tmp_path / "pbt"
    assert main([*PBT, "--out", str(out)]) == 0
    assert rundir.read_marker(out)["kind"] == "pbt"
    population = out / "checkpoints" / "population"
    assert sorted(int(p.name) for p in population.iterdir() if p.name.isdigit()) == [2, 3]
    before = snapshot(out)
    capsys.readouterr()
    # Another seed into the finished --out: refused before anything is computed.
    with pytest.raises(SystemExit) as exit_info:
        main([*PBT, "--out", str(out), "--seed", "3"])
    assert exit_info.value.code == 2
    assert "pbt directory" in capsys.readouterr().err and snapshot(out) == before
    # --resume of a finished run: says so, exit 0, nothing rewritten.
    assert main([*PBT, "--out", str(out), "--resume"]) == 0
    assert "is finished" in capsys.readouterr().out and snapshot(out) == before
    # Killed after the last checkpoint, before the tables: --resume finishes it (the last
    # generation is not saved twice: no StepAlreadyExistsError).
    (out / "pbt.yaml").unlink()
    assert main([*PBT, "--out", str(out), "--resume"]) == 0
    assert (out / "pbt.yaml").is_file()
    # The newest population checkpoint damaged: resume falls back to the older one.
    (out / "pbt.yaml").unlink()
    for path in (population / "3").rglob("*"):
        if path.is_file() and path.stat().st_size > 0:
            path.write_bytes(b"damaged")
    assert main([*PBT, "--out", str(out), "--resume"]) == 0
    assert "resuming from generation 2" in capsys.readouterr().err
    # --overwrite of a directory pbt did not write is refused.
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "todo.md").write_text("keep")
    with pytest.raises(SystemExit):
        main([*PBT, "--out", str(notes), "--overwrite"])
    assert "not a purejaxppo pbt directory" in capsys.readouterr().err
    assert (notes / "todo.md").read_text() == "keep"


# ---------------------------------------------------------------- 5: YAML
BILLION_LAUGHS = """\
env_name: CartPole-v1
a: &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]
b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]
c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]
env_kwargs: {gravity: [*c, *c, *c, *c, *c, *c, *c, *c, *c]}
"""


def test_yaml_aliases_are_refused_and_messages_quote_short_values(tmp_path, capsys):
    path = tmp_path / "laughs.yaml"
    path.write_text(BILLION_LAUGHS)
    with pytest.raises(SystemExit) as exit_info:
        main(["train", "--config", str(path), "--run-dir", str(tmp_path / "run"), *TINY])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2
    assert f"{path}, line 3: YAML aliases (*a) are not accepted" in err, err
    assert not (tmp_path / "run").exists()
    # A huge literal value is quoted shortened (at most 200 characters).
    with pytest.raises(ValueError) as info:
        pjp.PPOConfig(hidden_sizes=["x" * 100_000])
    assert len(str(info.value)) < 250 and "..." in str(info.value)


# ---------------------------------------------------------------- 6: traced hyperparameters
@pytest.mark.parametrize(
    "change, message",
    [
        ({"learning_rate": -1e-3}, "learning_rate=-0.001: must be > 0"),
        ({"gamma": 1.5}, "gamma=1.5: must be in [0, 1]"),
        ({"clip_coef": -0.2}, "clip_coef=-0.2: must be > 0"),
        ({"learning_rate": math.nan}, "learning_rate must be finite, got nan"),
    ],
)
def test_hyperparams_are_validated_like_the_config(change, message):
    hparams = pjp.Hyperparams.from_config(pjp.PPOConfig())
    with pytest.raises(ValueError, match=re.escape(f"Hyperparams: {message}")):
        hparams.replace(**change)
    # The same message from PPOConfig itself.
    with pytest.raises(ValueError, match=re.escape(message)):
        pjp.PPOConfig(**change)
    bad = dataclasses.replace(hparams, **{k: jnp.float32(v) for k, v in change.items()})
    with pytest.raises(ValueError, match=re.escape(f"Hyperparams.stack: item 1: {message}")):
        pjp.Hyperparams.stack([hparams, bad])
    # Unset values (None as NaN / inf) and a traced replace stay accepted.
    assert hparams.replace(learning_rate=1e-3).learning_rate == pytest.approx(1e-3)
    doubled = jax.jit(lambda h: h.replace(learning_rate=h.learning_rate * 2))(hparams)
    assert doubled.learning_rate == pytest.approx(2 * hparams.learning_rate)


def test_make_train_checks_concrete_hparams_before_compiling():
    config = pjp.PPOConfig(num_envs=4, num_steps=8, hidden_sizes=(8,), total_timesteps=64)
    hparams = pjp.Hyperparams.from_config(config)
    bad = dataclasses.replace(hparams, gamma=jnp.float32(1.5))
    with pytest.raises(ValueError, match=re.escape("train: hparams: gamma=1.5: must be in [0, 1]")):
        pjp.make_train(config)(jax.random.key(0), bad)


# ---------------------------------------------------------------- 7: NaN observations
class NanObservations:
    """CartPole whose observations turn NaN at random (1 step in 20)."""

    def __init__(self, env):
        self._env = env

    def __getattr__(self, name):
        return getattr(self._env, name)

    def step(self, key, state, action, params=None):
        out = self._env.step(key, state, action, params)
        obs = jnp.where(jax.random.uniform(key) < 0.05, jnp.nan, out[0])
        return (obs, *out[1:])


def test_a_nan_observation_is_reported_as_divergence_and_policy_refuses_nan_params():
    from purejaxppo import guards
    from purejaxppo.envs import make_env

    env, env_params = make_env("CartPole-v1")
    config = pjp.PPOConfig(
        num_envs=4, num_steps=16, hidden_sizes=(8,), total_timesteps=4 * 16 * 4,
        normalize_observations=True,
    )  # fmt: skip
    out = jax.jit(pjp.make_train(config, NanObservations(env), env_params))(jax.random.key(0))
    # The metric the drivers act on (exit 3, no NaN checkpoint) reports it.
    assert guards.first_nonfinite_update(out.metrics) is not None
    params = out.runner_state.train_state.params
    with pytest.raises(ValueError, match="Policy: parameters are not finite"):
        pjp.Policy(params, config)


# ---------------------------------------------------------------- ugly: one-line errors
def test_nothing_to_resume_is_one_line_without_orbax_thread_tracebacks(tmp_path):
    run_dir = tmp_path / "run"
    (run_dir / "checkpoints" / "last" / "3.orbax-checkpoint-tmp-123").mkdir(parents=True)
    (run_dir / "config.yaml").write_text("env_name: CartPole-v1\nnum_envs: 4\nnum_steps: 16\n")
    proc = subprocess.run(
        [sys.executable, "-m", "purejaxppo.cli", "train", "--resume", str(run_dir)],
        capture_output=True, text=True, timeout=300, env=ENV,
    )  # fmt: skip
    assert proc.returncode == 2
    assert proc.stderr.startswith("purejaxppo: error: nothing to resume: no complete checkpoint")
    assert "rerun without --resume, or with --overwrite" in proc.stderr
    assert proc.stderr.count("\n") == 1, proc.stderr  # no background-thread traceback


def test_bounds_and_suffixes_are_checked_before_anything_is_written(tmp_path, capsys):
    run_dir = tmp_path / "run"
    with pytest.raises(SystemExit) as exit_info:
        main(["train", "--run-dir", str(run_dir), "--total-timesteps", "1e30", "--no-progress"])
    assert exit_info.value.code == 2 and not run_dir.exists()
    assert "must be < 2**31 updates" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_info:
        main(["export", str(run_dir), "--to", str(tmp_path / "q.txt")])
    assert exit_info.value.code == 2 and not (tmp_path / "q.txt").exists()
    assert "unknown suffix '.txt'; use .pt" in capsys.readouterr().err


def test_pbt_options_and_collect_seed_are_checked(tmp_path, capsys):
    from purejaxppo.drivers.population.options import PBTOptions, check_options

    config = pjp.PPOConfig(num_envs=4, num_steps=8, total_timesteps=4 * 8 * 8)
    for change, message in [
        ({"perturb_factors": (math.inf, 1.2)}, "must be two finite positive factors"),
        ({"perturb_factors": ("a", 1.2)}, "must be two finite positive factors"),
        ({"tournament_size": math.nan}, "tournament_size=nan: must be an integer in [1, "),
        ({"exploit": "tournament", "tournament_size": 9}, "in [1, population=4]"),
    ]:
        with pytest.raises(ValueError, match=re.escape(message)):
            check_options(PBTOptions(population=4, ready_every=2, **change), config, 1)
    with pytest.raises(SystemExit) as exit_info:
        main([*PBT, "--out", str(tmp_path / "p"), "--checkpoint-every", "-1"])
    assert exit_info.value.code == 2 and not (tmp_path / "p").exists()
    assert "--checkpoint-every -1: must be >= 0" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_info:
        main(
            [
                "collect",
                str(tmp_path / "run"),
                "--episodes",
                "1",
                "--out",
                str(tmp_path / "ds"),
                "--seed",
                "-1",
            ]
        )
    assert (
        exit_info.value.code == 2 and "--seed -1: must be in [0, 2**32)" in capsys.readouterr().err
    )


# ---------------------------------------------------------------- ugly: paths, disk, sizes
def test_unwritable_output_paths_are_one_line_naming_the_users_path(tmp_path, capsys):
    a_file = tmp_path / "file"
    a_file.write_text("not a folder")
    missing_run = str(tmp_path / "no-run")  # the path is checked before the run is read
    cases = [
        (["eval", missing_run, "--video", "/proc/x.gif"], "eval --video /proc/x.gif: cannot"),
        (["export", missing_run, "--to", "/proc/p.pt"], "export --to /proc/p.pt: cannot write"),
        (["collect", missing_run, "--episodes", "1", "--out", "/proc/ds"], "--out /proc/ds"),
        (["export", missing_run, "--to", f"{a_file}/p.pt"], f"{a_file} is a file, not a"),
    ]
    for argv, message in cases:
        with pytest.raises(SystemExit) as exit_info:
            main(argv)
        err = capsys.readouterr().err
        assert exit_info.value.code == 2 and message in err and err.count("\n") == 1, err
        assert "tmp" not in err.replace(str(tmp_path), "")  # never a temporary file's name


def test_a_full_disk_exits_4_with_one_line_and_keeps_the_last_checkpoint(
    tmp_path, capsys, monkeypatch
):
    from purejaxppo import paths
    from purejaxppo.cli.values import EXIT_NO_SPACE, error

    run_dir = tmp_path / "run"
    real = paths.shutil.disk_usage
    saves = []

    def disk_usage(path):  # the first checkpoint fits, then the disk is full
        saves.append(path)
        usage = real(path)
        return usage._replace(free=usage.free if len(saves) == 1 else 1000)

    monkeypatch.setattr(paths.shutil, "disk_usage", disk_usage)
    with pytest.raises(SystemExit) as exit_info:
        main(["train", "--run-dir", str(run_dir), "--save-freq", "1", *TINY])
    err = capsys.readouterr().err
    assert exit_info.value.code == EXIT_NO_SPACE == 4, err
    assert err.startswith("purejaxppo: error: train: the disk is full (No space left"), err
    assert "then rerun (train: --resume)" in err and err.count("\n") == 1, err
    assert pjp.checkpoint.latest_checkpoint_step(run_dir) == 1
    # orbax reports ENOSPC of its writer threads as a ValueError: exit 4 too, not 2.
    orbax_error = ValueError("RESOURCE_EXHAUSTED: Failed to write: No space left on device")
    with pytest.raises(SystemExit) as exit_info:
        error(main.__globals__["build_parser"](), orbax_error)
    assert exit_info.value.code == EXIT_NO_SPACE
    assert "the disk is full (RESOURCE_EXHAUSTED" in capsys.readouterr().err


def test_absurd_sizes_are_refused_with_the_estimate_before_compiling(monkeypatch):
    from purejaxppo import memory
    from purejaxppo.envs import make_env

    huge = pjp.PPOConfig(hidden_sizes=(100_000,) * 3)
    with pytest.raises(ValueError, match=r"hidden_sizes=\[100000, 100000, 100000\], num_envs=4"):
        pjp.make_train(huge)
    # About 2 * 1e10 weights per tower, 24 bytes each: hundreds of GiB.
    with pytest.raises(ValueError, match=r"training needs about [0-9]{3}\.[0-9]{2} GiB"):
        pjp.make_train(huge)
    small = pjp.PPOConfig(num_envs=4, num_steps=16, hidden_sizes=(8,), total_timesteps=128)
    env, env_params = make_env("CartPole-v1")
    need = memory.estimate_bytes(small, pjp.make_networks(small, env, env_params), 4, 4)
    monkeypatch.setattr(memory, "available_bytes", lambda device=None: (need + 1, "RAM"))
    with pytest.warns(UserWarning, match=r"over 50% of the"):
        pjp.make_train(small)


# ---------------------------------------------------------------- ugly: smaller checks
def test_duplicated_grid_values_are_refused():
    from purejaxppo.drivers.settings import expand_grid

    with pytest.raises(ValueError, match=r"grid\['learning_rate'\]: value 0.001 is given twice"):
        expand_grid({"learning_rate": [1e-3, 3e-4, 0.001]})
    with pytest.raises(ValueError, match=r"grid\['hidden_sizes'\]: value \[8, 8\] is given"):
        expand_grid({"hidden_sizes": [[8, 8], [16], [8, 8]]})
    assert len(expand_grid({"learning_rate": [1e-3, 3e-4], "gamma": [0.9, 0.99]})) == 4


def test_a_pbt_checkpoint_in_a_run_is_named(tmp_path):
    import orbax.checkpoint as ocp

    from purejaxppo.checkpoint import load_checkpoint, make_manager

    directory = tmp_path / "run" / "checkpoints" / "last"
    meta = {"config": pjp.PPOConfig().to_dict(), "options": {}, "search": {}, "generation": 5}
    with make_manager(directory) as manager:  # what storage.save_population writes as meta
        manager.save(5, args=ocp.args.Composite(meta=ocp.args.JsonSave(meta)))
    with pytest.raises(ValueError, match=r"is a PBT population checkpoint \(purejaxppo pbt, gen"):
        load_checkpoint(tmp_path / "run")


def test_exporting_custom_network_params_says_custom_networks_are_not_exportable(tmp_path):
    from purejaxppo.export import export_torch

    config = pjp.PPOConfig(hidden_sizes=(8,))
    params = {"params": {"my_torso": {"kernel": jnp.zeros((4, 8)), "bias": jnp.zeros(8)}}}
    with pytest.raises(ValueError, match="custom networks are not exportable"):
        export_torch(params, config, tmp_path / "p.pt")
    assert not list(tmp_path.iterdir())


def test_pbt_devices_2_sets_two_cpu_devices(tmp_path):
    # `--devices 2` used to be refused on CPU: JAX had 1 device (only the default set more).
    argv = [a if a != "1" else "2" for a in PBT]
    assert argv[argv.index("--devices") + 1] == "2"
    proc = subprocess.run(
        [sys.executable, "-m", "purejaxppo.cli", *argv, "--out", str(tmp_path / "p")],
        capture_output=True, text=True, timeout=600, env=ENV,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "p" / "pbt.yaml").is_file()


def test_cli_reports_warnings_in_one_line_and_silences_orbax_error_logs(capsys):
    import logging
    import warnings

    from purejaxppo.cli.main import _one_line_reports

    show = warnings.showwarning
    with _one_line_reports(), warnings.catch_warnings():
        warnings.simplefilter("always")
        warnings.warn("checkpoint 4 is damaged; using the previous one, 3", stacklevel=1)
        logging.getLogger("absl").error("Failed to json parse Metadata file: ...")
    err = capsys.readouterr().err
    assert err == "purejaxppo: warning: checkpoint 4 is damaged; using the previous one, 3\n"
    assert warnings.showwarning is show  # restored


# ---------------------------------------------------------------- Ctrl-C / SIGTERM
def test_a_stop_request_saves_the_running_segment_and_a_second_stops_at_once():
    from purejaxppo.drivers.segments import SegmentHooks, progress_bar, run_segments
    from purejaxppo.signals import TrainingInterrupted

    saves = []

    def process(done, length, fetched):
        if done == 1:  # during the second segment
            os.kill(os.getpid(), signal.SIGTERM)

    hooks = SegmentHooks(
        lambda done: 1,
        lambda done, length: None,
        process,
        lambda done, due: saves.append((done, due)),
        fetch=lambda x: x,
        resume_hint="again",
    )
    before = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)
    bar = progress_bar(5, unit="update", desc="t", enabled=False)
    with pytest.raises(TrainingInterrupted) as info:
        run_segments(5, 0, hooks, bar=bar)
    assert saves == [(1, False), (2, True)]  # the stopped segment is saved (due)
    assert (info.value.done, info.value.signal_name, info.value.resume_hint) == (
        2,
        "SIGTERM",
        "again",
    )
    assert info.value.exit_code == 143
    assert (signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)) == before

    def twice(done, length, fetched):
        os.kill(os.getpid(), signal.SIGINT)
        os.kill(os.getpid(), signal.SIGINT)  # the second raises here, mid-segment

    saves.clear()
    with pytest.raises(KeyboardInterrupt) as info:
        run_segments(5, 0, hooks._replace(process=twice, resume_hint=None), bar=bar)
    assert not isinstance(info.value, TrainingInterrupted) and saves == []
    assert (signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)) == before


def test_ctrl_c_keeps_every_update_and_resume_ends_like_an_uninterrupted_run(
    tmp_path, capsys, monkeypatch
):
    from purejaxppo.drivers import single

    argv = ["train", "--num-envs", "4", "--num-steps", "16", "--hidden-sizes", "8",
            "--total-timesteps", "384", "--log-freq", "1", "--no-progress"]  # fmt: skip
    straight, stopped = tmp_path / "straight", tmp_path / "stopped"
    assert main([*argv, "--run-dir", str(straight)]) == 0
    process = single._SingleRun.process

    def ctrl_c_in_update_3(self, done, length, metrics):
        if done == 2:
            os.kill(os.getpid(), signal.SIGINT)
        return process(self, done, length, metrics)

    monkeypatch.setattr(single._SingleRun, "process", ctrl_c_in_update_3)
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_info:
        main([*argv, "--run-dir", str(stopped)])
    err = capsys.readouterr().err
    assert exit_info.value.code == 130, err
    assert (
        f"stopped by SIGINT after update 3, saved; continue with: purejaxppo train --resume "
        f"{stopped}" in err
    ), err
    assert sorted(p.name for p in (stopped / "checkpoints" / "last").iterdir()) == ["3"]
    monkeypatch.setattr(single._SingleRun, "process", process)
    assert main(["train", "--resume", str(stopped), "--no-progress"]) == 0
    a = (straight / "metrics.csv").read_text()
    b = (stopped / "metrics.csv").read_text()
    assert a.count("\n") == 7 and a == b  # 6 updates, bitwise (CPU)


# ------------------------------------------- issue 38: stops of collect / eval / export
def test_segments_are_sized_in_seconds_and_keep_the_results_bitwise(tmp_path, monkeypatch):
    from purejaxppo.drivers import segments

    def sized(natural, seconds_per_update):
        sizer = segments.SegmentSizer(3.0)
        assert sizer.length(natural) == natural  # the first segment: the driver's length
        sizer.record(natural, natural * seconds_per_update)
        return sizer.length(natural)

    # 0.5 s an update: 3 s fit 6; 61 is prime (divisor 1 < 6 / 2): 6.
    assert sized(61, 0.5) == 6
    # 60 = 10 x 6: later segments of 60 are 10 caps of 6.
    assert sized(60, 0.5) == 6
    # fit 30; 298 = 2 x 149 has no divisor in [15, 30]: 30 (and a remainder).
    assert sized(298, 0.1) == 30
    assert sized(10, 0.001) == 10  # fast updates: the driver's own lengths, nothing capped
    assert sized(10, 0.6) == 10  # 6 s <= 2 x 3 s: not worth another compile

    argv = ["train", *TINY[:-2], "--total-timesteps", "448", "--log-freq", "3"]  # 7 updates
    assert main([*argv, "--run-dir", str(tmp_path / "straight")]) == 0
    lengths = []
    run = segments.run_segments

    def spy(total, done, hooks, **kwargs):
        def timed_run(d, n):
            lengths.append(n)
            return hooks.run(d, n)

        return run(total, done, hooks._replace(run=timed_run), **kwargs)

    monkeypatch.setattr(segments, "SEGMENT_SECONDS", 1e-9)  # capped at 1 after the first
    monkeypatch.setattr("purejaxppo.drivers.single.run_segments", spy)
    assert main([*argv, "--run-dir", str(tmp_path / "sized")]) == 0
    assert lengths == [3, 1, 1, 1, 1]
    a, b = ((tmp_path / d / "metrics.csv").read_text() for d in ("straight", "sized"))
    assert a.count("\n") == 8 and a == b  # bitwise (CPU)


@pytest.fixture(scope="module")
def kept_run(tmp_path_factory):
    """A tiny run with its 8 checkpoints kept (`keep_checkpoints: all`)."""
    run_dir = tmp_path_factory.mktemp("kept") / "run"
    argv = ["train", *TINY[:-2], "--total-timesteps", "512", "--save-freq", "1"]
    assert main([*argv, "--keep-checkpoints", "all", "--run-dir", str(run_dir)]) == 0
    return run_dir


def signal_when(argv, ready, signals, cwd, timeout=60):
    """Runs `purejaxppo ARGV` and sends `signals` (0.3 s apart) once `ready(stderr so
    far)`; returns (exit code, stderr). A process still running at `timeout` is killed."""
    log = Path(cwd) / f"stderr_{argv[0]}.txt"
    with log.open("w") as stderr:
        proc = subprocess.Popen(
            [sys.executable, "-m", "purejaxppo.cli", *argv],
            cwd=cwd,
            env=ENV,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
        )
        try:
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline and proc.poll() is None:
                if ready(log.read_text()):
                    break
                time.sleep(0.01)
            for i, sig in enumerate(signals):
                time.sleep(0.3 * (i > 0))
                proc.send_signal(sig)
            proc.wait(timeout=timeout)
        finally:
            proc.kill()
    return proc.returncode, log.read_text()


def test_sigterm_during_collect_keeps_a_partial_dataset_that_load_episodes_refuses(
    kept_run, tmp_path
):
    out = tmp_path / "data"
    argv = ["collect", str(kept_run), "--episodes", "500000", "--out", str(out)]

    def started(_) -> bool:
        return (out / "collect.partial").exists()

    code, err = signal_when(argv, started, [signal.SIGTERM], tmp_path)
    assert code == 143 and "Traceback" not in err, err
    assert "SIGTERM: stopping after the running chunk" in err
    assert f"{out} is a partial dataset (" in err and "of 500000 episodes" in err, err
    assert (out / "collect.partial").exists() and not (out / "metadata.json").exists()
    assert list(out.glob("episodes_*.npz"))  # the finished episodes are written
    with pytest.raises(ValueError, match="is a partial dataset"):
        pjp.load_episodes(out)


def test_sigterm_during_eval_all_steps_writes_the_rows_of_the_finished_steps(kept_run, tmp_path):
    run_dir = tmp_path / "run"
    shutil.copytree(kept_run, run_dir)
    argv = ["eval", str(run_dir), "--all-steps", "--episodes", "64"]
    # Once the first step's line is out, the stop handlers are in place.
    code, err = signal_when(argv, lambda err: "eval: update 1:" in err, [signal.SIGTERM], tmp_path)
    assert code == 143 and "Traceback" not in err, err
    rows = (run_dir / "eval_steps.csv").read_text().splitlines()
    assert 2 <= len(rows) < 9, err  # a header and the finished steps (of 8)
    assert f"of 8 steps; rerun with --overwrite to evaluate all: purejaxppo eval {run_dir}" in err


def test_a_second_ctrl_c_during_export_writes_nothing_and_removes_the_staging_dir(
    kept_run, tmp_path
):
    target = tmp_path / "out" / "policy.pt"
    target.parent.mkdir()
    argv = ["export", str(kept_run), "--to", str(target)]
    staging = lambda _: any(target.parent.glob("tmp*"))  # noqa: E731  (inside the export)
    code, err = signal_when(argv, staging, [signal.SIGINT, signal.SIGINT], tmp_path)
    assert code == 130 and "Traceback" not in err, err
    assert "stopped at once by a second SIGINT; nothing written" in err
    assert list(target.parent.iterdir()) == []  # no staging directory, no file
