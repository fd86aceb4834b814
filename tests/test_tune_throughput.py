"""`benchmarks/tune_throughput.py`, `benchmarks/tune_host_throughput.py` and their peers' own
logic, without CleanRL or RL Zoo: the arms search the same distributions, and the trial adapter turns the tuner's flags into a
`purejaxppo train` command and its metrics.csv into the tensorboard scalars the tuner
reads (here with a stand-in for `purejaxppo train`)."""

import json
import runpy
import shlex
import sys
import textwrap

import optuna
import pytest
from tensorboard.backend.event_processing import event_accumulator

from benchmarks import tune_host_throughput, tune_mujoco_study, tune_throughput
from benchmarks.harness import ROOT
from benchmarks.peers import cleanrl_tuner, purejaxppo_trial, rlzoo_tuner
from purejaxppo.cli.values import parse_random
from purejaxppo.config import PPOConfig
from purejaxppo.drivers.tune.space import PPO_DEFAULT, PPO_DEFAULT_NAME, expand_default, parse_space

ADAPTER = ROOT / "benchmarks" / "peers" / "purejaxppo_trial.py"


def test_the_arms_search_the_same_distributions():
    flags = tune_throughput.search_flags()
    assert flags[0::2] == ["--search"] * 4
    config = PPOConfig.from_yaml(ROOT / "configs" / "cartpole.yaml")
    ours = parse_space(parse_random(flags[1::2]), config).distributions()
    space = tune_throughput.cleanrl_space()
    params_fn = cleanrl_tuner.params_fn_for(space, {"total-timesteps": "100000"})
    trial = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0)).ask()
    params = params_fn(trial)
    # The placeholder first (runpy overwrites it), the four fields, then the fixed flag.
    assert list(params) == [
        "exp-name",
        "learning-rate",
        "ent-coef",
        "gae-lambda",
        "clip-coef",
        "total-timesteps",
    ]
    theirs = {flag.replace("-", "_"): d for flag, d in trial.distributions.items()}
    assert theirs == ours
    assert ours["learning_rate"] == optuna.distributions.FloatDistribution(1e-4, 1e-2, log=True)
    assert ours["gae_lambda"] == optuna.distributions.FloatDistribution(0.8, 0.99)


def test_cleanrl_space_refuses_a_choice():
    with pytest.raises(ValueError, match=r"search\['num_envs'\]: kind 'choice'"):
        tune_throughput.cleanrl_space({"num_envs": ("choice", [4, 8], None)})


def test_ours_command_runs_tpe_without_pruner():
    args = tune_throughput.argparse.Namespace(
        config=ROOT / "configs" / "cartpole.yaml", total_timesteps=100_000, trials=4, batch=16
    )
    command = tune_throughput.ours_command(args, ROOT / "out")
    text = " ".join(command[1:])
    assert "--sampler tpe --pruner none" in text
    assert "--trials 4 --batch 4" in text  # the batch is at most the trials
    assert "--total-timesteps 100000" in text
    assert "learning_rate=log_uniform:0.0001:0.01" in text


def test_cleanrl_commands_run_the_peer_driver_as_a_module():
    args = tune_throughput.argparse.Namespace(
        cleanrl_python="python3.10",
        config=ROOT / "configs" / "cartpole.yaml",
        total_timesteps=100_000,
        trials=4,
        window=50,
    )
    ppo = tune_throughput.cleanrl_command(args, "cleanrl", ROOT / "w")
    assert ppo[:3] == ["python3.10", "-m", "benchmarks.peers.cleanrl_tuner"]
    assert json.loads(ppo[ppo.index("--space") + 1]) == tune_throughput.cleanrl_space()
    assert "--script" not in ppo  # the installed cleanrl/ppo.py
    train = tune_throughput.cleanrl_command(args, "cleanrl-train", ROOT / "w")
    assert train[train.index("--script") + 1] == str(ADAPTER)
    fixed = [train[i + 1] for i, word in enumerate(train) if word == "--fixed"]
    assert fixed[:2] == ["total-timesteps=100000", f"config={args.config}"]
    assert fixed[2].startswith("purejaxppo=") and fixed[2].endswith("purejaxppo")


