"""`purejaxppo train --coordinator ... --num-processes ... --process-id ...`: what is
refused before any process waits for the others, and what the user sees of a real run.

The refusals run in this process (`cli.main.main`) with `jax.distributed.initialize`
replaced by a failure, so a refusal that came after joining would fail the test; one of
them also runs as a real `purejaxppo train` process, timed. The real multi-process checks
(127.0.0.1, `test_distributed_train`'s launcher): a second process 0 is named a duplicate
id; gloo's "[Gloo] Rank N is connected ..." lines stay off the terminal; a double Ctrl-C
stops every process at once with the command that continues the run.
"""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from test_distributed_train import TINY, Launch, _env, distributed, error_lines, free_port

from purejaxppo import processes
from purejaxppo.cli.distributed import NOT_DATA_PARALLEL_PREFIXES
from purejaxppo.cli.main import main

#: A short run of 2 processes x 1 device: 2 updates.
SHORT = [*TINY, "--total-timesteps", "64"]


def refused(capsys, argv: list[str]) -> str:
    """The one line `purejaxppo train ARGV` exits 2 with (asserted)."""
    with pytest.raises(SystemExit) as exit:
        main(["train", *argv])
    assert exit.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err, err
    lines = [line for line in err.splitlines() if line.startswith("purejaxppo: error:")]
    assert len(lines) == 1, err
    return lines[0]


@pytest.fixture
def no_joining(monkeypatch):
    """Any attempt to join (`processes.initialize_distributed`, `jax.distributed.initialize`)
    fails the test."""
    import jax

    def join(*args, **kwargs):
        pytest.fail("the process tried to join: the refusal came after joining")

    monkeypatch.setattr(processes, "initialize_distributed", join)
    monkeypatch.setattr(jax.distributed, "initialize", join)


def cli(tmp_path: Path, *extra: str, coordinator="127.0.0.1:1234", count="2", pid="0") -> list:
    run = ["--run-dir", str(tmp_path / "run")]
    topology = ["--coordinator", coordinator, "--num-processes", count, "--process-id", pid]
    return [*SHORT, *run, *topology, *extra]


@pytest.mark.parametrize(
    "coordinator, expected",
    [
        ("http://x:1", "--coordinator http://x:1: must be HOST:PORT, without a scheme"),
        ("x:1/path", "--coordinator x:1/path: must be HOST:PORT, without a scheme"),
        ("localhost", "--coordinator localhost: must be HOST:PORT"),
        ("localhost:", "--coordinator localhost:: the port must be an integer in [1, 65535]"),
        ("localhost:0", "--coordinator localhost:0: the port must be an integer in [1, 65535]"),
        ("localhost:65536", "the port must be an integer in [1, 65535]"),
        ("localhost:１２", "--coordinator localhost:１２: the port must be an integer"),
        ("10.0.0.300:1234", "--coordinator 10.0.0.300:1234: 10.0.0.300 is not an IPv4 address"),
        ("::1:1234", "--coordinator ::1:1234: write an IPv6 address in brackets"),
        ("[::g]:1234", "--coordinator [::g]:1234: [::g] is not an IPv6 address"),
        ("under_score:1234", "--coordinator under_score:1234: 'under_score' is not a host name"),
        ("bad-.host:1234", "'bad-.host' is not a host name"),
    ],
)
def test_malformed_coordinator_is_refused_before_joining(
    capsys, no_joining, tmp_path, coordinator, expected
):
    line = refused(capsys, cli(tmp_path, coordinator=coordinator))
    assert expected in line, line
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(
    "address, host, port",
    [
        ("localhost:1234", "localhost", 1234),
        ("node-01.cluster.local:1", "node-01.cluster.local", 1),
        ("10.0.0.1:65535", "10.0.0.1", 65535),
        ("[::1]:8476", "[::1]", 8476),
        ("[fe80::1]:8476", "[fe80::1]", 8476),
    ],
)
def test_well_formed_addresses_parse(address, host, port):
    assert processes.parse_address(address) == (host, port)


@pytest.mark.parametrize(
    "count, expected",
    [
        ("1e8", "--num-processes 1e8: must be an integer in [1, 4096] or 'auto'"),
        ("100000000", "--num-processes 100000000: must be an integer in [1, 4096]"),
        ("4097", "--num-processes 4097: must be an integer in [1, 4096]"),
        ("0", "--num-processes 0: must be an integer in [1, 4096]"),
        ("-2", "--num-processes -2: must be an integer in [1, 4096]"),
        ("2.0", "--num-processes 2.0: must be an integer in [1, 4096]"),
        ("²", "--num-processes ²: must be an integer in [1, 4096]"),
    ],
)
def test_process_count_out_of_bounds_is_refused_before_joining(
    capsys, no_joining, tmp_path, count, expected
):
    assert expected in refused(capsys, cli(tmp_path, count=count))


