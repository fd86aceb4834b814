"""Readers never disturb a writer (issue #38): checkpoint readers delete nothing, partial
datasets are refused, env kwargs are checked, conflicting flags are refused up front."""

import re
import shutil
from pathlib import Path

import jax
import numpy as np
import pytest

import purejaxppo as pjp
from purejaxppo import checkpoint as ckpt

TINY = pjp.PPOConfig(
    num_envs=4, num_steps=16, total_timesteps=4 * 16 * 3, num_minibatches=2, hidden_sizes=(8,)
)


# ------------------------------------------------------ 1: checkpoint readers are read-only
@pytest.fixture(scope="module")
def runner():
    """An initial runner state of TINY (no training: cheap)."""
    return jax.device_get(jax.jit(pjp.make_train_fns(TINY).init)(jax.random.key(0)))


def _save_steps(run_dir: Path, runner, steps) -> Path:
    """Checkpoints of `runner` at each update in `steps`; returns checkpoints/last."""
    for step in steps:
        state = runner.replace(update_step=np.asarray(step, runner.update_step.dtype))
        metrics = {"episode_return": np.full(step, float(step), np.float32)}
        ckpt.save_checkpoint(run_dir, state, metrics, TINY, keep="all")
    return run_dir / "checkpoints" / "last"


def _in_progress(last: Path, step: int) -> Path:
    """A save in progress, as a training run writing `last` has it on disk."""
    tmp = last / f"{step}.orbax-checkpoint-tmp-1234567890"
    (tmp / "state").mkdir(parents=True)
    (tmp / "state" / "partial").write_bytes(b"being written")
    return tmp


def test_checkpoint_readers_leave_a_save_in_progress_alone(tmp_path, runner):
    from purejaxppo.drivers.population.storage import load_population

    run_dir = tmp_path / "run"
    last = _save_steps(run_dir, runner, [1, 2])
    tmp = _in_progress(last, 3)
    assert ckpt.list_checkpoints(run_dir) == [1, 2]
    assert tmp.is_dir()
    assert ckpt.latest_checkpoint_step(run_dir) == 2
    assert tmp.is_dir()
    loaded = ckpt.load_checkpoint(run_dir)
    assert loaded.update_step == 2 and list(loaded.metrics["episode_return"]) == [2.0, 2.0]
    assert tmp.is_dir()
    assert ckpt.load_checkpoint(run_dir, step=1).update_step == 1
    assert tmp.is_dir()
    policy = pjp.Policy.load(run_dir)
    assert policy.config.hidden_sizes == (8,)
    assert tmp.is_dir()
    params, step = ckpt.load_init_params(run_dir)
    assert step == 2 and jax.tree.leaves(params)
    assert (tmp / "state" / "partial").read_bytes() == b"being written"
    # A PBT population checkpoint directory holding only a save in progress.
    population = tmp_path / "pbt" / "checkpoints" / "population"
    population.mkdir(parents=True)
    pbt_tmp = _in_progress(population, 1)
    with pytest.raises(ValueError, match="no complete population checkpoint"):
        load_population(population, {})
    assert (pbt_tmp / "state" / "partial").is_file()


def test_a_writer_still_cleans_up_leftovers_of_an_interrupted_save(tmp_path, runner):
    last = _save_steps(tmp_path, runner, [1])
    tmp = _in_progress(last, 2)
    _save_steps(tmp_path, runner, [2])
    assert not tmp.exists()
    assert ckpt.list_checkpoints(tmp_path) == [1, 2]


def test_a_step_rotated_away_while_read_is_not_called_damaged(tmp_path, runner, monkeypatch):
    last = _save_steps(tmp_path, runner, [1, 2, 3])
    real = ckpt._restore
    removed = []

    def rotate_then_restore(manager, directory, step, *args):
        if not removed:  # a writer rotates this step away after the reader listed it
            shutil.rmtree(directory / str(step))
            removed.append(step)
        return real(manager, directory, step, *args)

    monkeypatch.setattr(ckpt, "_restore", rotate_then_restore)
    with pytest.warns() as caught:  # the newest complete step now, no "damaged" warning
        loaded = ckpt.load_checkpoint(tmp_path)
        import warnings

        warnings.warn("sentinel", UserWarning, stacklevel=1)
    assert [str(w.message) for w in caught] == ["sentinel"]
    assert removed == [3] and loaded.update_step == 2
    removed.clear()
    with pytest.raises(ValueError, match=r"checkpoint .*/last/1 vanished while it was read"):
        ckpt.load_checkpoint(tmp_path, step=1)
    assert removed == [1] and ckpt.list_checkpoints(tmp_path) == [2]
    assert last.is_dir()


