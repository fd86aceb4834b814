"""Command line: `purejaxppo train | sweep | pbt | eval | export` (see `--help`).

Exit codes: 0 done; 2 bad input (config, env kwargs, paths, a checkpoint that does not
match), reported before anything on disk changes; 3 training diverged (NaN / Inf losses
or parameters; the last finite checkpoint is kept).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from purejaxppo.config import DuplicateKeyError, PPOConfig, load_yaml

#: Exit code of a run whose losses or parameters became NaN / Inf.
EXIT_DIVERGED = 3


def _parse_value(text: str) -> Any:
    """Command-line value -> Python: YAML scalars/lists/mappings, plus `1e6` and `64,64`."""
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        pass
    if "," in text and not text.lstrip().startswith(("[", "{")):
        return [_parse_value(part.strip()) for part in text.split(",") if part.strip()]
    try:
        return load_yaml(text, source=repr(text))
    except DuplicateKeyError as err:
        raise argparse.ArgumentTypeError(str(err)) from None
    except ValueError:
        return text


def _add_config_overrides(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group(
        "config overrides", "any PPOConfig field; they override --config and the defaults"
    )
    defaults = PPOConfig()
    for field in dataclasses.fields(PPOConfig):
        flag = "--" + field.name.replace("_", "-")
        default = getattr(defaults, field.name)
        group.add_argument(
            flag,
            dest=field.name,
            type=_parse_value,
            default=argparse.SUPPRESS,
            metavar="VALUE",
            help=f"(default: {default!r})",
        )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="purejaxppo", description="PPO as one jit-compiled JAX function."
    )
    sub = parser.add_subparsers(dest="command", required=True)
    train = sub.add_parser(
        "train",
        help="train one agent and write a run directory",
        description="Train a PPO agent. With no arguments: CartPole-v1, default config.",
    )
    train.add_argument("--config", type=Path, help="YAML file of PPOConfig fields")
    train.add_argument(
        "--run-dir",
        type=Path,
        help="output directory (default: runs/<env>-<time>-seed<seed>)",
    )
    train.add_argument(
        "--resume",
        type=Path,
        metavar="RUN_DIR",
        help="continue the run in RUN_DIR from its last checkpoint (uses its config.yaml)",
    )
    train.add_argument(
        "--overwrite",
        action="store_true",
        help="replace the contents of an existing --run-dir (deleted once the new run's "
        "config, env and seed are validated, just before training starts)",
    )
    train.add_argument("--no-progress", action="store_true", help="no progress bar")
    train.add_argument(
        "--num-seeds",
        type=int,
        default=1,
        metavar="N",
        help="train the seeds --seed, ..., --seed + N-1 as one program, vmapped and split "
        "over the devices, into one run directory: a single-run directory seed_<s>/ per "
        "seed, plus metrics.csv (all seeds), summary.csv, seeds.yaml and a plot of the "
        "mean with bands (default 1: one run)",
    )
    train.add_argument(
        "--devices",
        type=int,
        metavar="N",
        help="with --num-seeds: split the seeds over the first N local devices (default: "
        "one CPU device per usable core, at most one per seed)",
    )
    train.add_argument(
        "--logger",
        action="append",
        dest="logger_names",
        metavar="NAME",
        help="also log to jsonl / tensorboard / wandb / mlflow (repeat for more; adds to "
        "the config's loggers; metrics.csv is always written)",
    )
    _add_config_overrides(train)

    evaluate = sub.add_parser(
        "eval",
        help="evaluate a run's last checkpoint",
        description="Run episodes with a run's policy and print mean, std and IQM of returns.",
    )
    evaluate.add_argument("run_dir", type=Path, metavar="RUN_DIR")
    evaluate.add_argument("--episodes", type=int, default=100)
    evaluate.add_argument("--greedy", action="store_true", help="argmax / mean actions")
    evaluate.add_argument("--seed", type=int, default=0)
    evaluate.add_argument("--env-name", help="evaluate on another env id (same spaces)")
    evaluate.add_argument(
        "--video",
        type=Path,
        metavar="FILE",
        help="also record one episode of the policy's env (greedy with --greedy, else "
        'sampled) as FILE.gif or FILE.mp4 (mp4: pip install "purejaxppo[video]")',
    )

    collect = sub.add_parser(
        "collect",
        help="write a run's episodes as a trajectory dataset (.npz chunks, Minari)",
        description="Play episodes with a run's policy and write obs, actions, rewards, "
        "terminations, truncations, log-probs and values to a new directory "
        "(episodes_*.npz; with --minari-id also a Minari dataset under OUT/minari).",
    )
    collect.add_argument("run_dir", type=Path, metavar="RUN_DIR")
    collect.add_argument("--episodes", type=int, required=True, metavar="N")
    collect.add_argument("--out", type=Path, required=True, metavar="DIR", help="new directory")
    collect.add_argument("--greedy", action="store_true", help="argmax / mean actions")
    collect.add_argument("--seed", type=int, default=0)
    collect.add_argument(
        "--minari-id",
        metavar="ID",
        help='e.g. "cartpole/ppo-v0" (pip install "purejaxppo[minari]")',
    )
    collect.add_argument(
        "--info-keys", default="", metavar="K1,K2", help="info entries to store per step"
    )

    sweep = sub.add_parser(
        "sweep",
        help="train every (seed x setting) of a grid / random search as one program",
        description="Train every combination of seeds and settings (vmapped, split over all "
        "devices and hosts) and write a table (one row per run x update), per-run final "
        "returns, a per-setting summary (mean, std, IQM over seeds) and a learning-curve plot.",
        epilog="examples: purejaxppo sweep --config configs/cartpole.yaml --seeds 64 "
        "--grid learning_rate=1e-4,3e-4,1e-3 --grid ent_coef=0,0.01;  "
        "--grid hidden_sizes='64,64;128,128' (';' separates list values);  "
        "--random learning_rate=log_uniform:1e-5:1e-3 --num-samples 16",
    )
    sweep.add_argument("--config", type=Path, help="YAML file of PPOConfig fields (the base)")
    sweep.add_argument("--seeds", type=int, default=8, help="seeds 0..n-1 per setting")
    sweep.add_argument(
        "--grid",
        action="append",
        default=[],
        metavar="FIELD=V1,V2,...",
        help="grid values of a config field (repeat for more fields)",
    )
    sweep.add_argument(
        "--random",
        action="append",
        default=[],
        metavar="FIELD=DIST:A:B",
        help="random search: uniform:LOW:HIGH, log_uniform:LOW:HIGH, int_uniform:LOW:HIGH or "
        "choice:V1,V2 (repeat for more fields; needs --num-samples)",
    )
    sweep.add_argument("--num-samples", type=int, default=0, help="random-search draws")
    sweep.add_argument("--random-seed", type=int, default=0, help="seed of the random draws")
    sweep.add_argument(
        "--max-runs-per-chunk",
        type=int,
        help="most runs per program call (a multiple of the device count; default: all, "
        "or what fits in GPU memory)",
    )
    sweep.add_argument("--devices", type=int, help="use the first N local devices")
    sweep.add_argument("--log-every", type=int, default=1, help="table rows every N updates")
    sweep.add_argument("--format", choices=("csv", "parquet"), default="csv")
    sweep.add_argument(
        "--out", type=Path, help="output directory (default: sweeps/<env>-<time>-<random>)"
    )
    sweep.add_argument(
        "--resume",
        type=Path,
        metavar="SWEEP_DIR",
        help="continue a killed sweep: its chunks already on disk are loaded, the rest "
        "computed (takes the sweep's arguments from SWEEP_DIR/request.yaml)",
    )
    sweep.add_argument(
        "--overwrite", action="store_true", help="replace the contents of an existing --out"
    )
    sweep.add_argument("--no-progress", action="store_true", help="no progress bar")
    multihost = sweep.add_argument_group(
        "several hosts", "start one process per host with the same arguments and its own id"
    )
    multihost.add_argument("--coordinator", metavar="HOST:PORT", help="process 0's address")
    multihost.add_argument("--num-processes", type=int, default=1)
    multihost.add_argument("--process-id", type=int, default=0)
    multihost.add_argument(
        "--local-devices", type=int, help="CPU only: fake this many CPU devices per process"
    )
    _add_config_overrides(sweep)

    pbt = sub.add_parser(
        "pbt",
        help="population-based training: a population, exploit / explore every K updates",
        description="Population-based training (Jaderberg et al. 2017) in one compiled "
        "program: every --ready-every updates the members are ranked by fitness, the "
        "losers copy the winners (params, optimizer state) and mutate their searched "
        "hyperparameters. Writes lineage.csv, summary.csv, pbt.png, pbt.yaml and the best "
        "member's run directory best/ (for eval / export). The PRNG seed is --seed.",
        epilog="example: purejaxppo pbt --config configs/cartpole.yaml --population 32 "
        "--ready-every 20 --search learning_rate=log_uniform:1e-5:1e-2 "
        "--search ent_coef=uniform:0:0.05 --exploit tournament",
    )
    pbt.add_argument("--config", type=Path, help="YAML file of PPOConfig fields (the base)")
    pbt.add_argument("--population", type=int, default=8, help="members (default 8)")
    pbt.add_argument(
        "--ready-every", type=int, default=10, help="updates per generation (default 10)"
    )
    pbt.add_argument(
        "--search",
        action="append",
        default=[],
        metavar="FIELD=DIST:LOW:HIGH",
        help="a traced field's initial distribution and range: uniform:LOW:HIGH or "
        "log_uniform:LOW:HIGH (repeat for more fields)",
    )
    pbt.add_argument("--exploit", default="truncation", help="truncation (default) or tournament")
    pbt.add_argument("--explore", default="perturb", help="perturb (default) or resample")
    pbt.add_argument("--truncation-fraction", type=float, default=0.25)
    pbt.add_argument("--tournament-size", type=int, default=3)
    pbt.add_argument("--resample-probability", type=float, default=0.25)
    pbt.add_argument(
        "--fitness-window", type=int, help="updates averaged for the fitness (default: K)"
    )
    pbt.add_argument("--devices", type=int, help="use the first N local devices")
    pbt.add_argument(
        "--checkpoint-every",
        type=int,
        default=1,
        help="generations between population checkpoints in OUT/checkpoints (0: none)",
    )
    pbt.add_argument(
        "--resume", action="store_true", help="continue from OUT/checkpoints (same arguments)"
    )
    pbt.add_argument("--out", type=Path, help="output directory (default: pbt/<env>-<time>)")
    pbt.add_argument("--no-progress", action="store_true", help="no progress bar")
    _add_config_overrides(pbt)

    export = sub.add_parser(
        "export",
        help="export a run's policy to PyTorch or ONNX",
        description="Export a run's newest checkpoint, chosen by the suffix of --to: .onnx "
        "writes an ONNX graph (pip install purejaxppo[onnx,torch]); anything else (e.g. "
        ".pt) the PyTorch files (module source + state_dict, a torch.export .pt2, "
        "TorchScript where it scripts, JSON metadata; pip install purejaxppo[torch]).",
    )
    export.add_argument("run_dir", type=Path, metavar="RUN_DIR")
    export.add_argument(
        "--to", type=Path, required=True, metavar="FILE", help="e.g. policy.pt or policy.onnx"
    )
    export.add_argument("--overwrite", action="store_true", help="replace existing files")
    for command_parser in sub.choices.values():
        command_parser.add_argument(
            "--no-compile-cache",
            action="store_true",
            help="do not use the persistent compilation cache (default: on, in "
            "$XDG_CACHE_HOME/purejaxppo/jax; also PUREJAXPPO_NO_COMPILE_CACHE=1, or "
            "PUREJAXPPO_COMPILE_CACHE=DIR to move it)",
        )
    return parser


def _split_assignment(text: str, flag: str) -> tuple[str, str]:
    name, sep, value = text.partition("=")
    if not sep or not name.strip() or not value.strip():
        raise ValueError(f"{flag} {text!r}: expected FIELD=VALUES")
    return name.strip().replace("-", "_"), value.strip()


def parse_grid(items: Sequence[str]) -> dict[str, list[Any]]:
    """['learning_rate=1e-4,3e-4', 'hidden_sizes=64,64;128,128'] -> grid dict."""
    grid: dict[str, list[Any]] = {}
    for item in items:
        name, text = _split_assignment(item, "--grid")
        if name in grid:
            raise ValueError(f"--grid {item!r}: field {name!r} given twice")
        if ";" in text:
            grid[name] = [_parse_value(part.strip()) for part in text.split(";") if part.strip()]
        else:
            grid[name] = [_parse_value(part.strip()) for part in text.split(",") if part.strip()]
    return grid


def parse_random(items: Sequence[str]) -> dict[str, tuple]:
    """['learning_rate=log_uniform:1e-5:1e-3', 'num_envs=choice:4,8'] -> random dict."""
    random: dict[str, tuple] = {}
    for item in items:
        name, text = _split_assignment(item, "--random")
        kind, _, rest = text.partition(":")
        if kind == "choice":
            values = _parse_value(rest)
            random[name] = (kind, values if isinstance(values, list) else [values])
        else:
            random[name] = (kind, *(_parse_value(part) for part in rest.split(":") if part))
    return random


def load_config(path: Path | None, overrides: dict[str, Any]) -> PPOConfig:
    """Defaults <- YAML file <- overrides; raises ValueError naming a bad field."""
    if path is None:
        return PPOConfig.from_dict(overrides)
    if not path.is_file():
        raise ValueError(f"--config {path}: no such file")
    return PPOConfig.from_yaml(path, **overrides)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = vars(parser.parse_args(argv))
    command = args.pop("command")
    if not args.pop("no_compile_cache", False):
        from purejaxppo.platform import enable_compile_cache

        enable_compile_cache()
    if command == "train":
        return _train_command(parser, args)
    if command == "sweep":
        return _sweep_command(parser, args)
    if command == "pbt":
        return _pbt_command(parser, args)
    if command == "eval":
        import jax

        from purejaxppo.guards import check_finite_params
        from purejaxppo.policy import Policy, evaluate

        try:
            policy = Policy.load(args["run_dir"])
            check_finite_params(policy.get_params(), f"run {args['run_dir']}")
            if args["video"] is not None:  # check before anything runs
                from purejaxppo.video import check_video_path, make_renderer

                check_video_path(args["video"])
                make_renderer(policy.env, policy.env_params)
            result = evaluate(
                policy,
                args["env_name"],
                args["episodes"],
                jax.random.key(args["seed"]),
                greedy=args["greedy"],
            )
            if args["video"] is not None:
                from purejaxppo.video import save_episode_video

                _, episode = save_episode_video(
                    policy, args["video"], jax.random.key(args["seed"]), greedy=args["greedy"]
                )
        except (ValueError, ImportError) as err:
            parser.exit(2, f"purejaxppo: error: {err}\n")
        stats = result.summary()
        env_name = args["env_name"] or policy.config.env_name
        print(
            f"{env_name}: {args['episodes']} episodes ({'greedy' if args['greedy'] else 'sampled'})"
            f"  mean {stats['mean']:.2f}  std {stats['std']:.2f}  IQM {stats['iqm']:.2f}"
            f"  mean length {result.lengths.mean():.1f}"
        )
        if args["video"] is not None:
            print(
                f"wrote {args['video']} ({episode.length} frames, return "
                f"{episode.episode_return:.2f})"
            )
        return 0
    if command == "collect":
        import jax

        from purejaxppo.datasets import check_output, collect
        from purejaxppo.policy import Policy

        info_keys = [k.strip() for k in args["info_keys"].split(",") if k.strip()]
        try:
            check_output(args["out"], args["minari_id"], args["episodes"])
            policy = Policy.load(args["run_dir"])
            result = collect(
                policy,
                args["episodes"],
                args["out"],
                jax.random.key(args["seed"]),
                greedy=args["greedy"],
                minari_id=args["minari_id"],
                info_keys=info_keys,
            )
        except (ValueError, ImportError) as err:
            parser.exit(2, f"purejaxppo: error: {err}\n")
        print(
            f"wrote {result.num_episodes} episodes ({result.num_steps} steps, mean return "
            f"{result.returns.mean():.2f}) to {result.out}"
            + (f" and Minari dataset {result.minari_id}" if result.minari_id else "")
        )
        return 0
    if command == "export":
        from purejaxppo.checkpoint import load_checkpoint
        from purejaxppo.export import export_onnx, export_torch
        from purejaxppo.guards import check_finite_params

        onnx = args["to"].suffix == ".onnx"
        try:
            checkpoint = load_checkpoint(args["run_dir"])
            check_finite_params(
                checkpoint.runner_state.train_state.params, f"run {args['run_dir']}"
            )
            export = export_onnx if onnx else export_torch
            path = export(
                checkpoint.runner_state,
                checkpoint.config,
                args["to"],
                overwrite=args["overwrite"],
            )
        except (ValueError, ImportError, FileExistsError) as err:
            parser.exit(2, f"purejaxppo: error: {err}\n")
        if onnx:
            print(f"wrote {path} (ONNX) and {path.name}.json")
        else:
            print(f"wrote {path.with_suffix('.module.py')}, .state_dict.pt, .pt2, .json "
                  "(and the TorchScript file where it scripts)")  # fmt: skip
        return 0
    return 1  # pragma: no cover - argparse rejects unknown commands


def _error(parser: argparse.ArgumentParser, message: Any, code: int = 2) -> None:
    parser.exit(code, f"purejaxppo: error: {message}\n")


def _train_command(parser: argparse.ArgumentParser, args: dict[str, Any]) -> int:
    config_path = args.pop("config")
    run_dir = args.pop("run_dir")
    progress = not args.pop("no_progress")
    resume = args.pop("resume")
    overwrite = args.pop("overwrite")
    extra_loggers = args.pop("logger_names") or []
    num_seeds, devices = args.pop("num_seeds"), args.pop("devices")
    if resume is not None and num_seeds != 1:
        _error(
            parser,
            f"--resume cannot be combined with --num-seeds {num_seeds}: every seed directory "
            "is a single run, resume them one at a time (--resume RUN_DIR/seed_<s>)",
        )
    if resume is not None:
        if config_path is not None or run_dir is not None:
            _error(parser, "--resume takes the run's own config and dir")
        if overwrite:
            _error(parser, "--resume and --overwrite exclude each other")
        if not (resume / "config.yaml").is_file():
            _error(parser, f"--resume {resume}: no run directory there (no config.yaml)")
        config_path, run_dir = resume / "config.yaml", resume
    try:
        config = load_config(config_path, args)
        if extra_loggers:
            loggers = [*config.loggers, *extra_loggers]
            config = config.replace(loggers=list(dict.fromkeys(loggers)))
    except ValueError as err:
        _error(parser, err)
    if config.total_timesteps % config.batch_size:
        print(
            f"purejaxppo: warning: total_timesteps={config.total_timesteps} is not a multiple "
            f"of num_envs*num_steps = {config.batch_size}: the run does {config.num_updates} "
            f"update(s) = {config.num_updates * config.batch_size} env steps",
            file=sys.stderr,
        )
    if num_seeds != 1 or devices is not None:
        return _train_seeds_command(
            parser, config, run_dir, num_seeds, devices, progress, overwrite
        )
    from purejaxppo import rundir
    from purejaxppo.guards import TrainingDiverged
    from purejaxppo.runner import train_and_log  # imports JAX; keep --help fast

    created = None
    if run_dir is None:  # a fresh, unique directory: never shared with another launch
        run_dir = created = rundir.default_run_dir(config.env_name, config.seed)
    try:
        result = train_and_log(
            config, run_dir, progress=progress, resume=resume is not None, overwrite=overwrite
        )
    except (ValueError, ImportError) as err:
        if created is not None and not rundir.is_nonempty(created):
            created.rmdir()
        _error(parser, err)
    except TrainingDiverged as err:
        _error(parser, err, EXIT_DIVERGED)
    final = result.final_return
    final_text = (
        f"{final:.2f}" if final == final else "n/a (no episode ended in the last 10 updates)"
    )
    print(
        f"final mean episode_return (last 10 updates): {final_text}\n"
        f"run directory: {result.run_dir}"
    )
    return 0


def _train_seeds_command(
    parser: argparse.ArgumentParser,
    config: PPOConfig,
    run_dir: Path | None,
    num_seeds: int,
    devices: int | None,
    progress: bool,
    overwrite: bool,
) -> int:
    """`purejaxppo train --num-seeds N`: validated before the CPU device count is set (and
    JAX started), trained by `seeds.train_seeds`."""
    from purejaxppo import rundir
    from purejaxppo.seeds import check_seeds

    try:
        check_seeds(config, num_seeds, devices=devices)
        if run_dir is not None:
            rundir.check_fresh(run_dir, overwrite)
    except ValueError as err:
        _error(parser, err)
    # Every core by default, as `sweep` and `pbt`: one CPU device per core.
    from purejaxppo.platform import configure_cpu_devices

    count = configure_cpu_devices(devices)
    if count is not None and devices is None:
        devices = min(count, num_seeds)
    from purejaxppo.seeds import train_seeds  # imports JAX; keep --help fast

    try:
        result = train_seeds(
            config, run_dir, num_seeds, devices=devices, progress=progress, overwrite=overwrite
        )
    except (ValueError, ImportError) as err:
        _error(parser, err)
    lines = ["final mean episode_return (last 10 updates) per seed:"]
    for seed, value in zip(result.seeds, result.final_returns, strict=True):
        mark = f" (diverged at update {result.diverged[seed]})" if seed in result.diverged else ""
        lines.append(f"  seed {seed}: {value:.2f}{mark}")
    stats = result.summary.set_index("seed")["final_return"]
    lines.append(
        f"mean ± std over {num_seeds} seeds: {stats['mean']:.2f} ± {stats['std']:.2f} "
        f"(IQM {stats['iqm']:.2f}, min {stats['min']:.2f}, max {stats['max']:.2f})"
    )
    lines.append(f"run directory: {result.run_dir} (seeds in seed_<s>/)")
    print("\n".join(lines))
    if result.diverged:
        _error(
            parser,
            f"{len(result.diverged)} of {num_seeds} seeds diverged (NaN / Inf): seeds "
            f"{sorted(result.diverged)}; see the 'diverged' column of "
            f"{result.run_dir / 'summary.csv'}",
            EXIT_DIVERGED,
        )
    return 0


#: Sweep options saved in `<out>/request.yaml` for `purejaxppo sweep --resume`.
_SWEEP_REQUEST = (
    "seeds", "num_samples", "random_seed", "max_runs_per_chunk", "devices", "log_every",
    "format",
)  # fmt: skip


def _sweep_command(parser: argparse.ArgumentParser, args: dict[str, Any]) -> int:
    options = {
        name: args.pop(name)
        for name in (
            "config", "seeds", "grid", "random", "num_samples", "random_seed",
            "max_runs_per_chunk", "devices", "log_every", "format", "out", "no_progress",
            "coordinator", "num_processes", "process_id", "local_devices", "resume",
            "overwrite",
        )
    }  # fmt: skip
    from purejaxppo import rundir

    resume, out = options["resume"], options["out"]
    try:
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
            request_path = resume / "request.yaml"
            if not request_path.is_file():
                raise ValueError(f"--resume {resume}: no sweep there (no request.yaml)")
            request = load_yaml(request_path.read_text(), source=str(request_path))
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
        from purejaxppo.sweep_settings import make_settings

        make_settings(config, grid, random, options["num_samples"], options["random_seed"])
        from purejaxppo.sinks import check_sinks

        check_sinks(config.loggers)  # `--loggers tensorboard,wandb`: one run per run
    except (ValueError, ImportError) as err:
        _error(parser, err)
    if options["process_id"] == 0:  # one process writes the directory and the request
        if out is None:
            out = rundir.make_unique_dir(
                "sweeps", f"{config.env_name}-{time.strftime('%Y%m%d-%H%M%S')}"
            )
        elif resume is None:
            if options["overwrite"]:
                rundir.clear(out)
            out.mkdir(parents=True, exist_ok=True)
        request = {
            "config": config.to_dict(),
            "grid": grid,
            "random": {name: list(spec) for name, spec in random.items()},
        }
        request.update({name: options[name] for name in _SWEEP_REQUEST})
        partial = out / "request.yaml.partial"
        partial.write_text(yaml.safe_dump(request, sort_keys=False))
        partial.replace(out / "request.yaml")
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
    elif options["local_devices"] is not None:
        import jax

        jax.config.update("jax_num_cpu_devices", options["local_devices"])
    else:
        # Every core by default: the runs are split over one CPU device per core.
        from purejaxppo.platform import configure_cpu_devices

        count = configure_cpu_devices()
        chunk = options["max_runs_per_chunk"]
        if count is not None and options["devices"] is None and chunk:
            # Chunks are multiples of the device count: keep the user's chunk size.
            options["devices"] = max(d for d in range(1, count + 1) if chunk % d == 0)
        if count is not None and not options["no_progress"]:
            print(
                f"purejaxppo: {options['devices'] or count} CPU devices (one per core; "
                "--devices N, --local-devices N or JAX_NUM_CPU_DEVICES to change)",
                file=sys.stderr,
            )
    from purejaxppo.sweeps import sweep, write_sweep

    try:
        result = sweep(
            config,
            seeds=options["seeds"],
            grid=grid,
            random=random,
            num_samples=options["num_samples"],
            random_seed=options["random_seed"],
            devices=options["devices"],
            max_runs_per_chunk=options["max_runs_per_chunk"],
            progress=not options["no_progress"],
            log_every=options["log_every"],
            progress_dir=out / "chunks",
        )
    except ValueError as err:
        _error(parser, err)
    written = write_sweep(result, out, config, fmt=options["format"])
    from purejaxppo.sweeps import log_sweep

    logged = log_sweep(result, out, config, config.loggers)
    if logged:
        print(f"logged {len(logged)} runs to {', '.join(config.loggers)} under {out / 'runs'}")
    if jax_process_index() == 0:
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
    print(f"wrote {', '.join(str(p) for p in written)}")
    return 0


def jax_process_index() -> int:
    import jax

    return jax.process_index()


def _pbt_command(parser: argparse.ArgumentParser, args: dict[str, Any]) -> int:
    options = {
        name: args.pop(name)
        for name in (
            "config", "population", "ready_every", "search", "exploit", "explore",
            "truncation_fraction", "tournament_size", "resample_probability",
            "fitness_window", "devices", "checkpoint_every", "resume", "out", "no_progress",
        )
    }  # fmt: skip
    try:
        config = load_config(options["config"], args)
        search = parse_random(options["search"])
        for name, spec in search.items():
            if spec[0] == "choice":
                raise ValueError(
                    f"--search {name}={spec}: pbt needs a range (uniform:LOW:HIGH or "
                    "log_uniform:LOW:HIGH), not a choice"
                )
        if options["resume"] and options["out"] is None:
            raise ValueError("--resume needs --out DIR (the interrupted run's directory)")
    except ValueError as err:
        parser.exit(2, f"purejaxppo: error: {err}\n")
    out = options["out"]
    if out is None:
        out = Path("pbt") / f"{config.env_name}-{time.strftime('%Y%m%d-%H%M%S')}"
    devices = options["devices"]
    if devices is None:
        # Every core by default, on as many CPU devices as divide the population.
        from purejaxppo.platform import configure_cpu_devices

        count = configure_cpu_devices()
        if count is not None:
            devices = max(d for d in range(1, count + 1) if options["population"] % d == 0)
            if not options["no_progress"]:
                print(
                    f"purejaxppo: population split over {devices} CPU devices (--devices N or "
                    "JAX_NUM_CPU_DEVICES to change)",
                    file=sys.stderr,
                )
    from purejaxppo.population import pbt, write_pbt  # imports JAX; keep --help fast

    every = options["checkpoint_every"]
    try:
        result = pbt(
            config,
            population=options["population"],
            ready_every=options["ready_every"],
            search=search,
            exploit=options["exploit"],
            explore=options["explore"],
            seed=config.seed,
            devices=devices,
            truncation_fraction=options["truncation_fraction"],
            tournament_size=options["tournament_size"],
            resample_probability=options["resample_probability"],
            fitness_window=options["fitness_window"],
            checkpoint_dir=out / "checkpoints" if every else None,
            checkpoint_every=max(every, 1),
            resume=options["resume"],
            progress=not options["no_progress"],
        )
    except ValueError as err:
        parser.exit(2, f"purejaxppo: error: {err}\n")
    written = write_pbt(result, out)
    import pandas as pd

    with pd.option_context("display.width", 160, "display.max_columns", 20):
        print(result.summary.head(10).to_string(index=False, float_format=lambda v: f"{v:.4g}"))
    print(f"best member {result.best_member}: {result.best_hparams_text()}")
    print(f"wrote {', '.join(str(p) for p in written)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
