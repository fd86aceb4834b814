"""`purejaxppo pbt`: population-based training (`drivers.population`)."""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path
from typing import Any

from purejaxppo import rundir
from purejaxppo.cli.options import PbtOptions, pop_options
from purejaxppo.cli.values import (
    error,
    load_config,
    parse_random,
)
from purejaxppo.config import TRACED_FIELDS, PPOConfig, load_yaml_file

#: The pbt options recorded in OUT/request.yaml (with its config) for `pbt --resume OUT`.
_RECORDED = (
    "population",
    "ready_every",
    "search",
    "exploit",
    "explore",
    "truncation_fraction",
    "tournament_size",
    "resample_probability",
    "fitness_window",
    "devices",
    "checkpoint_every",
)


def pbt_command(parser: argparse.ArgumentParser, args: dict[str, Any]) -> int:
    """`purejaxppo pbt`: validate, split the population over the devices, train, write."""
    o = pop_options(PbtOptions, args)
    # imports JAX (the population package): here, not at the top, to keep --help fast
    from purejaxppo.drivers.population.static import split_search

    try:
        o, config = _resumed(o, args) if isinstance(o.resume, Path) else (o, None)
        if o.resume and o.out is None:
            raise ValueError(
                "--resume needs OUT: --resume OUT, or --resume --out OUT with the pbt's "
                "own arguments"
            )
        config = config or load_config(o.config, args)
        search = parse_random(o.search, flag="--search")
        _check_search(search)  # before --out and before anything compiles
        static = split_search(search, config)[1]
        if static.names and (o.devices or 1) > 1:
            raise ValueError(
                f"--search {', '.join(static.names)} (static fields) cannot be combined with "
                f"--devices {o.devices}: it needs the single program of a traced-only search "
                "(static searches run on one device)"
            )
        if o.resume and o.overwrite:
            raise ValueError("--resume and --overwrite exclude each other")
        if o.checkpoint_every < 0:
            raise ValueError(f"--checkpoint-every {o.checkpoint_every}: must be >= 0 (0: none)")
        if o.out is not None and not o.resume:
            rundir.check_fresh(o.out, o.overwrite, what="pbt")
        # the devices, then the env's kind (its import starts JAX's backend), before --out
        # is claimed: a refused kind leaves nothing on disk
        devices = _pbt_devices(o, config, static=bool(static.names))
        from purejaxppo.drivers.population import check_pbt

        # every refusal of `pbt` itself (search, options, devices) before --out is made
        check_pbt(config, **_pbt_arguments(o, config, search, o.out, devices))
    except ValueError as err:
        parser.exit(2, f"purejaxppo: error: {err}\n")
    if o.resume and (o.out / "pbt.yaml").is_file():
        print(f"pbt: {o.out} is finished (it holds pbt.yaml): nothing to resume")
        return 0
    out = o.out
    if out is None:  # unique: two launches in one second never share it
        out = rundir.make_unique_dir("pbt", f"{config.env_name}-{time.strftime('%Y%m%d-%H%M%S')}")
    try:
        with rundir.claim(out, "pbt", resume=o.resume, overwrite=o.overwrite):
            if not o.resume:
                _write_request(out, o, config)
            return _run_pbt(parser, o, config, search, out, devices)
    except ValueError as err:
        error(parser, err)


def _check_search(search: dict[str, Any]) -> None:
    """Refuses a pbt `--search` with no field, a field pbt cannot search, a static field
    searched by a range or a traced one by a choice."""
    from purejaxppo.drivers.population.static import STATIC_SEARCH_FIELDS

    if not search:
        raise ValueError(
            "pbt needs at least one --search FIELD=DIST:LOW:HIGH (e.g. --search "
            "learning_rate=log_uniform:1e-5:1e-2): it explores only searched fields"
        )
    for name, spec in search.items():
        if name not in TRACED_FIELDS and name not in STATIC_SEARCH_FIELDS:
            raise ValueError(
                f"--search {name}: pbt searches traced fields "
                f"({', '.join(TRACED_FIELDS)}) and, by choice:A,B,..., the static fields "
                f"{', '.join(STATIC_SEARCH_FIELDS)}"
            )
        kind, *_ = spec  # (kind, *arguments), as `parse_random` builds it
        if name in STATIC_SEARCH_FIELDS and kind != "choice":
            raise ValueError(
                f"--search {name}={spec}: a static field is searched by a choice, e.g. "
                "--search hidden_sizes=choice:64-64,256-256-256"
            )
        if name in TRACED_FIELDS and kind == "choice":
            raise ValueError(
                f"--search {name}={spec}: pbt needs a range (uniform:LOW:HIGH or "
                "log_uniform:LOW:HIGH), not a choice"
            )


