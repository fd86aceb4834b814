"""One agent over several processes: `purejaxppo train --coordinator ...` on 127.0.0.1.

Every scenario runs real `purejaxppo train` processes (CPU devices set by
`--local-devices`, gloo collectives), each in its own session with a hard timeout that
kills its whole process group. The reference is one process with 2 CPU devices; the
same run on 2 processes x 1 device must match it bitwise, through a SIGTERM to every
process and through a SIGTERM to one of them (coordinated save, exit 143, `--resume` in
every process) and through a SIGKILL of one process (the other exits non-zero, the last
checkpoint loads, `--resume` continues it bitwise, here on one process with 2 devices: a
checkpoint does not depend on the topology). A checkpoint of 2 processes is also read by
one process (`eval`, `export`, `Policy.load`) and resumed on one device (another device
count: the state carries over bitwise, the updates after it differ). Evaluations, videos
and datasets during training are process 0's, its evaluations bitwise those of one
process with 2 devices.
"""

from __future__ import annotations

import contextlib
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pandas as pd
import pytest

from purejaxppo.checkpoint import list_checkpoints, load_checkpoint

#: 160 updates of 4 envs x 8 steps (2 per device), one epoch of one minibatch, a
#: checkpoint every 2 updates: long enough (seconds) that a signal sent once the first
#: checkpoint appears lands well before the end, also on an idle machine.
TINY = (
    "--num-envs 4 --num-steps 8 --hidden-sizes 8 --update-epochs 1 --num-minibatches 1 "
    "--total-timesteps 5120 --log-freq 2 --save-freq 2 --no-progress"
).split()
UPDATES = 160
#: Seconds without a heartbeat before the survivors of a SIGKILL stop (`--heartbeat-timeout`).
HEARTBEAT = 8
#: Hard limit of every launch (seconds); the whole process group is killed past it.
LIMIT = 240


class Exit(NamedTuple):
    returncode: int
    stdout: str
    stderr: str
    seconds: float  # from the launch (or the signal) to the exit


def _env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("XLA_FLAGS", None)  # each process sets its own devices (--local-devices)
    env.update(PYTHONUNBUFFERED="1", JAX_PLATFORMS="cpu", **(extra or {}))
    return env


def free_port() -> int:
    """A port free on every address (where the coordinator listens: "[::]:port"), below
    Linux's ephemeral range (32768-60999), so that no outgoing connection (gloo's, gRPC's)
    takes it between this check and the coordinator's bind."""
    rng = random.Random(time.time_ns())
    while True:
        port = rng.randrange(20000, 32768)
        with socket.socket(socket.AF_INET6) as sock, contextlib.suppress(OSError):
            sock.bind(("::", port))
            return port


def distributed(port: int, num_processes: int, process_id: int, local_devices: int = 1) -> list:
    return [
        "--coordinator", f"127.0.0.1:{port}", "--num-processes", str(num_processes),
        "--process-id", str(process_id), "--local-devices", str(local_devices),
        "--heartbeat-timeout", str(HEARTBEAT),
    ]  # fmt: skip


