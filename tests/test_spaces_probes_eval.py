"""`Policy.from_spaces` / `SpacesEnv`, the probes as gymnasium envs, `evaluate`'s
`callback` and `swap_channels`, and `sample_transitions`."""

import gymnasium as gym
import jax
import numpy as np
import pytest

import purejaxppo as pjp
from purejaxppo.acting.evaluation import swapped_channels

SMALL = pjp.PPOConfig(env_name="Probe3-v0", hidden_sizes=(8,))


@pytest.mark.parametrize(
    ("action_space", "shape", "dtype"),
    [
        (gym.spaces.Discrete(3), (), np.int32),
        (gym.spaces.Box(-2.0, 2.0, (2,)), (2,), np.float32),
        (gym.spaces.MultiDiscrete([2, 3]), (2,), np.int32),
        (gym.spaces.MultiBinary(4), (4,), np.int32),
    ],
)
def test_from_spaces_acts_on_a_sample(action_space, shape, dtype):
    obs_space = gym.spaces.Box(-1.0, 1.0, (3,), np.float64)  # float64: read as float32
    policy = pjp.Policy.from_spaces(SMALL, obs_space, action_space, key=jax.random.key(1))
    obs = obs_space.sample().astype(np.float32)
    action = policy.act(obs, jax.random.key(0))
    assert action.shape == shape and action.dtype == dtype
    actions, state = policy.predict(np.stack([obs, obs, obs]))
    assert state is None and actions.shape == (3, *shape) and actions.dtype == dtype
    assert all(action_space.contains(a.astype(action_space.dtype)) for a in actions)


def test_from_spaces_key_sets_the_params_and_make_networks_takes_spaces_env():
    obs_space, action_space = gym.spaces.Box(-1.0, 1.0, (3,)), gym.spaces.Discrete(2)
    a = pjp.Policy.from_spaces(SMALL, obs_space, action_space, key=jax.random.key(1))
    b = pjp.Policy.from_spaces(SMALL, obs_space, action_space, key=jax.random.key(1))
    c = pjp.Policy.from_spaces(SMALL, obs_space, action_space, key=jax.random.key(2))
    leaves = [jax.tree.leaves(p.get_params()) for p in (a, b, c)]
    assert all(np.array_equal(x, y) for x, y in zip(leaves[0], leaves[1], strict=True))
    assert not all(np.array_equal(x, y) for x, y in zip(leaves[0], leaves[2], strict=True))
    networks = pjp.make_networks(SMALL, pjp.SpacesEnv(obs_space, action_space))
    assert networks.action_spec.num_actions == 2
    assert jax.tree.map(np.shape, networks.init(jax.random.key(1))) == jax.tree.map(
        np.shape, a.get_params()
    )


@pytest.mark.parametrize(
    ("obs_space", "action_space", "message"),
    [
        (gym.spaces.Text(5), gym.spaces.Discrete(2), "observation_space: Text spaces"),
        (4, gym.spaces.Discrete(2), "observation_space=4: not a gymnasium or gymnax space"),
        (gym.spaces.Box(-1, 1, (3,)), gym.spaces.Dict({"a": gym.spaces.Discrete(2)}), "Dict"),
    ],
)
def test_from_spaces_refuses_a_bad_space_with_one_error(obs_space, action_space, message):
    with pytest.raises(ValueError, match=message):
        pjp.Policy.from_spaces(SMALL, obs_space, action_space)


def test_probes_are_gymnasium_envs_with_their_rewards():
    import purejaxppo.envs.probes.gymnasium_probes as probes

    assert "purejaxppo/Probe7-v0" in probes.GYMNASIUM_IDS
    assert "purejaxppo/ProbeBattery-v0" in gym.registry
    env = gym.make("purejaxppo/Probe1-v0")  # constant obs 0, one step, reward +1
    obs, _ = env.reset(seed=0)
    assert obs.dtype == np.float32 and obs.tolist() == [0.0]
    assert env.step(0)[1:4] == (1.0, True, False)
    env = gym.make("purejaxppo/Probe2-v0")  # obs +-1, one step, reward = obs
    for seed in range(4):
        obs, _ = env.reset(seed=seed)
        _, reward, terminated, _, _ = env.step(0)
        assert reward == obs[0] and terminated
    env = gym.make("purejaxppo/Probe3-v0")  # obs 0 then 1; reward +1 at the second step
    obs, _ = env.reset(seed=0)
    first, second = env.step(0), env.step(0)
    assert obs[0] == 0.0 and first[0][0] == 1.0 and first[1:3] == (0.0, False)
    assert second[1:3] == (1.0, True)
    env = gym.make("purejaxppo/Probe4-v0")  # action 1: +1, action 0: -1
    env.reset(seed=0)
    assert env.step(1)[1] == 1.0
    env.reset(seed=0)
    assert env.step(0)[1] == -1.0


