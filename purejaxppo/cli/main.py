"""`purejaxppo`'s entry point: parse, then dispatch to the subcommand's module.

Exit codes: 0 done; 2 bad input (config, env kwargs, paths, a checkpoint that does not
match), reported before anything on disk changes; 3 training diverged (NaN / Inf losses
or parameters; the last finite checkpoint is kept); 4 the disk (or quota) is full
(ENOSPC; the newest complete checkpoint is kept: free space, then --resume). Any other
operating-system error (permissions, impossible paths) is one line naming the path, exit 2;
5 a run over several processes lost one of them (`cli.distributed`: restart every
process with --resume).
Ctrl-C (SIGINT) or SIGTERM during training finishes and saves the running segment, then
exits 130 / 143 with the command that continues the run (`purejaxppo.signals`); a second
Ctrl-C stops at once. `collect`, `eval --all-steps` and `export` stop the same way after
their running unit (a chunk of steps, a checkpoint's evaluation, the export), write what
they finished (`CommandStopped` names it) and exit 130 / 143.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import shlex
import sys
import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from purejaxppo.cli.check import check_command
from purejaxppo.cli.parser import build_parser
from purejaxppo.cli.pbt import pbt_command
from purejaxppo.cli.policy_commands import collect_command, eval_command, export_command
from purejaxppo.cli.sweep import sweep_command
from purejaxppo.cli.train import train_command
from purejaxppo.cli.tune import tune_command
from purejaxppo.cli.values import EXIT_NO_SPACE, EXIT_OS_ERROR
from purejaxppo.errors import EnvError
from purejaxppo.signals import CommandStopped, StopNow, TrainingInterrupted

#: What a second signal (`StopNow`) leaves, per command that writes no checkpoint.
STOPPED_AT_ONCE = {
    "collect": "the dataset directory stays partial (load_episodes refuses it): continue it "
    "with purejaxppo collect --resume OUT, or delete it",
    "eval": "nothing written",
    "check": "nothing written",
    "export": "nothing written (its staging directory is removed)",
}

COMMANDS = {
    "train": train_command,
    "sweep": sweep_command,
    "pbt": pbt_command,
    "tune": tune_command,
    "check": check_command,
    "eval": eval_command,
    "collect": collect_command,
    "export": export_command,
}


@contextlib.contextmanager
def _one_line_reports() -> Iterator[None]:
    """Warnings as "purejaxppo: warning: MESSAGE" (no source line), and orbax's own error
    logs (absl: unreadable metadata, its writer threads' tracebacks) silenced: the error
    they report reaches the command, which prints it as one line. Deprecation warnings
    (libraries telling their developers, e.g. tfp about `jax.core`) are not shown, as
    Python's default filters do outside `__main__`, whatever filters the caller set."""
    absl = logging.getLogger("absl")
    level, show = absl.level, warnings.showwarning

    def one_line(message, category, filename, lineno, file=None, line=None):
        print(f"purejaxppo: warning: {message}", file=file or sys.stderr)

    absl.setLevel(logging.CRITICAL)
    warnings.showwarning = one_line
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            warnings.simplefilter("ignore", PendingDeprecationWarning)
            yield
    finally:
        absl.setLevel(level)
        warnings.showwarning = show


def main(argv: Sequence[str] | None = None) -> int:
    """Runs `purejaxppo ARGV...`; returns the exit code (see the module docstring).

    With `argv` None (the `purejaxppo` command, `python -m purejaxppo.cli`: the process's
    own arguments) a single run's programs are also kept as exports beside the compile
    cache (`stored_programs`), which a later launch loads instead of tracing them; a call
    from Python with its own `argv` (a test, a notebook) traces them every time.
    """
    parser = build_parser()
    args = vars(parser.parse_args(argv))
    command = args.pop("command")
    _import_modules(parser, args.pop("imports", []), command, args)
    programs = None
    if not args.pop("no_compile_cache", False):
        from purejaxppo.platform import PROGRAMS_SUBDIRECTORY, enable_compile_cache

        cache = enable_compile_cache()
        own = cache is not None and argv is None  # the process's own command line
        programs = cache / PROGRAMS_SUBDIRECTORY if own else None
    try:
        with _one_line_reports(), _storing_programs(programs):
            return COMMANDS[command](parser, args)
    except EnvError as err:  # the user's env failed: one line (traceback on request)
        _exit_env_error(parser, err)
    except TrainingInterrupted as stop:
        parser.exit(stop.exit_code, f"purejaxppo: {command}: {_stopped(command, stop)}\n")
    except CommandStopped as stop:
        parser.exit(stop.exit_code, f"purejaxppo: {command}: {stop}\n")
    except StopNow as stop:  # a second signal: one line, and out at once
        _kill_host_workers()
        sys.stderr.write(f"purejaxppo: {command}: {stop}; {_left_at_once(command, stop, argv)}\n")
        sys.stderr.flush()
        sys.stdout.flush()
        # Not sys.exit: XLA may still be running the segment's computation, and the
        # interpreter's teardown under it aborts the process.
        os._exit(stop.exit_code)
    except Exception as err:  # one line for a full disk / an OS error, never a traceback
        from purejaxppo.paths import describe_os_error, is_disk_full

        if type(err).__name__ == "JaxRuntimeError":  # an env failed in a host call?
            from purejaxppo.envs.host_calls import take_host_error

            error = take_host_error(err)
            if isinstance(error, EnvError):
                _exit_env_error(parser, error)
            if isinstance(error, ValueError):  # e.g. a factory's envs of other spaces
                parser.exit(2, f"purejaxppo: error: {error}\n")
        if is_disk_full(err):
            where = describe_os_error(err) or str(err).splitlines()[0][:200]
            parser.exit(
                EXIT_NO_SPACE,
                f"purejaxppo: error: {command}: the disk is full ({where}); the newest "
                "complete checkpoint is kept: free space, then rerun (train: --resume)\n",
            )
        line = describe_os_error(err)
        if line is None:
            raise
        parser.exit(EXIT_OS_ERROR, f"purejaxppo: error: {command}: {line}\n")


@contextlib.contextmanager
def _storing_programs(directory: Path | None) -> Iterator[None]:
    """The command's block, with `stored_programs`'s store in `directory` (None: off)."""
    if directory is None:
        yield
        return
    from purejaxppo.stored_programs import store_in

    with store_in(directory):
        yield


def _kill_host_workers() -> None:
    """Ends the worker processes of host vector envs before a stop at once: a worker hung
    in the env's own code would outlive the process (`envs.host.kill_workers`)."""
    host = sys.modules.get("purejaxppo.envs.host")  # imported only by runs that use one
    if host is not None:
        host.kill_workers()


def _import_modules(
    parser: argparse.ArgumentParser,
    modules: Sequence[str],
    command: str = "train",
    args: dict[str, Any] | None = None,
) -> None:
    """Imports each `--import MODULE` (the user's consent on the command line, as
    `python -m` is; a config file never imports), finding modules in the working directory
    as `python -m` does; a module that fails is one line. The modules are recorded in the
    markers of the directories this command writes (`rundir.set_imports`). A directory the
    command continues or reads (`--resume`, `eval RUN_DIR`) that recorded others is refused
    in one line giving the command with them: they are named, never imported from a file."""
    import importlib

    from purejaxppo import rundir

    read = _directory_read(command, args or {})
    if read is not None:
        where, directory = read
        missing = [m for m in rundir.recorded_imports(directory) if m not in modules]
        if missing:
            again = " ".join(f"--import {m}" for m in missing)
            parser.exit(
                2,
                f"purejaxppo: error: {where} {directory}: it was written with {again}; pass "
                f"{again} again\n",
            )
    if modules and os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())  # `python -m`'s first entry: a module beside you
    for module in modules:
        try:
            importlib.import_module(module)
        except Exception as err:  # ImportError, or the module's own error
            parser.exit(2, f"purejaxppo: error: --import {module}: {type(err).__name__}: {err}\n")
    rundir.set_imports(list(modules))


