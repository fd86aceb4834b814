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
With --list it only prints the probes, one a line (group | name | argv | setup | names |
expect | intact), and runs nothing.
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
    setup: Setup | None = None
    expect: str = "error"
    names: tuple[str, ...] = ()
    intact: tuple[str, ...] = ()


PROBES: list[Probe] = []


def probe(group: str, name: str, *argv: str, **kwargs) -> None:
    PROBES.append(Probe(group, name, list(argv), **kwargs))


# ----------------------------------------------------------------- setups
@dataclasses.dataclass(frozen=True)
class Setup:
    """A preparation of a probe's folder, with a stable repr (what it does) for --list."""

    what: str
    make: Callable[[Path], None] = dataclasses.field(compare=False)

    def __call__(self, d: Path) -> None:
        self.make(d)

    def __repr__(self) -> str:
        return self.what


def write(name: str, content: str | bytes, mode: int | None = None) -> Setup:
    def setup(d: Path) -> None:
        path = d / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)
        if mode is not None:
            path.chmod(mode)

    return Setup(f"write({name!r}, {content!r}, mode={mode!r})", setup)


def mkdir(name: str) -> Setup:
    return Setup(f"mkdir({name!r})", lambda d: (d / name).mkdir(parents=True, exist_ok=True))


def both(*setups: Setup) -> Setup:
    def setup(d: Path) -> None:
        for one in setups:
            one(d)

    return Setup(f"both({', '.join(map(repr, setups))})", setup)


def symlink_loop(name: str) -> Setup:
    return Setup(f"symlink_loop({name!r})", lambda d: (d / name).symlink_to(name))


def remove(name: str) -> Setup:
    def setup(d: Path) -> None:
        path = d / name
        shutil.rmtree(path) if path.is_dir() else path.unlink()

    return Setup(f"remove({name!r})", setup)


def run_config(content: str) -> Setup:
    return write("run/config.yaml", content)


def c_yaml(content: str | bytes, mode: int | None = None) -> Setup:
    return write("c.yaml", content, mode)


AFILE = write("afile", "not a folder\n")
EMPTY = mkdir("empty")
FOREIGN = both(write("mine/notes.txt", "my notes\n"), write("mine/data.csv", "a,b\n1,2\n"))
DAMAGED = run_config("num_envs: [4\nbad")
NO_CHECKPOINTS = remove("run/checkpoints")


# ----------------------------------------------------------------- tables
def table(group: str, prefix: Sequence[str], *rows: tuple, suffix: Sequence[str] = ()) -> None:
    """One probe per row `(name, args, names[, setup[, expect[, intact]]])`, its argv
    `prefix + args + suffix`: `args` a shell-quoted string (or a list of words), `names`
    one string or a tuple of them."""

    def one(name, args, names, setup=None, expect="error", intact=()) -> None:
        words = shlex.split(args) if isinstance(args, str) else list(args)
        names = (names,) if isinstance(names, str) else tuple(names)
        argv = [*prefix, *words, *suffix]
        probe(group, name, *argv, setup=setup, expect=expect, names=names, intact=intact)

    for row in rows:
        one(*row)


# ----------------------------------------------------------------- general
table(
    "cli",
    [],
    ("no subcommand", "", "command"),
    ("unknown subcommand", "trian", "trian"),
    ("--config without a value", "train --config", "--config"),
    ("flag of another subcommand", "eval {run} --num-envs 8", "num-envs"),
)

