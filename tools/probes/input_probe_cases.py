"""The rows of the CLI probes (`tools/probes/input_probes.py` runs them): tables per command
(`input_probe_kit.table`) of the commands that read (`train`, config files, `eval`); those
that write an output are in `input_probe_outputs.py`. `{d}` is the probe's folder, `{run}` a
copy of a tiny trained run made with `BASE_ARGS`."""

from __future__ import annotations

from tools.probes.input_probe_kit import (
    AFILE,
    DAMAGED,
    EMPTY,
    FOREIGN,
    NO_CHECKPOINTS,
    c_yaml,
    remove,
    run_config,
    symlink_loop,
    table,
    write,
)

TINY = ["--total-timesteps", "1024", "--num-envs", "4", "--num-steps", "32"]
TINY += ["--hidden-sizes", "8", "--no-progress"]
#: The base run every `{run}` probe gets a copy of: 8 updates, checkpoints 2, 4, 6, 8.
BASE_ARGS = [*TINY, "--save-freq", "2"]


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
