"""Same-machine peer: RL Zoo's tuner (`rl_zoo3.train --optimize`, rl-zoo3 2.9.2 with
stable-baselines3 PPO) on a gymnasium MuJoCo id, searching the space `purejaxppo tune
--search ppo-default` searches, every other setting `configs/mujoco.yaml`'s.

RL Zoo's own PPO sampler (`rl_zoo3.hyperparams_opt.sample_ppo_params`) also samples
n_steps, batch_size, n_epochs and the network, which changes a trial's cost; this driver
swaps in a sampler of its traced fields alone (learning rate, entropy coefficient, clip
range, max grad norm, and gamma / GAE lambda as uniforms over the ranges its `1 - x`
log-uniforms cover: `purejaxppo.drivers.tune.space.PPO_DEFAULT`) and fixes the rest as
`configs/mujoco.yaml` has them: 2048 steps per update (1 env x 2048), 10 epochs of batch
64, a linearly annealed learning rate, vf_coef 0.5, separate 64-64 tanh actor and critic,
observation and reward normalisation (VecNormalize). Everything else is RL Zoo's: its
objective (the mean return of `--eval-episodes` deterministic evaluation episodes, every
`n_timesteps / --n-evaluations` steps, the last one the trial's value), Optuna's TPE
sampler with its `--n-startup-trials`, its trial loop (one model built per trial).

    python3 -m venv rlzoo-venv
    rlzoo-venv/bin/pip install torch==2.13.0 rl-zoo3==2.9.2 "gymnasium[mujoco]" pandas
    rlzoo-venv/bin/python -m benchmarks.peers.rlzoo_tuner --env Hopper-v4 --trials 32 \
        --n-timesteps 20480 --n-evaluations 2 --eval-episodes 5 --workdir W

`--space acrobot`, `pendulum` and `hopper` are the quality study's
(`benchmarks.tune_peers_quality`): the four fields of `benchmarks.tune_quality.SEARCH`
(`sample_quality`) over the task's config's other settings (`QUALITY_SETTINGS`: Acrobot's
16 envs x 128 steps, 4 epochs of 4 minibatches, gamma 0.99, with `--hyperparams
normalize:False` to drop the VecNormalize RL Zoo's Acrobot entry adds; Pendulum's 32 envs
x 64 steps, 4 epochs of 8 minibatches, gamma 0.9, gSDE off, with `--hyperparams n_envs:32
normalize:True` for VecNormalize; Hopper's `configs/mujoco.yaml` 32 envs x 64 steps, 10
epochs of 32 minibatches, gamma 0.99, with `--hyperparams n_envs:32 normalize:True
gamma:0.99`; all lr annealed and 64-64 tanh).
`--pruner` (default none; RL Zoo's own default is median), `--seed` (the study's
and the models') and `--timeout` (start no trial after that many seconds: Optuna's
`timeout` through `benchmarks.peers.optuna_budget`) are passed on.

Prints, as its last line, one JSON object: trials, completed, best_value, best_params,
values, versions. Run by `benchmarks.tune_host_throughput` and
`benchmarks.tune_peers_quality`.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import sys
from pathlib import Path


def sample_traced(trial) -> dict:
    """`PPO_DEFAULT`'s fields, sampled from the distributions `purejaxppo tune` gives them
    (Optuna's parameter names are purejaxppo's field names)."""
    return {
        "learning_rate": trial.suggest_float("learning_rate", 1e-5, 2e-3, log=True),
        "ent_coef": trial.suggest_float("ent_coef", 1e-8, 0.1, log=True),
        "clip_coef": trial.suggest_categorical("clip_coef", [0.1, 0.2, 0.3, 0.4]),
        "max_grad_norm": trial.suggest_float("max_grad_norm", 0.3, 2.0),
        "gamma": trial.suggest_float("gamma", 0.97, 0.9999),
        "gae_lambda": trial.suggest_float("gae_lambda", 0.9, 0.9999),
    }


def traced_sampler(trial, n_actions, n_envs, additional_args) -> dict:
    """RL Zoo's sampler signature: SB3 PPO keyword arguments, `sample_traced`'s fields
    (SB3 names `clip_coef` `clip_range`) and `configs/mujoco.yaml`'s other settings."""
    from rl_zoo3.utils import linear_schedule
    from torch import nn

    sampled = sample_traced(trial)
    clip_range = sampled.pop("clip_coef")
    return {
        **sampled,
        "learning_rate": linear_schedule(sampled["learning_rate"]),
        "clip_range": clip_range,
        "n_steps": 2048 // n_envs,
        "batch_size": 64,
        "n_epochs": 10,
        "vf_coef": 0.5,
        "policy_kwargs": {
            "net_arch": {"pi": [64, 64], "vf": [64, 64]},
            "activation_fn": nn.Tanh,
            "ortho_init": True,
            "log_std_init": 0.0,
        },
    }