class Launch:
    """`purejaxppo train` processes, each in its own session (killed as a group)."""

    count = 0  # launches so far: names their log files

    def __init__(
        self,
        tmp: Path,
        argvs: list[list[str]],
        envs: list[dict] | None = None,
        command: str = "train",
    ):
        Launch.count += 1
        self.started = time.monotonic()
        self.logs = [tmp / f"launch{Launch.count}-process{i}" for i in range(len(argvs))]
        self.procs = []
        envs = envs or [{}] * len(argvs)
        for argv, log, extra in zip(argvs, self.logs, envs, strict=True):
            with open(f"{log}.out", "w") as stdout, open(f"{log}.err", "w") as stderr:
                self.procs.append(
                    subprocess.Popen(
                        [sys.executable, "-m", "purejaxppo.cli", command, *argv],
                        env=_env(extra),
                        stdout=stdout,
                        stderr=stderr,
                        start_new_session=True,
                    )
                )

    def kill_all(self) -> None:
        for proc in self.procs:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)

    def wait(self, since: float | None = None, limit: float = LIMIT) -> list[Exit]:
        """Every process's `Exit` (seconds since `since`, default the launch); kills them
        all past `limit` seconds from the launch and fails."""
        since = self.started if since is None else since
        exits = []
        try:
            for proc, log in zip(self.procs, self.logs, strict=True):
                left = max(1.0, self.started + limit - time.monotonic())
                try:
                    proc.wait(timeout=left)
                except subprocess.TimeoutExpired:
                    pytest.fail(f"purejaxppo train still running after {limit} s: {log}.err")
                seconds = time.monotonic() - since
                out, err = Path(f"{log}.out").read_text(), Path(f"{log}.err").read_text()
                exits.append(Exit(proc.returncode, out, err, seconds))
        finally:
            self.kill_all()
        return exits


def wait_for_checkpoint(run_dir: Path, launch: Launch, limit: float = LIMIT) -> None:
    """Returns once `run_dir/checkpoints/last/2` is complete (renamed into place)."""
    deadline = time.monotonic() + limit
    while not (run_dir / "checkpoints" / "last" / "2").is_dir():
        if time.monotonic() > deadline or any(p.poll() is not None for p in launch.procs):
            launch.kill_all()
            pytest.fail(f"no checkpoint in {run_dir}: {launch.wait(limit=1)}")
        time.sleep(0.05)


def error_lines(exit: Exit) -> list[str]:
    assert "Traceback" not in exit.stderr, exit.stderr[-3000:]
    return [line for line in exit.stderr.splitlines() if line.startswith("purejaxppo: error")]


def params_of(run_dir: Path) -> list[np.ndarray]:
    import jax  # after purejaxppo (imported above)

    checkpoint = load_checkpoint(run_dir)
    return [np.asarray(x) for x in jax.tree.leaves(checkpoint.runner_state.train_state)]


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> Path:
    """The uninterrupted run: 1 process x 2 CPU devices."""
    tmp = tmp_path_factory.mktemp("reference")
    run_dir = tmp / "run"
    argv = [*TINY, "--run-dir", str(run_dir), *distributed(free_port(), 1, 0, local_devices=2)]
    [done] = Launch(tmp, [argv]).wait()
    assert done.returncode == 0, done.stderr[-3000:]
    assert "(1 processes, 2 devices)" in done.stdout
    return run_dir


@pytest.fixture(scope="module")
def sigterm(tmp_path_factory) -> dict:
    """2 processes x 1 device; SIGTERM to both after the first checkpoint; `--resume` in
    both."""
    tmp = tmp_path_factory.mktemp("sigterm")
    run_dir, port = tmp / "run", free_port()
    launch = Launch(
        tmp, [[*TINY, "--run-dir", str(run_dir), *distributed(port, 2, i)] for i in (0, 1)]
    )
    wait_for_checkpoint(run_dir, launch)
    for proc in launch.procs:
        proc.send_signal(signal.SIGTERM)
    stopped = launch.wait(since=time.monotonic())
    steps = list_checkpoints(run_dir)
    port = free_port()
    argvs = [["--resume", str(run_dir), "--no-progress", *distributed(port, 2, i)] for i in (0, 1)]
    resumed = Launch(tmp, argvs).wait()
    return {"run_dir": run_dir, "stopped": stopped, "steps": steps, "resumed": resumed}


