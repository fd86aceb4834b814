"""Bad-input probes of the command line: about a hundred misuses of `train`, `eval`,
`export`, `collect`, `sweep`, `pbt` and of config files (unknown or mistyped fields,
wrong types, out-of-range values, bad env ids and env kwargs, bad grids and
distributions, paths that are files, missing, under a file, in /proc, a symlink loop,
damaged run directories, outputs that exist), each a real CLI subprocess (its own
process group, killed after --timeout seconds) in its own temporary folder, which is
also its working directory (so a default `runs/`, `sweeps/` or `pbt/` would show).

Each probe is classified:
  clean  refused with exit 2 and at most 3 lines of stderr (argparse's leading usage
         block not counted), the last `purejaxppo[ CMD]: error: ...` naming the bad
         field / value, no traceback, and the probe's folder byte-identical afterwards
         (nothing created, an existing run / output untouched); or, where the input
         is fine (marked so), a correct success leaving the inputs it reads untouched;
  ugly   a traceback, more lines, a message that does not name the field / value, an
         exit code other than 2, a timeout; or a refusal that leaves only an empty lock
         file behind in an existing folder;
  lost   data changed or deleted, a folder / files created for a refused input, or a
         bad value silently accepted (exit 0).
  skip   an unreadable file (chmod 000) when run as root, who reads it anyway.
`eval`, `export` and `collect` read the config saved in the checkpoint, not config.yaml:
with a damaged config.yaml either a success or a clean refusal is right.

Usage (from the repository root; a shared machine: nice):
  PYTHONPATH=$PWD nice -n 10 python benchmarks/input_probes.py [--only TEXT] [--timeout S]
Prints a table and the counts; writes benchmarks/results/input-probes-<stamp>.csv and .md.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import hashlib
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from harness import RESULTS, ROOT, atomic_write, env_with_pythonpath, markdown_table, stamp

#: A JAX CPU deadlock workaround, for every subprocess.
XLA = "--xla_cpu_enable_concurrency_optimized_scheduler=false"
ENV = env_with_pythonpath(str(ROOT), xla_flags=XLA)
CLI = [sys.executable, "-m", "purejaxppo.cli"]
TINY = ["--total-timesteps", "1024", "--num-envs", "4", "--num-steps", "32"]
TINY += ["--hidden-sizes", "8", "--no-progress"]
#: The base run every `{run}` probe gets a copy of: 8 updates, checkpoints 2, 4, 6, 8.
BASE_ARGS = [*TINY, "--save-freq", "2"]
#: The last line of a refusal: ours or argparse's (`purejaxppo train: error: ...`).
ERROR_LINE = re.compile(r"^purejaxppo( \w+)?: error: ")
#: Files a claim of a folder (`rundir.claim`) leaves behind.
LOCK_FILES = (".purejaxppo-lock", ".purejaxppo-pid")


@dataclasses.dataclass
class Probe:
    """One misuse. `argv` may hold `{d}` (the probe's folder) and `{run}` (a copy of the
    base run at `{d}/run`, made when an argument names it). `expect`: "error" (refused),
    "ok" (the input is fine: a success) or "either" (either answer is right, if clean).
    `names`: the error line must name one of these (`-` and `_` alike). `intact`: with a
    success, the entries of `{d}` that must stay byte-identical."""

    group: str
    name: str
    argv: list[str]
    setup: Callable[[Path], None] | None = None
    expect: str = "error"
    names: tuple[str, ...] = ()
    intact: tuple[str, ...] = ()


PROBES: list[Probe] = []


def probe(group: str, name: str, *argv: str, **kwargs) -> None:
    PROBES.append(Probe(group, name, list(argv), **kwargs))


# ----------------------------------------------------------------- setups
def write(name: str, content: str | bytes, mode: int | None = None) -> Callable[[Path], None]:
    def setup(d: Path) -> None:
        path = d / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)
        if mode is not None:
            path.chmod(mode)

    return setup


def mkdir(name: str) -> Callable[[Path], None]:
    return lambda d: (d / name).mkdir(parents=True, exist_ok=True)


def both(*setups: Callable[[Path], None]) -> Callable[[Path], None]:
    def setup(d: Path) -> None:
        for one in setups:
            one(d)

    return setup


def symlink_loop(name: str) -> Callable[[Path], None]:
    return lambda d: (d / name).symlink_to(name)


def remove(name: str) -> Callable[[Path], None]:
    def setup(d: Path) -> None:
        path = d / name
        shutil.rmtree(path) if path.is_dir() else path.unlink()

    return setup


AFILE = write("afile", "not a folder\n")
EMPTY = mkdir("empty")
FOREIGN = both(write("mine/notes.txt", "my notes\n"), write("mine/data.csv", "a,b\n1,2\n"))


# ----------------------------------------------------------------- general
probe("cli", "no subcommand", names=("command",))
probe("cli", "unknown subcommand", "trian", names=("trian",))
probe("cli", "--config without a value", "train", "--config", names=("--config",))
probe("cli", "flag of another subcommand", "eval", "{run}", "--num-envs", "8", names=("num-envs",))

# ----------------------------------------------------------------- train: values
TRAIN = ["train", "--run-dir", "{d}/new", *TINY]
probe("train", "unknown flag", *TRAIN, "--bogus-field", "1", names=("bogus",))
probe("train", "underscore flag", *TRAIN, "--learning_rate", "0.1", names=("learning_rate",))
probe("train", "abbreviated flag", *TRAIN, "--learning", "0.1", names=("--learning",))
probe("train", "--num-envs abc", *TRAIN, "--num-envs", "abc", names=("num_envs",))
probe("train", "--num-envs 0", *TRAIN, "--num-envs", "0", names=("num_envs",))
probe("train", "--num-envs -4", *TRAIN, "--num-envs", "-4", names=("num_envs",))
probe("train", "--num-envs 4.5", *TRAIN, "--num-envs", "4.5", names=("num_envs",))
probe(
    "train",
    "--num-minibatches 3 (!| 128)",
    *TRAIN,
    "--num-minibatches",
    "3",
    names=("num_minibatches",),
)
probe("train", "--update-epochs 0", *TRAIN, "--update-epochs", "0", names=("update_epochs",))
probe("train", "--gamma 1.5", *TRAIN, "--gamma", "1.5", names=("gamma",))
probe("train", "--gamma nan", *TRAIN, "--gamma", "nan", names=("gamma",))
probe(
    "train", "--learning-rate -1e-3", *TRAIN, "--learning-rate", "-1e-3", names=("learning_rate",)
)
probe("train", "--learning-rate=-1e-3", *TRAIN, "--learning-rate=-1e-3", names=("learning_rate",))
probe("train", "--clip-coef 0", *TRAIN, "--clip-coef", "0", names=("clip_coef",))
probe("train", "--target-kl -1", *TRAIN, "--target-kl", "-1", names=("target_kl",))
probe("train", "--reward-clip 0", *TRAIN, "--reward-clip", "0", names=("reward_clip",))
probe(
    "train",
    "--total-timesteps 10 (< batch)",
    *TRAIN,
    "--total-timesteps",
    "10",
    names=("total_timesteps",),
)
probe(
    "train",
    "--total-timesteps 1e30",
    *TRAIN,
    "--total-timesteps",
    "1e30",
    names=("total_timesteps",),
)
probe(
    "train",
    "--total-timesteps 1000 (rounded, fine)",
    *TRAIN,
    "--total-timesteps",
    "1000",
    expect="ok",
)
probe("train", "--hidden-sizes 8,0", *TRAIN, "--hidden-sizes", "8,0", names=("hidden_sizes",))
probe("train", "--hidden-sizes ''", *TRAIN, "--hidden-sizes", "", names=("hidden_sizes",))
probe(
    "train", "--hidden-sizes [8,[8]]", *TRAIN, "--hidden-sizes", "[8, [8]]", names=("hidden_sizes",)
)
probe("train", "--hidden-sizes 64x64", *TRAIN, "--hidden-sizes", "64x64", names=("hidden_sizes",))
probe("train", "--activation relux", *TRAIN, "--activation", "relux", names=("activation",))
probe("train", "--norm-adv maybe", *TRAIN, "--norm-adv", "maybe", names=("norm_adv",))
probe("train", "--norm-adv 1", *TRAIN, "--norm-adv", "1", names=("norm_adv",))
probe("train", "--seed -1", *TRAIN, "--seed", "-1", names=("seed",))
probe("train", "--seed 2**32", *TRAIN, "--seed", "4294967296", names=("seed",))
probe("train", "--save-freq -1", *TRAIN, "--save-freq", "-1", names=("save_freq",))
probe(
    "train", "--keep-checkpoints 0", *TRAIN, "--keep-checkpoints", "0", names=("keep_checkpoints",)
)
probe(
    "train",
    "--keep-checkpoints some",
    *TRAIN,
    "--keep-checkpoints",
    "some",
    names=("keep_checkpoints",),
)
probe(
    "train",
    "--loggers csv,tensorbord",
    *TRAIN,
    "--loggers",
    "csv,tensorbord",
    names=("tensorbord",),
)
probe("train", "--logger nosuch", *TRAIN, "--logger", "nosuch", names=("nosuch",))
probe("train", "--reset-ratio 3 (!| 4)", *TRAIN, "--reset-ratio", "3", names=("reset_ratio",))
probe(
    "train",
    "--multi-agent ippo on CartPole",
    *TRAIN,
    "--multi-agent",
    "ippo",
    names=("multi_agent", "ippo", "CartPole"),
)
probe(
    "train",
    "--host-vectorization async on gymnax",
    *TRAIN,
    "--host-vectorization",
    "async",
    names=("host_vectorization",),
)
probe("train", "--recurrent lstmm", *TRAIN, "--recurrent", "lstmm", names=("recurrent",))
probe(
    "train",
    "--max-seq-len 8 without recurrent",
    *TRAIN,
    "--max-seq-len",
    "8",
    names=("max_seq_len",),
)
probe("train", "--encoder cnn on flat obs", *TRAIN, "--encoder", "cnn", names=("encoder", "cnn"))
probe(
    "train",
    "--info-metrics nosuchkey",
    *TRAIN,
    "--info-metrics",
    "nosuchkey",
    names=("nosuchkey", "info_metrics"),
)
probe(
    "train",
    "--action-mask-key ''",
    *TRAIN,
    "--action-mask-key",
    "",
    expect="either",
    names=("action_mask_key",),
)
probe(
    "train", "--eval-splits {a/b: {}}", *TRAIN, "--eval-splits", "{a/b: {}}", names=("eval_splits",)
)
probe(
    "train",
    "--eval-splits typo'd EnvParams key",
    *TRAIN,
    "--eval-freq",
    "2",
    "--eval-splits",
    "{test: {max_steps_in_episodez: 10}}",
    names=("max_steps_in_episodez",),
)
probe("train", "--best-split nosplit", *TRAIN, "--best-split", "nosplit", names=("best_split",))
probe("train", "--name ../escape", *TRAIN, "--name", "../escape", names=("name",))
probe("train", "--num-seeds 0", *TRAIN, "--num-seeds", "0", names=("num_seeds", "num-seeds"))
probe("train", "--num-seeds abc", *TRAIN, "--num-seeds", "abc", names=("num-seeds",))
probe(
    "train",
    "--num-seeds 2 --devices 0",
    *TRAIN,
    "--num-seeds",
    "2",
    "--devices",
    "0",
    names=("devices",),
)
probe(
    "train",
    "--num-seeds 2 --devices 99",
    *TRAIN,
    "--num-seeds",
    "2",
    "--devices",
    "99",
    names=("devices", "99"),
)

# ----------------------------------------------------------------- train: envs
probe("env", "gymnax id typo", *TRAIN, "--env-name", "NotAnEnv-v0", names=("NotAnEnv",))
probe("env", "gymnax id wrong case", *TRAIN, "--env-name", "cartpole-v1", names=("cartpole-v1",))
probe("env", "empty env id", *TRAIN, "--env-name", "", names=("env_name",))
probe(
    "env", "unknown prefix", *TRAIN, "--env-name", "bogusprefix:CartPole-v1", names=("bogusprefix",)
)
probe(
    "env", "envpool: unknown task", *TRAIN, "--env-name", "envpool:NotAnEnv-v5", names=("NotAnEnv",)
)
probe("env", "envpool: empty task", *TRAIN, "--env-name", "envpool:", names=("envpool",))
probe(
    "env",
    "gymnasium: unknown id",
    *TRAIN,
    "--env-name",
    "gymnasium:NotAnEnv-v0",
    names=("NotAnEnv",),
)
probe(
    "env",
    "jaxmarl: unknown id",
    *TRAIN,
    "--env-name",
    "jaxmarl:not_an_env",
    "--multi-agent",
    "ippo",
    names=("not_an_env",),
)
probe(
    "env",
    "jaxmarl: without --multi-agent",
    *TRAIN,
    "--env-name",
    "jaxmarl:MPE_simple_spread_v3",
    names=("multi_agent", "multi-agent"),
)
probe("env", "--env-kwargs bad YAML", *TRAIN, "--env-kwargs", "{a: [1", names=("env_kwargs",))
probe("env", "--env-kwargs a list", *TRAIN, "--env-kwargs", "[1, 2]", names=("env_kwargs",))
probe(
    "env",
    "--env-kwargs unknown key",
    *TRAIN,
    "--env-kwargs",
    "{no_such_param: 1}",
    names=("no_such_param",),
)
probe(
    "env",
    "--env-kwargs string for int param",
    *TRAIN,
    "--env-kwargs",
    "{max_steps_in_episode: abc}",
    names=("max_steps_in_episode",),
)
probe(
    "env",
    "--env-kwargs envpool unknown key",
    *TRAIN,
    "--env-name",
    "envpool:HalfCheetah-v4",
    "--env-kwargs",
    "{no_such_param: 1}",
    names=("no_such_param",),
)
probe(
    "env",
    "--env-kwargs gymnasium unknown key",
    *TRAIN,
    "--env-name",
    "gymnasium:CartPole-v1",
    "--env-kwargs",
    "{no_such_param: 1}",
    names=("no_such_param",),
)

# ----------------------------------------------------------------- train: paths, resume, warm start
probe(
    "train",
    "--run-dir is a file",
    "train",
    "--run-dir",
    "{d}/afile",
    *TINY,
    setup=AFILE,
    names=("afile",),
)
probe(
    "train",
    "--run-dir under a file",
    "train",
    "--run-dir",
    "{d}/afile/run",
    *TINY,
    setup=AFILE,
    names=("afile",),
)
probe(
    "train",
    "--run-dir a symlink loop",
    "train",
    "--run-dir",
    "{d}/loop",
    *TINY,
    setup=symlink_loop("loop"),
    names=("loop",),
)
probe(
    "train",
    "--run-dir /proc/...",
    "train",
    "--run-dir",
    "/proc/pjp-probe-run",
    *TINY,
    names=("/proc",),
)
probe(
    "train",
    "--run-dir existing run, no --overwrite",
    "train",
    "--run-dir",
    "{run}",
    *TINY,
    names=("run",),
)
probe(
    "train",
    "--overwrite of a foreign folder",
    "train",
    "--run-dir",
    "{d}/mine",
    "--overwrite",
    *TINY,
    setup=FOREIGN,
    names=("mine",),
)
probe("train", "--resume missing dir", "train", "--resume", "{d}/missing", names=("missing",))
probe(
    "train", "--resume empty dir", "train", "--resume", "{d}/empty", setup=EMPTY, names=("empty",)
)
probe("train", "--resume a file", "train", "--resume", "{d}/afile", setup=AFILE, names=("afile",))
probe(
    "train",
    "--resume with --config",
    "train",
    "--resume",
    "{run}",
    "--config",
    "{run}/config.yaml",
    names=("--resume", "--config"),
)
probe(
    "train",
    "--resume with --overwrite",
    "train",
    "--resume",
    "{run}",
    "--overwrite",
    names=("--overwrite",),
)
probe(
    "train",
    "--resume with --num-envs 8",
    "train",
    "--resume",
    "{run}",
    "--num-envs",
    "8",
    "--no-progress",
    names=("num_envs",),
)
probe(
    "train",
    "--resume with --init-from",
    "train",
    "--resume",
    "{run}",
    "--init-from",
    "{run}",
    names=("init-from",),
)
probe(
    "train",
    "--resume damaged config.yaml",
    "train",
    "--resume",
    "{run}",
    "--no-progress",
    setup=write("run/config.yaml", "num_envs: [4\nbad"),
    names=("config.yaml",),
)
probe(
    "train",
    "--resume, no checkpoints/",
    "train",
    "--resume",
    "{run}",
    "--no-progress",
    setup=remove("run/checkpoints"),
    names=("checkpoint",),
)
probe(
    "train",
    "--resume of a finished run",
    "train",
    "--resume",
    "{run}",
    "--no-progress",
    expect="either",
    intact=("run",),
)
probe("train", "--init-from missing", *TRAIN, "--init-from", "{d}/missing", names=("missing",))
probe(
    "train",
    "--init-from empty dir",
    *TRAIN,
    "--init-from",
    "{d}/empty",
    setup=EMPTY,
    names=("empty",),
)
probe(
    "train",
    "--init-from other network shape",
    *TRAIN[:-3],
    "--hidden-sizes",
    "16",
    "--no-progress",
    "--init-from",
    "{run}",
    names=("hidden", "shape", "16"),
)
probe(
    "train",
    "--init-parts params,bogus",
    *TRAIN,
    "--init-from",
    "{run}",
    "--init-parts",
    "params,bogus",
    names=("init_parts", "bogus"),
)
probe(
    "train",
    "--init-step 3 (not kept)",
    *TRAIN,
    "--init-from",
    "{run}",
    "--init-step",
    "3",
    names=("init_step", "3"),
)

# ----------------------------------------------------------------- config files
CFG = ["train", "--run-dir", "{d}/new", "--no-progress", "--config"]
probe("config", "--config a directory", *CFG, "{d}/empty", setup=EMPTY, names=("empty",))
probe("config", "--config missing", *CFG, "{d}/missing.yaml", names=("missing.yaml",))
probe(
    "config",
    "--config empty file (fine)",
    *CFG,
    "{d}/c.yaml",
    *TINY,
    setup=write("c.yaml", ""),
    expect="either",
    intact=("c.yaml",),
)
probe(
    "config",
    "--config a YAML list",
    *CFG,
    "{d}/c.yaml",
    setup=write("c.yaml", "- num_envs\n- 4\n"),
    names=("c.yaml", "mapping"),
)
probe(
    "config",
    "--config a scalar",
    *CFG,
    "{d}/c.yaml",
    setup=write("c.yaml", "just text\n"),
    names=("c.yaml", "mapping"),
)
probe(
    "config",
    "--config non-UTF-8 bytes",
    *CFG,
    "{d}/c.yaml",
    setup=write("c.yaml", b"num_envs: 4\nname: \xff\xfe\x00bad\n"),
    names=("c.yaml",),
)
probe(
    "config",
    "--config binary junk",
    *CFG,
    "{d}/c.yaml",
    setup=write("c.yaml", bytes(range(256)) * 4),
    names=("c.yaml",),
)
probe(
    "config",
    "--config YAML syntax error",
    *CFG,
    "{d}/c.yaml",
    setup=write("c.yaml", "num_envs: 4\n  gamma: [0.9\n"),
    names=("c.yaml",),
)
probe(
    "config",
    "--config tab indentation",
    *CFG,
    "{d}/c.yaml",
    setup=write("c.yaml", "env_kwargs:\n\tmax_steps_in_episode: 10\n"),
    names=("c.yaml",),
)
probe(
    "config",
    "--config key typo",
    *CFG,
    "{d}/c.yaml",
    *TINY,
    setup=write("c.yaml", "num_env: 4\n"),
    names=("num_env",),
)
probe(
    "config",
    "--config duplicate key",
    *CFG,
    "{d}/c.yaml",
    setup=write("c.yaml", "gamma: 0.9\ngamma: 0.99\n"),
    names=("gamma",),
)
probe(
    "config",
    "--config huge float",
    *CFG,
    "{d}/c.yaml",
    setup=write("c.yaml", "learning_rate: 1.0e+400\n"),
    names=("learning_rate",),
)
probe(
    "config",
    "--config huge int",
    *CFG,
    "{d}/c.yaml",
    setup=write("c.yaml", "num_steps: 99999999999999999999999999999\n"),
    names=("num_steps", "total_timesteps"),
)
probe(
    "config",
    "--config YAML alias bomb",
    *CFG,
    "{d}/c.yaml",
    setup=write("c.yaml", "a: &a [1, 1]\nb: &b [*a, *a]\nc: [*b, *b]\n"),
    names=("alias",),
)
probe(
    "config",
    "--config env_kwargs a string",
    *CFG,
    "{d}/c.yaml",
    setup=write("c.yaml", "env_kwargs: abc\n"),
    names=("env_kwargs",),
)
probe(
    "config",
    "--config nested null key",
    *CFG,
    "{d}/c.yaml",
    setup=write("c.yaml", "env_kwargs: {null: 1}\n"),
    names=("env_kwargs",),
)
probe(
    "config",
    "--config symlink loop",
    *CFG,
    "{d}/loop.yaml",
    setup=symlink_loop("loop.yaml"),
    names=("loop.yaml",),
)
probe(
    "config",
    "--config unreadable (chmod 000)",
    *CFG,
    "{d}/c.yaml",
    *TINY,
    setup=write("c.yaml", "gamma: 0.9\n", mode=0),
    names=("c.yaml",),
)
probe(
    "config",
    "--config a run's config.yaml (fine)",
    *CFG,
    "{run}/config.yaml",
    "--total-timesteps",
    "256",
    expect="ok",
    intact=("run",),
)

# ----------------------------------------------------------------- eval
probe("eval", "missing run dir", "eval", "{d}/missing", names=("missing",))
probe("eval", "empty dir", "eval", "{d}/empty", setup=EMPTY, names=("empty",))
probe(
    "eval",
    "a symlink loop as run dir",
    "eval",
    "{d}/loop",
    setup=symlink_loop("loop"),
    names=("loop",),
)
probe("eval", "a file as run dir", "eval", "{d}/afile", setup=AFILE, names=("afile",))
probe(
    "eval",
    "damaged config.yaml",
    "eval",
    "{run}",
    setup=write("run/config.yaml", "num_envs: [4\nbad"),
    expect="either",
    intact=("run",),
    names=("config.yaml",),
)
probe(
    "eval",
    "config.yaml a list",
    "eval",
    "{run}",
    setup=write("run/config.yaml", "- 1\n- 2\n"),
    expect="either",
    intact=("run",),
    names=("config.yaml",),
)
probe(
    "eval",
    "config.yaml unknown field",
    "eval",
    "{run}",
    setup=write("run/config.yaml", "bogus_field: 1\n"),
    expect="either",
    intact=("run",),
    names=("bogus_field",),
)
probe(
    "eval",
    "config.yaml deleted",
    "eval",
    "{run}",
    setup=remove("run/config.yaml"),
    expect="either",
    intact=("run",),
    names=("config.yaml",),
)
probe(
    "eval",
    "checkpoints/ deleted",
    "eval",
    "{run}",
    setup=remove("run/checkpoints"),
    names=("checkpoint",),
)
probe("eval", "--episodes 0", "eval", "{run}", "--episodes", "0", names=("episodes",))
probe("eval", "--episodes -3", "eval", "{run}", "--episodes", "-3", names=("episodes",))
probe("eval", "--episodes abc", "eval", "{run}", "--episodes", "abc", names=("episodes",))
probe("eval", "--step 3 (not kept)", "eval", "{run}", "--step", "3", names=("3",))
probe("eval", "--step -1", "eval", "{run}", "--step", "-1", names=("step", "-1"))
probe("eval", "--seed -1", "eval", "{run}", "--seed", "-1", names=("seed",))
probe("eval", "--seed 2**70", "eval", "{run}", "--seed", str(2**70), names=("seed",))
probe(
    "eval",
    "--env-name NotAnEnv-v0",
    "eval",
    "{run}",
    "--env-name",
    "NotAnEnv-v0",
    names=("NotAnEnv",),
)
probe(
    "eval",
    "--env-name other spaces",
    "eval",
    "{run}",
    "--env-name",
    "Acrobot-v1",
    names=("Acrobot",),
)
probe(
    "eval",
    "--video bad suffix",
    "eval",
    "{run}",
    "--episodes",
    "1",
    "--video",
    "{d}/v.txt",
    names=("v.txt", ".txt"),
)
probe(
    "eval",
    "--video /proc/...",
    "eval",
    "{run}",
    "--episodes",
    "1",
    "--video",
    "/proc/v.gif",
    names=("/proc",),
)
probe(
    "eval",
    "--overwrite without --all-steps",
    "eval",
    "{run}",
    "--overwrite",
    names=("--overwrite",),
)
probe(
    "eval",
    "--all-steps with --step",
    "eval",
    "{run}",
    "--all-steps",
    "--step",
    "2",
    names=("--step",),
)
probe(
    "eval",
    "--all-steps over existing eval_steps.csv",
    "eval",
    "{run}",
    "--all-steps",
    "--episodes",
    "1",
    setup=write("run/eval_steps.csv", "mine\n"),
    names=("eval_steps",),
)
probe("eval", "3 episodes (fine)", "eval", "{run}", "--episodes", "3", expect="ok", intact=("run",))

# ----------------------------------------------------------------- export
probe("export", "no --to", "export", "{run}", names=("--to",))
probe("export", "--to bad suffix", "export", "{run}", "--to", "{d}/p.txt", names=(".txt",))
probe("export", "--to ''", "export", "{run}", "--to", "", names=("--to",))
probe("export", "missing run dir", "export", "{d}/missing", "--to", "{d}/p.pt", names=("missing",))
probe(
    "export",
    "empty dir",
    "export",
    "{d}/empty",
    "--to",
    "{d}/p.onnx",
    setup=EMPTY,
    names=("empty",),
)
probe(
    "export",
    "damaged config.yaml",
    "export",
    "{run}",
    "--to",
    "{d}/p.pt",
    setup=write("run/config.yaml", ": : :\n"),
    expect="either",
    intact=("run",),
    names=("config.yaml",),
)
probe("export", "--to /proc/...", "export", "{run}", "--to", "/proc/p.pt", names=("/proc",))
probe(
    "export",
    "--to under a file",
    "export",
    "{run}",
    "--to",
    "{d}/afile/p.pt",
    setup=AFILE,
    names=("afile",),
)
probe(
    "export",
    "--to a symlink loop",
    "export",
    "{run}",
    "--to",
    "{d}/loop.pt",
    setup=symlink_loop("loop.pt"),
    names=("loop.pt",),
)
probe(
    "export",
    "--to an existing folder",
    "export",
    "{run}",
    "--to",
    "{d}/p.onnx",
    setup=mkdir("p.onnx"),
    names=("p.onnx",),
)
probe(
    "export",
    "--to existing .onnx, no --overwrite",
    "export",
    "{run}",
    "--to",
    "{d}/p.onnx",
    setup=write("p.onnx", "my model\n"),
    names=("p.onnx",),
)
probe(
    "export",
    "--to .pt beside an existing .json",
    "export",
    "{run}",
    "--to",
    "{d}/p.pt",
    setup=write("p.json", "{}\n"),
    names=("p.json", "p."),
)
probe(
    "export",
    "--to .onnx in a new folder (fine)",
    "export",
    "{run}",
    "--to",
    "{d}/out/p.onnx",
    expect="either",
    intact=("run",),
)

# ----------------------------------------------------------------- collect
COLLECT = ["collect", "{run}", "--episodes", "2", "--out", "{d}/ds"]
probe("collect", "no --episodes / --out", "collect", "{run}", names=("--episodes", "--out"))
probe("collect", "no RUN_DIR", "collect", "--episodes", "2", "--out", "{d}/ds", names=("RUN_DIR",))
probe(
    "collect",
    "--episodes 0",
    *COLLECT[:2],
    "--episodes",
    "0",
    "--out",
    "{d}/ds",
    names=("episodes",),
)
probe(
    "collect",
    "--episodes -1",
    *COLLECT[:2],
    "--episodes",
    "-1",
    "--out",
    "{d}/ds",
    names=("episodes",),
)
probe(
    "collect",
    "missing run dir",
    "collect",
    "{d}/missing",
    "--episodes",
    "2",
    "--out",
    "{d}/ds",
    names=("missing",),
)
probe(
    "collect",
    "damaged config.yaml",
    *COLLECT,
    setup=write("run/config.yaml", "[unclosed\n"),
    expect="either",
    intact=("run",),
    names=("config.yaml",),
)
probe(
    "collect",
    "--out existing non-empty folder",
    *COLLECT[:-1],
    "{d}/mine",
    setup=FOREIGN,
    names=("mine",),
)
probe("collect", "--out is a file", *COLLECT[:-1], "{d}/afile", setup=AFILE, names=("afile",))
probe("collect", "--out /proc/...", *COLLECT[:-1], "/proc/pjp-ds", names=("/proc",))
probe("collect", "--temperature -1", *COLLECT, "--temperature", "-1", names=("temperature",))
probe("collect", "--temperature nan", *COLLECT, "--temperature", "nan", names=("temperature",))
probe(
    "collect", "--info-keys nosuchkey", *COLLECT, "--info-keys", "nosuchkey", names=("nosuchkey",)
)
probe("collect", "--step 3 (not kept)", *COLLECT, "--step", "3", names=("3",))
probe("collect", "--seed -5", *COLLECT, "--seed", "-5", names=("seed",))
probe(
    "collect",
    "--minari-id 'bad id!'",
    *COLLECT,
    "--minari-id",
    "bad id!",
    names=("bad id!", "minari"),
)
probe("collect", "--resume missing", "collect", "--resume", "{d}/missing", names=("missing",))
probe(
    "collect",
    "--resume empty dir",
    "collect",
    "--resume",
    "{d}/empty",
    setup=EMPTY,
    names=("empty",),
)
probe(
    "collect",
    "--resume with --episodes",
    "collect",
    "--resume",
    "{d}/empty",
    "--episodes",
    "3",
    setup=EMPTY,
    names=("--episodes",),
)
probe("collect", "2 episodes (fine)", *COLLECT, expect="ok", intact=("run",))

# ----------------------------------------------------------------- sweep
SWEEP = ["sweep", "--out", "{d}/out", "--seeds", "2", *TINY]
probe("sweep", "--grid without =", *SWEEP, "--grid", "gamma", names=("gamma",))
probe("sweep", "--grid empty values", *SWEEP, "--grid", "gamma=", names=("gamma",))
probe("sweep", "--grid unknown field", *SWEEP, "--grid", "gama=0.9,0.99", names=("gama",))
probe("sweep", "--grid bad value", *SWEEP, "--grid", "gamma=0.9,abc", names=("gamma", "abc"))
probe("sweep", "--grid out-of-range value", *SWEEP, "--grid", "gamma=0.9,1.5", names=("gamma",))
probe("sweep", "--grid seed (unsweepable)", *SWEEP, "--grid", "seed=1,2", names=("seed",))
probe(
    "sweep", "--grid log_freq (unsweepable)", *SWEEP, "--grid", "log_freq=1,2", names=("log_freq",)
)
probe(
    "sweep",
    "--grid a field twice",
    *SWEEP,
    "--grid",
    "gamma=0.9",
    "--grid",
    "gamma=0.99",
    names=("gamma",),
)
probe(
    "sweep",
    "--grid hidden_sizes with 0",
    *SWEEP,
    "--grid",
    "hidden_sizes=8;16,0",
    names=("hidden_sizes",),
)
probe(
    "sweep",
    "--grid env ids, one bad",
    *SWEEP,
    "--grid",
    "env_name=CartPole-v1,NotAnEnv-v0",
    names=("NotAnEnv",),
)
probe(
    "sweep",
    "--random unknown distribution",
    *SWEEP,
    "--random",
    "learning_rate=normal:0:1",
    "--num-samples",
    "2",
    names=("normal",),
)
probe(
    "sweep",
    "--random missing bound",
    *SWEEP,
    "--random",
    "learning_rate=log_uniform:1e-3",
    "--num-samples",
    "2",
    names=("learning_rate",),
)
probe(
    "sweep",
    "--random log_uniform from 0",
    *SWEEP,
    "--random",
    "learning_rate=log_uniform:0:1e-3",
    "--num-samples",
    "2",
    names=("learning_rate",),
)
probe(
    "sweep",
    "--random low > high",
    *SWEEP,
    "--random",
    "learning_rate=uniform:1e-3:1e-4",
    "--num-samples",
    "2",
    names=("learning_rate",),
)
probe(
    "sweep",
    "--random bound not a number",
    *SWEEP,
    "--random",
    "learning_rate=uniform:a:b",
    "--num-samples",
    "2",
    names=("learning_rate",),
)
probe(
    "sweep",
    "--random without --num-samples",
    *SWEEP,
    "--random",
    "learning_rate=uniform:1e-4:1e-3",
    names=("num_samples", "num-samples"),
)
probe(
    "sweep",
    "--random empty choice",
    *SWEEP,
    "--random",
    "num_envs=choice:",
    "--num-samples",
    "2",
    names=("num_envs",),
)
probe("sweep", "--seeds 0", *SWEEP, "--seeds", "0", "--grid", "gamma=0.9", names=("seeds",))
probe("sweep", "--seeds -2", *SWEEP, "--seeds", "-2", "--grid", "gamma=0.9", names=("seeds",))
probe("sweep", "--seeds abc", *SWEEP, "--seeds", "abc", names=("seeds",))
probe(
    "sweep",
    "--max-runs-per-chunk 0",
    *SWEEP,
    "--grid",
    "gamma=0.9",
    "--max-runs-per-chunk",
    "0",
    names=("max_runs_per_chunk", "max-runs-per-chunk"),
)
probe(
    "sweep",
    "--log-every 0",
    *SWEEP,
    "--grid",
    "gamma=0.9",
    "--log-every",
    "0",
    names=("log_every", "log-every"),
)
probe("sweep", "--format xlsx", *SWEEP, "--format", "xlsx", names=("xlsx",))
probe(
    "sweep",
    "--num-processes 2 without coordinator",
    *SWEEP,
    "--num-processes",
    "2",
    names=("coordinator",),
)
probe(
    "sweep",
    "--out is a file",
    "sweep",
    "--out",
    "{d}/afile",
    *TINY,
    "--grid",
    "gamma=0.9",
    setup=AFILE,
    names=("afile",),
)
probe(
    "sweep",
    "--out foreign folder",
    "sweep",
    "--out",
    "{d}/mine",
    *TINY,
    "--grid",
    "gamma=0.9",
    setup=FOREIGN,
    names=("mine",),
)
probe(
    "sweep",
    "--out /proc/...",
    "sweep",
    "--out",
    "/proc/pjp-sweep",
    *TINY,
    "--grid",
    "gamma=0.9",
    names=("/proc",),
)
probe(
    "sweep", "--resume empty dir", "sweep", "--resume", "{d}/empty", setup=EMPTY, names=("empty",)
)
probe(
    "sweep",
    "--resume with --grid",
    "sweep",
    "--resume",
    "{d}/empty",
    "--grid",
    "gamma=0.9",
    setup=EMPTY,
    names=("--grid",),
)
probe(
    "sweep",
    "--resume bad request.yaml",
    "sweep",
    "--resume",
    "{d}/sw",
    setup=write("sw/request.yaml", "just: text\n"),
    names=("request.yaml",),
)
probe("sweep", "2 seeds x 2 gammas (fine)", *SWEEP, "--grid", "gamma=0.9,0.99", expect="ok")

# ----------------------------------------------------------------- pbt
PBT = ["pbt", "--out", "{d}/out", "--population", "2", "--ready-every", "2", *TINY]
LR = ["--search", "learning_rate=log_uniform:1e-4:1e-3"]
probe("pbt", "no --search", *PBT, names=("--search",))
probe("pbt", "no --search, no --out", "pbt", *PBT[3:], names=("--search",))
probe("pbt", "--search unknown field", *PBT, "--search", "nosuch=uniform:0:1", names=("nosuch",))
probe(
    "pbt", "--search untraced field", *PBT, "--search", "num_envs=uniform:1:8", names=("num_envs",)
)
probe(
    "pbt",
    "--search unknown distribution",
    *PBT,
    "--search",
    "learning_rate=normal:0:1",
    names=("normal",),
)
probe(
    "pbt",
    "--search missing bound",
    *PBT,
    "--search",
    "learning_rate=uniform:1e-4",
    names=("learning_rate",),
)
probe(
    "pbt",
    "--search log_uniform from 0",
    *PBT,
    "--search",
    "learning_rate=log_uniform:0:1e-3",
    names=("learning_rate",),
)
probe(
    "pbt",
    "--search static field by a range",
    *PBT,
    "--search",
    "hidden_sizes=uniform:1:2",
    names=("hidden_sizes",),
)
probe(
    "pbt",
    "--search traced field by a choice",
    *PBT,
    "--search",
    "learning_rate=choice:1e-3,1e-4",
    names=("learning_rate",),
)
probe("pbt", "--population 0", *PBT, *LR, "--population", "0", names=("population",))
probe("pbt", "--population -1", *PBT, *LR, "--population", "-1", names=("population",))
probe(
    "pbt", "--ready-every 0", *PBT, *LR, "--ready-every", "0", names=("ready_every", "ready-every")
)
probe("pbt", "--exploit bogus", *PBT, *LR, "--exploit", "bogus", names=("bogus", "exploit"))
probe("pbt", "--explore bogus", *PBT, *LR, "--explore", "bogus", names=("bogus", "explore"))
probe(
    "pbt",
    "--truncation-fraction 1.5",
    *PBT,
    *LR,
    "--truncation-fraction",
    "1.5",
    names=("truncation_fraction", "truncation-fraction"),
)
probe(
    "pbt",
    "--tournament-size 0",
    *PBT,
    *LR,
    "--exploit",
    "tournament",
    "--tournament-size",
    "0",
    names=("tournament_size", "tournament-size"),
)
probe(
    "pbt",
    "--fitness-window 0",
    *PBT,
    *LR,
    "--fitness-window",
    "0",
    names=("fitness_window", "fitness-window"),
)
probe(
    "pbt",
    "--checkpoint-every -1",
    *PBT,
    *LR,
    "--checkpoint-every",
    "-1",
    names=("checkpoint-every",),
)
probe("pbt", "--resume without --out", "pbt", *PBT[3:], *LR, "--resume", names=("--out",))
probe(
    "pbt",
    "--resume of a missing --out",
    "pbt",
    "--out",
    "{d}/missing",
    *PBT[3:],
    *LR,
    "--resume",
    names=("missing",),
)
probe(
    "pbt", "--resume of an empty folder", *PBT, *LR, "--resume", setup=mkdir("out"), names=("out",)
)
probe(
    "pbt",
    "--resume of a foreign folder",
    "pbt",
    "--out",
    "{d}/mine",
    "--population",
    "2",
    "--ready-every",
    "2",
    *TINY,
    *LR,
    "--resume",
    setup=FOREIGN,
    names=("mine",),
)
probe(
    "pbt",
    "--out is a file",
    "pbt",
    "--out",
    "{d}/afile",
    *PBT[3:],
    *LR,
    setup=AFILE,
    names=("afile",),
)


# ----------------------------------------------------------------- running
def snapshot(root: Path) -> dict[str, str]:
    """relative path -> "dir", "link:<target>" or the sha256 of the file (no links followed)."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = Path(dirpath, name)
            rel = str(path.relative_to(root))
            if path.is_symlink():
                out[rel] = "link:" + os.readlink(path)
            elif path.is_dir():
                out[rel] = "dir"
            else:
                try:
                    out[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
                except OSError as err:
                    out[rel] = f"unreadable:{err.errno}"
    return out


def changes(before: dict[str, str], after: dict[str, str], under: Sequence[str] = ()) -> list[str]:
    """'+new', '-gone', '~changed' entries (only those under `under`, when given)."""

    def keep(rel: str) -> bool:
        return not under or any(rel == u or rel.startswith(u + "/") for u in under)

    out = [f"+{p}" for p in sorted(set(after) - set(before)) if keep(p)]
    out += [f"-{p}" for p in sorted(set(before) - set(after)) if keep(p)]
    out += [f"~{p}" for p in sorted(set(before) & set(after)) if before[p] != after[p] and keep(p)]
    return out


def stderr_lines(stderr: str) -> tuple[list[str], int]:
    """The non-empty stderr lines but progress bars and argparse's leading usage block;
    the number of usage lines dropped."""
    lines = [ln for ln in stderr.splitlines() if ln.strip() and "it/s]" not in ln]
    usage = 0
    if lines and lines[0].startswith("usage:"):
        usage = 1
        while usage < len(lines) and lines[usage].startswith(" "):
            usage += 1
    return lines[usage:], usage


def norm(text: str) -> str:
    return text.lower().replace("-", "_")


def classify(p: Probe, rc: int | None, stderr: str, diff: list[str], broken: list[str]) -> tuple:
    """(outcome, why) of a finished probe (rc None: it timed out)."""
    if rc is None:
        return "ugly", "timed out (killed)"
    lines, _ = stderr_lines(stderr)
    last = lines[-1] if lines else ""
    if rc == 0 and p.expect in ("ok", "either"):
        if broken:
            return "lost", "changed its inputs: " + " ".join(broken[:4])
        if "Traceback" in stderr:
            return "ugly", "succeeded, with a traceback on stderr"
        return "clean", "fine input, accepted" if p.expect == "ok" else "accepted (right too)"
    if rc == 0:
        return "lost", "bad input accepted (exit 0)" + (
            f"; wrote {' '.join(diff[:3])}" if diff else ""
        )
    if diff:
        only_locks = all(c.startswith("+") and Path(c[1:]).name in LOCK_FILES for c in diff)
        if not only_locks:
            return "lost", "refused, but changed " + " ".join(diff[:4])
    problems = []
    if p.expect == "ok":
        problems.append("fine input refused")
    if "Traceback" in stderr:
        problems.append("traceback")
    if rc != 2:
        problems.append(f"exit {rc}")
    if len(lines) > 3:
        problems.append(f"{len(lines)} lines")
    if not ERROR_LINE.match(last):
        problems.append("last line is no 'purejaxppo: error:'")
    if p.names and not any(norm(n) in norm(last) for n in p.names):
        problems.append(f"names none of {', '.join(p.names)}")
    if diff:
        problems.append("left " + " ".join(diff[:2]))
    return ("ugly" if problems else "clean"), "; ".join(problems)


def run_probe(p: Probe, d: Path, base: Path, timeout: float) -> dict[str, str]:
    d.mkdir()
    if any("{run}" in a for a in p.argv):
        shutil.copytree(base, d / "run", symlinks=True)
    if p.setup is not None:
        p.setup(d)
    argv = [a.replace("{run}", str(d / "run")).replace("{d}", str(d)) for a in p.argv]
    before = snapshot(d)
    start = time.monotonic()
    proc = subprocess.Popen(
        [*CLI, *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        errors="replace",
        env=ENV,
        cwd=d,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=timeout)
        rc = proc.returncode
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        rc = None
    seconds = time.monotonic() - start
    after = snapshot(d)
    diff = changes(before, after)
    broken = changes(before, after, p.intact) if p.intact else []
    if os.geteuid() == 0 and "chmod 000" in p.name:
        outcome, why = "skip", "run as root: chmod 000 does not stop reading"
    else:
        outcome, why = classify(p, rc, err, diff, broken)
    lines, usage = stderr_lines(err)
    note = lines[-1] if lines else (out.strip().splitlines() or [""])[-1]
    shown = [a.replace(str(d), "$T") for a in argv]
    return {
        "group": p.group,
        "probe": p.name,
        "argv": shlex.join(shown),
        "outcome": outcome,
        "exit": "timeout" if rc is None else str(rc),
        "seconds": f"{seconds:.1f}",
        "note": " ".join(note.split())[:160],
        "why": why,
        "first": " ".join((lines[0] if lines else "").split())[:200],
        "lines": f"{len(lines)}" + (f" (+{usage} usage)" if usage else ""),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help="the probes whose group or name holds this")
    parser.add_argument("--timeout", type=float, default=120, help="seconds per probe")
    args = parser.parse_args()
    probes = [p for p in PROBES if args.only in p.group or args.only in p.name]
    started = time.time()
    rows = []
    with tempfile.TemporaryDirectory(prefix="purejaxppo-input-probes-") as tmp:
        base = Path(tmp) / "base"
        made = subprocess.run(
            [*CLI, "train", "--run-dir", str(base), *BASE_ARGS],
            capture_output=True,
            text=True,
            env=ENV,
            cwd=tmp,
            timeout=600,
        )
        if made.returncode != 0:
            sys.exit(f"input_probes: the base run failed:\n{made.stderr[-2000:]}")
        for i, p in enumerate(probes):
            row = run_probe(p, Path(tmp) / f"p{i:03d}", base, args.timeout)
            rows.append(row)
            print(
                f"{row['outcome']:5} {row['exit']:>7} {row['seconds']:>5}s  "
                f"{p.group:7} {p.name[:40]:40} {row['note'][:90]}",
                flush=True,
            )
    counts = {k: sum(r["outcome"] == k for r in rows) for k in ("clean", "ugly", "lost", "skip")}
    summary = ", ".join(f"{v} {k}" for k, v in counts.items())
    print(f"\n{len(rows)} probes: {summary} ({time.time() - started:.0f} s)")
    bad = [r for r in rows if r["outcome"] in ("ugly", "lost")]
    for r in bad:
        print(f"\n[{r['outcome']}] {r['group']}: {r['probe']} (exit {r['exit']}; {r['why']})")
        print(f"  purejaxppo {r['argv']}\n  first: {r['first']}\n  last:  {r['note']}")

    cols = ["group", "probe", "argv", "outcome", "exit", "note", "why", "first", "lines"]
    name = f"input-probes-{stamp()}"

    def write_csv(path: str) -> None:
        with open(path, "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=cols + ["seconds"])
            writer.writeheader()
            writer.writerows(rows)

    atomic_write(RESULTS / f"{name}.csv", write_csv)
    cell = [{k: str(v).replace("|", "/").replace("`", "'") for k, v in r.items()} for r in rows]
    for r in cell:
        r["argv"] = f"`{r['argv'][:140]}`"
    lines = [
        f"# Bad-input probes of the command line ({time.strftime('%Y-%m-%d')}): {summary}",
        "",
        "Command: `PYTHONPATH=$PWD nice -n 10 python benchmarks/input_probes.py "
        f"{' '.join(sys.argv[1:])}` (a 2-core machine shared with other jobs; "
        f"{time.time() - started:.0f} s). `$T` is the probe's temporary folder; "
        "the classes are in the docstring of `benchmarks/input_probes.py`.",
        "",
        *markdown_table(cell, ["group", "probe", "argv", "outcome", "exit", "note"]),
    ]
    if bad:
        lines += ["", "## Ugly and lost", ""]
        lines += markdown_table(
            [r for r in cell if r["outcome"] in ("ugly", "lost")],
            ["group", "probe", "outcome", "exit", "why", "first"],
        )
    atomic_write(RESULTS / f"{name}.md", lambda p: Path(p).write_text("\n".join(lines) + "\n"))
    for suffix in (".csv", ".md"):  # atomic_write's temporary file is private (0600)
        (RESULTS / f"{name}{suffix}").chmod(0o644)
    print(f"wrote {RESULTS / name}.csv and .md")


if __name__ == "__main__":
    main()
