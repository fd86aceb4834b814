"""`purejaxppo sweep`: a grid / random search as one program (`drivers.sweeps`)."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import sys
import time
from pathlib import Path
from typing import Any, NamedTuple

import yaml

from purejaxppo.cli.options import SweepOptions, pop_options
from purejaxppo.cli.values import (
    error,
    load_config,
    parse_grid,
    parse_random,
)
from purejaxppo.config import PPOConfig, load_yaml_file

#: Sweep options saved in `<out>/request.yaml` for `purejaxppo sweep --resume`.
_SWEEP_REQUEST = (
    "seeds",
    "num_samples",
    "random_seed",
    "max_runs_per_chunk",
    "devices",
    "log_every",
    "format",
)


class _Request(NamedTuple):
    """What a sweep runs: a new one's arguments, or those `--resume` reads back."""

    config: PPOConfig
    grid: dict[str, list]  # field -> values (`parse_grid`)
    random: dict[str, tuple]  # field -> distribution spec (`parse_random`)
    out: Path | None  # the output directory; None: a unique one under sweeps/ (`_claim`)


def sweep_command(parser: argparse.ArgumentParser, args: dict[str, Any]) -> int:
    """`purejaxppo sweep`: validate, write the request, set the devices, sweep, report."""
    options = dataclasses.asdict(pop_options(SweepOptions, args))
    single = options["coordinator"] is None
    # One process: the CPU devices are set first, since validating the env's kind imports
    # gymnax, which starts JAX's backend. Several processes: after `_claim` (`_run_sweep`),
    # so that process 0 holds the directory before any process starts.
    count = _set_devices(parser, options) if single else None
    try:
        request = _request(options, args)
        if single:
            _check_kind(options, request)
            _default_devices(options, request.config, count)
            from purejaxppo.drivers.settings import check_chunk
            from purejaxppo.parallel import runs_mesh

            # the devices are known: --max-runs-per-chunk must split evenly over them
            mesh = runs_mesh(request.config.env_name, options["devices"])
            check_chunk(options["max_runs_per_chunk"], mesh.devices.size)
    except (ValueError, ImportError) as err:
        error(parser, err)
    with contextlib.ExitStack() as stack:
        if options["process_id"] == 0:  # one process writes the directory and the request
            request = request._replace(out=_claim(parser, stack, options, request))
            _write_request(options, request)
        return _run_sweep(parser, options, request)


def _run_sweep(parser: argparse.ArgumentParser, options: dict[str, Any], request: _Request) -> int:
    """Sets the devices (several processes), sweeps, writes and prints the results."""
    config, out = request.config, request.out
    if options["coordinator"] is not None:  # several processes (one set its devices first)
        _set_devices(parser, options)
        try:
            _check_kind(options, request)
        except (ValueError, ImportError) as err:
            error(parser, err)
    from purejaxppo.drivers.sweeps import sweep, write_sweep

    try:
        result = sweep(
            config,
            seeds=options["seeds"],
            grid=request.grid,
            random=request.random,
            num_samples=options["num_samples"],
            random_seed=options["random_seed"],
            devices=options["devices"],
            max_runs_per_chunk=options["max_runs_per_chunk"],
            progress=not options["no_progress"],
            log_every=options["log_every"],
            progress_dir=out / "chunks",
        )
    except ValueError as err:
        error(parser, err)
    written = write_sweep(result, out, config, fmt=options["format"])
    from purejaxppo.drivers.sweeps import log_sweep

    logged = log_sweep(result, out, config, config.loggers)
    if logged:
        print(f"logged {len(logged)} runs to {', '.join(config.loggers)} under {out / 'runs'}")
    if jax_process_index() == 0:
        _print_results(result)
    print(f"wrote {', '.join(str(p) for p in written)}")
    return 0


