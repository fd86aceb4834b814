"""`TuneOptions`: seeds per trial (the trial's value is the aggregate of independent runs,
bitwise), the timeout (stops as a stop request does, and the study resumes), a finished
study extended with more trials, Optuna's metric name, the start-up trials, and each new
option's bad values refused in one line."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optuna
import pytest
import yaml
from test_tune import run_cli

import purejaxppo as pjp
from purejaxppo.drivers.tune import study as studies
from purejaxppo.drivers.tune.objective import Objective, aggregate
from purejaxppo.drivers.tune.options import TuneOptions

States = optuna.trial.TrialState
# 12 updates of 4 envs x 8 steps; 4 reports per trial -> segments of 3 updates (96 steps).
CONFIG = pjp.PPOConfig(num_envs=4, num_steps=8, total_timesteps=4 * 8 * 12, hidden_sizes=(16,))
SEARCH = {"learning_rate": ("log_uniform", 1e-4, 1e-3)}
QUIET = {"sampler": "random", "pruner": "none", "reports": 4, "progress": False}


def test_aggregates_follow_their_definitions():
    values = np.array([4.0, 1.0, np.nan, 3.0, 2.0, 100.0])  # NaN: no episode ended
    assert aggregate(values, "mean") == 22.0
    assert aggregate(values, "median") == 3.0
    assert aggregate(values, "iqm") == 3.0  # 5 finite: cut 1 each end -> mean(2, 3, 4)
    assert aggregate(np.array([1.0, 2.0, 3.0, 4.0]), "iqm") == 2.5  # cut 1 -> mean(2, 3)
    assert aggregate(np.array([7.25]), "iqm") == 7.25
    assert np.isnan(aggregate(np.array([np.nan, np.nan]), "mean"))


@pytest.fixture(scope="module")
def three_seeds(tmp_path_factory):
    """2 trials of 3 seeds each, as 6 lanes of one program."""
    out = tmp_path_factory.mktemp("seeds")
    result = pjp.tune(
        CONFIG, SEARCH, trials=2, batch=2, seeds_per_trial=3, aggregate="median", out=out, **QUIET
    )
    return result, out


def test_seeds_per_trial_value_is_the_aggregate_of_independent_runs_bitwise(three_seeds):
    result, out = three_seeds
    trials = result.study.trials
    assert [t.state for t in trials] == [States.COMPLETE] * 2
    assert [t.user_attrs["seeds"] for t in trials] == [[0, 1, 2], [3, 4, 5]]
    seeds = [s for t in trials for s in t.user_attrs["seeds"]]
    keys = jnp.stack([jax.random.key(s) for s in seeds])
    hparams = pjp.Hyperparams.stack(
        [pjp.Hyperparams.from_config(CONFIG.replace(**t.params)) for t in trials for _ in range(3)]
    )
    metrics = jax.jit(jax.vmap(pjp.make_train(CONFIG)))(keys, hparams).metrics
    values = np.asarray(metrics["episode_return"]).reshape(2, 3, 12)
    counts = np.asarray(metrics["episode_count"]).reshape(2, 3, 12)
    objective = Objective()
    for n, trial in enumerate(trials):
        runs = [objective.value(values[n, k], counts[n, k], 12) for k in range(3)]
        assert trial.user_attrs["seed_values"] == runs  # bitwise, per seed
        assert trial.value == aggregate(np.array(runs), "median")
        for step, value in trial.intermediate_values.items():
            done = step // 32
            parts = [
                objective.value(values[n, k, :done], counts[n, k, :done], 12) for k in range(3)
            ]
            assert value == aggregate(np.array(parts), "median")
    table = (out / "trials.csv").read_text()
    assert "user_attrs_seed_values" in table and "user_attrs_seeds" in table
    assert yaml.safe_load((out / "best.yaml").read_text())["seed"] in (0, 3)  # its first seed
    # Optuna's tools name the value
    assert result.study.metric_names == ["episode_return"]
    # Optuna's listings show a short record; the request is in a system attribute
    assert set(result.study.user_attrs["purejaxppo"]) == {"seed", "sha256"}
    assert studies.stored_request(result.study, "here")["objective"]["seeds_per_trial"] == 3


def test_a_study_of_other_seeds_per_trial_is_refused(three_seeds):
    _, out = three_seeds
    with pytest.raises(ValueError, match="seeds_per_trial"):
        pjp.tune(CONFIG, SEARCH, trials=3, batch=2, out=out, resume=True, **QUIET)


def test_timeout_stops_as_a_stop_does_and_the_study_resumes(tmp_path, capsys):
    # the first segment (compile included) takes longer than 0.2 s: the timeout is spent
    # at its end, the two running trials are re-queued, and the outputs written
    first = pjp.tune(CONFIG, SEARCH, trials=4, batch=2, timeout=0.2, out=tmp_path, **QUIET)
    states = [t.state for t in first.study.trials]
    assert States.COMPLETE not in states and states.count(States.WAITING) == 2, states
    err = capsys.readouterr().err
    assert "the timeout of 0.2 s is spent: 0 trial(s) of the study finished; 2 running" in err
    assert (tmp_path / "trials.csv").exists()
    again = pjp.tune(CONFIG, SEARCH, trials=4, batch=2, out=tmp_path, resume=True, **QUIET)
    assert studies.finished(again.study.trials) == 4
    assert sum(t.state == States.COMPLETE for t in again.study.trials) == 4


def test_resume_with_more_trials_extends_a_finished_study(tmp_path, capsys):
    out = tmp_path / "out"
    base = ["--num-envs", "4", "--num-steps", "8", "--total-timesteps", "384"]
    base += ["--hidden-sizes", "16", "--search", "learning_rate=log_uniform:1e-4:1e-3"]
    base += ["--sampler", "random", "--pruner", "none", "--reports", "4", "--no-progress"]
    code, _ = run_cli(["tune", *base, "--trials", "2", "--batch", "2", "--out", str(out)], capsys)
    assert code == 0
    code, lines = run_cli(["tune", "--resume", str(out), "--trials", "1"], capsys)
    assert code == 2 and "records 2 trials, and a study's budget only grows" in lines[0], lines
    code, _ = run_cli(["tune", "--resume", str(out), "--trials", "3"], capsys)
    assert code == 0
    assert yaml.safe_load((out / "request.yaml").read_text())["trials"] == 3
    study = optuna.load_study(study_name="tune", storage=f"sqlite:///{out / 'study.db'}")
    assert [t.state for t in study.trials] == [States.COMPLETE] * 3


@pytest.mark.parametrize(
    "args, message",
    [
        (["--seeds-per-trial", "0"], "seeds_per_trial=0: must be an integer >= 1"),
        (["--timeout", "0"], "timeout=0.0: must be a number of seconds > 0"),
        (["--timeout", "-5"], "timeout=-5.0: must be a number of seconds > 0"),
        (["--timeout", "nan"], "timeout=nan: must be a number of seconds > 0"),
        (["--n-startup-trials", "-1"], "n_startup_trials=-1: must be an integer >= 0"),
        (
            ["--n-startup-trials", "3", "--sampler", "random"],
            "n_startup_trials=3: sampler 'random' has no random start-up trials",
        ),
        (["--aggregate", "mode"], "argument --aggregate: invalid choice: 'mode'"),
        (["--objective", "eval_return:0"], "EPISODES '0' must be an integer >= 1"),
        (["--enqueue", "lr=0.001"], "enqueue 'lr=0.001': 'lr' is not a searched field (searched"),
        (["--enqueue", "learning_rate=5"], "learning_rate: 5 is outside the search's log_uniform"),
        (["--enqueue", "learning_rate"], "'learning_rate' is not FIELD=VALUE"),
        (["--task", "CartPole-v1:500:0"], "task 'CartPole-v1:500:0': LOW 500 must be below HIGH 0"),
        (["--task", "CartPole-v1"], "task 'CartPole-v1': must be ENV_ID:LOW:HIGH"),
        (["--task", "CartPole-v1:0:x"], "LOW and HIGH must be finite numbers"),
        (["--objective", "eval_return:x"], "EPISODES 'x' must be an integer >= 1"),
    ],
)
def test_bad_option_values_are_refused_in_one_line(args, message, tmp_path, capsys):
    out = tmp_path / "out"
    argv = ["tune", "--out", str(out), "--trials", "4", *args]
    argv += ["--search", "learning_rate=log_uniform:1e-4:1e-2"]
    code, lines = run_cli(argv, capsys)
    assert code == 2 and message in lines[-1], lines
    assert not out.exists()


def test_options_record_round_trips_and_old_records_take_defaults():
    options = TuneOptions(trials=5, seeds_per_trial=2, aggregate="iqm", timeout=60.0)
    assert TuneOptions.from_record(options.record()) == options
    old = {"trials": 5, "batch": 8, "objective": "episode_return", "storage": None}
    assert TuneOptions.from_record(old) == TuneOptions(trials=5)
    with pytest.raises(TypeError, match="unknown option"):
        pjp.tune(CONFIG, SEARCH, trials=1, seeds=3)


def test_start_up_trials_reach_the_sampler():
    assert studies.make_sampler("tpe", 0, 3)._n_startup_trials == 3
    assert studies.make_sampler("tpe", 0)._n_startup_trials == 10  # Optuna's default
    assert studies.make_sampler("cmaes", 0, 4)._n_startup_trials == 4


def test_a_diverged_trial_fails_at_once_and_its_lanes_take_the_next(monkeypatch, capsys):
    from purejaxppo.drivers.tune.lanes import LaneGroup

    run_segment, lanes = LaneGroup.run_segment, []

    def poisoned(group):
        fetched = {name: np.array(value) for name, value in run_segment(group).items()}
        lanes.append([None if lane is None else lane.trial.number for lane in group.lanes])
        if len(lanes) == 1:
            fetched["v_loss"][0:2, 1] = np.nan  # trial 0's two seeds, its 2nd update
        return fetched

    monkeypatch.setattr(LaneGroup, "run_segment", poisoned)
    result = pjp.tune(CONFIG, SEARCH, trials=3, batch=2, seeds_per_trial=2, **QUIET)
    trials = result.study.trials
    assert trials[0].state == States.FAIL and trials[0].user_attrs["diverged"] == 2
    said = "tune: trial 0 failed, diverged: a non-finite v_loss at update 2\n"
    assert said in capsys.readouterr().err
    assert lanes[0] == [0, 0, 1, 1]
    assert lanes[1] == [2, 2, 1, 1]  # trial 2 took trial 0's lanes at the next boundary
    assert [t.state for t in trials[1:]] == [States.COMPLETE] * 2


def test_a_trial_whose_window_ends_no_episode_fails_and_says_why(capsys):
    # Pendulum's episodes are 200 steps; 12 updates of 8 steps end none
    pendulum = CONFIG.replace(env_name="Pendulum-v1")
    result = pjp.tune(pendulum, SEARCH, trials=2, batch=2, **QUIET)
    assert [t.state for t in result.study.trials] == [States.FAIL] * 2
    assert {t.user_attrs["failed"] for t in result.study.trials} == {
        "no episode ended in the objective's window"
    }
    err = capsys.readouterr().err
    for n in (0, 1):
        assert (
            f"tune: trial {n} failed, no episode ended in the objective's window (its last 2 "
            "of 12 updates): train longer, or widen the window (objective episode_return:0.4)\n"
        ) in err


def test_the_eval_objective_is_pjp_evaluate_of_the_trials_parameters():
    from purejaxppo.drivers.tune.evaluation import eval_key

    result = pjp.tune(CONFIG, SEARCH, trials=2, batch=2, objective="eval_return:3", **QUIET)
    trials = result.study.trials
    assert [t.state for t in trials] == [States.COMPLETE] * 2
    assert result.study.metric_names == ["eval_return"]
    keys = jnp.stack([jax.random.key(t.user_attrs["seed"]) for t in trials])
    hparams = pjp.Hyperparams.stack(
        [pjp.Hyperparams.from_config(CONFIG.replace(**t.params)) for t in trials]
    )
    output = jax.jit(jax.vmap(pjp.make_train(CONFIG)))(keys, hparams)
    for n, trial in enumerate(trials):
        lane = jax.tree.map(lambda x, n=n: x[n], output)
        policy = pjp.Policy.from_train_output(lane, CONFIG.replace(**trial.params))
        key = eval_key(trial.user_attrs["seed"], 12)
        played = pjp.evaluate(policy, key=key, greedy=True, num_episodes=3)
        assert trial.value == np.mean(played.returns.astype(np.float64))
        assert len(trial.intermediate_values) == 4  # an evaluation at every report


def test_ppo_default_is_rl_zoos_space_and_given_fields_replace_its_entries(tmp_path, capsys):
    from purejaxppo.drivers.tune import check_tune
    from purejaxppo.drivers.tune.space import PPO_DEFAULT

    space = check_tune(CONFIG, "ppo-default", trials=1).space.to_lists()
    assert set(space) == {
        "learning_rate",
        "ent_coef",
        "clip_coef",
        "max_grad_norm",
        "gamma",
        "gae_lambda",
    }
    assert space["learning_rate"] == ["log_uniform", 1e-5, 2e-3]
    mine = {"ppo-default": None, "learning_rate": ("log_uniform", 1e-4, 1e-3)}
    space = check_tune(CONFIG, mine, trials=1).space.to_lists()
    assert space["learning_rate"] == ["log_uniform", 1e-4, 1e-3] and len(space) == len(PPO_DEFAULT)
    out = tmp_path / "out"
    argv = ["tune", "--search", "ppo-default", "--search", "learning_rate=log_uniform:1e-4:1e-3"]
    argv += [
        "--num-envs",
        "4",
        "--num-steps",
        "8",
        "--total-timesteps",
        "384",
        "--hidden-sizes",
        "16",
    ]
    argv += ["--trials", "1", "--batch", "1", "--reports", "2", "--no-progress", "--out", str(out)]
    code, _ = run_cli(argv, capsys)
    assert code == 0
    recorded = yaml.safe_load((out / "request.yaml").read_text())["search"]
    assert recorded["learning_rate"] == ["log_uniform", 0.0001, 0.001] and len(recorded) == 6


def test_the_base_config_and_enqueued_settings_are_the_first_trials():
    search = {**SEARCH, "update_epochs": ("choice", [1, 2])}
    queued = [{"learning_rate": 5e-4}, "learning_rate=0.0002,update_epochs=2"]
    result = pjp.tune(CONFIG, search, trials=3, batch=1, enqueue=queued, **QUIET)
    params = [t.params for t in result.study.trials]
    # the base config's learning rate (2.5e-4) is in the space, its 4 update epochs are not
    assert params[0]["learning_rate"] == CONFIG.learning_rate
    assert params[1]["learning_rate"] == 5e-4
    assert params[2] == {"learning_rate": 2e-4, "update_epochs": 2}
    plain = pjp.tune(CONFIG, SEARCH, trials=1, batch=1, enqueue_base=False, **QUIET)
    assert plain.study.trials[0].params["learning_rate"] != CONFIG.learning_rate


def test_a_multi_task_study_scores_the_mean_normalised_score_of_every_task(tmp_path):
    tasks = ["CartPole-v1:0:500", "Probe5-v0:-1:1"]  # Probe5: one-step episodes, +-1
    result = pjp.tune(CONFIG, SEARCH, trials=2, batch=2, task=tasks, out=tmp_path, **QUIET)
    trials = result.study.trials
    assert [t.state for t in trials] == [States.COMPLETE] * 2
    for trial in trials:
        scores = trial.user_attrs["task_scores"]
        assert set(scores) == {"CartPole-v1", "Probe5-v0"}
        mean = np.mean([scores["CartPole-v1"] / 500, (scores["Probe5-v0"] + 1) / 2])
        assert trial.value == pytest.approx(mean, rel=1e-12)
        # each task's score is its own objective, bitwise that of a plain run
        config = CONFIG.replace(env_name="Probe5-v0", **trial.params)
        out = jax.jit(pjp.make_train(config))(jax.random.key(trial.user_attrs["seed"]))
        values, counts = (np.asarray(out.metrics[n]) for n in ("episode_return", "episode_count"))
        assert Objective().value(values, counts, 12) == pytest.approx(scores["Probe5-v0"], abs=1e-4)
        # intermediate values: 4 reports per task, at the steps of the tasks before
        assert sorted(trial.intermediate_values) == [96, 192, 288, 384, 480, 576, 672, 768]
    table = (tmp_path / "trials.csv").read_text()
    assert "user_attrs_task_scores" in table
