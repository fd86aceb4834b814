"""The tuner quality study against RL Zoo's and CleanRL's tuners
(`benchmarks/tune_peers_quality.py`): the three arms search one space with one budget and
the same settings, and every library's rerun is scored alike. The study itself needs the
peers' virtualenvs and about an hour, so it is a benchmark; these tests check its parts."""

from __future__ import annotations

import argparse
import json

import optuna
import pytest

from benchmarks import tune_peers_quality as study
from benchmarks.harness import ROOT
from benchmarks.peers import optuna_budget, rlzoo_tuner, sb3_rerun
from benchmarks.tune_quality import SEARCH
from benchmarks.tune_throughput import search_flags
from purejaxppo.cli.values import parse_random
from purejaxppo.drivers.tune.space import parse_space

ARGS = argparse.Namespace(
    task="acrobot",
    budget=180.0,
    updates=25,
    objective="eval_return:10",
    ours_set={},
    rlzoo_python=ROOT / "rlzoo-venv" / "bin" / "python",
    cleanrl_python=ROOT / "cleanrl-venv" / "bin" / "python",
)


def test_rlzoo_samples_the_quality_studys_distributions():
    config = study.TASKS["acrobot"].settings()
    ours = parse_space(parse_random(search_flags(SEARCH)[1::2]), config).distributions()
    trial = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0)).ask()
    assert set(rlzoo_tuner.sample_quality(trial)) == set(SEARCH)
    assert trial.distributions == ours


@pytest.mark.parametrize("task", sorted(study.TASKS))
def test_rlzoo_and_sb3_train_with_the_configs_settings(monkeypatch, task):
    """RL Zoo's sampler (and so SB3's rerun) fixes what the task's config fixes. RL Zoo
    lives in its own virtualenv: its `linear_schedule` is stood in for here."""
    import sys
    import types

    from torch import nn

    utils = types.ModuleType("rl_zoo3.utils")
    utils.linear_schedule = lambda value: ("linear", value)
    monkeypatch.setitem(sys.modules, "rl_zoo3", types.ModuleType("rl_zoo3"))
    monkeypatch.setitem(sys.modules, "rl_zoo3.utils", utils)
    params = {"learning_rate": 0.003, "ent_coef": 0.02, "gae_lambda": 0.9, "clip_coef": 0.15}
    config = study.TASKS[task].settings()
    n_envs, normalize = rlzoo_tuner.QUALITY_ENVS[task]
    assert n_envs == config.num_envs
    assert normalize == config.normalize_observations == config.normalize_rewards
    sampler = rlzoo_tuner.SAMPLERS[study.TASKS[task].space]
    kwargs = sampler(optuna.trial.FixedTrial(params), None, n_envs, None)
    assert kwargs["learning_rate"] == ("linear", 0.003) and config.anneal_lr
    assert (kwargs["ent_coef"], kwargs["gae_lambda"], kwargs["clip_range"]) == (0.02, 0.9, 0.15)
    assert kwargs["n_steps"] == config.num_steps and kwargs["n_epochs"] == config.update_epochs
    assert kwargs["batch_size"] == config.num_envs * config.num_steps // config.num_minibatches
    assert (kwargs["gamma"], kwargs["vf_coef"], kwargs["max_grad_norm"]) == (
        config.gamma,
        config.vf_coef,
        config.max_grad_norm,
    )
    assert kwargs["policy_kwargs"]["net_arch"] == {"pi": [64, 64], "vf": [64, 64]}
    assert kwargs["policy_kwargs"]["activation_fn"] is nn.Tanh
    assert config.hidden_sizes == (64, 64) and config.activation == "tanh"
    assert kwargs.get("use_sde", False) is False  # RL Zoo's Pendulum entry turns gSDE on
    if normalize:  # RL Zoo's VecNormalize: on through --hyperparams, as in the rerun
        assert "normalize:True" in study.TASKS[task].rlzoo_hyperparams


def test_cleanrl_gets_the_configs_settings_as_flags():
    """CleanRL's scripts read the task config's fixed settings as flags (their own defaults
    differ: `ppo_continuous_action.py` steps 1 env x 2048, 32 minibatches, gamma 0.99)."""
    args = argparse.Namespace(**{**vars(ARGS), "task": "pendulum", "updates": 50})
    command = study.cleanrl_command(args, ROOT / "out", 1)
    text = " ".join(command)
    assert "--script ppo_continuous_action.py" in text
    for flag in ("num-envs=32", "num-steps=64", "num-minibatches=8", "update-epochs=4"):
        assert f"--fixed {flag}" in text
    assert "--fixed gamma=0.9" in text and "--fixed clip-vloss=False" in text
    assert "--fixed total-timesteps=102400" in text and "--fixed env-id=Pendulum-v1" in text
    rlzoo = " ".join(study.rlzoo_command(args, ROOT / "out", 1))
    assert "--space pendulum --hyperparams n_envs:32 normalize:True" in rlzoo
    ours = study.ours_command(args, ROOT / "out", 1)
    assert ours[ours.index("--config") + 1] == str(ROOT / "configs/pendulum_normalized.yaml")
    assert study.total_steps(args) == 50 * 32 * 64