def sample_quality(trial) -> dict:
    """`benchmarks.tune_quality.SEARCH`'s fields and distributions (purejaxppo's names)."""
    return {
        "learning_rate": trial.suggest_float("learning_rate", 1e-5, 1e-1, log=True),
        "ent_coef": trial.suggest_float("ent_coef", 0.0, 0.05),
        "gae_lambda": trial.suggest_float("gae_lambda", 0.8, 0.99),
        "clip_coef": trial.suggest_float("clip_coef", 0.1, 0.3),
    }


#: The quality study's fixed PPO settings per task (`configs/acrobot.yaml`,
#: `configs/pendulum_normalized.yaml`) in SB3's names; the env count is RL Zoo's
#: `n_envs` (its Acrobot entry's 16; Pendulum's is set with `--hyperparams n_envs:32`).
QUALITY_SETTINGS = {
    "acrobot": {"n_steps": 128, "minibatches": 4, "n_epochs": 4, "gamma": 0.99},
    "pendulum": {"n_steps": 64, "minibatches": 8, "n_epochs": 4, "gamma": 0.9},
    "hopper": {"n_steps": 64, "minibatches": 32, "n_epochs": 10, "gamma": 0.99},
}
#: Envs per task, and whether observations and rewards are normalised (VecNormalize).
QUALITY_ENVS = {"acrobot": (16, False), "pendulum": (32, True), "hopper": (32, True)}


def quality_kwargs(sampled: dict, n_envs: int, task: str) -> dict:
    """SB3 PPO keyword arguments: `sample_quality`'s fields (`clip_coef` is SB3's
    `clip_range`, the learning rate annealed linearly) and `QUALITY_SETTINGS[task]` (64-64
    tanh actor and critic, orthogonal init, vf_coef and max_grad_norm 0.5; a Gaussian policy
    with a state-independent log-std starting at 0 and no gSDE, which RL Zoo's Pendulum
    entry would switch on)."""
    from rl_zoo3.utils import linear_schedule
    from torch import nn

    settings = dict(QUALITY_SETTINGS[task])
    minibatches = settings.pop("minibatches")
    policy = {"net_arch": {"pi": [64, 64], "vf": [64, 64]}, "activation_fn": nn.Tanh}
    return {
        "learning_rate": linear_schedule(sampled["learning_rate"]),
        "ent_coef": sampled["ent_coef"],
        "gae_lambda": sampled["gae_lambda"],
        "clip_range": sampled["clip_coef"],
        **settings,
        "batch_size": settings["n_steps"] * n_envs // minibatches,
        "vf_coef": 0.5,
        "max_grad_norm": 0.5,
        **({"use_sde": False} if task != "acrobot" else {}),
        "policy_kwargs": {**policy, "ortho_init": True},
    }


def acrobot_sampler(trial, n_actions, n_envs, additional_args) -> dict:
    """RL Zoo's sampler signature: `sample_quality` with `configs/acrobot.yaml`'s settings."""
    return quality_kwargs(sample_quality(trial), n_envs, "acrobot")


