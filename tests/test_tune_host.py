"""`tune` on envs stepped on the host: a gymnasium env and an EnvPool MuJoCo env, one trial
at a time with its seeds as lanes of one vector env / pool (compiled once), with pruning,
the timeout's stop and a resume that finishes the study and then extends it."""

from __future__ import annotations

import optuna
import pytest
from test_tune import PruneNumbers

import purejaxppo as pjp
from purejaxppo.drivers.tune import study as studies
from purejaxppo.drivers.tune.lanes import LaneGroup

States = optuna.trial.TrialState
SEARCH = {"learning_rate": ("log_uniform", 1e-4, 1e-3)}
# 12 updates of 4 envs x 8 steps, 4 reports; Hopper's and CartPole's untrained episodes
# end well within the objective's window (the last 2 updates, 16 steps an env)
QUIET = {"sampler": "random", "reports": 4, "progress": False, "seeds_per_trial": 2}


@pytest.mark.parametrize("env_name", ["gymnasium:CartPole-v1", "envpool:Hopper-v4"])
def test_a_host_env_study_prunes_stops_resumes_and_extends(env_name, tmp_path, capsys, monkeypatch):
    config = pjp.PPOConfig(
        env_name=env_name, num_envs=4, num_steps=8, total_timesteps=4 * 8 * 12, hidden_sizes=(16,)
    )
    widths = []
    init = LaneGroup.__init__

    def spy(group, *args, **kwargs):
        init(group, *args, **kwargs)
        widths.append(group.width)

    monkeypatch.setattr(LaneGroup, "__init__", spy)
    # the first segment (compile included) outlasts the timeout: its trial is re-queued
    first = pjp.tune(config, SEARCH, trials=3, batch=4, timeout=0.2, out=tmp_path, **QUIET)
    assert [t.state for t in first.study.trials] == [States.FAIL, States.WAITING]
    err = capsys.readouterr().err
    assert "trials one at a time, compiled once; a trial's seeds share the " in err
    assert "(2 seed(s) x 4 envs)" in err
    assert "the timeout of 0.2 s is spent" in err
    pruner = PruneNumbers({2})  # the re-queued trial 0 runs again as trial 1
    done = pjp.tune(
        config, SEARCH, trials=3, batch=4, out=tmp_path, resume=True, pruner=pruner, **QUIET
    )
    trials = done.study.trials
    assert [t.state for t in trials[1:]] == [States.COMPLETE, States.PRUNED, States.COMPLETE]
    assert trials[1].params == trials[0].params  # the re-queued trial's values
    assert len(trials[1].user_attrs["seed_values"]) == 2
    assert widths == [2, 2]  # one trial (2 seeds) at a time; one compile per call
    more = pjp.tune(config, SEARCH, trials=4, out=tmp_path, resume=True, pruner="none", **QUIET)
    assert studies.finished(more.study.trials) == 4
    assert more.study.trials[-1].state == States.COMPLETE
    assert (tmp_path / "best.yaml").exists()


def test_the_eval_objective_plays_greedy_episodes_on_a_host_env(tmp_path):
    config = pjp.PPOConfig(
        env_name="gymnasium:CartPole-v1",
        num_envs=4,
        num_steps=8,
        total_timesteps=4 * 8 * 12,
        hidden_sizes=(16,),
    )
    result = pjp.tune(
        config, SEARCH, trials=1, objective="eval_return:2", pruner="none", out=tmp_path, **QUIET
    )
    (trial,) = result.study.trials
    assert trial.state == States.COMPLETE and len(trial.intermediate_values) == 4
    # a greedy CartPole episode of an almost untrained policy: a few steps to a few hundred
    assert 5 <= trial.value <= 500 and len(trial.user_attrs["seed_values"]) == 2