def _request(options: dict[str, Any], args: dict[str, Any]) -> _Request:
    """The `_Request` of a new sweep, or of the sweep `--resume` continues; validated
    (settings, loggers, output directory) without starting JAX's backend."""
    from purejaxppo import rundir

    resume, out = options["resume"], options["out"]
    if resume is not None:
        given = [
            flag
            for flag, value in (
                ("--config", options["config"]),
                ("--grid", options["grid"]),
                ("--random", options["random"]),
                ("--out", out),
                ("--overwrite", options["overwrite"]),
            )
            if value
        ] + ["--" + name.replace("_", "-") for name in args]
        if given:
            raise ValueError(
                f"--resume takes the sweep's own arguments from {resume}/request.yaml; "
                f"drop {', '.join(given)}"
            )
        request = _read_request(resume)
        config = PPOConfig.from_dict(request["config"])
        options.update({name: request[name] for name in _SWEEP_REQUEST})
        grid, random, out = request["grid"], request["random"], resume
    else:
        config = load_config(options["config"], args)
        grid = parse_grid(options["grid"])
        random = parse_random(options["random"])
        if out is not None and options["process_id"] == 0:
            rundir.check_fresh(out, options["overwrite"], what="sweep")
    if options["coordinator"] is None and options["num_processes"] != 1:
        raise ValueError("--num-processes > 1 needs --coordinator HOST:PORT")
    if options["num_processes"] > 1 and out is None:
        raise ValueError("a sweep over several processes needs --out (a shared directory)")
    # Validate the settings now (without starting JAX's backend, which must wait for
    # the device settings below): the output directory is created only after this.
    from purejaxppo.drivers.settings import check_sweep_options, make_settings

    make_settings(config, grid, random, options["num_samples"], options["random_seed"])
    check_sweep_options(options["seeds"], options["log_every"], options["max_runs_per_chunk"])
    from purejaxppo.sinks import check_sinks

    check_sinks(config.loggers)  # `--loggers tensorboard,wandb`: one run per run
    return _Request(config=config, grid=grid, random=random, out=out)


def _read_request(resume: Path) -> dict[str, Any]:
    """The request `sweep --resume` continues: `resume`/request.yaml, checked to hold
    every key `_write_request` writes."""
    path = resume / "request.yaml"
    if not path.is_file():
        raise ValueError(f"--resume {resume}: no sweep there (no request.yaml)")
    request = load_yaml_file(path)
    keys = ("config", "grid", "random", *_SWEEP_REQUEST)
    missing = [key for key in keys if not isinstance(request, dict) or key not in request]
    if missing:
        raise ValueError(
            f"--resume {resume}: {path} is not a sweep request (no {', '.join(missing)})"
        )
    return request


def _claim(
    parser: argparse.ArgumentParser,
    stack: contextlib.ExitStack,
    options: dict[str, Any],
    request: _Request,
) -> Path:
    """Creates the output directory (default: a unique one) and holds it as its only writer
    (`rundir.claim`) until the sweep ends; the old contents go under the lock."""
    from purejaxppo import rundir

    out = request.out
    if out is None:
        out = rundir.make_unique_dir(
            "sweeps", f"{request.config.env_name}-{time.strftime('%Y%m%d-%H%M%S')}"
        )
    try:
        claim = rundir.claim(
            out, "sweep", resume=options["resume"] is not None, overwrite=options["overwrite"]
        )
        stack.enter_context(claim)
    except ValueError as err:
        error(parser, err)
    return out


def _write_request(options: dict[str, Any], request: _Request) -> None:
    """Writes `request.yaml` atomically (process 0)."""
    saved = {
        "config": request.config.to_dict(),
        "grid": request.grid,
        "random": {name: list(spec) for name, spec in request.random.items()},
    }
    saved.update({name: options[name] for name in _SWEEP_REQUEST})
    partial = request.out / "request.yaml.partial"
    partial.write_text(yaml.safe_dump(saved, sort_keys=False))
    partial.replace(request.out / "request.yaml")