# ----------------------------------------------------------------- train: values
TRAIN = ["train", "--run-dir", "{d}/new", *TINY]
table(
    "train",
    TRAIN,
    ("unknown flag", "--bogus-field 1", "bogus"),
    ("underscore flag", "--learning_rate 0.1", "learning_rate"),
    ("abbreviated flag", "--learning 0.1", "--learning"),
    ("--num-envs abc", "--num-envs abc", "num_envs"),
    ("--num-envs 0", "--num-envs 0", "num_envs"),
    ("--num-envs -4", "--num-envs -4", "num_envs"),
    ("--num-envs 4.5", "--num-envs 4.5", "num_envs"),
    ("--num-minibatches 3 (!| 128)", "--num-minibatches 3", "num_minibatches"),
    ("--update-epochs 0", "--update-epochs 0", "update_epochs"),
    ("--gamma 1.5", "--gamma 1.5", "gamma"),
    ("--gamma nan", "--gamma nan", "gamma"),
    ("--learning-rate -1e-3", "--learning-rate -1e-3", "learning_rate"),
    ("--learning-rate=-1e-3", "--learning-rate=-1e-3", "learning_rate"),
    ("--clip-coef 0", "--clip-coef 0", "clip_coef"),
    ("--target-kl -1", "--target-kl -1", "target_kl"),
    ("--reward-clip 0", "--reward-clip 0", "reward_clip"),
    ("--total-timesteps 10 (< batch)", "--total-timesteps 10", "total_timesteps"),
    ("--total-timesteps 1e30", "--total-timesteps 1e30", "total_timesteps"),
    ("--total-timesteps 1000 (rounded, fine)", "--total-timesteps 1000", (), None, "ok"),
    ("--hidden-sizes 8,0", "--hidden-sizes 8,0", "hidden_sizes"),
    ("--hidden-sizes ''", "--hidden-sizes ''", "hidden_sizes"),
    ("--hidden-sizes [8,[8]]", "--hidden-sizes '[8, [8]]'", "hidden_sizes"),
    ("--hidden-sizes 64x64", "--hidden-sizes 64x64", "hidden_sizes"),
    ("--activation relux", "--activation relux", "activation"),
    ("--norm-adv maybe", "--norm-adv maybe", "norm_adv"),
    ("--norm-adv 1", "--norm-adv 1", "norm_adv"),
    ("--seed -1", "--seed -1", "seed"),
    ("--seed 2**32", "--seed 4294967296", "seed"),
    ("--save-freq -1", "--save-freq -1", "save_freq"),
    ("--keep-checkpoints 0", "--keep-checkpoints 0", "keep_checkpoints"),
    ("--keep-checkpoints some", "--keep-checkpoints some", "keep_checkpoints"),
    ("--loggers csv,tensorbord", "--loggers csv,tensorbord", "tensorbord"),
    ("--logger nosuch", "--logger nosuch", "nosuch"),
    ("--reset-ratio 3 (!| 4)", "--reset-ratio 3", "reset_ratio"),
    ("--multi-agent ippo on CartPole", "--multi-agent ippo", ("multi_agent", "ippo", "CartPole")),
    ("--host-vectorization async on gymnax", "--host-vectorization async", "host_vectorization"),
    ("--recurrent lstmm", "--recurrent lstmm", "recurrent"),
    ("--max-seq-len 8 without recurrent", "--max-seq-len 8", "max_seq_len"),
    ("--encoder cnn on flat obs", "--encoder cnn", ("encoder", "cnn")),
    ("--info-metrics nosuchkey", "--info-metrics nosuchkey", ("nosuchkey", "info_metrics")),
    ("--action-mask-key ''", "--action-mask-key ''", "action_mask_key", None, "either"),
    ("--eval-splits {a/b: {}}", "--eval-splits '{a/b: {}}'", "eval_splits"),
    (
        "--eval-splits typo'd EnvParams key",
        "--eval-freq 2 --eval-splits '{test: {max_steps_in_episodez: 10}}'",
        "max_steps_in_episodez",
    ),
    ("--best-split nosplit", "--best-split nosplit", "best_split"),
    ("--name ../escape", "--name ../escape", "name"),
    ("--num-seeds 0", "--num-seeds 0", ("num_seeds", "num-seeds")),
    ("--num-seeds abc", "--num-seeds abc", "num-seeds"),
    ("--num-seeds 2 --devices 0", "--num-seeds 2 --devices 0", "devices"),
    ("--num-seeds 2 --devices 99", "--num-seeds 2 --devices 99", ("devices", "99")),
)