@pytest.fixture(scope="module")
def sigterm_one(tmp_path_factory) -> dict:
    """2 processes x 1 device; SIGTERM to process 1 alone after the first checkpoint (a
    scheduler preempting one host). Then, all at once: `--resume` in both processes; a
    copy of the stopped run resumed by plain `purejaxppo train --resume` (one process, one
    device: 2 devices wrote it); `eval` and `export` of another copy (one process)."""
    tmp = tmp_path_factory.mktemp("sigterm_one")
    run_dir, port = tmp / "run", free_port()
    launch = Launch(
        tmp, [[*TINY, "--run-dir", str(run_dir), *distributed(port, 2, i)] for i in (0, 1)]
    )
    wait_for_checkpoint(run_dir, launch)
    launch.procs[1].send_signal(signal.SIGTERM)
    stopped = launch.wait(since=time.monotonic())
    steps = list_checkpoints(run_dir)
    one_dir, read_dir = tmp / "one", tmp / "read"
    shutil.copytree(run_dir, one_dir)
    shutil.copytree(run_dir, read_dir)
    port = free_port()
    argvs = [["--resume", str(run_dir), "--no-progress", *distributed(port, 2, i)] for i in (0, 1)]
    launches = {
        "resumed": Launch(tmp, argvs),
        "on_one": Launch(tmp, [["--resume", str(one_dir), "--no-progress"]]),
        "eval": Launch(tmp, [[str(read_dir), "--episodes", "2", "--greedy"]], command="eval"),
        "export": Launch(tmp, [[str(read_dir), "--to", str(tmp / "policy.pt")]], command="export"),
    }
    try:
        result = {name: launch.wait() for name, launch in launches.items()}
    finally:  # a failed wait leaves none running
        for launch in launches.values():
            launch.kill_all()
    for name in ("on_one", "eval", "export"):
        [result[name]] = result[name]
    result.update(run_dir=run_dir, stopped=stopped, steps=steps, one_dir=one_dir)
    result.update(read_dir=read_dir, policy_pt=tmp / "policy.pt")
    return result


@pytest.fixture(scope="module")
def sigkill(tmp_path_factory) -> dict:
    """2 processes x 1 device; SIGKILL to process 1 after the first checkpoint; then
    `--resume` on 1 process x 2 devices."""
    tmp = tmp_path_factory.mktemp("sigkill")
    run_dir, port = tmp / "run", free_port()
    launch = Launch(
        tmp, [[*TINY, "--run-dir", str(run_dir), *distributed(port, 2, i)] for i in (0, 1)]
    )
    wait_for_checkpoint(run_dir, launch)
    killed_at = time.monotonic()
    os.killpg(launch.procs[1].pid, signal.SIGKILL)
    survivor, _ = launch.wait(since=killed_at)
    kept = load_checkpoint(run_dir).update_step
    argv = ["--resume", str(run_dir), "--no-progress", *distributed(free_port(), 1, 0, 2)]
    [resumed] = Launch(tmp, [argv]).wait()
    return {"run_dir": run_dir, "survivor": survivor, "kept": kept, "resumed": resumed}


def stopped_after(stopped: list[Exit], steps: list[int]) -> int:
    """The update after which every process stopped with 143, saving there together."""
    for exit in stopped:
        assert exit.returncode == 143, (exit.returncode, exit.stderr[-3000:])
        assert "stopped by SIGTERM after update" in exit.stderr
    marker = "stopped by SIGTERM after update "
    done = {int(exit.stderr.split(marker)[1].split(",")[0]) for exit in stopped}
    assert len(done) == 1, done
    [update] = done
    assert update == max(steps) < UPDATES, steps
    return update


def test_two_processes_equal_one_process_with_two_devices_through_sigterm(reference, sigterm):
    stopped_after(sigterm["stopped"], sigterm["steps"])
    first, second = sigterm["resumed"]
    assert first.returncode == second.returncode == 0, first.stderr[-2000:] + second.stderr[-2000:]
    # Process 0 alone reports (and writes metrics.csv, the plot, the progress bar).
    assert "final mean episode_return" in first.stdout
    assert "final mean episode_return" not in second.stdout
    expected = pd.read_csv(reference / "metrics.csv")
    got = pd.read_csv(sigterm["run_dir"] / "metrics.csv")
    assert len(got) == UPDATES
    pd.testing.assert_frame_equal(got, expected, check_exact=True)
    for a, b in zip(params_of(sigterm["run_dir"]), params_of(reference), strict=True):
        np.testing.assert_array_equal(a, b)


