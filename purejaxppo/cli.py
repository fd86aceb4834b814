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

    export = sub.add_parser(
        "export",
        help="export a run's policy to PyTorch",
        description="Write a TorchScript file (plus state_dict, module source and JSON "
        "metadata) of a run's newest checkpoint; needs torch (pip install purejaxppo[torch]).",
    )
    export.add_argument("run_dir", type=Path, metavar="RUN_DIR")
    export.add_argument("--to", type=Path, required=True, metavar="FILE", help="e.g. policy.pt")
    return parser


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


if __name__ == "__main__":
    sys.exit(main())