# ----------------------------------------------------------------- train: envs
NO_PARAM = ["--env-kwargs", "{no_such_param: 1}"]
table(
    "env",
    TRAIN,
    ("gymnax id typo", "--env-name NotAnEnv-v0", "NotAnEnv"),
    ("gymnax id wrong case", "--env-name cartpole-v1", "cartpole-v1"),
    ("empty env id", "--env-name ''", "env_name"),
    ("unknown prefix", "--env-name bogusprefix:CartPole-v1", "bogusprefix"),
    ("envpool: unknown task", "--env-name envpool:NotAnEnv-v5", "NotAnEnv"),
    ("envpool: empty task", "--env-name envpool:", "envpool"),
    ("gymnasium: unknown id", "--env-name gymnasium:NotAnEnv-v0", "NotAnEnv"),
    ("jaxmarl: unknown id", "--env-name jaxmarl:not_an_env --multi-agent ippo", "not_an_env"),
    (
        "jaxmarl: without --multi-agent",
        "--env-name jaxmarl:MPE_simple_spread_v3",
        ("multi_agent", "multi-agent"),
    ),
    ("--env-kwargs bad YAML", "--env-kwargs '{a: [1'", "env_kwargs"),
    ("--env-kwargs a list", "--env-kwargs '[1, 2]'", "env_kwargs"),
    ("--env-kwargs unknown key", NO_PARAM, "no_such_param"),
    (
        "--env-kwargs string for int param",
        "--env-kwargs '{max_steps_in_episode: abc}'",
        "max_steps_in_episode",
    ),
    (
        "--env-kwargs envpool unknown key",
        ["--env-name", "envpool:HalfCheetah-v4", *NO_PARAM],
        "no_such_param",
    ),
    (
        "--env-kwargs gymnasium unknown key",
        ["--env-name", "gymnasium:CartPole-v1", *NO_PARAM],
        "no_such_param",
    ),
)

# ----------------------------------------------------------------- train: paths, resume, warm start
table(
    "train",
    ["train", "--run-dir"],
    ("--run-dir is a file", "{d}/afile", "afile", AFILE),
    ("--run-dir under a file", "{d}/afile/run", "afile", AFILE),
    ("--run-dir a symlink loop", "{d}/loop", "loop", symlink_loop("loop")),
    ("--run-dir /proc/...", "/proc/pjp-probe-run", "/proc"),
    ("--run-dir existing run, no --overwrite", "{run}", "run"),
    ("--overwrite of a foreign folder", "{d}/mine --overwrite", "mine", FOREIGN),
    suffix=TINY,
)
table(
    "train",
    ["train", "--resume"],
    ("--resume missing dir", "{d}/missing", "missing"),
    ("--resume empty dir", "{d}/empty", "empty", EMPTY),
    ("--resume a file", "{d}/afile", "afile", AFILE),
    ("--resume with --config", "{run} --config {run}/config.yaml", ("--resume", "--config")),
    ("--resume with --overwrite", "{run} --overwrite", "--overwrite"),
    ("--resume with --num-envs 8", "{run} --num-envs 8 --no-progress", "num_envs"),
    ("--resume with --init-from", "{run} --init-from {run}", "init-from"),
    ("--resume damaged config.yaml", "{run} --no-progress", "config.yaml", DAMAGED),
    ("--resume, no checkpoints/", "{run} --no-progress", "checkpoint", NO_CHECKPOINTS),
    ("--resume of a finished run", "{run} --no-progress", (), None, "either", ("run",)),
)
table(
    "train",
    TRAIN,
    ("--init-from missing", "--init-from {d}/missing", "missing"),
    ("--init-from empty dir", "--init-from {d}/empty", "empty", EMPTY),
)
table(
    "train",
    TRAIN[:-3],  # TINY but --hidden-sizes 8 --no-progress
    (
        "--init-from other network shape",
        "--hidden-sizes 16 --no-progress --init-from {run}",
        ("hidden", "shape", "16"),
    ),
)
table(
    "train",
    [*TRAIN, "--init-from", "{run}"],
    ("--init-parts params,bogus", "--init-parts params,bogus", ("init_parts", "bogus")),
    ("--init-step 3 (not kept)", "--init-step 3", ("init_step", "3")),
)

