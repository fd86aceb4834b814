"""Probe rows of the commands that write an output (`tools/probes/input_probes.py` runs them
after `input_probe_cases`' rows): `export --to`, `collect --out`, `sweep --out` and `pbt
--out`, with their other options; `{d}` is the probe's folder, `{run}` a copy of the base
run."""

from __future__ import annotations

from tools.probes.input_probe_cases import TINY
from tools.probes.input_probe_kit import (
    AFILE,
    EMPTY,
    FOREIGN,
    mkdir,
    run_config,
    symlink_loop,
    table,
    write,
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
table(
    "pbt",
    [*PBT, "--search", "hidden_sizes=choice:8,16"],
    ("static search on 2 devices", "--devices 2", ("--devices 2", "hidden_sizes")),
    ("static search, --checkpoint-every -1", "--checkpoint-every -1", "checkpoint-every"),
)
