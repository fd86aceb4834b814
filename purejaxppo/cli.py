"""Command line: `purejaxppo train [--config X.yaml] [--total-timesteps 1e6 ...]`."""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from purejaxppo.config import PPOConfig


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
        return yaml.safe_load(text)
    except yaml.YAMLError:
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
    train.add_argument("--no-progress", action="store_true", help="no progress bar")
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
    sweep.add_argument("--out", type=Path, help="output directory (default: sweeps/<env>-<time>)")
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
    if command == "train":
        config_path = args.pop("config")
        run_dir = args.pop("run_dir")
        progress = not args.pop("no_progress")
        resume = args.pop("resume")
        extra_loggers = args.pop("logger_names") or []
        if resume is not None:
            if config_path is not None or run_dir is not None:
                parser.exit(2, "purejaxppo: error: --resume takes the run's own config and dir\n")
            config_path, run_dir = resume / "config.yaml", resume
        try:
            config = load_config(config_path, args)
            if extra_loggers:
                loggers = [*config.loggers, *extra_loggers]
                config = config.replace(loggers=list(dict.fromkeys(loggers)))
        except ValueError as err:
            parser.exit(2, f"purejaxppo: error: {err}\n")
        from purejaxppo.runner import train_and_log  # imports JAX; keep --help fast

        if run_dir is None:
            stamp = time.strftime("%Y%m%d-%H%M%S")
            run_dir = Path("runs") / f"{config.env_name}-{stamp}-seed{config.seed}"
        try:
            result = train_and_log(config, run_dir, progress=progress, resume=resume is not None)
        except (ValueError, ImportError) as err:
            parser.exit(2, f"purejaxppo: error: {err}\n")
        print(
            f"final mean episode_return (last 10 updates): {result.final_return:.2f}\n"
            f"run directory: {result.run_dir}"
        )
        return 0
    if command == "sweep":
        return _sweep_command(parser, args)
    if command == "eval":
        import jax

        from purejaxppo.policy import Policy, evaluate

        try:
            policy = Policy.load(args["run_dir"])
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

        onnx = args["to"].suffix == ".onnx"
        try:
            checkpoint = load_checkpoint(args["run_dir"])
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
            print(f"wrote {path} (ONNX) and its .json")
        else:
            print(f"wrote {path.with_suffix('.module.py')}, .state_dict.pt, .pt2, .json "
                  "(and the TorchScript file where it scripts)")  # fmt: skip
        return 0
    return 1  # pragma: no cover - argparse rejects unknown commands


def _sweep_command(parser: argparse.ArgumentParser, args: dict[str, Any]) -> int:
    options = {
        name: args.pop(name)
        for name in (
            "config", "seeds", "grid", "random", "num_samples", "random_seed",
            "max_runs_per_chunk", "devices", "log_every", "format", "out", "no_progress",
            "coordinator", "num_processes", "process_id", "local_devices",
        )
    }  # fmt: skip
    try:
        config = load_config(options["config"], args)
        grid = parse_grid(options["grid"])
        random = parse_random(options["random"])
        if options["coordinator"] is None and options["num_processes"] != 1:
            raise ValueError("--num-processes > 1 needs --coordinator HOST:PORT")
    except ValueError as err:
        parser.exit(2, f"purejaxppo: error: {err}\n")
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
        )
    except ValueError as err:
        parser.exit(2, f"purejaxppo: error: {err}\n")
    out = options["out"]
    if out is None:
        out = Path("sweeps") / f"{config.env_name}-{time.strftime('%Y%m%d-%H%M%S')}"
    written = write_sweep(result, out, config, fmt=options["format"])
    import jax

    if jax.process_index() == 0:
        import pandas as pd

        best = result.summary.sort_values("final_return_iqm", ascending=False)
        with pd.option_context("display.width", 160, "display.max_columns", 20):
            print(best.head(10).to_string(index=False, float_format=lambda v: f"{v:.4g}"))
    print(f"wrote {', '.join(str(p) for p in written)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