# ----------------------------------------------------------------- config files
CFG = ["train", "--run-dir", "{d}/new", "--no-progress", "--config"]
C_YAML = [*CFG, "{d}/c.yaml"]
table(
    "config",
    CFG,
    ("--config a directory", "{d}/empty", "empty", EMPTY),
    ("--config missing", "{d}/missing.yaml", "missing.yaml"),
)
table(
    "config",
    C_YAML,
    ("--config empty file (fine)", TINY, (), c_yaml(""), "either", ("c.yaml",)),
    ("--config a YAML list", "", ("c.yaml", "mapping"), c_yaml("- num_envs\n- 4\n")),
    ("--config a scalar", "", ("c.yaml", "mapping"), c_yaml("just text\n")),
    ("--config non-UTF-8 bytes", "", "c.yaml", c_yaml(b"num_envs: 4\nname: \xff\xfe\x00bad\n")),
    ("--config binary junk", "", "c.yaml", c_yaml(bytes(range(256)) * 4)),
    ("--config YAML syntax error", "", "c.yaml", c_yaml("num_envs: 4\n  gamma: [0.9\n")),
    ("--config tab indentation", "", "c.yaml", c_yaml("env_kwargs:\n\tmax_steps_in_episode: 10\n")),
    ("--config key typo", TINY, "num_env", c_yaml("num_env: 4\n")),
    ("--config duplicate key", "", "gamma", c_yaml("gamma: 0.9\ngamma: 0.99\n")),
    ("--config huge float", "", "learning_rate", c_yaml("learning_rate: 1.0e+400\n")),
    (
        "--config huge int",
        "",
        ("num_steps", "total_timesteps"),
        c_yaml("num_steps: 99999999999999999999999999999\n"),
    ),
    (
        "--config YAML alias bomb",
        "",
        "alias",
        c_yaml("a: &a [1, 1]\nb: &b [*a, *a]\nc: [*b, *b]\n"),
    ),
    ("--config env_kwargs a string", "", "env_kwargs", c_yaml("env_kwargs: abc\n")),
    ("--config nested null key", "", "env_kwargs", c_yaml("env_kwargs: {null: 1}\n")),
)
table(
    "config",
    CFG,
    ("--config symlink loop", "{d}/loop.yaml", "loop.yaml", symlink_loop("loop.yaml")),
    ("--config unreadable (chmod 000)", ["{d}/c.yaml", *TINY], "c.yaml", c_yaml("gamma: 0.9\n", 0)),
    (
        "--config a run's config.yaml (fine)",
        "{run}/config.yaml --total-timesteps 256",
        (),
        None,
        "ok",
        ("run",),
    ),
)