def _resumed(o: PbtOptions, args: dict[str, Any]) -> tuple[PbtOptions, PPOConfig]:
    """`pbt --resume OUT`: the options and config OUT/request.yaml recorded (the pbt's own
    arguments, as `sweep --resume` and `tune --resume` take theirs).

    Raises:
      ValueError: one line: other arguments given, or OUT holds no pbt request.
    """
    out = o.resume
    defaults = PbtOptions()
    given = [
        "--" + name.replace("_", "-")
        for name in (*_RECORDED, "config", "overwrite", "out")
        if getattr(o, name) != getattr(defaults, name) and not (name == "out" and o.out == out)
    ] + ["--" + name.replace("_", "-") for name in args]
    if given:
        raise ValueError(
            f"--resume {out} takes the pbt's arguments from {out}/request.yaml; drop "
            f"{', '.join(given)}"
        )
    path = out / "request.yaml"
    if not path.is_file():
        if (out / "checkpoints").is_dir():  # a pbt from before the request was recorded
            raise ValueError(
                f"--resume {out}: no request.yaml there (a pbt started before it was "
                f"recorded): continue it with its own arguments and --resume --out {out}"
            )
        raise ValueError(f"--resume {out}: no pbt there (no request.yaml)")
    saved = load_yaml_file(path)
    missing = [k for k in ("config", *_RECORDED) if not isinstance(saved, dict) or k not in saved]
    if missing:
        raise ValueError(f"--resume {out}: request.yaml is not a pbt's (no {', '.join(missing)})")
    options = {name: saved[name] for name in _RECORDED}
    resumed = dataclasses.replace(o, **options, out=out, resume=True)
    return resumed, PPOConfig.from_dict(saved["config"])


def _write_request(out: Path, o: PbtOptions, config: PPOConfig) -> None:
    """Writes `out`/request.yaml atomically: the config and `_RECORDED` options that
    `pbt --resume OUT` continues with."""
    from purejaxppo.drivers.report import write_yaml

    saved = {"config": config.to_dict(), **{name: getattr(o, name) for name in _RECORDED}}
    write_yaml(out / "request.yaml", saved)


def _pbt_devices(o: PbtOptions, config: Any, *, static: bool) -> int | None:
    """Sets the CPU devices before JAX's backend starts (--devices N: N; default: every
    core), then checks the env's kind (`kinds.check`; importing it starts the backend);
    returns the devices the population is split over (default: as many CPU devices as
    divide the population, where the kind allows it).

    Raises:
      ValueError: a bad --devices, or a kind that refuses pbt (one line).
    """
    from purejaxppo.platform import configure_cpu_devices

    count = configure_cpu_devices(o.devices)
    from purejaxppo import kinds
    from purejaxppo.parallel import runs_mesh

    kinds.check(
        "pbt_resume" if o.resume else "pbt", config.env_name, multi_agent=config.multi_agent
    )
    if o.devices is not None or static or count is None:
        return o.devices
    mesh = runs_mesh(config.env_name, "auto", o.population)
    if mesh is None:  # the kind keeps the members on one device (the driver's default)
        return None
    if not o.no_progress:
        print(
            f"purejaxppo: population split over {mesh.devices.size} CPU devices (--devices N "
            "or JAX_NUM_CPU_DEVICES to change)",
            file=sys.stderr,
        )
    return int(mesh.devices.size)


def _pbt_arguments(
    o: PbtOptions, config: Any, search: Any, out: Path | None, devices: int | None
) -> dict[str, Any]:
    """`pbt`'s keyword arguments for these options (`out` None: the default output directory
    is not made yet). A static search runs on one device."""
    every = o.checkpoint_every
    return {
        "population": o.population,
        "ready_every": o.ready_every,
        "search": search,
        "exploit": o.exploit,
        "explore": o.explore,
        "seed": config.seed,
        "devices": devices,
        "truncation_fraction": o.truncation_fraction,
        "tournament_size": o.tournament_size,
        "resample_probability": o.resample_probability,
        "fitness_window": o.fitness_window,
        "checkpoint_dir": out / "checkpoints" if every and out is not None else None,
        "checkpoint_every": max(every, 1),
        "resume": o.resume,
        "progress": not o.no_progress,
    }


def _run_pbt(
    parser: argparse.ArgumentParser,
    o: PbtOptions,
    config: Any,
    search: Any,
    out: Path,
    devices: int | None,
) -> int:
    """Trains the population into `out` (claimed) on `devices`, writes, prints. A static
    search runs on one device. A stop request (SIGINT / SIGTERM) ends with
    `TrainingInterrupted` after the running generation is saved in `out/checkpoints`; a
    full disk (also orbax's report of one) exits 4 in one line (`values.error`)."""
    from purejaxppo.drivers.population import pbt, write_pbt  # imports JAX; keep --help fast
    from purejaxppo.signals import StopNow, TrainingInterrupted

    try:
        result = pbt(config, **_pbt_arguments(o, config, search, out, devices))
    except ValueError as err:
        error(parser, err)
    except (TrainingInterrupted, StopNow) as stop:
        if stop.resume_hint:  # saved: OUT continues (a pbt from before request.yaml:
            # with its own arguments)
            recorded = (out / "request.yaml").is_file()
            stop.resume_hint = (
                f"purejaxppo pbt --resume {out}"
                if recorded
                else f"the same command with --resume --out {out}"
            )
        raise
    written = write_pbt(result, out)
    import pandas as pd

    with pd.option_context("display.width", 160, "display.max_columns", 20):
        print(result.summary.head(10).to_string(index=False, float_format=lambda v: f"{v:.4g}"))
    print(f"best member {result.best_member}: {result.best_hparams_text()}")
    print(f"wrote {', '.join(str(p) for p in written)}")
    return 0
