"""The command line's parser: one function per subcommand's options.

Every parser refuses abbreviated flags (`allow_abbrev=False`) and answers a mistyped flag
with the closest known one and the subcommand's own usage (exit code 2).
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
from pathlib import Path
from typing import Any

from purejaxppo.cli.values import _parse_value
from purejaxppo.config import PPOConfig


class Parser(argparse.ArgumentParser):
    """`argparse.ArgumentParser` without prefix matching, with "did you mean" for a
    mistyped flag. A subcommand's parser (`subcommand=True`) reports unknown arguments
    itself, so the message carries the subcommand's usage, not the top-level one."""

    def __init__(self, *args: Any, subcommand: bool = False, **kwargs: Any) -> None:
        kwargs["allow_abbrev"] = False
        super().__init__(*args, **kwargs)
        self.subcommand = subcommand

    def parse_known_args(self, args=None, namespace=None):  # noqa: ANN001, ANN201
        parsed, extras = super().parse_known_args(args, namespace)
        if self.subcommand and extras:
            self.error(self.unrecognized(extras))
        return parsed, extras

    def unrecognized(self, extras: list[str]) -> str:
        """'unrecognized arguments: --learnig-rate 1e-3 (did you mean --learning-rate?)'"""
        message = f"unrecognized arguments: {' '.join(extras)}"
        known = [flag for flag in self._option_string_actions if flag.startswith("--")]
        hints = []
        for extra in extras:
            if not extra.startswith("--"):
                continue
            close = difflib.get_close_matches(extra.split("=", 1)[0], known, n=1, cutoff=0.6)
            if close:
                hints.append(f"did you mean {close[0]}")
        return message + (f" ({'; '.join(hints)}?)" if hints else "")


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
    """The `purejaxppo` parser: train, eval, collect, sweep, pbt, export."""
    parser = Parser(prog="purejaxppo", description="PPO as one jit-compiled JAX function.")
    sub = parser.add_subparsers(dest="command", required=True)
    for add in (_add_train, _add_evaluate, _add_collect, _add_sweep, _add_pbt, _add_export):
        add(sub)
    for command_parser in sub.choices.values():
        command_parser.add_argument(
            "--no-compile-cache",
            action="store_true",
            help="do not use the persistent compilation cache (default: on, in "
            "$XDG_CACHE_HOME/purejaxppo/jax; also PUREJAXPPO_NO_COMPILE_CACHE=1, or "
            "PUREJAXPPO_COMPILE_CACHE=DIR to move it)",
        )
    return parser


def _add_train(sub: Any) -> None:
    """The `train` subcommand's options."""
    train = sub.add_parser(
        "train",
        subcommand=True,
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


def _add_evaluate(sub: Any) -> None:
    """The `eval` subcommand's options."""
    evaluate = sub.add_parser(
        "eval",
        subcommand=True,
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


def _add_collect(sub: Any) -> None:
    """The `collect` subcommand's options."""
    collect = sub.add_parser(
        "collect",
        subcommand=True,
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


def _add_sweep(sub: Any) -> None:
    """The `sweep` subcommand's options."""
    sweep = sub.add_parser(
        "sweep",
        subcommand=True,
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


def _add_pbt(sub: Any) -> None:
    """The `pbt` subcommand's options."""
    pbt = sub.add_parser(
        "pbt",
        subcommand=True,
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


def _add_export(sub: Any) -> None:
    """The `export` subcommand's options."""
    export = sub.add_parser(
        "export",
        subcommand=True,
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
