"""The processes of one program spread over several hosts (`jax.distributed`).

Every process runs the same program (as JAX and orbax expect): it joins the others
(`initialize_distributed`), and where a step may go differently in different processes
(a file only some of them can read, a lock, the arguments they were started with) they
agree before going on (`flagged_processes`, `differing_fields`, `together`), so that no
process waits in a collective that another never reaches; what process 0 alone computes
reaches the others bit for bit (`from_process_zero`). `is_lost_process_error` tells the error a
collective raises when another process died. Devices and meshes are `parallel`'s.

Timeouts (documented in docs/guides/multi-device.md, "Beyond one machine"):
`INIT_TIMEOUT_S` to join, `HEARTBEAT_TIMEOUT_S` to notice a dead process that no
collective is waiting on, `SHUTDOWN_TIMEOUT_S` at exit.
"""

from __future__ import annotations

import contextlib
import ctypes
import ipaddress
import os
import re
import socket
import sys
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, TypeVar

import jax
import numpy as np

__all__ = [
    "EXIT_NOT_JOINED",
    "HEARTBEAT_TIMEOUT_S",
    "INIT_TIMEOUT_S",
    "MAX_PROCESSES",
    "SHUTDOWN_TIMEOUT_S",
    "check_port_free",
    "check_process_args",
    "claim_process_id",
    "differing_fields",
    "flagged_processes",
    "from_process_zero",
    "initialize_distributed",
    "is_lost_process_error",
    "parse_address",
    "quiet_gloo",
    "together",
]

T = TypeVar("T")

#: Seconds `initialize_distributed` waits for every process to join before this process
#: exits with one line (exit code 2). JAX's own `initialization_timeout` is set a little
#: longer, so that its abort (a C++ stack trace) never comes first.
INIT_TIMEOUT_S = 120
#: Seconds without a heartbeat after which JAX's coordination service declares a process
#: dead and stops the others (JAX's default is 100). A process killed while the others
#: wait in a collective is noticed at once (its connections close); this bounds the rest
#: (a process killed between collectives, or the coordinator itself).
HEARTBEAT_TIMEOUT_S = 30
#: Seconds the processes wait for each other at exit (JAX's default is 300).
SHUTDOWN_TIMEOUT_S = 30
#: The most processes one run takes (`check_process_args`): a larger count is a typo,
#: and JAX's coordinator would set up state for every one of them before timing out.
MAX_PROCESSES = 4096
#: One label of a host name (RFC 1123).
_HOST_LABEL = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?")
#: Exit code of a process whose wait for the others timed out (`initialize_distributed`).
EXIT_NOT_JOINED = 2


