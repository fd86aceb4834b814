"""`purejaxppo tune`: Bayesian hyperparameter search with Optuna (`drivers.tune`).

    purejaxppo tune --config C --search FIELD=DIST:... --trials N [--batch B] [--out OUT]
    purejaxppo tune --resume OUT          # continue OUT with the arguments it recorded

OUT holds the request (request.yaml), the study (study.db, unless --storage names another
storage), trials.csv, best.yaml and the figures. A worker that joins a shared study passes
the same arguments, its own --out and `--resume` (the study is loaded, not refused).
"""

from __future__ import annotations

import argparse
import dataclasses
import time
from pathlib import Path
from typing import Any, NamedTuple

from purejaxppo.cli.options import CONFIG, NO_PROGRESS, option, pop_options
from purejaxppo.cli.values import error, load_config, parse_random
from purejaxppo.config import PPOConfig, load_yaml_file

#: The tune's own options recorded in OUT/request.yaml (with its config and search).
_RECORDED = (
    "trials",
    "batch",
    "sampler",
    "pruner",
    "objective",
    "direction",
    "storage",
    "study_name",
    "reports",
)


@dataclasses.dataclass
class TuneOptions:
    """`purejaxppo tune`."""

    config: Path | None = option(type=Path, help=CONFIG)
    search: list[str] = option(
        action="append",
        metavar="FIELD=DIST:A:B",
        help="a searched field: uniform:LOW:HIGH, log_uniform:LOW:HIGH, int_uniform:LOW:HIGH "
        "or choice:V1,V2 (sizes as 64-64); static fields take choice / int_uniform (repeat "
        "for more fields)",
    )
    trials: int | None = option(
        type=int, metavar="N", help="trials in the study, all workers together (required)"
    )
    batch: int = option(8, type=int, metavar="B", help="trials trained at once (default 8)")
    sampler: str = option("tpe", help="tpe (default), cmaes, random or qmc")
    pruner: str = option("median", help="median (default), halving, hyperband or none")
    objective: str = option(
        "episode_return",
        metavar="METRIC[:WINDOW]",
        help="the metric averaged over the last WINDOW fraction of a trial's updates "
        "(default episode_return:0.1)",
    )
    direction: str = option("maximize", help="maximize (default) or minimize")
    storage: str | None = option(
        metavar="URL",
        help="an Optuna RDB storage, e.g. postgresql://user:password@host/db, shared by "
        "workers (default: sqlite:///OUT/study.db)",
    )
    study_name: str = option("tune", metavar="NAME", help="the study's name (default tune)")
    reports: int = option(
        10, type=int, metavar="N", help="intermediate values (pruning checks) per trial"
    )
    out: Path | None = option(
        type=Path, help="output directory (default: tune/<env>-<time>-<random>)"
    )
    resume: Any = option(
        nargs="?",
        const=True,
        type=Path,
        metavar="OUT",
        help="continue OUT with its recorded arguments; or, without OUT, load the study of "
        "--storage / --out to join it as one more worker",
    )
    overwrite: bool = option(
        False, action="store_true", help="replace the contents of an --out written by tune"
    )
    no_progress: bool = option(False, action="store_true", help=NO_PROGRESS)


class _Request(NamedTuple):
    config: PPOConfig
    search: dict[str, tuple]
    options: dict[str, Any]  # `_RECORDED`
    out: Path | None
    continuing: bool  # OUT holds the request: `--resume OUT`


def tune_command(parser: argparse.ArgumentParser, args: dict[str, Any]) -> int:
    """`purejaxppo tune`: check everything, claim OUT, record the request, tune, report.
    The lanes of a batch split over one CPU device per usable core (as `sweep`'s runs)."""
    from purejaxppo.platform import configure_cpu_devices

    configure_cpu_devices()  # before JAX starts its backend
    o = pop_options(TuneOptions, args)
    try:
        request = _request(o, args)
        from purejaxppo.drivers.tune import check_tune

        check_tune(request.config, request.search, **_arguments(o, request, request.out))
    except (ValueError, ImportError) as err:
        error(parser, err)
    from purejaxppo import rundir

    out = request.out
    if out is None:
        stem = f"{request.config.env_name}-{time.strftime('%Y%m%d-%H%M%S')}"
        out = rundir.make_unique_dir("tune", stem)
    try:
        with rundir.claim(out, "tune", resume=request.continuing, overwrite=o.overwrite):
            if not request.continuing:
                _write_request(out, request)
            return _run(parser, o, request, out)
    except ValueError as err:
        error(parser, err)


def _arguments(o: TuneOptions, request: _Request, out: Path | None) -> dict[str, Any]:
    """`tune`'s keyword arguments (but the config and search)."""
    return {**request.options, "resume": o.resume is not None, "out": out}


def _run(parser: argparse.ArgumentParser, o: TuneOptions, request: _Request, out: Path) -> int:
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
    except (TrainingInterrupted, StopNow) as stop:
        stop.resume_hint = f"purejaxppo tune --resume {out}"
        raise
    _print_result(result, request, out)
    return 0


def _request(o: TuneOptions, args: dict[str, Any]) -> _Request:
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
                ("--trials", o.trials),
                ("--storage", o.storage),
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
        return _read_request(where)
    if isinstance(o.resume, Path) and o.config is None and not o.search:
        raise ValueError(f"--resume {o.resume}: no tune there (no request.yaml)")
    if o.trials is None:
        raise ValueError("--trials N is required: the study's total of trials")
    config = load_config(o.config, args)
    try:
        search = parse_random(o.search)
    except ValueError as err:
        raise ValueError(str(err).replace("--random", "--search")) from None
    out = where if where is not None else o.out
    if out is not None:
        rundir.check_fresh(out, o.overwrite, what="tune")
    options = {name: getattr(o, name) for name in _RECORDED}
    return _Request(config=config, search=search, options=options, out=out, continuing=False)


def _read_request(out: Path) -> _Request:
    """The request recorded in `out`/request.yaml."""
    saved = load_yaml_file(out / "request.yaml")
    missing = [
        k for k in ("config", "search", *_RECORDED) if not isinstance(saved, dict) or k not in saved
    ]
    if missing:
        raise ValueError(f"--resume {out}: request.yaml is not a tune's (no {', '.join(missing)})")
    search = {name: tuple(spec) for name, spec in saved["search"].items()}
    options = {name: saved[name] for name in _RECORDED}
    config = PPOConfig.from_dict(saved["config"])
    return _Request(config=config, search=search, options=options, out=out, continuing=True)


def _write_request(out: Path, request: _Request) -> None:
    """Writes `out`/request.yaml atomically."""
    import yaml

    from purejaxppo.drivers.report import write_yaml

    saved = {
        "config": request.config.to_dict(),
        "search": {name: list(spec) for name, spec in request.search.items()},
        **request.options,
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
        goal = request.options["objective"]
        print(f"best trial {best.number}: {goal} = {best.value:.6g} ({params})")
        print(f"rerun it: purejaxppo train --config {out / 'best.yaml'}")
    print(f"wrote {', '.join(str(p) for p in result.written)}")
