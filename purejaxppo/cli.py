"""Command line: `purejaxppo train | sweep | pbt | eval | export` (see `--help`)."""

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
        help="export a run's policy to PyTorch",
        description="Write a TorchScript file (plus state_dict, module source and JSON "
        "metadata) of a run's newest checkpoint; needs torch (pip install purejaxppo[torch]).",
    )
    export.add_argument("run_dir", type=Path, metavar="RUN_DIR")
    export.add_argument("--to", type=Path, required=True, metavar="FILE", help="e.g. policy.pt")
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
        if resume is not None:
            if config_path is not None or run_dir is not None:
                parser.exit(2, "purejaxppo: error: --resume takes the run's own config and dir\n")
            config_path, run_dir = resume / "config.yaml", resume
        try:
            config = load_config(config_path, args)
        except ValueError as err:
            parser.exit(2, f"purejaxppo: error: {err}\n")
        from purejaxppo.runner import train_and_log  # imports JAX; keep --help fast

        if run_dir is None:
            stamp = time.strftime("%Y%m%d-%H%M%S")
            run_dir = Path("runs") / f"{config.env_name}-{stamp}-seed{config.seed}"
        try:
            result = train_and_log(config, run_dir, progress=progress, resume=resume is not None)
        except ValueError as err:
            parser.exit(2, f"purejaxppo: error: {err}\n")
        print(
            f"final mean episode_return (last 10 updates): {result.final_return:.2f}\n"
            f"run directory: {result.run_dir}"
        )
        return 0
    if command == "sweep":
        return _sweep_command(parser, args)
    if command == "pbt":
        return _pbt_command(parser, args)
    if command == "eval":
        import jax

        from purejaxppo.policy import Policy, evaluate

        try:
            policy = Policy.load(args["run_dir"])
            result = evaluate(
                policy,
                args["env_name"],
                args["episodes"],
                jax.random.key(args["seed"]),
                greedy=args["greedy"],
            )
        except ValueError as err:
            parser.exit(2, f"purejaxppo: error: {err}\n")
        stats = result.summary()
        env_name = args["env_name"] or policy.config.env_name
        print(
            f"{env_name}: {args['episodes']} episodes ({'greedy' if args['greedy'] else 'sampled'})"
            f"  mean {stats['mean']:.2f}  std {stats['std']:.2f}  IQM {stats['iqm']:.2f}"
            f"  mean length {result.lengths.mean():.1f}"
        )
        return 0
    if command == "export":
        from purejaxppo.checkpoint import load_checkpoint
        from purejaxppo.export import export_torch

        try:
            checkpoint = load_checkpoint(args["run_dir"])
            path = export_torch(checkpoint.runner_state, checkpoint.config, args["to"])
        except (ValueError, ImportError) as err:
            parser.exit(2, f"purejaxppo: error: {err}\n")
        print(f"wrote {path} (TorchScript) and its .state_dict.pt, .module.py, .json")
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
    from purejaxppo.pbt import pbt, write_pbt  # imports JAX; keep --help fast

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
            devices=options["devices"],
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