def test_a_step_removed_mid_read_is_the_one_vanished_message(tmp_path, runner, monkeypatch):
    """A writer's rmtree still in progress when the read fails (the directory still there,
    files half gone): not "does not match the network / env of this config", not "holds
    no 'config' mapping": the step vanished, and the newest complete one is read."""
    import threading

    _save_steps(tmp_path, runner, [1, 2, 3])
    real = ckpt._check_shapes
    removed = []

    def fail_while_removed(abstract, state, where):
        if not removed:
            removed.append(where.name)
            timer = threading.Timer(0.1, shutil.rmtree, args=(where,))
            timer.start()  # the writer's removal finishes after the read failed
            raise ValueError(f"checkpoint {where}: params has shape (1,), needs (8,)")
        return real(abstract, state, where)

    monkeypatch.setattr(ckpt, "_check_shapes", fail_while_removed)
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        loaded = ckpt.load_checkpoint(tmp_path)
    assert not [w for w in caught if "damaged" in str(w.message)]  # not called damaged
    assert removed == ["3"] and loaded.update_step == 2
    assert ckpt.list_checkpoints(tmp_path) == [1, 2]


def test_a_step_removed_while_orbax_lists_the_steps_is_listed_again(tmp_path, runner, monkeypatch):
    """Orbax lists the step directories, then stats each one: a writer's rotation in
    between made it raise FileNotFoundError out of `load_checkpoint` (seen in CI after
    the retry of the test above). The listing is opened again; a step that keeps
    vanishing is one line naming it."""
    import orbax.checkpoint as ocp

    last = _save_steps(tmp_path, runner, [1, 2, 3])
    real = ocp.CheckpointManager
    opened = []

    def rotated_while_listing(directory, **kwargs):
        opened.append(directory)
        if len(opened) == 1:  # orbax listed 3, then it was gone before its stat
            shutil.rmtree(last / "3")
            raise FileNotFoundError(2, "No such file or directory", str(last / "3"))
        return real(directory, **kwargs)

    monkeypatch.setattr(ocp, "CheckpointManager", rotated_while_listing)
    assert ckpt.load_checkpoint(tmp_path).update_step == 2
    assert len(opened) == 2 and ckpt.list_checkpoints(tmp_path) == [1, 2]

    def always_rotating(directory, **kwargs):
        raise FileNotFoundError(2, "No such file or directory", str(last / "2"))

    monkeypatch.setattr(ocp, "CheckpointManager", always_rotating)
    with pytest.raises(ValueError, match=r"checkpoint .*/last/2 vanished while the steps"):
        ckpt.load_checkpoint(tmp_path)


# ------------------------------------------------------------ 2: partial collect datasets
@pytest.fixture(scope="module")
def cartpole():
    """An untrained CartPole policy (no training compile)."""
    config = pjp.PPOConfig(hidden_sizes=(8,))
    env, env_params = pjp.make_env("CartPole-v1")
    networks = pjp.make_networks(config, env, env_params)
    return pjp.Policy(networks.init(jax.random.key(0)), config, env, env_params)