def initialize_distributed(
    coordinator_address: str | None = None,
    num_processes: int | None = None,
    process_id: int | None = None,
    *,
    local_device_count: int | None = None,
    initialization_timeout: float = INIT_TIMEOUT_S,
    heartbeat_timeout: int = HEARTBEAT_TIMEOUT_S,
) -> None:
    """Joins this process to a multi-host run (`jax.distributed.initialize`).

    Call it in every process before anything else touches JAX. On CPU it selects gloo
    for cross-process collectives (JAX's CPU backend has none by default). With all three
    of `coordinator_address`, `num_processes` and `process_id` None, JAX reads them from
    the cluster's environment (SLURM, Open MPI, Kubernetes, TPU pods; its
    `cluster_detection_method`).

    Process 0 first checks that it can bind the coordinator's port (JAX's gRPC server
    crashes the process on a port in use). A process that waits more than
    `initialization_timeout` seconds for the others to join (fewer processes started than
    `num_processes`, a wrong address) exits with one line on stderr and exit code
    `EXIT_NOT_JOINED` (JAX would abort it a little later with a C++ stack trace).

    Args:
      coordinator_address: "host:port" of process 0 (e.g. "10.0.0.1:1234").
      num_processes: total number of processes.
      process_id: this process's index in [0, num_processes).
      local_device_count: CPU only, number of (fake) CPU devices for this process
        (`jax_num_cpu_devices`); None leaves JAX's default.
      initialization_timeout: seconds to wait for every process to join (> 0).
      heartbeat_timeout: seconds after which a silent process counts as dead
        (`HEARTBEAT_TIMEOUT_S`).

    Raises:
      ValueError: for a process count outside [1, `MAX_PROCESSES`], a process_id outside
        [0, num_processes), a malformed address (`parse_address`), a coordinator port
        that process 0 cannot bind (in use, e.g. by another process 0: a duplicate id;
        or not allowed), a timeout <= 0, or no cluster environment where the arguments
        are left to JAX.
    """
    explicit = (coordinator_address, num_processes, process_id)
    if any(value is not None for value in explicit):
        if None in explicit:
            raise ValueError(
                "coordinator_address, num_processes and process_id go together "
                f"(got {coordinator_address!r}, {num_processes!r}, {process_id!r})"
            )
        check_process_args(coordinator_address, num_processes, process_id)
    if not initialization_timeout > 0:
        raise ValueError(f"initialization_timeout={initialization_timeout} must be > 0 seconds")
    if process_id == 0:
        check_port_free(coordinator_address)
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    if local_device_count is not None:
        jax.config.update("jax_num_cpu_devices", local_device_count)
    where = coordinator_address or "the cluster's coordinator"
    count = "all" if num_processes is None else f"all {num_processes}"
    watchdog = threading.Timer(
        initialization_timeout,
        _exit_not_joined,
        args=(
            f"purejaxppo: error: not {count} processes joined {where} within "
            f"{initialization_timeout:g} s: start every process, each with its own "
            "--process-id (two with the same id count as one), with the same "
            "--num-processes and --coordinator (process 0's address)\n",
        ),
    )
    watchdog.daemon = True
    watchdog.start()
    try:
        jax.distributed.initialize(
            coordinator_address,
            num_processes,
            process_id,
            initialization_timeout=int(initialization_timeout) + 10,
            heartbeat_timeout_seconds=heartbeat_timeout,
            shutdown_timeout_seconds=SHUTDOWN_TIMEOUT_S,
        )
    except ValueError as err:
        if coordinator_address is None:
            raise ValueError(
                f"no cluster environment found ({err}): give --coordinator HOST:PORT, "
                "--num-processes N and --process-id I"
            ) from None
        raise
    finally:
        watchdog.cancel()