def test_hopper_trains_envpools_hopper_in_ours_and_gymnasiums_in_the_peers():
    """The MuJoCo task: `configs/mujoco.yaml` on EnvPool's Hopper-v4 for `tune` and its
    rerun, gymnasium's Hopper-v4 with the same settings for SB3 and CleanRL; RL Zoo's
    VecNormalize discounts with the config's gamma, not its Hopper entry's 0.999."""
    args = argparse.Namespace(**{**vars(ARGS), "task": "hopper"})
    ours = study.ours_command(args, ROOT / "out", 0)
    assert ours[ours.index("--env-name") + 1] == "envpool:Hopper-v4"
    assert ours[ours.index("--config") + 1] == str(ROOT / "configs/mujoco.yaml")
    config = study.TASKS["hopper"].settings()
    assert config.env_name == "envpool:Hopper-v4" and config.gamma == 0.99
    rlzoo = " ".join(study.rlzoo_command(args, ROOT / "out", 0))
    assert "--env Hopper-v4 --space hopper" in rlzoo
    assert "--hyperparams n_envs:32 normalize:True gamma:0.99 " in rlzoo
    cleanrl = " ".join(study.cleanrl_command(args, ROOT / "out", 0))
    assert "--script ppo_continuous_action.py" in cleanrl
    for flag in ("env-id=Hopper-v4", "num-envs=32", "num-steps=64", "num-minibatches=32"):
        assert f"--fixed {flag}" in cleanrl
    assert "--fixed update-epochs=10" in cleanrl and "--fixed total-timesteps=51200" in cleanrl
    assert "--env-name" not in " ".join(study.ours_command(ARGS, ROOT / "out", 0))


def test_ours_set_changes_ours_studies_and_reruns_only():
    args = argparse.Namespace(**{**vars(ARGS), "task": "hopper"})
    args.ours_set = dict([study._ours_set("normalize_timing=step")])
    ours = study.ours_command(args, ROOT / "out", 0)
    assert ours[-2:] == ["--normalize-timing", "step"]
    assert study.ours_settings(args).normalize_timing == "step"
    assert study.ours_settings(ARGS).normalize_timing == "update"
    assert study.rlzoo_command(args, ROOT / "out", 0) == study.rlzoo_command(
        argparse.Namespace(**{**vars(ARGS), "task": "hopper"}), ROOT / "out", 0
    )
    for bad in ("normalize_timing", "bogus=1"):
        with pytest.raises(argparse.ArgumentTypeError, match="FIELD=VALUE"):
            study._ours_set(bad)


def test_every_arm_gets_the_same_budget_steps_and_seed():
    out = ROOT / "out"
    ours = " ".join(study.ours_command(ARGS, out, 2))
    rlzoo = " ".join(study.rlzoo_command(ARGS, out, 2))
    cleanrl = " ".join(study.cleanrl_command(ARGS, out, 2))
    for text in (ours, rlzoo, cleanrl):
        assert "--timeout 180.0" in text
    assert "--total-timesteps 51200" in ours and "--seed 2" in ours
    assert "--seeds-per-trial 2 --objective eval_return:10" in ours
    assert "--no-enqueue-base" in ours and "--pruner median" in ours
    assert "--n-timesteps 51200" in rlzoo and "--seed 2" in rlzoo
    assert "--space acrobot --hyperparams normalize:False --pruner median" in rlzoo
    assert "--fixed total-timesteps=51200" in cleanrl and "--sampler-seed 2" in cleanrl
    assert "--fixed num-envs=16" in cleanrl and "--fixed env-id=Acrobot-v1" in cleanrl
    config = study.TASKS["acrobot"].settings()
    assert config.num_envs * config.num_steps == study.TASKS["acrobot"].steps_per_update
    assert (config.num_envs, config.update_epochs, config.num_minibatches) == (16, 4, 4)


def test_ours_study_reads_the_best_completed_trial(tmp_path):
    (tmp_path / "trials.csv").write_text(
        "number,value_eval_return,params_clip_coef,params_learning_rate,state\n"
        "0,-120.5,0.2,0.001,COMPLETE\n"
        "1,-80.0,0.25,0.003,COMPLETE\n"
        "2,,0.1,0.05,PRUNED\n"
        "3,,0.3,0.00001,FAIL\n"
    )
    found = study.ours_study(tmp_path)
    assert found == {
        "best_value": -80.0,
        "best_params": {"clip_coef": 0.25, "learning_rate": 0.003},
        "completed": 2,
        "pruned": 1,
    }


