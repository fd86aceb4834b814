"""`purejaxppo tune`: Bayesian hyperparameter search with Optuna (`drivers.tune`).

    purejaxppo tune --config C --search FIELD=DIST:... --trials N [--batch B] [--out OUT]
    purejaxppo tune --resume OUT          # continue OUT with the arguments it recorded

OUT holds the request (request.yaml), the study (study.db, unless --storage names another
storage), trials.csv, best.yaml and the figures. A worker that joins a shared study passes
the same arguments, its own --out and `--resume` (the study is loaded, not refused).

request.yaml records the storage URL with its password hidden
(`postgresql://tuner:***@host/db`); `--resume OUT` takes it back from `--storage URL`
given again or from the environment variable PUREJAXPPO_STORAGE_PASSWORD
(`storage.PASSWORD_ENV`). `--resume OUT` never starts a new study: a study that is gone
from its storage is refused.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import time
from pathlib import Path
from typing import Any, NamedTuple

from purejaxppo.cli.options import CONFIG, NO_PROGRESS, option, pop_options
from purejaxppo.cli.values import error, load_config, parse_random
from purejaxppo.config import PPOConfig, load_yaml_file
from purejaxppo.drivers.tune.options import TuneOptions


@dataclasses.dataclass(frozen=True)
class TuneCommand(TuneOptions):
    """`purejaxppo tune`: the study's options (`TuneOptions`, each field a flag) and where
    the command reads and writes."""

    config: Path | None = option(type=Path, help=CONFIG)
    search: list[str] = option(
        action="append",
        metavar="FIELD=DIST:A:B",
        help="a searched field: uniform:LOW:HIGH, log_uniform:LOW:HIGH, int_uniform:LOW:HIGH "
        "or choice:V1,V2 (sizes as 64-64); static fields take choice / int_uniform (repeat "
        "for more fields); ppo-default: RL Zoo's PPO space over the traced fields (the "
        "fields given beside it replace its entries)",
    )
    out: Path | None = option(
        type=Path, help="output directory (default: tune/<env>-<time>-<random>)"
    )
    resume: Any = option(
        nargs="?",
        const=True,
        type=Path,
        metavar="OUT",
        help="continue OUT with its recorded arguments (with --trials N: raise its study's "
        "budget to N); or, without OUT, load the study of --storage / --out to join it as "
        "one more worker",
    )
    overwrite: bool = option(
        False, action="store_true", help="replace the contents of an --out written by tune"
    )
    no_progress: bool = option(False, action="store_true", help=NO_PROGRESS)


class _Request(NamedTuple):
    config: PPOConfig
    search: dict[str, tuple]
    options: TuneOptions
    out: Path | None
    continuing: bool  # OUT holds the request: `--resume OUT`
    extended: bool = False  # `--resume OUT --trials N` raised the recorded trials


def tune_command(parser: argparse.ArgumentParser, args: dict[str, Any]) -> int:
    """`purejaxppo tune`: check everything, claim OUT, record the request, tune, report.
    The lanes of a batch split over one CPU device per usable core (as `sweep`'s runs)."""
    from purejaxppo.platform import configure_cpu_devices

    configure_cpu_devices()  # before JAX starts its backend
    o = pop_options(TuneCommand, args)
    try:
        request = _request(o, args)
        from purejaxppo.drivers.tune import check_tune

        arguments = _arguments(o, request, request.out)
        setup = check_tune(request.config, request.search, **arguments, overwrite=bool(o.overwrite))
        if request.continuing:
            _check_study(setup.url, request.options.study_name, request.out)
    except (ValueError, ImportError) as err:
        error(parser, err)
    from purejaxppo import rundir

    out = request.out
    if out is None:
        stem = f"{request.config.env_name}-{time.strftime('%Y%m%d-%H%M%S')}"
        try:
            out = rundir.make_unique_dir("tune", stem)
        except OSError as err:
            _failed(parser, err, Path("tune") / stem)
    try:
        with rundir.claim(out, "tune", resume=request.continuing, overwrite=o.overwrite):
            if not request.continuing or request.extended:
                _write_request(out, request)
            return _run(parser, o, request, out)
    except ValueError as err:
        error(parser, err)
    except Exception as err:  # a full disk, a failing storage: one line, never a traceback
        _failed(parser, err, out)


def _arguments(o: TuneCommand, request: _Request, out: Path | None) -> dict[str, Any]:
    """`tune`'s keyword arguments (but the config and search)."""
    return {"options": request.options, "resume": o.resume is not None, "out": out}


def _check_study(url: str, study_name: str, out: Path) -> None:
    """`--resume OUT` continues OUT's study: refused when the study is not in its storage
    (never a new study over OUT's results)."""
    from purejaxppo.drivers.tune import study as studies
    from purejaxppo.drivers.tune.driver import missing_study

    if not studies.study_exists(url, study_name):
        raise ValueError(missing_study(out, study_name, url))


def _run(parser: argparse.ArgumentParser, o: TuneCommand, request: _Request, out: Path) -> int:
    from purejaxppo.drivers.tune import tune
    from purejaxppo.signals import StopNow, TrainingInterrupted

    try:
        result = tune(
            request.config,
            request.search,
            **_arguments(o, request, out),
            progress=not o.no_progress,
        )
    except ValueError as err:
        error(parser, err)
    except TrainingInterrupted as stop:
        parser.exit(stop.exit_code, f"purejaxppo: tune: {_stopped(stop, out)}\n")
    except StopNow as stop:  # a second signal: one line, and out at once
        sys.stderr.write(
            f"purejaxppo: tune: {stop}; every finished trial is kept in the study (the "
            f"running ones run again): continue with purejaxppo tune --resume {out}\n"
        )
        sys.stderr.flush()
        sys.stdout.flush()
        os._exit(stop.exit_code)  # as `cli.main`: XLA may still run the segment
    _print_result(result, request, out)
    return 0


def _stopped(stop: Any, out: Path) -> str:
    """The one line of a stopped tune (`TrainingInterrupted`; `stop.done`: the study's
    finished trials)."""
    how = f"continue with purejaxppo tune --resume {out}"
    if not stop.done:
        return f"stopped by {stop.signal_name} before any trial finished; nothing lost: {how}"
    return (
        f"stopped by {stop.signal_name} with {stop.done} trial(s) of the study finished, "
        f"all kept in it; {how}"
    )


def _failed(parser: argparse.ArgumentParser, err: Exception, out: Path) -> None:
    """Exits with one line for a full disk (`EXIT_NO_SPACE`), another OS error or a failing
    storage (2), naming how to continue; re-raises anything else."""
    from purejaxppo.cli.values import EXIT_NO_SPACE, EXIT_OS_ERROR
    from purejaxppo.drivers.tune import storage as storages
    from purejaxppo.paths import describe_os_error

    started = (out / "request.yaml").is_file()
    how = f"purejaxppo tune --resume {out}" if started else "run the same command again"
    kept = "every finished trial is kept in the study" if started else "nothing was started"
    first = (str(err).strip().splitlines() or [type(err).__name__])[0][:300]
    if isinstance(err, OSError) and err.strerror:
        first = err.strerror + (f": {err.filename}" if err.filename else "")
    if storages.disk_full(err):
        message = f"the disk is full ({first}); {kept}: free space, then {how}"
        parser.exit(EXIT_NO_SPACE, f"purejaxppo: error: tune: {message}\n")
    line = describe_os_error(err)
    if line is not None:
        parser.exit(EXIT_OS_ERROR, f"purejaxppo: error: tune: {line}; {kept}: then {how}\n")
    if type(err).__name__ == "StorageInternalError":
        cause = next(storages.chain(err), err)
        words = (str(cause).strip().splitlines() or [type(cause).__name__])[0][:300]
        message = f"the study's storage failed ({words}); {kept}: fix it, then {how}"
        parser.exit(EXIT_OS_ERROR, f"purejaxppo: error: tune: {message}\n")
    raise err


def _request(o: TuneCommand, args: dict[str, Any]) -> _Request:
    """The request of a new tune, of a joining worker, or the one `--resume OUT` reads."""
    from purejaxppo import rundir

    where = o.resume if isinstance(o.resume, Path) else o.out if o.resume else None
    if o.resume is True and o.out is None and o.storage is None:
        raise ValueError("--resume needs OUT: --resume OUT, or --resume with --out / --storage")
    if where is not None and (where / "request.yaml").is_file():
        given = [
            flag
            for flag, value in (
                ("--config", o.config),
                ("--search", o.search),
                ("--overwrite", o.overwrite),
                ("--out", o.out if o.out != where else None),
            )
            if value
        ] + ["--" + name.replace("_", "-") for name in args]
        if given:
            raise ValueError(
                f"--resume takes the tune's arguments from {where}/request.yaml; drop "
                f"{', '.join(given)}"
            )
        return _extend(_read_request(where, o.storage), o.trials)
    if isinstance(o.resume, Path) and o.config is None and not o.search:
        raise ValueError(f"--resume {o.resume}: no tune there (no request.yaml)")
    if o.trials is None:
        raise ValueError("--trials N is required: the study's total of trials")
    config = load_config(o.config, args)
    from purejaxppo.drivers.tune.space import PPO_DEFAULT_NAME, expand_default

    default = PPO_DEFAULT_NAME in o.search
    try:
        search = parse_random([s for s in o.search if s != PPO_DEFAULT_NAME], "--search")
    except ValueError as err:
        raise ValueError(str(err).replace("--random", "--search")) from None
    if default:  # recorded expanded: request.yaml says what was searched
        search = expand_default({PPO_DEFAULT_NAME: None, **search})
    out = where if where is not None else o.out
    if out is not None:
        rundir.check_fresh(out, o.overwrite, what="tune")
    options = TuneOptions(**{f.name: getattr(o, f.name) for f in dataclasses.fields(TuneOptions)})
    return _Request(config=config, search=search, options=options, out=out, continuing=False)


def _read_request(out: Path, storage: str | None = None) -> _Request:
    """The request recorded in `out`/request.yaml; its storage URL with the password back
    (from `storage`, the --storage given again, or the environment: `with_password`).

    Raises:
      ValueError: one line: request.yaml is not a tune's, `storage` is another storage,
        or the recorded URL's password was not given.
    """
    from purejaxppo.drivers.tune import storage as storages

    saved = load_yaml_file(out / "request.yaml")
    missing = [
        k
        for k in ("config", "search", "trials", "objective")
        if not isinstance(saved, dict) or k not in saved
    ]
    if missing:
        raise ValueError(f"--resume {out}: request.yaml is not a tune's (no {', '.join(missing)})")
    search = {name: tuple(spec) for name, spec in saved["search"].items()}
    options = TuneOptions.from_record(saved)
    recorded = options.storage
    if recorded is None and storage is not None:
        raise ValueError(
            f"--resume {out}: its study is in {out}/study.db, not --storage "
            f"{storages.hidden_url(storage)!r}; drop --storage"
        )
    if recorded is not None:
        try:
            password = storages.with_password(recorded, storage, os.environ)
            options = dataclasses.replace(options, storage=password)
        except ValueError as err:
            raise ValueError(f"--resume {out}: {err}") from None
    config = PPOConfig.from_dict(saved["config"])
    return _Request(config=config, search=search, options=options, out=out, continuing=True)


def _extend(request: _Request, trials: int | None) -> _Request:
    """`--resume OUT --trials N`: the request with its study's budget raised to N.

    Raises:
      ValueError: N below the recorded trials (a study's budget only grows).
    """
    recorded = request.options.trials
    if trials is None or trials == recorded:
        return request
    if isinstance(trials, bool) or not isinstance(trials, int) or trials < recorded:
        raise ValueError(
            f"--trials {trials}: {request.out}/request.yaml records {recorded} trials, and a "
            f"study's budget only grows (--trials N > {recorded}, or drop --trials)"
        )
    options = dataclasses.replace(request.options, trials=trials)
    return request._replace(options=options, extended=True)


def _write_request(out: Path, request: _Request) -> None:
    """Writes `out`/request.yaml atomically, the storage URL's password hidden."""
    import yaml

    from purejaxppo.drivers.report import write_yaml
    from purejaxppo.drivers.tune import storage as storages

    storage = request.options.storage
    saved = {
        "config": request.config.to_dict(),
        "search": {name: list(spec) for name, spec in request.search.items()},
        **request.options.record(),
        "storage": None if storage is None else storages.hidden_url(storage),
    }
    yaml.safe_dump(saved)  # refuses what YAML cannot hold before anything is written
    write_yaml(out / "request.yaml", saved)


def _print_result(result: Any, request: _Request, out: Path) -> None:
    """The study's counts, the best trial and the files written."""
    states = result.trials["state"].value_counts().to_dict() if len(result.trials) else {}
    counts = ", ".join(f"{n} {s.lower()}" for s, n in sorted(states.items()))
    print(f"tune: study {result.study.study_name!r}: {len(result.trials)} trials ({counts})")
    if result.best_config is not None:
        best = result.study.best_trial
        params = " ".join(
            f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in best.params.items()
        )
        goal = request.options.objective
        print(f"best trial {best.number}: {goal} = {best.value:.6g} ({params})")
        print(f"rerun it: purejaxppo train --config {out / 'best.yaml'}")
    print(f"wrote {', '.join(str(p) for p in result.written)}")