@contextlib.contextmanager
def claim_process_id(run_dir: str | os.PathLike, process_id: int, count: int) -> Iterator[None]:
    """Holds this process's id for the run in `run_dir` while it runs: an exclusive
    `fcntl` lock on `.<run dir name>.process-<id>.lock` beside the run directory (on the
    file system every process sees; the kernel drops the lock if the process dies), the
    file removed on exit. Two processes started with the same id would otherwise reach
    JAX's coordinator, which aborts one of them with a C++ stack trace; here the second
    is refused in one line before it joins. Nothing is claimed where the run directory's
    parent does not exist (the run refuses it later).

    Raises:
      ValueError: another live process of this run holds `process_id` (naming its host
        and pid).
    """
    import fcntl
    from pathlib import Path

    run_dir = Path(run_dir).absolute()
    if not run_dir.parent.is_dir():
        yield
        return
    path = run_dir.parent / f".{run_dir.name}.process-{process_id}.lock"
    handle = open(path, "a+")  # noqa: SIM115 (held for the whole run)
    try:
        try:
            fcntl.lockf(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            handle.seek(0)
            holder = handle.read().strip() or "another process"
            raise ValueError(
                f"--process-id {process_id}: {holder} already runs this run with that id; "
                f"give each of the {count} processes its own --process-id in [0, {count})"
            ) from None
        handle.seek(0)
        handle.truncate()
        handle.write(f"process {process_id} (pid {os.getpid()} on {socket.gethostname()})")
        handle.flush()
        _CLAIMS.append(path)
        try:
            yield
        finally:
            release_claims()
    finally:
        handle.close()


#: The id lock files this process holds (`claim_process_id`).
_CLAIMS: list[Any] = []


def release_claims() -> None:
    """Removes this process's id lock files; also before an `os._exit`, which skips the
    `claim_process_id` context's exit (the kernel drops the locks themselves)."""
    while _CLAIMS:
        with contextlib.suppress(OSError):
            _CLAIMS.pop().unlink()


def _exit_not_joined(message: str) -> None:
    sys.stderr.write(message)
    sys.stderr.flush()
    release_claims()
    os._exit(EXIT_NOT_JOINED)


def check_process_args(coordinator_address: str, num_processes: int, process_id: int) -> None:
    """Raises a one-line `ValueError` for a process count outside [1, `MAX_PROCESSES`], a
    process_id outside [0, num_processes) or an address that is not "HOST:PORT"
    (`parse_address`); touches nothing."""
    if not 1 <= num_processes <= MAX_PROCESSES:
        raise ValueError(f"num_processes={num_processes} must be in [1, {MAX_PROCESSES}]")
    if not 0 <= process_id < num_processes:
        raise ValueError(f"process_id={process_id} must be in [0, num_processes={num_processes})")
    parse_address(coordinator_address)


def parse_address(address: str, name: str = "coordinator_address") -> tuple[str, int]:
    """`(host, port)` of "HOST:PORT": HOST a host name (letters, digits, hyphens and dots,
    RFC 1123), an IPv4 address or an IPv6 address in brackets ("[::1]:1234"); PORT in
    [1, 65535].

    Args:
      address: the address to check.
      name: what the errors call it: an argument ("coordinator_address") or a command
        line option ("--coordinator").

    Raises:
      ValueError: one line naming `name`, the address and what is wrong with it (a scheme
        such as "http://", no port, a port out of range, a malformed host).
    """
    where = f"{name} {address}" if name.startswith("--") else f"{name}={address!r}"
    if "://" in address or "/" in address:
        raise ValueError(f"{where}: must be HOST:PORT, without a scheme or a path")
    host, colon, port = address.rpartition(":")
    if not colon or not host:
        raise ValueError(f"{where}: must be HOST:PORT (e.g. 10.0.0.1:1234)")
    if not (port.isascii() and port.isdigit()) or not 0 < int(port) < 65536:
        raise ValueError(f"{where}: the port must be an integer in [1, 65535]")
    if host.startswith("[") and host.endswith("]"):
        try:
            ipaddress.IPv6Address(host[1:-1])
        except ValueError:
            raise ValueError(f"{where}: {host} is not an IPv6 address") from None
    elif ":" in host:
        raise ValueError(f"{where}: write an IPv6 address in brackets, e.g. [::1]:1234")
    elif all(label.isdigit() for label in host.split(".")):
        try:
            ipaddress.IPv4Address(host)
        except ValueError:
            raise ValueError(f"{where}: {host} is not an IPv4 address") from None
    elif len(host) > 253 or not all(_HOST_LABEL.fullmatch(x) for x in host.split(".")):
        raise ValueError(
            f"{where}: {host!r} is not a host name (letters, digits, '-' and '.'), an IPv4 "
            "address or an [IPv6] address"
        )
    return host, int(port)


def check_port_free(coordinator_address: str) -> None:
    """Raises a one-line `ValueError` when this host cannot bind the coordinator's port on
    every address (where JAX's coordinator listens: "[::]:port"); when a gRPC server
    holds the port (`_speaks_http2`: most likely another process 0 of the same run), the
    error names a duplicate process id instead of asking for a free port."""
    port = int(coordinator_address.rpartition(":")[2])
    try:
        sock = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
        address = ("::", port)
    except OSError:  # no IPv6 on this host
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        address = ("0.0.0.0", port)
    with sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(address)
        except OSError as err:
            if _speaks_http2(port):
                raise ValueError(
                    f"process_id=0 is taken: a JAX coordinator (a gRPC server) already "
                    f"listens on port {port} of this host, so another process was started "
                    "with process id 0 too (a duplicate id): give each process its own id "
                    "in [0, num_processes); if another run uses this port, pick a free port"
                ) from None
            raise ValueError(
                f"coordinator_address={coordinator_address!r}: process 0 cannot listen on "
                f"port {port} ({err.strerror}): pick a free port"
            ) from None


def _speaks_http2(port: int, timeout: float = 1.0) -> bool:
    """Whether the server on `port` of this host answers HTTP/2's connection preface with
    a SETTINGS frame, as every gRPC server (JAX's coordinator) does."""
    preface = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes([0, 0, 0, 4, 0, 0, 0, 0, 0])
    for host in ("::1", "127.0.0.1"):
        try:
            with socket.create_connection((host, port), timeout=timeout) as sock:
                sock.sendall(preface)
                header = sock.recv(9)
        except OSError:
            continue
        return len(header) >= 4 and header[3] == 4  # frame type 4: SETTINGS
    return False


@contextlib.contextmanager
def quiet_gloo() -> Iterator[None]:
    """Keeps gloo's connection lines ("[Gloo] Rank N is connected to M peer ranks ...",
    which its C++ runtime prints to stdout, whatever the log level, in every process each
    time a collective across processes first connects a set of devices) off the user's
    terminal.

    Meanwhile stdout (file descriptor 1, so also what C and C++ code print) goes through
    a pipe, whose lines a thread passes on to the real stdout at once, but for gloo's.
    Wrap everything that runs collectives across processes in it.
    """
    sys.stdout.flush()
    saved = os.dup(1)
    read, write = os.pipe()

    def forward() -> None:
        pending = b""
        with open(read, "rb", buffering=0, closefd=True) as pipe:
            while chunk := pipe.read(65536):
                *lines, pending = (pending + chunk).split(b"\n")
                kept = b"".join(line + b"\n" for line in lines if not line.startswith(b"[Gloo] "))
                if kept:
                    os.write(saved, kept)
        if pending and not pending.startswith(b"[Gloo] "):
            os.write(saved, pending)

    forwarder = threading.Thread(target=forward, name="purejaxppo-stdout", daemon=True)
    forwarder.start()
    os.dup2(write, 1)
    os.close(write)
    try:
        yield
    finally:
        sys.stdout.flush()
        ctypes.CDLL(None).fflush(None)  # what C++ streams (synced with C stdio) hold
        os.dup2(saved, 1)  # closes the pipe's last write end: the forwarder drains it
        forwarder.join(5)
        os.close(saved)


def flagged_processes(flag: bool) -> list[int]:
    """The processes (ids, increasing) that pass `flag=True`; every process must call it
    at the same point (one small all-gather). One process: `[0]` or `[]` without
    communication.

    A step that may fail in some processes only (reading a shared file, a lock) is
    followed by this, so that all of them go on or all stop, instead of some waiting in
    a collective that the others never reach.
    """
    if jax.process_count() == 1:
        return [0] if flag else []
    from jax.experimental import multihost_utils

    flags = np.asarray(multihost_utils.process_allgather(np.int32(flag)))
    return [int(i) for i in np.flatnonzero(flags.reshape(-1))]


def together(what: str, action: Callable[[], T]) -> T:
    """Runs `action` here; when it failed (`ValueError`, `OSError`) in any process, raises
    in every process (its own error, or one naming the processes that failed), so that no
    process goes on to a collective the others never reach. `action` itself must take no
    collective that a failure could skip. One process: `action()`, its error as it is."""
    try:
        result, error = action(), None
    except (ValueError, OSError) as err:
        result, error = None, err
    failed = flagged_processes(error is not None)
    if error is not None:
        raise error
    if failed:
        raise ValueError(f"{what} failed in process {', '.join(map(str, failed))} (see its error)")
    return result


def from_process_zero(values: Sequence[float]) -> list[float]:
    """Process 0's `values` in every process, bit for bit (as float64 bits); every process
    calls it at the same point with as many values (the others' are ignored). One
    process: `values` without communication."""
    if jax.process_count() == 1:
        return [float(v) for v in values]
    from jax.experimental import multihost_utils

    bits = np.asarray(values, np.float64).view(np.uint32)
    shared = np.asarray(multihost_utils.broadcast_one_to_all(bits), np.uint32)
    return [float(v) for v in shared.view(np.float64)]


def differing_fields(fields: Mapping[str, Any]) -> dict[str, list[int]]:
    """`{name: [processes whose value differs from process 0's]}` for the entries of
    `fields` (JSON-able values), `{}` where every process holds the same values. Every
    process must call it with the same names (a different set of names is reported as
    the entry "names"). Compares a 28-bit digest per value (`fingerprint.digest`)."""
    if jax.process_count() == 1:
        return {}
    from jax.experimental import multihost_utils

    from purejaxppo.fingerprint import digest

    names = [*fields, "names"]
    values = [*fields.values(), sorted(fields)]
    hashes = np.asarray([int(digest(v)[:7], 16) for v in values], np.int32)
    table = np.asarray(multihost_utils.process_allgather(hashes)).reshape(-1, len(names))
    differ = {}
    for column, name in enumerate(names):
        others = np.flatnonzero(table[:, column] != table[0, column])
        if others.size:
            differ[name] = [int(i) for i in others]
    return differ


def is_lost_process_error(err: BaseException) -> bool:
    """True for the error a collective or the coordination service raises in a process
    whose peer died (killed, crashed): gloo's closed connections, JAX's missed heartbeats
    and failed barriers."""
    text = str(err)
    marks = ("Gloo", "Connection closed", "Connection reset", "heartbeat", "Barrier failed")
    return isinstance(err, (RuntimeError, ValueError)) and any(m in text for m in marks)