def test_peer_study_maps_cleanrls_flag_names():
    line = {"best_value": -90.0, "values": [-200.0, -90.0], "pruned": 1}
    line["best_params"] = {"learning-rate": 0.002, "ent-coef": 0.01, "exp-name": "ppo"}
    found = study.peer_study("log line\n" + json.dumps(line))
    assert found["best_params"] == {"learning_rate": 0.002, "ent_coef": 0.01}
    assert (found["best_value"], found["completed"], found["pruned"]) == (-90.0, 2, 1)


def test_every_library_scores_the_last_fraction_of_its_episodes():
    stdout = "\n".join(
        [
            "global_step=1000, episodic_return=[-500.]",
            "global_step=45000, episodic_return=[-100.]",
            "global_step=50000, episodic_return=-80.0",
            "SPS: 1500",
        ]
    )
    assert study.cleanrl_final_return(stdout, 51200, 0.4) == pytest.approx(-90.0)
    assert study.cleanrl_final_return("SPS: 1", 51200, 0.4) != study.cleanrl_final_return(
        "SPS: 1", 51200, 0.4
    )  # NaN: no episode
    episodes = [(1000, -500.0), (45000, -100.0), (50000, -80.0)]
    assert sb3_rerun.final_return(episodes, 51200, 0.4) == pytest.approx(-90.0)


def test_summary_is_over_studies():
    rows = [
        {"arm": "ours", "rerun": [1.0], "rerun_mean": -80.0, "completed": 90, "pruned": 40},
        {"arm": "ours", "rerun": [1.0], "rerun_mean": -90.0, "completed": 70, "pruned": 20},
        {"arm": "cleanrl", "rerun": [], "rerun_mean": float("nan"), "completed": 0, "pruned": 0},
    ]
    for row in rows:
        row["wall_s"] = 180.0
    (ours,) = study.summarize(rows)  # a study that found nothing has no rerun row
    assert (ours["tuner"], ours["studies"], ours["rerun_mean"]) == ("ours", 2, -85.0)
    assert (ours["rerun_std"], ours["rerun_worst"], ours["completed"]) == (5.0, -90.0, 80.0)


def test_the_budget_reaches_optunas_optimize(monkeypatch):
    real = optuna.study.Study.optimize
    monkeypatch.setattr(optuna.study.Study, "optimize", real)
    with pytest.raises(ValueError, match="seconds must be > 0, got 0"):
        optuna_budget.limit_optimize(0)
    optuna_budget.limit_optimize(0.3)
    optuna_budget.limit_optimize(0.2)  # a second call replaces the first budget
    assert optuna.study.Study.optimize.__wrapped__ is real
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    budgeted = optuna.create_study()

    def slow(trial):
        import time

        time.sleep(0.05)
        return trial.suggest_float("x", 0, 1)

    budgeted.optimize(slow, n_trials=1000)
    assert 2 <= len(budgeted.trials) < 20  # stopped by the 0.2 s budget, not n_trials


def test_the_figure_is_drawn_from_a_results_file(tmp_path):
    studies = [
        {"arm": arm, "rep": rep, "rerun": [-100.0 - rep, -90.0]}
        for arm in study.ARMS
        for rep in range(2)
    ]
    record = {"task": "Acrobot-v1", "rerun_seeds": [100, 101], "budget_s": 180.0}
    results = tmp_path / "results.json"
    results.write_text(json.dumps({**record, "studies": studies}))
    figure = tmp_path / "figure.png"
    study.main(["--plot", str(results), str(results), "--figure", str(figure)])
    assert figure.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and figure.stat().st_size > 10_000


def test_a_later_file_of_ours_alone_replaces_ours_column_in_the_figure():
    def record(arms, rerun, objective="eval_return:10"):
        studies = [{"arm": arm, "rep": 0, "rerun": rerun} for arm in arms]
        return {"ours_objective": objective, "studies": studies}

    first = record(study.ARMS, [1.0])
    other_objective = record(["ours"], [2.0], "episode_return:0.4")
    rerun = record(["ours"], [3.0])
    columns = study.figure_columns([first, other_objective, rerun])
    assert [(arm, s[0]["rerun"]) for arm, _, s in columns] == [
        ("ours", [3.0]),  # the rerun's, in the first file's place
        *[(arm, [1.0]) for arm in study.ARMS if arm != "ours"],
        ("ours", [2.0]),  # another objective: a column of its own
    ]