def test_sigterm_to_one_process_stops_every_process_after_one_save(reference, sigterm_one):
    # JAX's preemption service passes process 1's notice to process 0: both stop after
    # the same segment, save once together, exit 143; --resume in both is bitwise.
    stopped_after(sigterm_one["stopped"], sigterm_one["steps"])
    for resumed in sigterm_one["resumed"]:
        assert resumed.returncode == 0, resumed.stderr[-3000:]
    expected = pd.read_csv(reference / "metrics.csv")
    got = pd.read_csv(sigterm_one["run_dir"] / "metrics.csv")
    pd.testing.assert_frame_equal(got, expected, check_exact=True)
    for a, b in zip(params_of(sigterm_one["run_dir"]), params_of(reference), strict=True):
        np.testing.assert_array_equal(a, b)


def test_resume_on_another_device_count_continues_the_checkpoint(reference, sigterm_one):
    # Written by 2 processes x 1 device, resumed by one process on one device: the
    # checkpoint's state and metrics carry over bitwise; the updates after it draw their
    # rollouts and minibatches on 1 device instead of 2, so they differ from the 2-device
    # run (a different, equally valid continuation).
    done = stopped_after(sigterm_one["stopped"], sigterm_one["steps"])
    on_one = sigterm_one["on_one"]
    assert on_one.returncode == 0, on_one.stderr[-3000:]
    assert f"resumed from update {done}" in on_one.stderr
    expected = pd.read_csv(reference / "metrics.csv")
    got = pd.read_csv(sigterm_one["one_dir"] / "metrics.csv")
    assert len(got) == UPDATES and np.isfinite(got["loss"]).all()
    pd.testing.assert_frame_equal(got.iloc[:done], expected.iloc[:done], check_exact=True)
    assert not got.iloc[done:]["loss"].equals(expected.iloc[done:]["loss"])


