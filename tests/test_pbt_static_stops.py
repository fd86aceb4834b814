"""A PBT over static fields under the stop protocol, with checkpoints, resume, the
fingerprint of its settings, a gymnasium env and a full disk: real `purejaxppo pbt`
processes and real signals."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import jax
import numpy as np
import pandas as pd
import pytest

import purejaxppo as pjp
from purejaxppo.cli.main import main

REPO = Path(__file__).resolve().parents[1]
EXE = os.path.join(os.path.dirname(sys.executable), "purejaxppo")
#: 2 members (hidden_sizes 8 and 16), 12 generations of 2 updates of 4 envs x 8 steps.
TINY = ["--population", "2", "--ready-every", "2", "--num-envs", "4", "--num-steps", "8"]
TINY += ["--num-minibatches", "2", "--update-epochs", "1", "--truncation-fraction", "0.5"]
TINY += ["--total-timesteps", str(12 * 2 * 32), "--no-progress"]
STATIC = ["pbt", *TINY, "--search", "hidden_sizes=choice:8,16"]
GENERATIONS = 12


@pytest.fixture(scope="module")
def cli_env():
    """The environment of the subprocesses: this checkout first (and the run's compile
    cache, see conftest.py)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    return env


def _run(argv, env, timeout=300):
    return subprocess.run([EXE, *argv], capture_output=True, text=True, env=env, timeout=timeout)


def _steps(out: Path) -> list[int]:
    """The complete population checkpoints under `out` (orbax renames a finished one)."""
    population = out / "checkpoints" / "population"
    if not population.is_dir():
        return []
    return sorted(int(p.name) for p in population.iterdir() if p.name.isdigit())


@pytest.fixture(scope="module")
def gymnasium_run(tmp_path_factory, cli_env):
    """A population on a gymnasium env, 3 generations of 4 updates, started at once in the
    background (it compiles programs of its own, beside the reference's)."""
    out = tmp_path_factory.mktemp("gymnasium") / "gym"
    argv = [*STATIC, "--env-name", "gymnasium:CartPole-v1", "--ready-every", "4"]
    argv += ["--total-timesteps", str(3 * 4 * 32), "--out", str(out)]
    log = out.with_name("stderr.txt")
    with open(log, "w") as err:
        proc = subprocess.Popen([EXE, *argv], stdout=subprocess.DEVNULL, stderr=err, env=cli_env)
    yield proc, out, log
    if proc.poll() is None:
        proc.kill()
        proc.wait()


@pytest.fixture(scope="module")
def reference(tmp_path_factory, cli_env, gymnasium_run):
    """The uninterrupted run (it also fills the compile cache for the others)."""
    out = tmp_path_factory.mktemp("static") / "reference"
    done = _run([*STATIC, "--out", str(out)], cli_env)
    assert done.returncode == 0, done.stderr
    return out


def test_sigterm_keeps_the_finished_generations_and_resume_is_bitwise(
    reference, tmp_path, cli_env, capsys
):
    out = tmp_path / "stopped"
    proc = subprocess.Popen(
        [EXE, *STATIC, "--out", str(out)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=cli_env,
    )
    deadline = time.time() + 120
    while proc.poll() is None and not _steps(out) and time.time() < deadline:
        time.sleep(0.01)
    assert proc.poll() is None, "the population ended before its first checkpoint was seen"
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 143, err
    done = _steps(out)[-1]
    assert 1 <= done < GENERATIONS and "Traceback" not in err, err
    lines = err.strip().splitlines()
    assert lines[-2] == (
        "purejaxppo: SIGTERM: stopping after the running generation (it is saved first); "
        "Ctrl-C again stops at once"
    )
    assert lines[-1] == (
        f"purejaxppo: pbt: stopped by SIGTERM after generation {done}, saved; continue "
        f"with: purejaxppo pbt --resume {out}"
    )
    assert not (out / "lineage.csv").exists()

    # a resume with other settings is refused in one line naming the field, untouched
    for flags, field in [
        (["--learning-rate", "0.001"], "config.learning_rate=0.00025, now config.learning_rate"),
        (["--search", "hidden_sizes=choice:8,32"], "static_search.hidden_sizes"),
        (["--population", "4"], "options.population=2, now options.population=4"),
    ]:
        base = STATIC[:-2] if flags[0] == "--search" else STATIC  # the search replaced
        with pytest.raises(SystemExit) as exit_info:
            main([*base, *flags, "--out", str(out), "--resume"])
        err = capsys.readouterr().err
        assert exit_info.value.code == 2 and err.count("\n") == 1, err
        assert err.startswith(f"purejaxppo: error: pbt --resume: {out / 'checkpoints'} was ")
        assert field in err, err
    assert _steps(out)[-1] == done and not (out / "lineage.csv").exists()

    resumed = _run([*STATIC, "--out", str(out), "--resume"], cli_env)
    assert resumed.returncode == 0, resumed.stderr
    for name in ("lineage.csv", "summary.csv", "best/metrics.csv"):
        assert (out / name).read_bytes() == (reference / name).read_bytes(), name
    got, want = (pjp.Policy.load(d / "best").get_params() for d in (out, reference))
    for a, b in zip(jax.tree.leaves(got), jax.tree.leaves(want), strict=True):
        np.testing.assert_array_equal(a, b)


def test_a_second_sigint_stops_at_once_in_one_line(tmp_path, cli_env):
    out = tmp_path / "twice"
    # no compile cache: the first generation compiles for seconds, the signals land there
    proc = subprocess.Popen(
        [EXE, *STATIC, "--no-compile-cache", "--out", str(out)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=cli_env,
    )
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(proc.stderr), daemon=True)
    reader.start()

    def wait_for(text: str) -> None:
        deadline = time.time() + 120
        while not any(text in line for line in list(lines)) and time.time() < deadline:
            assert proc.poll() is None, "".join(lines)
            time.sleep(0.01)

    wait_for("pbt: 2 members x 12 generations")  # then the stop requests are taken
    time.sleep(1.0)
    proc.send_signal(signal.SIGINT)
    wait_for("Ctrl-C again stops at once")
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=120) == 130
    reader.join(timeout=10)
    err = "".join(lines)
    assert "Traceback" not in err, err
    last = err.strip().splitlines()[-1]
    assert last.startswith("purejaxppo: pbt: stopped at once by a second SIGINT; "), err
    if _steps(out):  # a fast machine: a generation was saved before the signals
        assert last.endswith(f"continue with: purejaxppo pbt --resume {out}"), err
    else:
        assert "nothing was saved; start again with: purejaxppo pbt " in last, err
        assert last.endswith(f"--out {out} --overwrite"), err