def test_an_interrupted_collect_is_never_read_as_complete(cartpole, tmp_path, monkeypatch):
    from purejaxppo.acting import datasets

    real_flush = datasets._Writer.flush

    def flush_then_die(self):
        real_flush(self)
        if len(self.files) == 1:
            raise KeyboardInterrupt  # the user's Ctrl-C after the first chunk file

    monkeypatch.setattr(datasets._Writer, "flush", flush_then_die)
    out = tmp_path / "data"
    with pytest.raises(KeyboardInterrupt):
        datasets.collect(cartpole, 6, out, parallel=2, chunk_steps=16, flush_steps=1)
    monkeypatch.undo()
    assert [p.name for p in out.glob("episodes_*.npz")] == ["episodes_00000.npz"]
    assert not (out / "metadata.json").exists()
    with pytest.raises(
        ValueError, match=re.escape(f"{out} is a partial dataset (1 episodes_*.npz")
    ):
        datasets.load_episodes(out)
    before = sorted(p.name for p in out.iterdir())
    with pytest.raises(ValueError, match=re.escape(f"collect: {out} is a partial dataset (")):
        datasets.collect(cartpole, 6, out)
    assert sorted(p.name for p in out.iterdir()) == before  # nothing overwritten
    # Without its marker (an older purejaxppo's interrupted collect): chunks, no metadata.
    (out / "collect.partial").unlink()
    with pytest.raises(ValueError, match="is a partial dataset"):
        datasets.load_episodes(out)
    with pytest.raises(ValueError, match="is a partial dataset"):
        datasets.check_output(out, None, 6)
    # Collected to the end: the marker is gone and every episode reads back.
    done = datasets.collect(cartpole, 6, tmp_path / "done", parallel=2, flush_steps=1)
    assert len(done.files) == 6
    assert not (tmp_path / "done" / "collect.partial").exists()
    episodes = datasets.load_episodes(tmp_path / "done")
    assert sorted(episodes["episode_ids"]) == list(range(6))
    assert len(episodes["reward"]) == done.num_steps


def test_a_damaged_collect_dataset_names_the_file(cartpole, tmp_path):
    import json

    from purejaxppo.acting.datasets import collect, load_episodes

    out = collect(cartpole, 4, tmp_path / "data", parallel=2, flush_steps=1).out
    chunk = out / "episodes_00002.npz"
    data = chunk.read_bytes()
    chunk.write_bytes(data[: len(data) // 2])  # a truncated copy
    with pytest.raises(
        ValueError, match=re.escape(f"load_episodes: {chunk} is truncated or damaged")
    ):
        load_episodes(out)
    chunk.write_bytes(data)
    assert len(load_episodes(out)["episode_ids"]) == 4
    (out / "episodes_00003.npz").unlink()  # a file lost since
    with pytest.raises(ValueError, match=r"holds 3 episodes_\*\.npz files; .* wrote 4"):
        load_episodes(out)
    meta = json.loads((out / "metadata.json").read_text())
    (out / "metadata.json").write_text(json.dumps({**meta, "files": 3, "num_episodes": 4}))
    with pytest.raises(ValueError, match=r"holds 3 episodes \(3 distinct ids\); .* says 4"):
        load_episodes(out)
    with pytest.raises(ValueError, match=r"no collect dataset in .*nothing"):
        load_episodes(tmp_path / "nothing")


# --------------------------------------------------------------- 3: env kwarg values
@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"frame_skip": 0}, "frame_skip=0 must be >= 1"),
        ({"stack_num": -2}, "stack_num=-2 must be >= 1"),
        ({"noop_max": 0}, "noop_max=0 must be >= 1"),  # EnvPool's reset segfaults on 0
        ({"img_height": 0}, "img_height=0 must be >= 1"),
        ({"img_width": 0}, "img_width=0 must be >= 1"),
        ({"max_episode_steps": 0}, "max_episode_steps=0 must be >= 1"),
        ({"frame_skip": 2.0}, "frame_skip=2.0 must be an integer"),
        ({"stack_num": True}, "stack_num=True must be an integer"),
        ({"img_width": "84"}, "img_width='84' must be an integer"),
        ({"repeat_action_probability": 1.5}, r"repeat_action_probability=1.5 must be a number"),
        ({"repeat_action_probability": -0.1}, r"repeat_action_probability=-0.1 must be a"),
        ({"repeat_action_probability": "0.25"}, r"repeat_action_probability='0.25' must be"),
    ],
)
def test_envpool_option_values_are_checked(kwargs, message, monkeypatch):
    from purejaxppo.envs.suites import envpool as suite

    built = []
    monkeypatch.setattr(suite, "EnvPoolEnv", lambda *args: built.append(args))
    with pytest.raises(ValueError, match=rf"^env_kwargs of envpool:Pong-v5: {message}"):
        suite.make("Pong-v5", kwargs)
    assert built == []  # refused before anything is built