def test_checkpoint_of_two_processes_loads_in_one_process(sigterm_one):
    import jax  # after purejaxppo (imported above)

    import purejaxppo as pjp

    run_dir = sigterm_one["read_dir"]  # as the 2 processes left it when they stopped
    params = load_checkpoint(run_dir).runner_state.train_state.params
    loaded = pjp.Policy.load(run_dir).get_params()
    assert len(jax.tree.leaves(params)) == 8  # actor and critic: a hidden layer and a head each
    for a, b in zip(jax.tree.leaves(loaded), jax.tree.leaves(params), strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    evaluated, exported = sigterm_one["eval"], sigterm_one["export"]
    assert evaluated.returncode == 0, evaluated.stderr[-3000:]
    assert "2 episodes" in evaluated.stdout, evaluated.stdout
    assert exported.returncode == 0, exported.stderr[-3000:]
    assert sigterm_one["policy_pt"].with_suffix(".state_dict.pt").stat().st_size > 0


def test_sigkill_of_one_process_stops_the_other_and_resume_is_bitwise(reference, sigkill):
    survivor = sigkill["survivor"]
    assert survivor.returncode != 0
    # Within the heartbeat timeout (plus startup of the error path), never a hang.
    assert survivor.seconds < HEARTBEAT + 20, survivor.seconds
    if survivor.returncode == 5:  # our line; JAX's own abort (134) may come first
        [line] = error_lines(survivor)
        assert "lost another process of the run" in line and "--resume" in line
    assert 2 <= sigkill["kept"] < UPDATES
    resumed = sigkill["resumed"]
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert f"resumed from update {sigkill['kept']}" in resumed.stderr
    expected = pd.read_csv(reference / "metrics.csv")
    pd.testing.assert_frame_equal(pd.read_csv(sigkill["run_dir"] / "metrics.csv"), expected)
    for a, b in zip(params_of(sigkill["run_dir"]), params_of(reference), strict=True):
        np.testing.assert_array_equal(a, b)


@pytest.fixture(scope="module")
def observed(tmp_path_factory) -> dict:
    """8 updates with evaluations (and "best" checkpoints), videos and a dataset during
    training, at once on 2 processes x 1 device and on 1 process x 2 devices."""
    tmp = tmp_path_factory.mktemp("observed")
    during = [
        *TINY,
        "--total-timesteps",
        "256",
        "--save-freq",
        "4",
        "--eval-freq",
        "4",
        "--eval-episodes",
        "2",
        "--video-freq",
        "4",
        "--collect-freq",
        "8",
        "--collect-episodes",
        "2",
    ]
    port = free_port()
    pair = [[*during, "--run-dir", str(tmp / "pair"), *distributed(port, 2, i)] for i in (0, 1)]
    one = [*during, "--run-dir", str(tmp / "one"), *distributed(free_port(), 1, 0, 2)]
    launches = {"pair": Launch(tmp, pair), "one": Launch(tmp, [one])}
    try:
        exits = {name: launch.wait() for name, launch in launches.items()}
    finally:
        for launch in launches.values():
            launch.kill_all()
    return {**exits, "pair_dir": tmp / "pair", "one_dir": tmp / "one"}


def test_evaluations_videos_and_datasets_during_a_run_over_two_processes(observed):
    first, second = observed["pair"]
    assert first.returncode == second.returncode == 0, first.stderr[-2000:] + second.stderr[-2000:]
    assert "(2 processes, 2 devices)" in first.stdout
    assert "final mean episode_return" not in second.stdout
    run_dir = observed["pair_dir"]
    table = pd.read_csv(run_dir / "metrics.csv")
    evaluated = table.dropna(subset=["eval/train/return"])
    assert list(evaluated["update"]) == [4, 8] and list(table["update"]) == list(range(1, 9))
    # Process 0 evaluates the parameters every process holds: bitwise the evaluations of
    # the same run on one process with 2 devices (metrics, checkpoints, "best").
    expected = pd.read_csv(observed["one_dir"] / "metrics.csv")
    pd.testing.assert_frame_equal(table, expected, check_exact=True)
    history = load_checkpoint(run_dir).eval_history
    assert history == load_checkpoint(observed["one_dir"]).eval_history
    assert [update for update, _ in history["train"]] == [4, 8]
    returns = [value for _, value in history["train"]]
    assert returns == pytest.approx(list(evaluated["eval/train/return"]), rel=1e-12)
    assert list_checkpoints(run_dir, "best") == list_checkpoints(observed["one_dir"], "best")
    assert list_checkpoints(run_dir, "best")
    for update in (4, 8):
        assert (run_dir / "videos" / f"update_{update:06d}.gif").stat().st_size > 0
    data = np.load(run_dir / "datasets" / "update_000008" / "episodes_00000.npz")
    assert len(data["episode_ids"]) == 2


def slurm_job(run_dir: Path, argv: list[str]) -> tuple[list[list[str]], list[dict]]:
    """Two tasks of a SLURM job on this machine, as `srun` would start them:
    `--num-processes auto` reads the coordinator (`SLURM_STEP_NODELIST`, and the port JAX
    derives from `SLURM_JOB_ID`), the process count and each process's id."""
    for job_id in range(os.getpid() % 4096, 4096):
        with socket.socket(socket.AF_INET6) as sock:  # JAX's port: 61440 + job id % 4096
            with contextlib.suppress(OSError):
                sock.bind(("::", 61440 + job_id))
                break
    common = {"SLURM_JOB_ID": str(job_id), "SLURM_STEP_NODELIST": "localhost"}
    common["SLURM_NTASKS"] = "2"
    envs = [{**common, "SLURM_PROCID": str(i), "SLURM_LOCALID": str(i)} for i in (0, 1)]
    argv = [*argv, "--run-dir", str(run_dir), "--num-processes", "auto", "--local-devices", "1"]
    return [argv, argv], envs


@pytest.fixture(scope="module")
def misconfigured(tmp_path_factory) -> dict[str, list[Exit]]:
    """Every misconfiguration at once (each its own processes and port), and beside them a
    short run of a (simulated) SLURM job with `--num-processes auto`."""
    tmp = tmp_path_factory.mktemp("misconfigured")
    short = [*TINY, "--total-timesteps", "64"]  # 2 updates (the last value counts)

    def pair(name: str, extra: list[list[str]], num_processes=(2, 2)) -> list[list[str]]:
        port = free_port()
        return [
            [*short, "--run-dir", str(tmp / name), *distributed(port, n, i), *more]
            for i, (n, more) in enumerate(zip(num_processes, extra, strict=True))
        ]

    busy = socket.socket(socket.AF_INET6)
    busy.bind(("::", 0))
    busy.listen()
    busy_port = busy.getsockname()[1]
    (tmp / "h").mkdir()
    (tmp / "h" / "notes.txt").write_text("not a run")
    scenarios = {
        "process_id": [[*short, "--run-dir", str(tmp / "a"), *distributed(free_port(), 2, 2)]],
        "num_envs": [[*short, "--run-dir", str(tmp / "b"), *distributed(free_port(), 3, 0)]],
        "too_few": pair("c", [["--num-envs", "6", "--init-timeout", "4"]] * 2, (3, 3)),
        "port_in_use": [[*short, "--run-dir", str(tmp / "d"), *distributed(busy_port, 2, 0)]],
        "configs_differ": pair("e", [[], ["--learning-rate", "0.001"]]),
        # 6 envs split over the 2 devices process 0 expects and the 3 process 1 does
        "counts_differ": pair("f", [["--num-envs", "6"]] * 2, num_processes=(2, 3)),
        "host_env": pair("g", [["--env-name", "gymnasium:CartPole-v1"]] * 2),
        "run_dir_not_empty": pair("h", [[], []]),
    }
    launches = {name: Launch(tmp, argvs) for name, argvs in scenarios.items()}
    launches["slurm_auto"] = Launch(tmp, *slurm_job(tmp / "slurm", [*short, "--log-freq", "1"]))
    try:
        return {name: launch.wait(limit=120) for name, launch in launches.items()}
    finally:
        busy.close()
        for launch in launches.values():
            launch.kill_all()


@pytest.mark.parametrize(
    "scenario, expected, seconds",
    [
        ("process_id", "process_id=2 must be in [0, num_processes=2)", 30),
        ("num_envs", "num_envs=4 does not split over 3 devices", 30),
        ("too_few", "not all 3 processes joined 127.0.0.1:", 60),
        ("port_in_use", "process 0 cannot listen on port", 30),
        ("configs_differ", "different arguments: learning_rate (process 1) differ", 90),
        ("counts_differ", "different arguments: num_processes (process 1) differ", 90),
        ("host_env", "data-parallel training", 90),
        # process 0 holds the directory; the others learn that its claim failed
        ("run_dir_not_empty", ("is not empty; pass --resume", "process 0 could not claim"), 90),
    ],
)
def test_misconfiguration_fails_fast_in_one_line(misconfigured, scenario, expected, seconds):
    exits = misconfigured[scenario]
    expected = (expected,) * len(exits) if isinstance(expected, str) else expected
    for exit, text in zip(exits, expected, strict=True):
        assert exit.returncode == 2, (exit.returncode, exit.stderr[-3000:])
        [line] = error_lines(exit)
        assert text in line, line
        assert exit.seconds < seconds


def test_num_processes_auto_reads_the_cluster_environment(misconfigured):
    first, second = misconfigured["slurm_auto"]
    assert first.returncode == second.returncode == 0, first.stderr[-2000:] + second.stderr[-2000:]
    assert "(2 processes, 2 devices)" in first.stdout
    assert "final mean episode_return" not in second.stdout
