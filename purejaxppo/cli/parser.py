"""The command line's parser, generated from the subcommands' option dataclasses.

Every parser refuses abbreviated flags (`allow_abbrev=False`) and answers a mistyped flag
with the closest known one and the subcommand's own usage (exit code 2).
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import re
import typing
from typing import Any

from purejaxppo.cli.check import CheckOptions
from purejaxppo.cli.options import (
    CollectOptions,
    EvalOptions,
    ExportOptions,
    PbtOptions,
    SweepOptions,
    TrainOptions,
)
from purejaxppo.cli.tune import TuneCommand
from purejaxppo.cli.values import _parse_value
from purejaxppo.config import PPOConfig
from purejaxppo.peer_names import peer_field


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
        """'unrecognized arguments: --learnig-rate 1e-3 (did you mean --learning-rate?)';
        another library's flag gets ours and whose it is (`peer_names`): '--env-id X (did
        you mean --env-name, for CleanRL's env_id?)'."""
        message = f"unrecognized arguments: {' '.join(extras)}"
        known = [flag for flag in self._option_string_actions if flag.startswith("--")]
        fields = [flag[2:].replace("-", "_") for flag in known]
        hints = []
        for index, extra in enumerate(extras):
            if not extra.startswith("--"):
                follows_flag = index > 0 and extras[index - 1].startswith("--")
                hint = None if follows_flag else bare_word_hint(extra, known)
                hints += [hint] if hint else []
                continue
            flag = extra.split("=", 1)[0]
            peer = peer_field(flag[2:], fields)
            if peer is not None:
                hints.append(f"did you mean --{peer[0].replace('_', '-')}, for {peer[1]}")
                continue
            close = difflib.get_close_matches(flag, known, n=1, cutoff=0.6)
            if close:
                hints.append(f"did you mean {close[0]}")
        return message + (f" ({'; '.join(hints)}?)" if hints else "")


#: A word that reads as an env id: `CartPole-v1`, `envpool:Hopper-v4`, `Breakout-MinAtar`.
ENV_ID_WORD = re.compile(r"[A-Za-z][\w./-]*-v\d+|[a-z]\w*:[\w./:-]+|[A-Z]\w*-(MinAtar|bsuite|misc)")


def bare_word_hint(word: str, known: list[str]) -> str | None:
    """The hint for a word that no flag took: a config file (`--config`), an env id
    (`--env-name`), or a second value of a one-value flag (`purejaxppo sweep --grid`)."""
    if word.endswith((".yaml", ".yml")) and "--config" in known:
        return f"did you mean --config {word}"
    if "--env-name" in known and ENV_ID_WORD.fullmatch(word):
        return f"did you mean --env-name {word}"
    try:
        number = isinstance(_parse_value(word), (int, float))
    except argparse.ArgumentTypeError:  # e.g. a YAML mapping with a key given twice
        number = False
    if "--env-name" in known and number:
        return "did you mean one run per value: purejaxppo sweep --grid FIELD=V1,V2"
    return None


class _ListValues(argparse.Action):
    """A tuple field's flag takes its items as one word or several: `--hidden-sizes 64 64`
    is `--hidden-sizes 64,64` (tyro's and `nargs="+"`'s convention); one word is kept as
    `_parse_value` read it."""

    def __call__(self, parser, namespace, values, option_string=None):  # noqa: ANN001
        setattr(namespace, self.dest, values[0] if len(values) == 1 else list(values))


def _add_config_overrides(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group(
        "config overrides", "any PPOConfig field; they override --config and the defaults"
    )
    defaults = PPOConfig()
    hints = typing.get_type_hints(PPOConfig)
    for field in dataclasses.fields(PPOConfig):
        flag = "--" + field.name.replace("_", "-")
        default = getattr(defaults, field.name)
        annotation = hints[field.name]  # `tuple[int, ...]` or `tuple[int, ...] | None`
        items = (annotation, *typing.get_args(annotation))
        is_tuple = any(typing.get_origin(a) is tuple for a in items)
        group.add_argument(
            flag,
            dest=field.name,
            type=_parse_value,
            default=argparse.SUPPRESS,
            metavar="VALUE",
            help=f"(default: {default!r})",
            **({"nargs": "+", "action": _ListValues} if is_tuple else {}),
        )


#: subcommand -> (its options dataclass, whether it takes PPOConfig overrides).
SUBCOMMANDS: dict[str, tuple[type, bool]] = {
    "train": (TrainOptions, True),
    "eval": (EvalOptions, False),
    "collect": (CollectOptions, False),
    "sweep": (SweepOptions, True),
    "pbt": (PbtOptions, True),
    "tune": (TuneCommand, True),
    "check": (CheckOptions, True),
    "export": (ExportOptions, False),
}
#: subcommand -> its help, description and epilog.
TEXTS = {
    "train": dict(
        help="train one agent and write a run directory",
        description="Train a PPO agent. With no arguments: CartPole-v1, default config.",
    ),
    "eval": dict(
        help="evaluate a run's last checkpoint",
        description="Run episodes with a run's policy and print mean, std and IQM of returns.",
    ),
    "collect": dict(
        help="write a run's episodes as a trajectory dataset (.npz chunks, Minari)",
        description="Play episodes with a run's policy and write obs, actions, rewards, "
        "terminations, truncations, log-probs and values to a new directory "
        "(episodes_*.npz; with --minari-id also a Minari dataset under OUT/minari).",
        epilog="A stopped collect (Ctrl-C, SIGTERM) leaves OUT partial; continue it with: "
        "purejaxppo collect --resume OUT (the dataset an uninterrupted collect writes).",
    ),
    "sweep": dict(
        help="train every (seed x setting) of a grid / random search as one program",
        description="Train every combination of seeds and settings (vmapped, split over all "
        "devices and hosts) and write a table (one row per run x update), per-run final "
        "returns, a per-setting summary (mean, std, IQM over seeds) and a learning-curve plot.",
        epilog="examples: purejaxppo sweep --config configs/cartpole.yaml --seeds 64 "
        "--grid learning_rate=1e-4,3e-4,1e-3 --grid ent_coef=0,0.01;  "
        "--grid hidden_sizes='64,64;128,128' (';' separates list values);  "
        "--random learning_rate=log_uniform:1e-5:1e-3 --num-samples 16",
    ),
    "pbt": dict(
        help="population-based training: a population, exploit / explore every K updates",
        description="Population-based training (Jaderberg et al. 2017) in one compiled "
        "program: every --ready-every updates the members are ranked by fitness, the "
        "losers copy the winners (params, optimizer state) and mutate their searched "
        "hyperparameters. Writes lineage.csv, summary.csv, pbt.png, pbt.yaml and the best "
        "member's run directory best/ (for eval / export). The PRNG seed is --seed.",
        epilog="example: purejaxppo pbt --config configs/cartpole.yaml --population 32 "
        "--ready-every 20 --search learning_rate=log_uniform:1e-5:1e-2 "
        "--search ent_coef=uniform:0:0.05 --exploit tournament",
    ),
    "tune": dict(
        help="Bayesian hyperparameter search with Optuna, a batch of trials per program",
        description="Search hyperparameters with Optuna: --batch trials at a time train as "
        "the lanes of one compiled program, pruned lanes take new trials at once, and the "
        "study lives in a database (OUT/study.db or --storage URL) that several workers "
        "share. Writes trials.csv, best.yaml (rerun it with purejaxppo train --config "
        "OUT/best.yaml) and figures (pip install 'purejaxppo[tune]').",
        epilog="example: purejaxppo tune --config configs/cartpole.yaml --trials 64 --batch 16 "
        "--search learning_rate=log_uniform:1e-5:1e-2 --search ent_coef=uniform:0:0.05 "
        "--out tune/cartpole;  continue a stopped tune: purejaxppo tune --resume tune/cartpole",
    ),
    "check": dict(
        help="is my PPO right? probe envs and invariants run with a config",
        description="Train a battery of probe environments with the config's PPO settings "
        "and network family (K seeds vmapped per probe), then a short run on the config's "
        "own env read against invariants. Each row: what it isolates, expected and "
        "measured values, pass or fail, and on a failure the part of PPO it points to. "
        "Exit 0 when every row passes, 1 when one fails, 2 on bad input.",
        epilog="example: purejaxppo check --config configs/cartpole.yaml --seeds 8;  "
        "--json prints the report as JSON",
    ),
    "export": dict(
        help="export a run's policy to PyTorch or ONNX",
        description="Export a run's newest checkpoint, chosen by the suffix of --to: .onnx "
        "writes an ONNX graph (pip install purejaxppo[onnx,torch]); anything else (e.g. "
        ".pt) the PyTorch files (module source + state_dict, a torch.export .pt2, "
        "TorchScript where it scripts, JSON metadata; pip install purejaxppo[torch]).",
    ),
}


def add_options(parser: argparse.ArgumentParser, cls: type) -> None:
    """One flag (or positional argument) per field of the dataclass `cls` (`option`)."""
    groups: dict[tuple[str, str], Any] = {}
    for field in dataclasses.fields(cls):
        kwargs = dict(field.metadata)
        target = parser
        group = kwargs.pop("group", None)
        if group is not None:
            if group not in groups:
                groups[group] = parser.add_argument_group(*group)
            target = groups[group]
        if kwargs.pop("positional", False):
            target.add_argument(field.name, **kwargs)
            continue
        flag = kwargs.pop("flag", "--" + field.name.replace("_", "-"))
        if "required" not in kwargs:
            default = field.default
            if field.default_factory is not dataclasses.MISSING:
                default = field.default_factory()
            kwargs["default"] = default
        target.add_argument(flag, dest=field.name, **kwargs)


def build_parser() -> argparse.ArgumentParser:
    """The `purejaxppo` parser: one subcommand per `SUBCOMMANDS` entry."""
    parser = Parser(prog="purejaxppo", description="PPO as one jit-compiled JAX function.")
    sub = parser.add_subparsers(dest="command", required=True)
    for name, (cls, overrides) in SUBCOMMANDS.items():
        command = sub.add_parser(name, subcommand=True, **TEXTS[name])
        add_options(command, cls)
        if overrides:
            _add_config_overrides(command)
        command.add_argument(
            "--import",
            dest="imports",
            action="append",
            default=[],
            metavar="MODULE",
            help="import MODULE first (repeatable), e.g. the module that registers your own "
            "gymnasium env: --import mypkg.envs --env-name gymnasium:GoRight-v0 (the working "
            "directory is searched too). The run records it: --resume and eval of the run "
            "ask for it again. Only the command line imports: a config file cannot",
        )
        command.add_argument(
            "--no-compile-cache",
            action="store_true",
            help="do not use the persistent compilation cache (default: on, in "
            "$XDG_CACHE_HOME/purejaxppo/jax; also PUREJAXPPO_NO_COMPILE_CACHE=1, or "
            "PUREJAXPPO_COMPILE_CACHE=DIR to move it)",
        )
    return parser