def _directory_read(command: str, args: dict[str, Any]) -> tuple[str, Path] | None:
    """(how the command line names it, the directory) of the output `command` continues
    (`--resume`) or the run it reads (eval, collect, export), whose marker may name the
    modules it needs; None for a new one."""
    resume = args.get("resume")
    if command in ("pbt", "tune") and resume is True:  # `--resume --out OUT`
        resume = args.get("out")
    if command == "collect" and isinstance(resume, Path):  # the stopped collect's run
        from purejaxppo.dataset_files import read_request

        with contextlib.suppress(ValueError, OSError, TypeError, KeyError):
            return f"--resume {resume}: its run", Path(read_request(resume)["run_dir"])
        return None
    if isinstance(resume, Path):
        return "--resume", resume
    run_dir = args.get("run_dir") if command in ("eval", "collect", "export") else None
    return (command, run_dir) if isinstance(run_dir, Path) else None


def _stopped(command: str, stop: TrainingInterrupted) -> str:
    """The one line of a stop request: where the run stopped and how to continue. A
    sweep's driver has already said which runs are saved (its chunks), so its line only
    gives the command that continues."""
    if command == "sweep":
        if stop.resume_hint:
            return f"stopped by {stop.signal_name}; continue with: {stop.resume_hint}"
        return f"stopped by {stop.signal_name}; nothing is kept (no progress directory)"
    where = f"stopped by {stop.signal_name} after {stop.unit} {stop.done}"
    if stop.resume_hint:
        return f"{where}, saved; continue with: {stop.resume_hint}"
    return f"{where}; this command writes no checkpoints"


def _left_at_once(command: str, stop: StopNow, argv: Sequence[str] | None) -> str:
    """What a stop at once leaves: the commands that write no checkpoint say what they
    left; the others name the checkpoint they continue from, or, when nothing was saved
    yet (`stop.resume_hint` None), say so and give the command that starts again."""
    if command in STOPPED_AT_ONCE:
        return STOPPED_AT_ONCE[command]
    if stop.resume_hint:
        return f"the newest complete checkpoint is kept; continue with: {stop.resume_hint}"
    words = list(sys.argv[1:] if argv is None else argv)
    if "--overwrite" not in words:
        words.append("--overwrite")
    return f"nothing was saved; start again with: {shlex.join(['purejaxppo', *words])}"


def _exit_env_error(parser: argparse.ArgumentParser, err: EnvError) -> None:
    """Exits 2 with the env's error in one line; `PUREJAXPPO_DEBUG=1` raises it (the
    env's own traceback is its `__cause__`) instead."""
    if os.environ.get("PUREJAXPPO_DEBUG"):
        raise err
    parser.exit(2, f"purejaxppo: error: {err} (PUREJAXPPO_DEBUG=1 shows its traceback)\n")


if __name__ == "__main__":
    sys.exit(main())