def pendulum_sampler(trial, n_actions, n_envs, additional_args) -> dict:
    """RL Zoo's sampler signature: `sample_quality` with
    `configs/pendulum_normalized.yaml`'s settings (RL Zoo's VecNormalize normalises, with
    `--hyperparams normalize:True`)."""
    return quality_kwargs(sample_quality(trial), n_envs, "pendulum")


def hopper_sampler(trial, n_actions, n_envs, additional_args) -> dict:
    """RL Zoo's sampler signature: `sample_quality` with `configs/mujoco.yaml`'s settings
    (VecNormalize, with `--hyperparams n_envs:32 normalize:True gamma:0.99`: RL Zoo's
    Hopper-v4 entry says 1 env and gamma 0.999, and VecNormalize takes the entry's gamma)."""
    return quality_kwargs(sample_quality(trial), n_envs, "hopper")


#: `--space` -> RL Zoo sampler.
SAMPLERS = {
    "ppo-default": traced_sampler,
    "acrobot": acrobot_sampler,
    "pendulum": pendulum_sampler,
    "hopper": hopper_sampler,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--env", default="Hopper-v4", help="gymnasium MuJoCo id")
    parser.add_argument("--trials", type=int, default=32)
    parser.add_argument("--n-timesteps", type=int, default=20480, help="env steps per trial")
    parser.add_argument("--n-evaluations", type=int, default=2)
    parser.add_argument("--eval-episodes", type=int, default=5)
    parser.add_argument("--n-startup-trials", type=int, default=10)
    parser.add_argument("--workdir", type=Path, required=True)
    parser.add_argument("--space", choices=SAMPLERS, default="ppo-default")
    parser.add_argument("--pruner", choices=("none", "median", "halving"), default="none")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--timeout", type=float, default=None, help="seconds (Optuna's)")
    parser.add_argument("--hyperparams", nargs="*", default=[], help="RL Zoo's, passed on")
    args = parser.parse_args()
    import optuna
    from rl_zoo3 import hyperparams_opt
    from rl_zoo3.train import train

    hyperparams_opt.HYPERPARAMS_SAMPLER["ppo"] = SAMPLERS[args.space]  # exp_manager's too
    if args.timeout is not None:
        from benchmarks.peers.optuna_budget import limit_optimize

        limit_optimize(args.timeout)
    args.workdir.mkdir(parents=True, exist_ok=True)
    storage = f"sqlite:///{args.workdir / 'study.db'}"
    sys.argv = [
        "rl_zoo3.train",
        *["--algo", "ppo", "--env", args.env, "--optimize", "--device", "cpu"],
        *["--n-trials", str(args.trials), "--n-timesteps", str(args.n_timesteps)],
        *["--n-evaluations", str(args.n_evaluations), "--eval-episodes", str(args.eval_episodes)],
        *["--sampler", "tpe", "--pruner", args.pruner, "--n-jobs", "1"],
        *["--seed", str(args.seed)],
        *["--n-startup-trials", str(args.n_startup_trials), "--log-folder", str(args.workdir)],
        *["--storage", storage, "--study-name", "rlzoo", "--verbose", "0"],
        *(["--hyperparams", *args.hyperparams] if args.hyperparams else []),
    ]
    train()
    study = optuna.load_study(study_name="rlzoo", storage=storage)
    complete = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
    values = [t.value for t in complete]
    best = max(complete, key=lambda t: t.value) if complete else None
    versions = {
        p: importlib.metadata.version(p)
        for p in ("rl_zoo3", "stable_baselines3", "torch", "gymnasium", "mujoco", "optuna")
    }
    record = {
        "trials": args.trials,
        "completed": len(complete),
        "best_value": max(values) if values else float("nan"),
        "best_params": best.params if best else {},
        "pruned": sum(t.state == optuna.trial.TrialState.PRUNED for t in study.trials),
        "values": values,
        "versions": versions,
    }
    print(json.dumps(record))


if __name__ == "__main__":
    main()
