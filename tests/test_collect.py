"""`collect`: EnvPool Atari episodes are whole games; `resume` continues a stopped collect
to the uninterrupted dataset (library and `purejaxppo collect --resume`, a real SIGTERM);
multi-agent JaxMARL runs store an agent axis per step, play `evaluate`'s episodes and
resume bitwise; their Minari dataset is refused in one line before anything is written."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import jax
import numpy as np
import pytest

import purejaxppo as pjp
from purejaxppo.acting.datasets import collect, load_episodes
from purejaxppo.cli.main import main
from purejaxppo.kinds import kind_of
from purejaxppo.policy import Policy

REPO = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}


def untrained(env_name: str, env_kwargs: dict | None = None, **config) -> pjp.Policy:
    config = pjp.PPOConfig(env_name=env_name, env_kwargs=env_kwargs or {}, **config)
    env, env_params = pjp.make_env(env_name, config.env_kwargs)
    networks = pjp.make_networks(config, env, env_params)
    return pjp.Policy(networks.init(jax.random.key(0)), config, env, env_params)


def snapshot(path: Path) -> dict[str, bytes]:
    return {str(p.relative_to(path)): p.read_bytes() for p in path.rglob("*") if p.is_file()}


# ------------------------------------------------------------------- EnvPool Atari
def test_atari_episodes_are_whole_games_with_raw_rewards(tmp_path):
    # Breakout: 5 lives; under episodic_life a lost life is `terminated` for the learner
    # and rewards are clipped; collect's episode is the game, its rewards the raw ones.
    kwargs = {"episodic_life": True, "reward_clip": True}
    policy = untrained("envpool:Breakout-v5", kwargs, hidden_sizes=(8,))
    key = jax.random.key(1)
    result = collect(
        policy, 2, tmp_path / "data", key, info_keys=["terminated"], max_steps=3000, chunk_steps=512
    )
    data = load_episodes(tmp_path / "data")
    expected = pjp.evaluate(policy, num_episodes=2, key=key, max_steps=3000)
    # The games evaluate plays (the same keys): raw scores, every life.
    np.testing.assert_array_equal(result.lengths, expected.lengths)
    np.testing.assert_array_equal(result.returns, expected.returns)
    assert (expected.lengths < 3000).all()  # both games ended (not cut at max_steps)
    for i in range(2):
        steps = data["episode_id"] == i
        ends = data["terminated"][steps] | data["truncated"][steps]
        assert ends[-1] and ends.sum() == 1  # one end, the game's, its last step
        assert data["info/terminated"][steps].sum() == 5  # the learner's 5 lost lives
        assert data["reward"][steps].sum() == expected.returns[i]
        assert set(np.unique(data["reward"][steps])) <= {0.0, 1.0, 4.0, 7.0}  # raw bricks


def test_a_recurrent_policy_starts_afresh_after_each_lost_life(tmp_path):
    # Its learner's episodes are lives (`episodic_life`), so the GRU's state is reset at a
    # lost life in collect, evaluate and videos too, not only at the game's start.
    kwargs = {"episodic_life": True}
    policy = untrained("envpool:Breakout-v5", kwargs, hidden_sizes=(8,), recurrent="gru")
    key = jax.random.key(2)
    result = collect(policy, 1, tmp_path / "data", key, info_keys=["terminated"], max_steps=3000)
    data = load_episodes(tmp_path / "data")
    expected = pjp.evaluate(policy, num_episodes=1, key=key, max_steps=3000)
    np.testing.assert_array_equal(result.lengths, expected.lengths)
    np.testing.assert_array_equal(result.returns, expected.returns)
    lost = np.flatnonzero(data["info/terminated"][:-1]) + 1  # steps after a lost life
    assert len(lost) == 4  # 5 lives, the last one ends the game
    networks, params = policy.networks, policy.get_params()
    fresh = networks.initial_state(1)
    carried = 0
    for t in [*lost, *(lost - 1)]:
        obs = jax.tree.map(lambda x, t=t: x[t][None], data["obs"])
        _, _, value = networks.step(params, fresh, obs, np.ones((1,), bool))
        if t in lost:  # the state entering this step was reset: the value of a fresh state
            np.testing.assert_allclose(data["value"][t], value[0], rtol=1e-5, atol=1e-6)
        else:
            carried += not np.isclose(data["value"][t], value[0], rtol=1e-5, atol=1e-6)
    assert carried >= 3  # elsewhere the carried state changes the value


# ------------------------------------------------------------------------- resume
@pytest.fixture(scope="module")
def cartpole():
    return untrained("CartPole-v1", hidden_sizes=(8,))


def stop_after(chunks: int):
    asked = []

    def stop() -> bool:
        asked.append(1)
        return len(asked) == chunks

    return stop


ARGS = dict(parallel=4, chunk_steps=8, flush_steps=30)


def test_a_resumed_collect_writes_the_uninterrupted_dataset(cartpole, tmp_path, monkeypatch):
    key = jax.random.key(5)
    minari = dict(minari_id="test/cartpole-v0")
    whole = collect(cartpole, 10, tmp_path / "whole", key, **ARGS, **minari)
    out = tmp_path / "resumed"
    # Stopped after the first chunk of the second group of 4 (groups of chunks of 8 steps,
    # until their longest episode ends): the resume skips group 0 and replays group 1.
    first_group = -(-int(whole.lengths[:4].max()) // 8)
    stopped = collect(cartpole, 10, out, key, **ARGS, **minari, stop=stop_after(first_group + 1))
    assert not stopped.complete and 4 <= stopped.num_episodes < 10
    (out / ".episodes_00009.npz.tmp").write_bytes(b"half a chunk")  # a killed write
    # Other settings: refused, naming them, nothing changed.
    before = snapshot(out)
    with pytest.raises(ValueError, match=r"cannot resume .*: key, parallel differ"):
        collect(
            cartpole, 10, out, jax.random.key(6), **{**ARGS, "parallel": 5}, **minari, resume=True
        )
    other = untrained("CartPole-v1", hidden_sizes=(8,))
    other.set_params(jax.tree.map(lambda x: x + 1, other.get_params()))
    with pytest.raises(ValueError, match=r"cannot resume .*: params differ"):
        collect(other, 10, out, key, **ARGS, **minari, resume=True)
    assert snapshot(out) == before
    resumed = collect(cartpole, 10, out, key, **{**ARGS, "flush_steps": 1}, **minari, resume=True)
    assert resumed.complete and not (out / "collect.partial").exists()
    assert not (out / ".episodes_00009.npz.tmp").exists()
    np.testing.assert_array_equal(resumed.returns, whole.returns)
    a, b = load_episodes(tmp_path / "whole"), load_episodes(out)
    assert a.keys() == b.keys()
    for name in a:  # bitwise, in the same order
        np.testing.assert_array_equal(a[name], b[name], err_msg=name)
    import minari as minari_lib

    monkeypatch.setenv("MINARI_DATASETS_PATH", str(out / "minari"))
    dataset = minari_lib.load_dataset("test/cartpole-v0")
    assert dataset.total_episodes == 10 and dataset.total_steps == whole.num_steps
    by_id = {e.id: float(e.rewards.sum()) for e in dataset.iterate_episodes()}
    np.testing.assert_array_equal([by_id[i] for i in range(10)], whole.returns)
    with pytest.raises(ValueError, match="is complete .*nothing to resume"):
        collect(cartpole, 10, out, key, **ARGS, **minari, resume=True)
    with pytest.raises(ValueError, match="no partial collect dataset"):
        collect(cartpole, 10, tmp_path / "none", key, resume=True)


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    run = tmp_path_factory.mktemp("run") / "run"
    argv = ["train", "--num-envs", "4", "--num-steps", "16", "--hidden-sizes", "8"]
    argv += ["--no-progress", "--total-timesteps", "128", "--run-dir", str(run)]
    assert main(argv) == 0
    return run


def test_a_temperature_that_is_not_a_finite_number_is_refused(run_dir, tmp_path, capsys):
    out = tmp_path / "data"
    argv = ["collect", str(run_dir), "--episodes", "2", "--out", str(out)]
    with pytest.raises(SystemExit) as exit_info:
        main([*argv, "--temperature", "nan"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "collect: temperature=nan: must be a finite number >= 0" in err, err
    assert not out.exists()
    with pytest.raises(ValueError, match="temperature=inf: must be a finite number >= 0"):
        Policy.load(run_dir).act(np.zeros(4), jax.random.key(0), temperature=float("inf"))


def test_collect_max_steps_cuts_the_episodes_as_eval_max_steps_does(run_dir, tmp_path, capsys):
    out = tmp_path / "data"
    argv = ["collect", str(run_dir), "--episodes", "3", "--out", str(out), "--max-steps", "5"]
    assert main(argv) == 0
    data = load_episodes(out)
    np.testing.assert_array_equal(data["episode_length"], [5, 5, 5])  # CartPole lasts > 5
    assert data["truncated"].sum() == 3 and not data["terminated"].any()
    capsys.readouterr()
    assert main(["eval", str(run_dir), "--episodes", "3", "--max-steps", "5"]) == 0
    assert "mean 5.00" in capsys.readouterr().out  # the same cut episodes
    with pytest.raises(SystemExit) as exit_info:
        main([*argv[:-1], "0"])
    assert exit_info.value.code == 2
    assert "collect: --max-steps 0: must be an int >= 1" in capsys.readouterr().err


def test_sigterm_then_collect_resume_writes_the_uninterrupted_dataset(run_dir, tmp_path, capsys):
    out, whole = tmp_path / "data", tmp_path / "whole"
    argv = ["collect", str(run_dir), "--episodes", "3000", "--seed", "2"]
    log = tmp_path / "stderr.txt"
    with log.open("w") as stderr:
        proc = subprocess.Popen(
            [sys.executable, "-m", "purejaxppo.cli", *argv, "--out", str(out)],
            cwd=tmp_path,
            env=ENV,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
        )
        try:
            deadline = time.monotonic() + 120
            while not (out / "collect.partial").exists() and time.monotonic() < deadline:
                time.sleep(0.01)
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=120)
        finally:
            proc.kill()
    err = log.read_text()
    assert proc.returncode == 143 and "Traceback" not in err, err
    assert f"continue it with: purejaxppo collect --resume {out}" in err, err
    marker = json.loads((out / "collect.partial").read_text())
    assert marker["request"]["run_dir"] == str(run_dir) and marker["request"]["step"] == 2
    capsys.readouterr()
    with pytest.raises(SystemExit, match="2"):
        main(["collect", "--resume", str(out), "--episodes", "5"])
    assert "drop --episodes" in capsys.readouterr().err
    assert main(["collect", "--resume", str(out)]) == 0
    assert main([*argv, "--out", str(whole)]) == 0
    a, b = load_episodes(whole), load_episodes(out)
    for name in a:
        np.testing.assert_array_equal(a[name], b[name], err_msg=name)
    assert main(["collect", "--resume", str(out)]) == 0
    assert "nothing to resume" in capsys.readouterr().out


# ---------------------------------------------------------------------- JaxMARL
SPREAD = "jaxmarl:MPE_simple_spread_v3"


@pytest.fixture(scope="module")
def ippo_run(tmp_path_factory):
    """A tiny IPPO run on MPE simple_spread (3 agents): 2 updates, collecting 2 episodes
    after the second."""
    run = tmp_path_factory.mktemp("marl") / "run"
    argv = ["train", "--env-name", SPREAD, "--multi-agent", "ippo", "--num-envs", "2"]
    argv += ["--num-steps", "8", "--num-minibatches", "1", "--update-epochs", "1"]
    argv += ["--hidden-sizes", "8", "--total-timesteps", "32", "--no-progress"]
    argv += ["--collect-freq", "2", "--collect-episodes", "2"]  # during training too
    assert main([*argv, "--run-dir", str(run)]) == 0
    return run


def untrained_marl(multi_agent: str) -> pjp.Policy:
    config = pjp.PPOConfig(env_name=SPREAD, multi_agent=multi_agent, hidden_sizes=(8,))
    env, env_params = pjp.make_env(SPREAD)
    kind = kind_of(env)
    env = kind.configure(config, env)  # MAPPO: with the world state its critic reads
    networks = kind.networks(config, env, env_params)
    return pjp.Policy(networks.init(jax.random.key(1)), config, env, env_params, networks)


@pytest.mark.parametrize("multi_agent", ["ippo", "mappo"])
def test_marl_collect_stores_an_agent_axis_and_plays_evaluate_episodes(
    multi_agent, ippo_run, tmp_path
):
    policy = Policy.load(ippo_run) if multi_agent == "ippo" else untrained_marl("mappo")
    # MPE's episodes end after 26 steps (JaxMARL's `step >= max_steps` before its counter
    # moves on): the wrapper's episode limit is 26, so they end rather than being cut.
    key = jax.random.key(3)
    result = collect(policy, 4, tmp_path / "data", key)
    data = load_episodes(tmp_path / "data")
    expected = pjp.evaluate(policy, num_episodes=4, key=key)
    # The episodes evaluate plays with the same key: the same lengths, and team returns
    # equal up to float32 summation order (evaluate sums each agent over time, then the
    # agents; collect the agents per step, then the steps).
    np.testing.assert_array_equal(result.lengths, expected.lengths)
    np.testing.assert_allclose(result.returns, expected.returns, rtol=1e-5)
    np.testing.assert_array_equal(data["episode_return"], result.returns)
    s, a = int(result.lengths.sum()), 3  # S steps (4 episodes x 26), A agents
    assert s == 4 * 26
    obs = data["obs/obs"] if multi_agent == "mappo" else data["obs"]
    assert obs.shape == (s, a, 18) and data["action"].shape == (s, a)
    for name in ("agent_reward", "log_prob", "value"):
        assert data[name].shape == (s, a) and data[name].dtype == np.float32, name
    for name in ("reward", "terminated", "truncated", "episode_id"):
        assert data[name].shape == (s,), name
    final = data["final_obs/obs"] if multi_agent == "mappo" else data["final_obs"]
    assert final.shape == (4, a, 18)
    if multi_agent == "mappo":  # the critic's input: every agent's observation
        assert data["obs/world_state"].shape == (s, a, 54)
    # MPE: the team reward is the agents' sum; `reward` sums to the episode's return.
    np.testing.assert_allclose(data["reward"], data["agent_reward"].sum(-1), rtol=1e-6)
    for i in range(4):
        steps = data["episode_id"] == i
        assert data["reward"][steps].sum() == data["episode_return"][i]
        ends = data["terminated"][steps] | data["truncated"][steps]
        assert ends[-1] and ends.sum() == 1 and data["truncated"][steps][-1]  # a time limit
    assert np.all(data["log_prob"] <= 0) and np.all(np.isin(data["action"], range(5)))
    if multi_agent == "ippo":  # `collect_freq` during training: 2 whole 26-step episodes
        during = load_episodes(ippo_run / "datasets" / "update_000002")
        assert during["obs"].shape == (52, a, 18) and during["agent_reward"].shape == (52, a)


def test_a_resumed_marl_collect_writes_the_uninterrupted_dataset(tmp_path):
    policy, key = untrained_marl("ippo"), jax.random.key(7)
    args = dict(parallel=2, chunk_steps=8, flush_steps=30)
    collect(policy, 4, tmp_path / "whole", key, **args)
    out = tmp_path / "resumed"
    # Groups of 2 episodes of 26 steps: 4 chunks of 8 each. Stopped
    # after group 1's first chunk: the resume skips group 0 and replays group 1.
    stopped = collect(policy, 4, out, key, **args, stop=stop_after(5))
    assert not stopped.complete and stopped.num_episodes == 2
    resumed = collect(policy, 4, out, key, **{**args, "flush_steps": 1}, resume=True)
    assert resumed.complete
    a, b = load_episodes(tmp_path / "whole"), load_episodes(out)
    assert a.keys() == b.keys() and "agent_reward" in a
    for name in a:  # bitwise, in the same order
        np.testing.assert_array_equal(a[name], b[name], err_msg=name)


def test_marl_minari_is_refused_in_one_line_before_anything_is_written(ippo_run, tmp_path, capsys):
    policy = untrained_marl("ippo")
    with pytest.raises(ValueError) as err:
        collect(policy, 2, tmp_path / "data", minari_id="test/spread-v0")
    message = str(err.value)
    assert "\n" not in message
    assert SPREAD in message and "multi-agent JaxMARL env" in message  # the kind
    assert "Minari dataset" in message and "--minari-id" in message  # the operation
    assert ".npz chunks" in message  # the alternative
    assert not (tmp_path / "data").exists()
    argv = ["collect", str(ippo_run), "--episodes", "2", "--out", str(tmp_path / "cli")]
    with pytest.raises(SystemExit, match="2"):
        main([*argv, "--minari-id", "test/spread-v0"])
    err_lines = capsys.readouterr().err.strip().splitlines()
    assert len(err_lines) == 1 and "Minari dataset" in err_lines[0], err_lines
    assert not (tmp_path / "cli").exists()