def test_envpool_option_values_in_range_build_the_env():
    from purejaxppo.envs.suites import envpool as suite

    good = {"frame_skip": 2, "stack_num": 1, "noop_max": 1, "img_height": 42}
    good |= {"img_width": np.int64(42), "repeat_action_probability": 0.25}
    env, _ = suite.make("Pong-v5", {**good, "max_episode_steps": 100})
    assert env.observation_space(None).shape == (42, 42, 1)
    assert env.max_steps_in_episode == 100
    env, _ = suite.make("Pong-v5", {"repeat_action_probability": 1})
    assert env.options == {"repeat_action_probability": 1}
    with pytest.raises(ValueError, match="max_episode_steps=0 must be >= 1"):
        suite.make("HalfCheetah-v4", {"max_episode_steps": 0})  # MuJoCo too


def test_jaxmarl_unknown_kwargs_get_a_did_you_mean():
    from purejaxppo.envs.suites import jaxmarl as suite

    with pytest.raises(ValueError, match=r"unknown key 'num_agent' \(did you mean 'num_agents'\?"):
        suite.make("MPE_simple_spread_v3", {"num_agent": 4})
    with pytest.raises(ValueError, match=r"unknown key 'agent_id' \(did you mean 'agent_ids'\?"):
        suite.make("MPE_simple_spread_v3", {"agent_id": True})
    # The keys the env reads from its **kwargs, and the SMAX kwargs the heuristic-enemy
    # wrapper passes on to the SMAX it builds, are known.
    env, _ = suite.make("MPE_simple_spread_v3", {"num_agents": 4, "damping": 0.5})
    assert env.num_agents == 4 and env.env.damping == 0.5
    with pytest.raises(ValueError, match=r"'see_enemy_action' \(did you mean 'see_enemy_actions'"):
        suite.make("HeuristicEnemySMAX", {"scenario": "3m", "see_enemy_action": True})
    env, _ = suite.make("HeuristicEnemySMAX", {"scenario": "3m", "enemy_shoots": False})
    assert env.num_agents == 3