def test_probe_gymnasium_kwargs_seed_and_every_space():
    import purejaxppo.envs.probes.gymnasium_probes as probes

    env = gym.make("purejaxppo/Probe6-v0", max_steps_in_episode=2)  # the probe's env_kwargs
    env.reset(seed=1)
    env.step(0)
    assert env.step(0)[2:4] == (False, True)  # truncated at the time limit
    first = [gym.make("purejaxppo/Probe5-v0").reset(seed=s)[0][0] for s in range(6)]
    again = [gym.make("purejaxppo/Probe5-v0").reset(seed=s)[0][0] for s in range(6)]
    assert first == again and len(set(first)) == 2  # reproducible, both cues drawn
    for gym_id in probes.GYMNASIUM_IDS:
        env = gym.make(gym_id)
        obs, _ = env.reset(seed=0)
        assert env.observation_space.contains(obs), gym_id
        out = env.step(env.action_space.sample())
        assert env.observation_space.contains(out[0]) and isinstance(out[1], float), gym_id
    with pytest.raises(ValueError, match="max_steps"):
        gym.make("purejaxppo/Probe1-v0", max_step=3)


def test_make_env_gymnasium_probe_registers_it():
    env, _ = pjp.make_env("gymnasium:purejaxppo/Probe4-v0")
    assert env.action_space(None).n == 2


def _probe_policy(env_id="Probe3-v0"):
    config = SMALL.replace(env_name=env_id)
    networks = pjp.make_networks(config, *pjp.make_env(env_id))
    return pjp.Policy(networks.init(jax.random.key(0)), config)


def test_evaluate_callback_per_episode():
    seen = []
    result = pjp.evaluate(
        _probe_policy(), num_episodes=3, callback=lambda i, r, n: seen.append((i, r, n))
    )
    # Probe3: two steps, reward 1 at the second, whatever the actions.
    assert seen == [(0, 1.0, 2), (1, 1.0, 2), (2, 1.0, 2)]
    assert result.returns.tolist() == [1.0, 1.0, 1.0]
    with pytest.raises(TypeError, match="callback"):
        pjp.evaluate(_probe_policy(), num_episodes=1, callback=3)


def test_evaluate_from_spaces_policy_plays_the_config_env():
    policy = pjp.Policy.from_spaces(SMALL, gym.spaces.Box(0, 1, (1,)), gym.spaces.Discrete(1))
    assert pjp.evaluate(policy, num_episodes=2).lengths.tolist() == [2, 2]


def test_swapped_channels_transposes_before_the_policy():
    policy = _probe_policy()

    def step(params, state, obs, reset):
        return state, obs, None

    networks = policy.networks._replace(step=step)
    obs = np.arange(2 * 3 * 4 * 5).reshape(2, 3, 4, 5)  # [B, C=3, H=4, W=5]
    swapped, shape = swapped_channels(networks, (3, 4, 5), (4, 5, 3))
    assert shape == (4, 5, 3)
    np.testing.assert_array_equal(swapped.step(None, (), obs, None)[1], obs.transpose(0, 2, 3, 1))
    swapped, _ = swapped_channels(networks, (4, 5, 3), (3, 4, 5))  # HWC -> CHW
    hwc = obs.transpose(0, 2, 3, 1)
    np.testing.assert_array_equal(swapped.step(None, (), hwc, None)[1], obs)
    with pytest.raises(ValueError, match="image observations"):
        swapped_channels(networks, (1,), (1,))
    with pytest.raises(ValueError, match="transposed"):
        swapped_channels(networks, (3, 4, 5), (3, 4, 5))


def test_evaluate_swap_channels_on_minatar():
    env, _ = pjp.make_env("Breakout-MinAtar")  # [10, 10, 4] (HWC)
    chw = gym.spaces.Box(0.0, 1.0, (4, 10, 10))
    config = SMALL.replace(env_name="Breakout-MinAtar")
    policy = pjp.Policy.from_spaces(config, chw, gym.spaces.Discrete(3))
    with pytest.raises(ValueError, match="do not match"):
        pjp.evaluate(policy, num_episodes=2, max_steps=5)
    result = pjp.evaluate(policy, num_episodes=2, max_steps=5, swap_channels=True)
    assert result.lengths.tolist() == [5, 5]


def test_sample_transitions_prints_a_table(tmp_path, capsys):
    out = tmp_path / "data"
    pjp.collect(_probe_policy(), 3, out)
    sample = pjp.sample_transitions(out, 4, seed=1)
    printed = capsys.readouterr().out.splitlines()
    assert printed[0].split() == [
        "index",
        "episode_id",
        "obs",
        "action",
        "reward",
        "terminated",
        "truncated",
        "log_prob",
        "value",
    ]
    assert len(printed) == 5 and len(sample["index"]) == 4
    episodes = pjp.load_episodes(out)
    rows = sample["index"]
    assert len(set(rows.tolist())) == 4 and rows.max() < 6  # 3 episodes of 2 steps
    np.testing.assert_array_equal(sample["reward"], episodes["reward"][rows])
    assert sample["obs"].shape == (4, 1)
    whole = pjp.sample_transitions(episodes, 100, show=False)  # all 6, no print
    assert whole["index"].tolist() == list(range(6)) and capsys.readouterr().out == ""
    with pytest.raises(ValueError, match="n=0"):
        pjp.sample_transitions(out, 0)
    with pytest.raises(ValueError, match="no collect dataset"):
        pjp.sample_transitions(tmp_path, 2)
