"""`purejaxppo eval | collect | export`: the commands that use a trained run's policy."""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from purejaxppo.cli.options import CollectOptions, EvalOptions, ExportOptions, pop_options
from purejaxppo.drivers.segments import CommandStopped, stop_requests
from purejaxppo.paths import check_writable


def eval_command(parser: argparse.ArgumentParser, args: dict[str, Any]) -> int:
    """`purejaxppo eval RUN_DIR`: episodes of a run's policy; mean, std, IQM."""
    o = pop_options(EvalOptions, args)
    if o.all_steps:
        return _eval_all_steps(parser, o)
    if o.overwrite:
        parser.exit(2, "purejaxppo: error: --overwrite is for --all-steps (eval writes no file)\n")
    import jax

    from purejaxppo.evaluation import evaluate
    from purejaxppo.guards import check_finite_params
    from purejaxppo.policy import Policy

    try:
        if o.video is not None:
            check_writable(o.video, "eval --video")
        policy = Policy.load(o.run_dir, step=o.step)
        check_finite_params(policy.get_params(), f"run {o.run_dir}")
        if o.video is not None:  # check before anything runs
            from purejaxppo.video import check_video_path, make_renderer

            check_video_path(o.video)
            make_renderer(policy.env, policy.env_params)
        result = evaluate(
            policy,
            o.env_name,
            o.episodes,
            jax.random.key(o.seed),
            greedy=o.greedy,
        )
        if o.video is not None:
            from purejaxppo.video import save_episode_video

            _, episode = save_episode_video(
                policy, o.video, jax.random.key(o.seed), greedy=o.greedy
            )
    except (ValueError, ImportError) as err:
        parser.exit(2, f"purejaxppo: error: {err}\n")
    stats = result.summary()
    env_name = o.env_name or policy.config.env_name
    at = "" if o.step is None else f" (update {o.step})"
    print(
        f"{env_name}{at}: {o.episodes} episodes ({'greedy' if o.greedy else 'sampled'})"
        f"  mean {stats['mean']:.2f}  std {stats['std']:.2f}  IQM {stats['iqm']:.2f}"
        f"  mean length {result.lengths.mean():.1f}"
    )
    if o.video is not None:
        print(f"wrote {o.video} ({episode.length} frames, return {episode.episode_return:.2f})")
    return 0


def _eval_all_steps(parser: argparse.ArgumentParser, o: EvalOptions) -> int:
    """`purejaxppo eval RUN_DIR --all-steps`: every kept checkpoint, a table and a plot."""
    if o.step is not None or o.video is not None:
        parser.exit(2, "purejaxppo: error: --all-steps excludes --step and --video\n")
    import jax

    from purejaxppo.drivers.series import check_series_output, evaluate_series, write_series

    stopping = (
        f"stopping after the running step; the finished steps' rows are written to "
        f"{o.run_dir}/eval_steps.csv"
    )
    try:
        check_series_output(o.run_dir, o.overwrite)
        with stop_requests(stopping) as requested:
            table = evaluate_series(
                o.run_dir,
                o.episodes,
                jax.random.key(o.seed),
                greedy=o.greedy,
                env_id=o.env_name,
                after_step=lambda row: _row_done(row, requested),
            )
            stopped = table.attrs.get("total_steps", len(table)) > len(table)
            if len(table):
                csv_path, png_path = write_series(o.run_dir, table, title=str(o.run_dir))
    except (ValueError, ImportError) as err:
        parser.exit(2, f"purejaxppo: error: {err}\n")
    if len(table):
        print(table.to_string(index=False, float_format=lambda v: f"{v:.2f}"))
    if stopped:
        total = table.attrs["total_steps"]
        wrote = f"wrote {csv_path} and {png_path}" if len(table) else "wrote nothing"
        raise CommandStopped(
            requested[0],
            f"{wrote} with {len(table)} of {total} steps; rerun with --overwrite to "
            f"evaluate all: purejaxppo eval {o.run_dir} --all-steps --overwrite",
        )
    print(f"wrote {csv_path} and {png_path}")
    return 0


def _row_done(row: dict[str, Any], requested: list[str]) -> bool:
    """Prints one finished step of `eval --all-steps` (stderr); True once a stop is asked."""
    print(
        f"eval: update {row['update']}: mean {row['mean']:.2f} (IQM {row['iqm']:.2f})",
        file=sys.stderr,
        flush=True,
    )
    return bool(requested)