def test_importing_jaxmarl_prints_nothing_and_keeps_redirections():
    import subprocess
    import sys

    script = (
        "import contextlib, io, sys\n"
        "from purejaxppo.envs.suites.jaxmarl import make\n"
        "buf = io.StringIO()\n"
        "with contextlib.redirect_stdout(buf):\n"
        "    make('MPE_simple_spread_v3', {})\n"
        "    kept = sys.stdout is buf\n"
        "print('redirect kept:', kept, 'printed:', repr(buf.getvalue()))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout == "redirect kept: True printed: ''\n"


# ------------------------------------------------------------ 4: conflicts refused up front
def _refused(argv, capsys) -> str:
    """The one-line error of `purejaxppo ARGV` (exit code 2)."""
    from purejaxppo.cli import main

    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("purejaxppo: error: "), captured.err
    return lines[0]


def test_pbt_without_search_is_refused_before_anything_runs(tmp_path, capsys, monkeypatch):
    import purejaxppo.drivers.population as population

    def never(*args, **kwargs):
        raise AssertionError("pbt started")

    monkeypatch.setattr(population, "pbt", never)
    out = tmp_path / "pbt"
    line = _refused(["pbt", "--population", "2", "--out", str(out), "--no-progress"], capsys)
    assert "pbt needs at least one --search FIELD=DIST:LOW:HIGH" in line
    assert not out.exists()
    line = _refused(["pbt", "--out", str(out), "--resume"], capsys)
    assert "pbt needs at least one --search" in line
    # From Python too, before anything compiles or is written.
    config = pjp.PPOConfig(env_name="CartPole-v1", num_envs=2, num_steps=8, total_timesteps=64)
    for search in (None, {}):
        with pytest.raises(ValueError, match="pbt needs at least one traced field"):
            population.driver.pbt(config, population=2, search=search, checkpoint_dir=out)
    assert not out.exists()


def test_train_resume_refuses_a_warm_start(tmp_path, capsys):
    run, source = tmp_path / "run", tmp_path / "source"
    for argv in (["--init-from", str(source)], ["--init-parts", "params", "--init-step", "3"]):
        line = _refused(["train", "--resume", str(run), *argv, "--no-progress"], capsys)
        flags = ", ".join(a for a in argv if a.startswith("--"))
        assert f"--resume continues {run} from its own checkpoint; {flags} (a warm start)" in line
    assert list(tmp_path.iterdir()) == []


def test_config_that_is_a_directory_says_so(tmp_path, capsys):
    run_dir = tmp_path / "run"
    line = _refused(["train", "--config", str(tmp_path), "--run-dir", str(run_dir)], capsys)
    assert line == f"purejaxppo: error: --config {tmp_path}: is a directory, not a YAML file"
    (tmp_path / "config.yaml").write_text("num_envs: 4\n")
    line = _refused(["pbt", "--config", str(tmp_path), "--search", "ent_coef=uniform:0:1"], capsys)
    assert line.endswith(
        f"is a directory, not a YAML file (the run's config: {tmp_path}/config.yaml)"
    )
    assert not run_dir.exists()
    line = _refused(["train", "--config", str(tmp_path / "none.yaml")], capsys)
    assert line.endswith("none.yaml: no such file")


def test_a_step_count_that_is_not_a_multiple_of_the_batch_is_rounded_once(tmp_path, capsys):
    import yaml

    from purejaxppo.cli import main

    run = tmp_path / "run"
    argv = ["train", "--run-dir", str(run), "--no-progress", "--num-envs", "4"]
    assert main([*argv, "--num-steps", "64", "--total-timesteps", "600"]) == 0
    err = capsys.readouterr().err
    assert err.count("total_timesteps=600 rounded down to 512 (2 updates") == 1
    assert "not a multiple" not in err
    assert yaml.safe_load((run / "config.yaml").read_text())["total_timesteps"] == 512


def test_signals_are_answered_at_once_even_mid_segment(tmp_path):
    """The first SIGINT prints its line at once; the second stops the process within a
    second, in the middle of a long compiled segment, with one line and no traceback
    (before: both waited for the segment's end)."""
    import os
    import signal
    import subprocess
    import sys
    import time

    run = tmp_path / "run"
    entry = "import sys; from purejaxppo.cli import main; sys.exit(main())"
    argv = [sys.executable, "-c", entry, "train", "--run-dir", str(run)]
    argv += ["--no-progress", "--num-envs", "4", "--num-steps", "128"]
    argv += ["--total-timesteps", str(4 * 128 * 5000), "--log-freq", "5000"]  # one segment
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    process = subprocess.Popen(argv, stderr=subprocess.PIPE, text=True, env=env)
    try:
        deadline = time.monotonic() + 120
        while not (run / "config.yaml").exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        time.sleep(3)  # into the segment's compile / run
        assert process.poll() is None
        process.send_signal(signal.SIGINT)
        time.sleep(1.0)
        process.send_signal(signal.SIGINT)
        sent = time.monotonic()
        process.wait(timeout=10)
        waited = time.monotonic() - sent
    finally:
        process.kill()
    err = process.stderr.read()
    assert process.returncode == 130, err[-2000:]
    assert waited < 3.0, waited
    assert "SIGINT: stopping after the running segment" in err
    # Nothing was saved yet: no --resume is promised; the command that starts again is.
    assert "stopped at once by a second SIGINT; nothing was saved; start again with: " in err
    assert f"purejaxppo train --run-dir {run} --no-progress" in err and "--overwrite" in err
    assert "--resume" not in err
    assert "Traceback" not in err


def test_the_final_return_weighs_episodes_not_updates():
    """The headline final return is the mean of the newest finished episodes (whole
    updates, until >= 100), not of the last updates' means: a last update in which one
    short episode ended no longer counts as much as one in which 60 did."""
    from purejaxppo.drivers.report import final_return, final_return_of

    returns = np.array([1.0, 2.0, 10.0])  # the mean return of each update's ended episodes
    counts = np.array([50.0, 60.0, 1.0])  # how many ended
    # Newest first: 10 x 1 (1 episode), 2 x 60 (61), 1 x 50 (111 >= 100): 180 / 111.
    assert final_return_of(returns, counts) == (pytest.approx(180 / 111), 111)
    assert final_return(returns, counts, episodes=61) == pytest.approx(130 / 61)
    # Updates in which no episode ended (NaN mean, count 0) are skipped.
    gaps = final_return_of([5.0, np.nan, 7.0], [2.0, 0.0, 2.0])
    assert gaps == (pytest.approx(6.0), 4)
    # No counts (tables from before episode_count): the last 10 updates' values.
    assert final_return(returns) == pytest.approx(13 / 3)
    assert final_return(returns, np.full(3, np.nan)) == pytest.approx(13 / 3)
    assert final_return_of([np.nan], [0.0]) == (pytest.approx(np.nan, nan_ok=True), 0)
