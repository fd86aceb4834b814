"""Probe rows of values checked, not only names (`tools/probes/input_probes.py` runs them
last, after the rows of `input_probe_cases` and `input_probe_outputs`): env kwargs out of
range or of the wrong type, sizes beyond any free memory (refused by the memory estimate,
naming the field, before anything is built), YAML's `on` / `off` for a string field, a
config nested too deeply; tune's study, storage and option values (a study another tool
made, a storage password, a field searched twice, the options of seeds, tasks,
enqueued trials and the timeout)."""

from __future__ import annotations

from tools.probes.input_probe_cases import C_YAML, TINY, TRAIN
from tools.probes.input_probe_kit import Setup, c_yaml, table

MPE = ["--env-name", "jaxmarl:MPE_simple_spread_v3", "--multi-agent", "ippo", "--env-kwargs"]
table(
    "values",
    TRAIN,
    ("jaxmarl: max_steps 0", [*MPE, "{max_steps: 0}"], "max_steps"),
    ("jaxmarl: wrong-typed kwarg", [*MPE, "{action_type: 5}"], "action_type"),
    (
        "metabbo: num_dims 30000",
        "--env-name metabbo:DE --env-kwargs '{num_dims: 30000}'",
        "num_dims",
    ),
    ("--update-epochs 10**12", "--update-epochs 1000000000000", "update_epochs"),
    ("--fused-kernels off (fine)", "--fused-kernels off", (), None, "ok"),
)
table(
    "values",
    C_YAML,
    ("--config fused_kernels: off (fine)", TINY, (), c_yaml("fused_kernels: off\n"), "ok"),
    (
        "--config nested too deeply",
        "",
        ("c.yaml", "nested"),
        c_yaml("env_kwargs: " + "[" * 5000 + "]" * 5000 + "\n"),
    ),
)
table(
    "values",
    ["eval"],
    ("eval --episodes 10**12", "{run} --episodes 1000000000000", ("num_episodes", "episodes")),
)
TUNE = ["tune", "--out", "{d}/tune", *TINY]
table(
    "values",
    TUNE,
    (
        "tune: a static range's mid values refused",
        "--search num_minibatches=int_uniform:1:70 --trials 4",
        ("num_minibatches", "choice:1,2,4"),
    ),
    (
        "tune: a static range too wide",
        "--search num_envs=int_uniform:1:100000 --trials 4",
        ("num_envs", "100000 values"),
    ),
    (
        "tune --batch 10**8",
        "--search learning_rate=log_uniform:1e-4:1e-2 --trials 100000000 --batch 100000000",
        ("batch", "--batch"),
    ),
)


def _foreign_study(d) -> None:
    """An Optuna study named "tune" with one trial, made by Optuna itself (another tool)."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(study_name="tune", storage=f"sqlite:///{d / 'foreign.db'}")
    x = optuna.distributions.FloatDistribution(0.0, 2.0)
    study.add_trial(optuna.trial.create_trial(params={"x": 1.0}, distributions={"x": x}, value=3))


FOREIGN_STUDY = Setup("foreign_study('foreign.db')", _foreign_study)
LR = "--search learning_rate=log_uniform:1e-4:1e-2 --trials 4"
table(
    "values",
    TUNE,
    (
        "tune: a study another tool made",
        f"{LR} --resume --storage sqlite:///{{d}}/foreign.db",
        ("not made by purejaxppo tune", "foreign.db"),
        FOREIGN_STUDY,
    ),
    (
        "tune: a storage's password stays hidden",
        f"{LR} --storage postgresql://me:hunter2@127.0.0.1:1/db",
        ("me:***@127.0.0.1:1",),
    ),
    (
        "tune: a --search field twice",
        f"{LR} --search learning_rate=uniform:0.001:0.002",
        ("learning_rate", "twice"),
    ),
    ("tune --seeds-per-trial 0", f"{LR} --seeds-per-trial 0", "seeds_per_trial=0"),
    ("tune --task LOW >= HIGH", f"{LR} --task CartPole-v1:500:0", ("CartPole-v1:500:0", "LOW")),
    ("tune --enqueue unknown field", f"{LR} --enqueue lr=0.1", ("lr", "searched")),
    ("tune --enqueue outside the space", f"{LR} --enqueue learning_rate=5", "learning_rate"),
    ("tune --timeout 0", f"{LR} --timeout 0", "timeout"),
    ("tune --objective eval_return:0", f"{LR} --objective eval_return:0", "EPISODES"),
)
