"""Probe rows of values checked, not only names (`tools/probes/input_probes.py` runs them
last, after the rows of `input_probe_cases` and `input_probe_outputs`): env kwargs out of
range or of the wrong type, sizes beyond any free memory (refused by the memory estimate,
naming the field, before anything is built), YAML's `on` / `off` for a string field, a
config nested too deeply."""

from __future__ import annotations

from tools.probes.input_probe_cases import C_YAML, TINY, TRAIN
from tools.probes.input_probe_kit import c_yaml, table

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