def test_adapter_parses_the_tuners_flags():
    argv = ["--learning-rate=0.001", "--ent-coef=0.02", "--gae-lambda=0.9", "--clip-coef=0.15"]
    argv += ["--total-timesteps=100000", "--env-id=CartPole-v1", "--seed=0", "--track=False"]
    args = purejaxppo_trial.parse_flags(argv)
    command = purejaxppo_trial.train_command(args, ROOT / "run")
    assert command[:2] == ["purejaxppo", "train"]
    pairs = dict(zip(command[2::2], command[3::2], strict=True))
    assert pairs["--learning-rate"] == "0.001"
    assert pairs["--ent-coef"] == "0.02"
    assert pairs["--gae-lambda"] == "0.9"
    assert pairs["--clip-coef"] == "0.15"
    assert pairs["--total-timesteps"] == "100000"
    assert pairs["--seed"] == "0"
    assert pairs["--env-name"] == "CartPole-v1"
    assert pairs["--config"] == str(ROOT / "configs" / "cartpole.yaml")


FAKE_TRAIN = """
import json, sys
from pathlib import Path
run_dir = Path(sys.argv[sys.argv.index("--run-dir") + 1])
run_dir.mkdir(parents=True)
(run_dir / "argv.json").write_text(json.dumps(sys.argv[1:]))
(run_dir / "metrics.csv").write_text(
    "update,episode_return,episode_count,env_steps\\n"
    "1,,0.0,512.0\\n"
    "2,20.5,2.0,1024.0\\n"
    "3,40.0,3.0,1536.0\\n"
)
"""


def test_adapter_writes_the_scalars_the_tuner_reads(tmp_path, monkeypatch):
    fake = tmp_path / "fake_train.py"
    fake.write_text(textwrap.dedent(FAKE_TRAIN))
    monkeypatch.chdir(tmp_path)
    # As the Tuner calls it: its flags from argv[0] on, argv[0] replaced by runpy.
    argv = ["--exp-name=ppo", "--learning-rate=0.003", "--total-timesteps=1536"]
    argv += [f"--purejaxppo={sys.executable} {fake}", "--env-id=CartPole-v1", "--seed=0"]
    monkeypatch.setattr(sys, "argv", [*argv, "--track=False"])
    experiment = runpy.run_path(str(ADAPTER), run_name="__main__")

    run_dir = tmp_path / "runs" / experiment["run_name"]
    assert experiment["run_name"].startswith("CartPole-v1__purejaxppo__0__")
    passed = json.loads((run_dir / "train" / "argv.json").read_text())
    assert passed[passed.index("--learning-rate") + 1] == "0.003"
    assert passed[passed.index("--total-timesteps") + 1] == "1536"
    accumulator = event_accumulator.EventAccumulator(str(run_dir))
    accumulator.Reload()
    events = accumulator.Scalars("charts/episodic_return")
    # Update 1 ended no episode; update 2 ended 2 (mean 20.5), update 3 ended 3 (mean 40).
    assert [(e.step, e.value) for e in events] == [(1024, 20.5)] * 2 + [(1536, 40.0)] * 3
    # The tuner's window of the last 4 episodes: (20.5 + 3 * 40) / 4 = 35.125.
    assert sum(e.value for e in events[-4:]) / 4 == 35.125


def test_best_of_trials_reads_completed_trials(tmp_path):
    path = tmp_path / "trials.csv"
    path.write_text("number,value,state\n0,120.5,COMPLETE\n1,,FAIL\n2,480.25,COMPLETE\n")
    assert tune_throughput.best_of_trials(path) == (480.25, 2)


def test_ratios_are_over_our_wall_time():
    rows = [{"arm": "ours", "wall_s": 10.0}, {"arm": "cleanrl", "wall_s": 250.0}]
    tune_throughput.add_ratios(rows)
    assert [r["x_ours"] for r in rows] == [1.0, 25.0]


def test_cpu_ratios_are_over_our_cpu_seconds_and_absent_without_them():
    rows = [
        {"arm": "ours", "wall_s": 10.0, "cpu_s": 16.0},
        {"arm": "cleanrl", "wall_s": 250.0, "cpu_s": 400.0},
        {"arm": "cleanrl-train", "wall_s": 50.0},
    ]
    tune_throughput.add_ratios(rows)
    assert [r["x_ours_cpu"] for r in rows[:2]] == [1.0, 25.0]
    assert rows[2]["x_ours"] == 5.0 and rows[2]["x_ours_cpu"] != rows[2]["x_ours_cpu"]  # NaN


