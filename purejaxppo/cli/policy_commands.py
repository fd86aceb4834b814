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
from purejaxppo.paths import check_writable
from purejaxppo.signals import CommandStopped, stop_requests


def eval_command(parser: argparse.ArgumentParser, args: dict[str, Any]) -> int:
    """`purejaxppo eval RUN_DIR`: episodes of a run's policy; mean, std, IQM."""
    o = pop_options(EvalOptions, args)
    try:
        _check_seed("eval", o.seed)
        if o.max_steps is not None and o.max_steps < 1:
            raise ValueError(f"--max-steps {o.max_steps}: must be an int >= 1")
    except ValueError as err:
        parser.exit(2, f"purejaxppo: error: {err}\n")
    if o.all_steps:
        return _eval_all_steps(parser, o)
    if o.overwrite:
        parser.exit(2, "purejaxppo: error: --overwrite is for --all-steps (eval writes no file)\n")
    import jax

    from purejaxppo.acting.evaluation import evaluate
    from purejaxppo.guards import check_finite_params
    from purejaxppo.policy import Policy

    try:
        if o.video is not None:
            check_writable(o.video, "eval --video")
        policy = Policy.load(o.run_dir, step=o.step)
        check_finite_params(policy.get_params(), f"run {o.run_dir}")
        if o.video is not None:  # check before anything runs
            from purejaxppo.acting.video import check_video_path, make_renderer

            check_video_path(o.video)
            video_env = _eval_env(policy, o.env_name)
            make_renderer(*video_env)
        result = evaluate(
            policy,
            o.env_name,
            o.episodes,
            jax.random.key(o.seed),
            greedy=o.greedy,
            max_steps=o.max_steps,
        )
        if o.video is not None:
            video_line = _save_video(policy, o, video_env)
    except (ValueError, ImportError) as err:
        parser.exit(2, f"purejaxppo: error: {_flag_names(err)}\n")
    stats = result.summary()
    env_name = o.env_name or policy.config.env_name
    at = "" if o.step is None else f" (update {o.step})"
    print(
        f"{env_name}{at}: {o.episodes} episodes ({'greedy' if o.greedy else 'sampled'})"
        f"  mean {stats['mean']:.2f}  std {stats['std']:.2f}  IQM {stats['iqm']:.2f}"
        f"  mean length {result.lengths.mean():.1f}"
    )
    if o.video is not None:
        print(video_line)
    return 0


def _eval_env(policy: Any, env_name: str | None) -> tuple[Any, Any]:
    """`(env, env_params)` that `eval` plays: `--env-name`'s env (built as `evaluate`
    builds it), or the policy's own."""
    if env_name is None or env_name == policy.config.env_name:
        return policy.env, policy.env_params
    from purejaxppo.envs import make_env

    return make_env(env_name)


def _save_video(policy: Any, o: EvalOptions, video_env: tuple[Any, Any]) -> str:
    """Writes `eval --video`'s episode and returns the line that says which it is: the
    first of the episodes evaluated (the same keys: `record_episode(first_of=)`), or for
    an EnvPool MuJoCo env an episode of its gymnasium twin (EnvPool renders no frames)."""
    import jax

    from purejaxppo.acting.video import save_episode_video
    from purejaxppo.envs.twins import is_envpool_mujoco

    env, env_params = video_env
    twin = is_envpool_mujoco(env)
    _, episode = save_episode_video(
        policy,
        o.video,
        jax.random.key(o.seed),
        greedy=o.greedy,
        max_steps=o.max_steps,
        env=env,
        env_params=env_params,
        first_of=None if twin else o.episodes,
    )
    which = (
        f"an episode of its gymnasium twin gymnasium:{env.task_id} (EnvPool renders no "
        "frames), not one of the episodes above"
        if twin
        else f"episode 1 of the {o.episodes} above"
    )
    return (
        f"wrote {o.video}: {which} ({episode.length} frames, return {episode.episode_return:.2f})"
    )


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
                max_steps=o.max_steps,
                after_step=lambda row: _row_done(row, requested),
            )
            stopped = table.attrs.get("total_steps", len(table)) > len(table)
            if len(table):
                csv_path, png_path = write_series(o.run_dir, table, title=str(o.run_dir))
    except (ValueError, ImportError) as err:
        parser.exit(2, f"purejaxppo: error: {_flag_names(err)}\n")
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