# ----------------------------------------------------------------- eval
table(
    "eval",
    ["eval"],
    ("missing run dir", "{d}/missing", "missing"),
    ("empty dir", "{d}/empty", "empty", EMPTY),
    ("a symlink loop as run dir", "{d}/loop", "loop", symlink_loop("loop")),
    ("a file as run dir", "{d}/afile", "afile", AFILE),
)
table(
    "eval",
    ["eval", "{run}"],
    ("damaged config.yaml", "", "config.yaml", DAMAGED, "either", ("run",)),
    ("config.yaml a list", "", "config.yaml", run_config("- 1\n- 2\n"), "either", ("run",)),
    (
        "config.yaml unknown field",
        "",
        "bogus_field",
        run_config("bogus_field: 1\n"),
        "either",
        ("run",),
    ),
    ("config.yaml deleted", "", "config.yaml", remove("run/config.yaml"), "either", ("run",)),
    ("checkpoints/ deleted", "", "checkpoint", NO_CHECKPOINTS),
    ("--episodes 0", "--episodes 0", "episodes"),
    ("--episodes -3", "--episodes -3", "episodes"),
    ("--episodes abc", "--episodes abc", "episodes"),
    ("--step 3 (not kept)", "--step 3", "3"),
    ("--step -1", "--step -1", ("step", "-1")),
    ("--seed -1", "--seed -1", "seed"),
    ("--seed 2**70", f"--seed {2**70}", "seed"),
    ("--env-name NotAnEnv-v0", "--env-name NotAnEnv-v0", "NotAnEnv"),
    ("--env-name other spaces", "--env-name Acrobot-v1", "Acrobot"),
    ("--video bad suffix", "--episodes 1 --video {d}/v.txt", ("v.txt", ".txt")),
    ("--video /proc/...", "--episodes 1 --video /proc/v.gif", "/proc"),
    ("--overwrite without --all-steps", "--overwrite", "--overwrite"),
    ("--all-steps with --step", "--all-steps --step 2", "--step"),
    (
        "--all-steps over existing eval_steps.csv",
        "--all-steps --episodes 1",
        "eval_steps",
        write("run/eval_steps.csv", "mine\n"),
    ),
    ("3 episodes (fine)", "--episodes 3", (), None, "ok", ("run",)),
)

# ----------------------------------------------------------------- export
table(
    "export",
    ["export"],
    ("no --to", "{run}", "--to"),
    ("--to bad suffix", "{run} --to {d}/p.txt", ".txt"),
    ("--to ''", "{run} --to ''", "--to"),
    ("missing run dir", "{d}/missing --to {d}/p.pt", "missing"),
    ("empty dir", "{d}/empty --to {d}/p.onnx", "empty", EMPTY),
    (
        "damaged config.yaml",
        "{run} --to {d}/p.pt",
        "config.yaml",
        run_config(": : :\n"),
        "either",
        ("run",),
    ),
    ("--to /proc/...", "{run} --to /proc/p.pt", "/proc"),
    ("--to under a file", "{run} --to {d}/afile/p.pt", "afile", AFILE),
    ("--to a symlink loop", "{run} --to {d}/loop.pt", "loop.pt", symlink_loop("loop.pt")),
    ("--to an existing folder", "{run} --to {d}/p.onnx", "p.onnx", mkdir("p.onnx")),
    (
        "--to existing .onnx, no --overwrite",
        "{run} --to {d}/p.onnx",
        "p.onnx",
        write("p.onnx", "my model\n"),
    ),
    (
        "--to .pt beside an existing .json",
        "{run} --to {d}/p.pt",
        ("p.json", "p."),
        write("p.json", "{}\n"),
    ),
    (
        "--to .onnx in a new folder (fine)",
        "{run} --to {d}/out/p.onnx",
        (),
        None,
        "either",
        ("run",),
    ),
)