def _check_kind(options: dict[str, Any], request: _Request) -> None:
    """The env kind's refusals (a host env's runs on several devices or processes), and
    every setting's env built once (a bad id or env kwarg), before anything is written.
    Imports gymnax (JAX's backend starts): after `_set_devices`."""
    from purejaxppo import kinds
    from purejaxppo.drivers.settings import make_settings
    from purejaxppo.drivers.sweeps.driver import check_processes
    from purejaxppo.envs import make_env
    from purejaxppo.parallel import runs_mesh

    config = request.config
    kind = kinds.check("sweep", config.env_name, multi_agent=config.multi_agent)
    runs_mesh(config.env_name, options["devices"] or 1)  # a host env's runs on several devices
    check_processes(kind, config.env_name, options["num_processes"])
    _, run_configs = make_settings(
        config, request.grid, request.random, options["num_samples"], options["random_seed"]
    )
    built = set()
    for run_config in run_configs:
        env_id, env_kwargs = run_config.env_name, run_config.env_kwargs
        if (env_id, repr(env_kwargs)) in built:
            continue
        built.add((env_id, repr(env_kwargs)))
        kinds.check("sweep", env_id, multi_agent=run_config.multi_agent)
        env, _ = make_env(env_id, env_kwargs)
        getattr(env, "close", lambda: None)()  # a host env's or EnvPool's workers


def _set_devices(parser: argparse.ArgumentParser, options: dict[str, Any]) -> int | None:
    """Starts the multi-process runtime, or sets the CPU device count (one per core), before
    JAX's backend starts; returns the CPU device count set (None: unchanged)."""
    if options["coordinator"] is not None:
        from purejaxppo.parallel import initialize_distributed

        try:
            initialize_distributed(
                options["coordinator"],
                options["num_processes"],
                options["process_id"],
                local_device_count=options["local_devices"],
            )
        except ValueError as err:
            parser.exit(2, f"purejaxppo: error: {err}\n")
        return None
    if options["local_devices"] is not None:
        import jax

        jax.config.update("jax_num_cpu_devices", options["local_devices"])
        return None
    # Every core by default: the runs are split over one CPU device per core.
    from purejaxppo.platform import configure_cpu_devices

    return configure_cpu_devices()


def _default_devices(options: dict[str, Any], config: PPOConfig, count: int | None) -> None:
    """Without `--devices`: chunks of `--max-runs-per-chunk` runs keep their size (the devices
    divide it); an EnvPool or host env's runs stay on one device (`parallel.runs_mesh`)."""
    from purejaxppo.parallel import runs_mesh

    chunk = options["max_runs_per_chunk"]
    mesh = runs_mesh(config.env_name, "auto", chunk)
    one_device = mesh is None
    if count is not None and options["devices"] is None and chunk and not one_device:
        options["devices"] = int(mesh.devices.size)
    if count is not None and not options["no_progress"]:
        if one_device:  # the runs stay on one device, whatever the core count
            line = f"{count} CPU devices; this env's runs use one of them"
        else:
            line = (
                f"{options['devices'] or count} CPU devices (one per core; --devices N, "
                "--local-devices N or JAX_NUM_CPU_DEVICES to change)"
            )
        print(f"purejaxppo: {line}", file=sys.stderr)


def _print_results(result: Any) -> None:
    """Warns about diverged runs; prints the ten best settings by IQM."""
    import pandas as pd

    diverged = result.runs[result.runs["diverged"] > 0]
    if len(diverged):
        print(
            f"purejaxppo: warning: {len(diverged)} of {len(result.runs)} runs diverged "
            f"(NaN / Inf losses; runs {diverged['run'].tolist()}, first non-finite "
            f"updates {diverged['diverged'].tolist()}): see the 'diverged' column of "
            "runs.csv",
            file=sys.stderr,
        )

    best = result.summary.sort_values("final_return_iqm", ascending=False)
    with pd.option_context("display.width", 160, "display.max_columns", 20):
        print(best.head(10).to_string(index=False, float_format=lambda v: f"{v:.4g}"))


def jax_process_index() -> int:
    import jax

    return jax.process_index()