def test_process_count_bounds():
    processes.check_process_args("127.0.0.1:1234", processes.MAX_PROCESSES, 4095)
    with pytest.raises(ValueError, match=r"num_processes=4097 must be in \[1, 4096\]"):
        processes.check_process_args("127.0.0.1:1234", 4097, 0)


@pytest.mark.parametrize(
    "extra, expected",
    [
        (
            ["--env-name", "gymnasium:CartPole-v1"],
            "env_name='gymnasium:CartPole-v1': data-parallel",
        ),
        (["--env-name", "envpool:CartPole-v1"], "env_name='envpool:CartPole-v1': data-parallel"),
        (["--env-name", "jaxmarl:MPE_simple_spread_v3"], "over several processes is not supported"),
        (["--init-timeout", "inf"], "--init-timeout inf: must be > 0 seconds (finite)"),
        (["--init-timeout", "nan"], "--init-timeout nan: must be > 0 seconds (finite)"),
        (["--init-timeout", "0"], "--init-timeout 0: must be > 0 seconds (finite)"),
    ],
)
def test_other_arguments_are_refused_before_joining(capsys, no_joining, tmp_path, extra, expected):
    assert expected in refused(capsys, cli(tmp_path, *extra))


def test_refused_prefixes_are_the_kinds_without_data_parallel():
    from purejaxppo import kinds

    # every kind that cannot be data-parallel is refused by its prefix before joining
    refusing = {kind.name for kind in kinds.KINDS if not kind.supports("processes")}
    assert refusing == {kinds.HOST.name, kinds.ENVPOOL.name, kinds.AGENTS.name}
    for env_id in ["gymnasium:CartPole-v1", "envpool:Pong-v5", "jaxmarl:MPE", "CartPole-v1"]:
        refused = not kinds.kind_of_id(env_id).supports("processes")
        assert env_id.startswith(NOT_DATA_PARALLEL_PREFIXES) == refused, env_id
    # and any multi_agent setting (the AGENTS kind, whatever the id)
    assert not kinds.kind_of_id("CartPole-v1", "ippo").supports("processes")


def test_host_env_exits_at_once_in_a_real_process(tmp_path):
    """No process waits for the others to join first (it used to wait for all of them,
    and for `--init-timeout` when one was missing)."""
    argv = cli(tmp_path, "--env-name", "gymnasium:CartPole-v1", "--init-timeout", "600")
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "purejaxppo.cli", "train", *argv],
        env=_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    seconds = time.monotonic() - started
    assert done.returncode == 2, done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    [line] = [x for x in done.stderr.splitlines() if x.startswith("purejaxppo: error")]
    assert "env_name='gymnasium:CartPole-v1'" in line and "(asked for 2 processes)" in line
    assert seconds < 20, seconds  # loose: the refusal comes before any wait


class _Listener:
    """A server on a free port of this host that answers each connection with `reply`."""

    def __init__(self, reply: bytes):
        self.sock = socket.socket(socket.AF_INET6)
        self.sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        self.sock.bind(("::", 0))
        self.sock.listen()
        self.port = self.sock.getsockname()[1]
        self.reply = reply
        threading.Thread(target=self.serve, daemon=True).start()

    def serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                conn.recv(64)
                if self.reply:
                    conn.sendall(self.reply)
                    time.sleep(0.5)


def test_port_taken_by_a_grpc_server_names_a_duplicate_process_id():
    settings = bytes([0, 0, 0, 4, 0, 0, 0, 0, 0])  # an empty HTTP/2 SETTINGS frame
    grpc_like, silent = _Listener(settings), _Listener(b"")
    try:
        with pytest.raises(ValueError, match=r"process_id=0 is taken: .*duplicate id"):
            processes.check_port_free(f"127.0.0.1:{grpc_like.port}")
        with pytest.raises(ValueError, match="cannot listen on port .*pick a free port"):
            processes.check_port_free(f"127.0.0.1:{silent.port}")
    finally:
        grpc_like.sock.close()
        silent.sock.close()