# ----------------------------------------------------------------- collect
COLLECT = ["collect", "{run}", "--episodes", "2", "--out"]
table(
    "collect",
    ["collect"],
    ("no --episodes / --out", "{run}", ("--episodes", "--out")),
    ("no RUN_DIR", "--episodes 2 --out {d}/ds", "RUN_DIR"),
    ("--episodes 0", "{run} --episodes 0 --out {d}/ds", "episodes"),
    ("--episodes -1", "{run} --episodes -1 --out {d}/ds", "episodes"),
    ("missing run dir", "{d}/missing --episodes 2 --out {d}/ds", "missing"),
)
table(
    "collect",
    COLLECT,
    ("damaged config.yaml", "{d}/ds", "config.yaml", run_config("[unclosed\n"), "either", ("run",)),
    ("--out existing non-empty folder", "{d}/mine", "mine", FOREIGN),
    ("--out is a file", "{d}/afile", "afile", AFILE),
    ("--out /proc/...", "/proc/pjp-ds", "/proc"),
    ("--temperature -1", "{d}/ds --temperature -1", "temperature"),
    ("--temperature nan", "{d}/ds --temperature nan", "temperature"),
    ("--info-keys nosuchkey", "{d}/ds --info-keys nosuchkey", "nosuchkey"),
    ("--step 3 (not kept)", "{d}/ds --step 3", "3"),
    ("--seed -5", "{d}/ds --seed -5", "seed"),
    ("--minari-id 'bad id!'", "{d}/ds --minari-id 'bad id!'", ("bad id!", "minari")),
)
table(
    "collect",
    ["collect"],
    ("--resume missing", "--resume {d}/missing", "missing"),
    ("--resume empty dir", "--resume {d}/empty", "empty", EMPTY),
    ("--resume with --episodes", "--resume {d}/empty --episodes 3", "--episodes", EMPTY),
    ("2 episodes (fine)", "{run} --episodes 2 --out {d}/ds", (), None, "ok", ("run",)),
)

# ----------------------------------------------------------------- sweep
SWEEP = ["sweep", "--out", "{d}/out", "--seeds", "2", *TINY]
table(
    "sweep",
    SWEEP,
    ("--grid without =", "--grid gamma", "gamma"),
    ("--grid empty values", "--grid gamma=", "gamma"),
    ("--grid unknown field", "--grid gama=0.9,0.99", "gama"),
    ("--grid bad value", "--grid gamma=0.9,abc", ("gamma", "abc")),
    ("--grid out-of-range value", "--grid gamma=0.9,1.5", "gamma"),
    ("--grid seed (unsweepable)", "--grid seed=1,2", "seed"),
    ("--grid log_freq (unsweepable)", "--grid log_freq=1,2", "log_freq"),
    ("--grid a field twice", "--grid gamma=0.9 --grid gamma=0.99", "gamma"),
    ("--grid hidden_sizes with 0", "--grid 'hidden_sizes=8;16,0'", "hidden_sizes"),
    ("--grid env ids, one bad", "--grid env_name=CartPole-v1,NotAnEnv-v0", "NotAnEnv"),
    (
        "--random unknown distribution",
        "--random learning_rate=normal:0:1 --num-samples 2",
        "normal",
    ),
    (
        "--random missing bound",
        "--random learning_rate=log_uniform:1e-3 --num-samples 2",
        "learning_rate",
    ),
    (
        "--random log_uniform from 0",
        "--random learning_rate=log_uniform:0:1e-3 --num-samples 2",
        "learning_rate",
    ),
    (
        "--random low > high",
        "--random learning_rate=uniform:1e-3:1e-4 --num-samples 2",
        "learning_rate",
    ),
    (
        "--random bound not a number",
        "--random learning_rate=uniform:a:b --num-samples 2",
        "learning_rate",
    ),
    (
        "--random without --num-samples",
        "--random learning_rate=uniform:1e-4:1e-3",
        ("num_samples", "num-samples"),
    ),
    ("--random empty choice", "--random num_envs=choice: --num-samples 2", "num_envs"),
    ("--seeds 0", "--seeds 0 --grid gamma=0.9", "seeds"),
    ("--seeds -2", "--seeds -2 --grid gamma=0.9", "seeds"),
    ("--seeds abc", "--seeds abc", "seeds"),
    (
        "--max-runs-per-chunk 0",
        "--grid gamma=0.9 --max-runs-per-chunk 0",
        ("max_runs_per_chunk", "max-runs-per-chunk"),
    ),
    ("--log-every 0", "--grid gamma=0.9 --log-every 0", ("log_every", "log-every")),
    ("--format xlsx", "--format xlsx", "xlsx"),
    ("--num-processes 2 without coordinator", "--num-processes 2", "coordinator"),
)
table(
    "sweep",
    ["sweep", "--out"],
    ("--out is a file", "{d}/afile", "afile", AFILE),
    ("--out foreign folder", "{d}/mine", "mine", FOREIGN),
    ("--out /proc/...", "/proc/pjp-sweep", "/proc"),
    suffix=[*TINY, "--grid", "gamma=0.9"],
)
table(
    "sweep",
    ["sweep", "--resume"],
    ("--resume empty dir", "{d}/empty", "empty", EMPTY),
    ("--resume with --grid", "{d}/empty --grid gamma=0.9", "--grid", EMPTY),
    (
        "--resume bad request.yaml",
        "{d}/sw",
        "request.yaml",
        write("sw/request.yaml", "just: text\n"),
    ),
)
table("sweep", SWEEP, ("2 seeds x 2 gammas (fine)", "--grid gamma=0.9,0.99", (), None, "ok"))