def _flag_names(err: Exception) -> str:
    """`err`'s line with the library's argument named as eval's and collect's flag (an
    env without a time limit asks for `max_steps=`)."""
    return str(err).replace("pass max_steps=", "pass --max-steps N")


def _row_done(row: dict[str, Any], requested: list[str]) -> bool:
    """Prints one finished step of `eval --all-steps` (stderr); True once a stop is asked."""
    print(
        f"eval: update {row['update']}: mean {row['mean']:.2f} (IQM {row['iqm']:.2f})",
        file=sys.stderr,
        flush=True,
    )
    return bool(requested)


def collect_command(parser: argparse.ArgumentParser, args: dict[str, Any]) -> int:
    """`purejaxppo collect RUN_DIR`: a run's episodes as a dataset; `collect --resume
    OUT` continues a stopped one with its own arguments (kept in OUT/collect.partial)."""
    o = pop_options(CollectOptions, args)
    import jax

    from purejaxppo.acting.datasets import METADATA, check_output, collect
    from purejaxppo.policy import Policy

    if o.resume is not None and (o.resume / METADATA).is_file():
        print(f"collect: {o.resume} is complete (it holds {METADATA}): nothing to resume")
        return 0
    try:
        o, request = _collect_request(o)
        info_keys = [k.strip() for k in o.info_keys.split(",") if k.strip()]
        check_output(o.out, o.minari_id, o.episodes, resume=o.resume is not None)
        check_writable(o.out, "collect --out")
        policy = Policy.load(o.run_dir, step=o.step)
        stopping = (
            f"stopping after the running chunk; the finished episodes are kept in {o.out} as "
            f"a partial dataset: continue it with purejaxppo collect --resume {o.out}"
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
                resume=o.resume is not None,
                request=request,
                max_steps=o.max_steps,
            )
    except (ValueError, ImportError) as err:
        parser.exit(2, f"purejaxppo: error: {_flag_names(err)}\n")
    except FileExistsError:  # another writer created it since check_output
        parser.exit(2, f"purejaxppo: error: collect: {o.out} exists; nothing overwritten\n")
    if not result.complete:
        raise CommandStopped(
            requested[0],
            f"{o.out} is a partial dataset ({result.num_episodes} of {o.episodes} episodes in "
            f"{len(result.files)} chunk file(s), no metadata.json: load_episodes refuses "
            f"it); continue it with: purejaxppo collect --resume {o.out} (or delete it: "
            f"rm -r {o.out})",
        )
    print(
        f"wrote {result.num_episodes} episodes ({result.num_steps} steps, mean return "
        f"{result.returns.mean():.2f}) to {result.out}"
        + (f" and Minari dataset {result.minari_id}" if result.minari_id else "")
    )
    return 0


def _check_seed(command: str, seed: int) -> None:
    """Raises a `ValueError` unless `command`'s --seed (`jax.random.key(seed)`) is in
    [0, 2**32)."""
    if not 0 <= seed < 2**32:
        raise ValueError(f"{command}: --seed {seed}: must be in [0, 2**32)")


#: `collect`'s arguments kept in OUT/collect.partial for `collect --resume OUT`.
_COLLECT_REQUEST = ("run_dir", "step", "episodes", "seed", "greedy", "temperature")
_COLLECT_REQUEST += ("minari_id", "info_keys", "max_steps")