def test_second_process_zero_is_named_a_duplicate(tmp_path):
    """A real coordinator (process 0 waiting for process 1); another process 0 exits 2 at
    once naming the duplicate id (it used to say "pick a free port")."""
    port = free_port()
    argv = [*SHORT, "--run-dir", str(tmp_path / "run"), *distributed(port, 2, 0)]
    first = Launch(tmp_path, [[*argv, "--init-timeout", "120"]])
    try:
        deadline = time.monotonic() + 90
        while not processes._speaks_http2(port) and time.monotonic() < deadline:
            time.sleep(0.5)
        # another run directory: the port tells the duplicate (the same directory's id
        # lock would tell it first: test_a_duplicate_nonzero_process_id_...)
        other = [str(tmp_path / "run2") if a == str(tmp_path / "run") else a for a in argv]
        [second] = Launch(tmp_path, [other]).wait(limit=60)
    finally:
        first.kill_all()
    assert second.returncode == 2, second.stderr[-3000:]
    [line] = error_lines(second)
    assert "process_id=0 is taken" in line and "duplicate id" in line, line


def test_gloo_lines_stay_off_the_terminal(tmp_path):
    """2 processes x 2 devices (4 gloo ranks, connected in two steps): neither stream of
    either process shows gloo's connection lines; what the run prints still shows."""
    port = free_port()
    argvs = [
        [*SHORT, "--run-dir", str(tmp_path / "run"), *distributed(port, 2, i, local_devices=2)]
        for i in (0, 1)
    ]
    exits = Launch(tmp_path, argvs).wait(limit=200)
    for exit in exits:
        assert exit.returncode == 0, exit.stderr[-3000:]
        assert "[Gloo]" not in exit.stdout + exit.stderr, exit.stdout + exit.stderr
    assert "run directory:" in exits[0].stdout and "(2 processes, 4 devices)" in exits[0].stdout


def test_double_ctrl_c_stops_every_process_at_once_with_the_resume_command(tmp_path):
    """Ctrl-C twice (a terminal sends it to both processes): each exits 130 within seconds
    with one line giving its own command that continues from the newest checkpoint (it
    used to print a traceback, wait 31 s and abort with C++ stack traces)."""
    port = free_port()
    run_dir = tmp_path / "run"
    argvs = [
        [*TINY, "--total-timesteps", "40960", "--run-dir", str(run_dir), *distributed(port, 2, i)]
        for i in (0, 1)
    ]
    launch = Launch(tmp_path, argvs)
    deadline = time.monotonic() + 200
    while not (run_dir / "checkpoints" / "last" / "2").is_dir():
        assert time.monotonic() < deadline and all(p.poll() is None for p in launch.procs)
        time.sleep(0.2)
    signalled = time.monotonic()
    for _ in range(2):
        for proc in launch.procs:
            proc.send_signal(signal.SIGINT)
        time.sleep(0.3)
    exits = launch.wait(since=signalled, limit=260)
    for process_id, exit in enumerate(exits):
        assert exit.returncode == 130, (exit.returncode, exit.stderr[-3000:])
        assert exit.seconds < 15, exit.seconds
        assert "Traceback" not in exit.stderr and "Check failure" not in exit.stderr
        assert "every process stops after the running segment" in exit.stderr  # the first
        [line] = [x for x in exit.stderr.splitlines() if "stopped at once" in x]
        assert "a second SIGINT; the newest complete checkpoint is kept" in line, line
        assert f"--resume {run_dir} --coordinator 127.0.0.1:{port}" in line, line
        assert f"--process-id {process_id}" in line, line


def test_a_duplicate_nonzero_process_id_is_one_line_and_leaves_no_file(tmp_path):
    """Two processes started with --process-id 1: the second is refused in one line
    before it joins (JAX's coordinator would abort one of them with a C++ stack trace);
    the first, left waiting for a process 0 that never comes, times out in one line, and
    neither leaves its id's lock file beside the run directory."""
    argv = cli(tmp_path, *SHORT, "--init-timeout", "12", coordinator=f"127.0.0.1:{free_port()}")
    argv[argv.index("--process-id") + 1] = "1"
    command = [sys.executable, "-m", "purejaxppo.cli", "train", *argv]
    first = subprocess.Popen(command, env=_env(), stderr=subprocess.PIPE, text=True)
    lock = tmp_path / ".run.process-1.lock"
    deadline = time.monotonic() + 60
    while not lock.exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert lock.exists(), "the first process did not claim its id"
    second = subprocess.run(command, env=_env(), capture_output=True, text=True, timeout=120)
    assert second.returncode == 2, second.stderr[-2000:]
    assert "Traceback" not in second.stderr and "Check failure" not in second.stderr
    [line] = [x for x in second.stderr.splitlines() if x.startswith("purejaxppo: error")]
    assert f"--process-id 1: process 1 (pid {first.pid} on" in line, line
    assert "give each of the 2 processes its own --process-id in [0, 2)" in line
    _, err = first.communicate(timeout=120)
    assert first.returncode == 2 and "not all 2 processes joined" in err, err[-2000:]
    assert not lock.exists() and not (tmp_path / "run").exists()