# ----------------------------------------------------------------- pbt
PBT_ARGS = ["--population", "2", "--ready-every", "2", *TINY]
PBT = ["pbt", "--out", "{d}/out", *PBT_ARGS]
LR = ["--search", "learning_rate=log_uniform:1e-4:1e-3"]
table(
    "pbt",
    ["pbt"],
    ("no --search", "--out {d}/out", "--search"),
    ("no --search, no --out", "", "--search"),
    suffix=PBT_ARGS,
)
table(
    "pbt",
    [*PBT, "--search"],
    ("--search unknown field", "nosuch=uniform:0:1", "nosuch"),
    ("--search untraced field", "num_envs=uniform:1:8", "num_envs"),
    ("--search unknown distribution", "learning_rate=normal:0:1", "normal"),
    ("--search missing bound", "learning_rate=uniform:1e-4", "learning_rate"),
    ("--search log_uniform from 0", "learning_rate=log_uniform:0:1e-3", "learning_rate"),
    ("--search static field by a range", "hidden_sizes=uniform:1:2", "hidden_sizes"),
    ("--search traced field by a choice", "learning_rate=choice:1e-3,1e-4", "learning_rate"),
)
table(
    "pbt",
    [*PBT, *LR],
    ("--population 0", "--population 0", "population"),
    ("--population -1", "--population -1", "population"),
    ("--ready-every 0", "--ready-every 0", ("ready_every", "ready-every")),
    ("--exploit bogus", "--exploit bogus", ("bogus", "exploit")),
    ("--explore bogus", "--explore bogus", ("bogus", "explore")),
    (
        "--truncation-fraction 1.5",
        "--truncation-fraction 1.5",
        ("truncation_fraction", "truncation-fraction"),
    ),
    (
        "--tournament-size 0",
        "--exploit tournament --tournament-size 0",
        ("tournament_size", "tournament-size"),
    ),
    ("--fitness-window 0", "--fitness-window 0", ("fitness_window", "fitness-window")),
    ("--checkpoint-every -1", "--checkpoint-every -1", "checkpoint-every"),
)
table(
    "pbt",
    ["pbt"],
    ("--resume without --out", "", "--out"),
    ("--resume of a missing --out", "--out {d}/missing", "missing"),
    ("--resume of an empty folder", "--out {d}/out", "out", mkdir("out")),
    ("--resume of a foreign folder", "--out {d}/mine", "mine", FOREIGN),
    suffix=[*PBT_ARGS, *LR, "--resume"],
)
table(
    "pbt",
    ["pbt", "--out", "{d}/afile"],
    ("--out is a file", "", "afile", AFILE),
    suffix=[*PBT_ARGS, *LR],
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
    parser.add_argument("--list", action="store_true", help="print the probes; run nothing")
    args = parser.parse_args()
    probes = [p for p in PROBES if args.only in p.group or args.only in p.name]
    if args.list:
        for p in probes:
            print(p.group, p.name, p.argv, p.setup, p.names, p.expect, p.intact, sep=" | ")
        return
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