def _collect_request(o: CollectOptions) -> tuple[CollectOptions, dict[str, Any]]:
    """The options `collect` runs with and the request it keeps for a resume: a new
    collect's (checked; RUN_DIR absolute, the checkpoint's update resolved), or with
    `--resume OUT` the stopped collect's own, read back from OUT's partial marker.

    Raises:
      ValueError: a new collect without RUN_DIR, --episodes or --out, or a bad --seed;
        `--resume` with other options, or an OUT that holds no collect's arguments.
    """
    import dataclasses

    from purejaxppo.checkpoint import latest_checkpoint_step
    from purejaxppo.dataset_files import read_request

    if o.resume is not None:
        given = [
            "--" + f.name.replace("_", "-") if f.name != "run_dir" else "RUN_DIR"
            for f in dataclasses.fields(o)
            if f.name != "resume" and getattr(o, f.name) != f.default
        ]
        if given:
            raise ValueError(
                f"collect --resume takes the collect's own arguments from "
                f"{o.resume}/collect.partial; drop {', '.join(given)}"
            )
        request = read_request(o.resume)
        if isinstance(request, dict):  # kept before --max-steps existed: the time limit
            request = {"max_steps": None, **request}
        if not isinstance(request, dict) or set(request) != set(_COLLECT_REQUEST):
            raise ValueError(
                f"collect --resume {o.resume}: its collect.partial holds no command's "
                "arguments (written by pjp.collect: resume it with collect(..., resume=True))"
            )
        options = dict(request, run_dir=Path(request["run_dir"]), out=o.resume)
        return CollectOptions(**options, resume=o.resume), request
    missing = [n for n, v in (("RUN_DIR", o.run_dir), ("--episodes", o.episodes)) if v is None]
    missing += ["--out"] if o.out is None else []
    if missing:
        raise ValueError(f"collect: give {', '.join(missing)} (or --resume OUT)")
    _check_seed("collect", o.seed)
    if o.max_steps is not None and o.max_steps < 1:
        raise ValueError(f"collect: --max-steps {o.max_steps}: must be an int >= 1")
    run_dir = o.run_dir.absolute()
    step = o.step if o.step is not None else latest_checkpoint_step(run_dir)
    o = dataclasses.replace(o, run_dir=run_dir, step=step)
    return o, {name: getattr(o, name) for name in _COLLECT_REQUEST} | {"run_dir": str(run_dir)}


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
        manifest = o.to.with_name(o.to.name + ".json") if onnx else o.to.with_suffix(".json")
        abandon = _abandon_export(o.to.parent, manifest)
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


def _abandon_export(parent: Path, manifest: Path) -> Callable[[str], None]:
    """The second signal's action during `export`: removes the staging directories
    (`tmp*`) the exporter made in `parent` since now, says in one line whether the export
    was written (its `manifest`, committed last, is new: a signal during the commit
    waits for it) or nothing was, and exits 128 + the signal number, in the signal
    handler (the export runs in the main thread)."""
    before = set(parent.iterdir()) if parent.is_dir() else set()
    old = _identity(manifest)

    def abandon(signal_name: str) -> None:
        written = _identity(manifest) != old  # before the staging dirs go (inode reuse)
        for path in set(parent.iterdir()) - before if parent.is_dir() else ():
            if path.name.startswith("tmp") and path.is_dir():
                shutil.rmtree(path, ignore_errors=True)
        done = (
            f"the export was written in full first ({manifest} and the files beside it)"
            if written
            else "nothing written (its staging directory is removed)"
        )
        print(
            f"purejaxppo: export: stopped at once by a second {signal_name}; {done}",
            file=sys.stderr,
            flush=True,
        )
        os._exit(128 + int(signal.Signals[signal_name]))

    return abandon


def _identity(path: Path) -> tuple[int, int] | None:
    """(inode, mtime in ns) of `path`, None when missing: a replaced file has a new one."""
    try:
        stat = path.stat()
    except OSError:
        return None
    return stat.st_ino, stat.st_mtime_ns


_EXPORT_STOPPING = (
    "stopping once the running export is written (all its files or none; a second signal "
    "removes its staging directory and writes nothing, unless the files are already "
    "being committed, which finishes first)"
)