def test_a_full_disk_exits_4_in_one_line_and_keeps_the_last_checkpoint(
    reference, tmp_path, cli_env
):
    # the write of generation 2's checkpoint fails as a full disk does
    (tmp_path / "disk_full.py").write_text(
        "import errno\n"
        "import purejaxppo\n"
        "from etils import epath\n"
        "Path = type(epath.Path('/'))\n"
        "real = Path.write_text\n"
        "def write_text(self, *args, **kwargs):\n"
        "    if '/2.orbax-checkpoint-tmp' in str(self):\n"
        "        raise OSError(errno.ENOSPC, 'No space left on device', str(self))\n"
        "    return real(self, *args, **kwargs)\n"
        "Path.write_text = write_text\n"
    )
    env = {**cli_env, "PYTHONPATH": os.pathsep.join([str(tmp_path), cli_env["PYTHONPATH"]])}
    out = tmp_path / "full"
    done = _run([*STATIC, "--import", "disk_full", "--out", str(out)], env)
    assert done.returncode == 4, done.stderr
    err = done.stderr.strip().splitlines()
    assert len(err) == 2 and err[0].startswith("pbt: 2 members"), done.stderr  # plan, error
    assert err[1].startswith(
        f"purejaxppo: error: pbt: the disk is full (No space left on device: {out}/checkpoints"
    ), done.stderr
    assert err[1].endswith(
        "the newest complete checkpoint is kept: free space, then rerun (train: --resume)"
    )
    assert _steps(out) == [1]


def test_gymnasium_members_moving_between_groups_train(gymnasium_run):
    proc, out, log = gymnasium_run
    assert proc.wait(timeout=300) == 0, log.read_text()
    lineage = pd.read_csv(out / "lineage.csv")
    assert len(lineage) == 3 * 2 and lineage.fitness.notna().all()
    # a member copied the other and moved to its group: its vector env's rows changed
    moved = lineage[lineage.replaced & (lineage.generation > 0)]
    assert len(moved), lineage
    shared = lineage.groupby("generation").hidden_sizes.nunique()
    assert (shared == 1).any(), lineage


def test_a_traced_population_resumed_with_other_settings_is_refused(tmp_path, cli_env, capsys):
    out = tmp_path / "traced"
    argv = ["pbt", *TINY, "--devices", "1", "--search", "ent_coef=uniform:0:0.05"]
    proc = subprocess.Popen([EXE, *argv, "--out", str(out)], env=cli_env, stderr=subprocess.PIPE)
    record = out / "checkpoints" / ".purejaxppo-fingerprint.json"
    deadline = time.time() + 120
    while proc.poll() is None and not record.is_file() and time.time() < deadline:
        time.sleep(0.01)
    proc.kill()  # a crash right after it started
    proc.communicate(timeout=60)
    assert record.is_file()
    with pytest.raises(SystemExit) as exit_info:
        main([*argv, "--gamma", "0.9", "--out", str(out), "--resume"])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and err.count("\n") == 1, err
    assert "pbt --resume:" in err and "config.gamma=0.99, now config.gamma=0.9" in err, err