def test_children_cpu_seconds_count_a_finished_subprocess():
    before = tune_throughput.children_cpu_s()
    code = "import time\nend = time.process_time() + 0.3\nwhile time.process_time() < end: pass"
    tune_throughput.subprocess.run([sys.executable, "-c", code], check=True)
    assert tune_throughput.children_cpu_s() - before >= 0.25


def test_the_rlzoo_arm_samples_the_space_of_ppo_default():
    """RL Zoo's swapped-in sampler draws from the distributions `--search ppo-default`
    gives ours, under our field names."""
    config = PPOConfig.from_yaml(ROOT / "configs" / "mujoco.yaml")
    ours = parse_space(expand_default(PPO_DEFAULT_NAME), config).distributions()
    trial = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0)).ask()
    sampled = rlzoo_tuner.sample_traced(trial)
    assert trial.distributions == ours
    assert set(sampled) == set(PPO_DEFAULT)
    assert ours["clip_coef"] == optuna.distributions.CategoricalDistribution([0.1, 0.2, 0.3, 0.4])


def test_host_arms_run_the_same_study():
    args = tune_host_throughput.argparse.Namespace(
        trials=32,
        total_timesteps=20480,
        reports=2,
        eval_episodes=5,
        rlzoo_python=ROOT / "rlzoo-venv" / "bin" / "python",
    )
    ours = " ".join(tune_host_throughput.ours_command(args, ROOT / "out")[1:])
    for flags in ("--env-name envpool:Hopper-v4", "--search ppo-default", "--trials 32"):
        assert flags in ours
    assert "--total-timesteps 20480" in ours and "--sampler tpe --pruner none" in ours
    assert "--objective eval_return:5 --reports 2" in ours
    theirs = tune_host_throughput.rlzoo_command(args, ROOT / "out")
    assert theirs[1:4] == ["-m", "benchmarks.peers.rlzoo_tuner", "--env"]
    text = " ".join(theirs)
    assert "Hopper-v4 --trials 32 --n-timesteps 20480" in text
    assert "--n-evaluations 2 --eval-episodes 5" in text


def test_time_arm_times_a_command_and_keeps_a_failures_message(tmp_path):
    def read(stdout):
        return {"best": tune_throughput.last_json_line(stdout)["best_value"], "completed": 2}

    code = "print('log line'); print('{\"best_value\": 2.5}')"
    ok = tune_throughput.time_arm("peer", [sys.executable, "-c", code], tmp_path, 2, read)
    assert (ok["best"], ok["completed"], ok["error"]) == (2.5, 2, "")
    assert ok["wall_s"] > 0 and ok["s_per_trial"] == ok["wall_s"] / 2
    failing = [sys.executable, "-c", "import sys; sys.exit('boom')"]
    bad = tune_throughput.time_arm("peer", failing, tmp_path, 2, read)
    assert bad["best"] != bad["best"] and bad["completed"] == 0 and "boom" in bad["error"]


def test_the_worked_mujoco_study_runs_the_guides_command():
    args = tune_mujoco_study.argparse.Namespace(
        trials=16, total_timesteps=200_000, seeds_per_trial=2, n_startup_trials=5
    )
    guide = (ROOT / "docs" / "guides" / "tuning.md").read_text()
    line = next(
        x for x in guide.splitlines() if x.startswith("purejaxppo tune --config configs/mujoco")
    )
    command = tune_mujoco_study.tune_command(args, "tune/hopper")
    assert command[1:] == shlex.split(line)[1:]


def test_the_worked_study_reads_trials_and_reruns(tmp_path):
    (tmp_path / "trials.csv").write_text(
        "number,value_episode_return,params_ent_coef,params_learning_rate,user_attrs_seed,state\n"
        "0,812.5,0.0,0.0003,0,COMPLETE\n"
        "1,,0.004,0.0009,1,PRUNED\n"
    )
    trials = tune_mujoco_study.read_trials(tmp_path / "trials.csv")
    assert trials[0] == {
        "number": 0,
        "state": "COMPLETE",
        "value": 812.5,
        "ent_coef": 0.0,
        "learning_rate": 0.0003,
    }
    assert trials[1]["state"] == "PRUNED" and trials[1]["value"] != trials[1]["value"]
    (tmp_path / "summary.csv").write_text(
        "seed,final_return,diverged\n100,1500.0,0\n101,900.5,0\nmean,1200.25,\n"
    )
    assert tune_mujoco_study.rerun_returns(tmp_path) == [1500.0, 900.5]