def collect_command(parser: argparse.ArgumentParser, args: dict[str, Any]) -> int:
    """`purejaxppo collect RUN_DIR`: a run's episodes as a dataset."""
    o = pop_options(CollectOptions, args)
    import jax

    from purejaxppo.datasets import check_output, collect
    from purejaxppo.policy import Policy

    info_keys = [k.strip() for k in o.info_keys.split(",") if k.strip()]
    try:
        if not 0 <= o.seed < 2**32:
            raise ValueError(f"collect: --seed {o.seed}: must be in [0, 2**32)")
        check_output(o.out, o.minari_id, o.episodes)
        check_writable(o.out, "collect --out")
        policy = Policy.load(o.run_dir, step=o.step)
        stopping = (
            f"stopping after the running chunk; the finished episodes are kept in {o.out} as "
            "a partial dataset (load_episodes refuses it): delete it and rerun to collect it all"
        )
        with stop_requests(stopping) as requested:
            result = collect(
                policy,
                o.episodes,
                o.out,
                jax.random.key(o.seed),
                greedy=o.greedy,
                temperature=o.temperature,
                minari_id=o.minari_id,
                info_keys=info_keys,
                stop=lambda: bool(requested),
            )
    except (ValueError, ImportError) as err:
        parser.exit(2, f"purejaxppo: error: {err}\n")
    except FileExistsError:  # another writer created it since check_output
        parser.exit(2, f"purejaxppo: error: collect: {o.out} exists; nothing overwritten\n")
    if not result.complete:
        raise CommandStopped(
            requested[0],
            f"{o.out} is a partial dataset ({result.num_episodes} of {o.episodes} episodes in "
            f"{len(result.files)} chunk file(s), no metadata.json: load_episodes refuses "
            f"it); delete it (rm -r {o.out}) and rerun the same command to collect all "
            f"{o.episodes}",
        )
    print(
        f"wrote {result.num_episodes} episodes ({result.num_steps} steps, mean return "
        f"{result.returns.mean():.2f}) to {result.out}"
        + (f" and Minari dataset {result.minari_id}" if result.minari_id else "")
    )
    return 0


#: `export --to` suffixes: PyTorch files (`export_torch`) or ONNX (`export_onnx`).
EXPORT_SUFFIXES = (".pt", ".pth", ".onnx")


def export_command(parser: argparse.ArgumentParser, args: dict[str, Any]) -> int:
    """`purejaxppo export RUN_DIR --to FILE`: PyTorch or ONNX files."""
    o = pop_options(ExportOptions, args)
    from purejaxppo.checkpoint import load_checkpoint
    from purejaxppo.export import export_onnx, export_torch
    from purejaxppo.guards import check_finite_params

    onnx = o.to.suffix == ".onnx"
    if o.to.suffix not in EXPORT_SUFFIXES:
        parser.exit(
            2,
            f"purejaxppo: error: --to {o.to}: unknown suffix {o.to.suffix!r}; use .pt (PyTorch: "
            "TorchScript, .pt2, .state_dict.pt, .module.py) or .onnx\n",
        )
    try:
        check_writable(o.to, "export --to")
        checkpoint = load_checkpoint(o.run_dir)
        check_finite_params(checkpoint.runner_state.train_state.params, f"run {o.run_dir}")
        export = export_onnx if onnx else export_torch
        # A second signal removes the exporter's staging directory and exits at once.
        abandon = _abandon_export(o.to.parent)
        with stop_requests(_EXPORT_STOPPING, at_once=abandon) as requested:
            path = export(
                checkpoint.runner_state,
                checkpoint.config,
                o.to,
                overwrite=o.overwrite,
            )
    except (ValueError, ImportError, FileExistsError) as err:
        parser.exit(2, f"purejaxppo: error: {err}\n")
    if onnx:
        wrote = f"wrote {path} (ONNX) and {path.name}.json"
    else:
        also = ".state_dict.pt, .pt2, .json (and the TorchScript file where it scripts)"
        wrote = f"wrote {path.with_suffix('.module.py')}, {also}"
    if requested:
        raise CommandStopped(requested[0], f"the export finished first: {wrote}")
    print(wrote)
    return 0


def _abandon_export(parent: Path) -> Callable[[str], None]:
    """The second signal's action during `export`: removes the staging directories
    (`tmp*`) the exporter made in `parent` since now, says so in one line and exits
    128 + the signal number, in the signal handler (the export runs in the main thread)."""
    before = set(parent.iterdir()) if parent.is_dir() else set()

    def abandon(signal_name: str) -> None:
        for path in set(parent.iterdir()) - before if parent.is_dir() else ():
            if path.name.startswith("tmp") and path.is_dir():
                shutil.rmtree(path, ignore_errors=True)
        print(
            f"purejaxppo: export: stopped at once by a second {signal_name}; nothing written "
            "(its staging directory is removed)",
            file=sys.stderr,
            flush=True,
        )
        os._exit(128 + int(signal.Signals[signal_name]))

    return abandon


_EXPORT_STOPPING = (
    "stopping once the running export is written (all its files or none; a second signal "
    "removes its staging directory and writes nothing)"
)
