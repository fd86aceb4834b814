"""AgileRL / duo_ai-style acting on `Policy`: `act` without a key, `get_action`,
`evaluate_actions`, `to_env_action` (feed-forward, continuous, recurrent; shape errors)."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import purejaxppo as pjp
from purejaxppo.policy import make_act

# One update of the default CartPole config (4 envs x 128 steps): a trained policy in
# seconds, as tests/test_policy.py's `test_evaluate_from_train_output_needs_config`.
CONFIG = pjp.PPOConfig(total_timesteps=512)
LOG_SQRT_2PI = 0.5 * math.log(2 * math.pi)  # 0.918939, -log N(mean; mean, 1)


@pytest.fixture(scope="module")
def policy():
    out = jax.jit(pjp.make_train(CONFIG))(jax.random.key(0))
    return pjp.Policy.from_train_output(out, CONFIG)


@pytest.fixture(scope="module")
def obs():
    return jax.random.normal(jax.random.key(1), (16, 4))


def untrained(config, key=0):
    env, env_params = pjp.make_env(config.env_name, config.env_kwargs)
    params = pjp.make_networks(config, env, env_params).init(jax.random.key(key))
    return pjp.Policy(params, config)


def test_act_without_key_is_greedy_and_with_key_unchanged(policy, obs):
    greedy = policy.act(obs)
    np.testing.assert_array_equal(greedy, policy.act(obs))  # deterministic
    _, out = policy.act(obs, jax.random.key(2), 0.0, return_model_output=True)
    np.testing.assert_array_equal(greedy, jnp.argmax(out["logits"], -1))
    assert greedy.dtype == jnp.int32 and int(policy.act(obs[5])) == int(greedy[5])
    # With a key: temperature 1 by default, the same samples as before (make_act, T = 1).
    key = jax.random.key(3)
    before = make_act(policy.networks)(
        policy.get_params(), (), obs, jnp.zeros((16,), bool), key, jnp.float32(1.0)
    )[1]
    np.testing.assert_array_equal(policy.act(obs, key), before)
    with pytest.raises(ValueError, match="needs a key"):
        policy.act(obs, temperature=0.5)
    with pytest.raises(ValueError, match=">= 0"):
        policy.act(obs, temperature=-1.0)


def test_get_action_log_prob_is_of_its_action(policy, obs):
    params = policy.get_params()
    dist, value = policy.networks.apply(params, obs)
    log_probs = jax.nn.log_softmax(dist.logits)  # [16, 2]
    key = jax.random.key(4)
    out = policy.get_action(obs, key)
    assert isinstance(out, pjp.ActionOutput)
    assert out.action.shape == (16,) and out.action.dtype == jnp.int32
    # The rollout's sample for this key (`dist.sample_and_log_prob`, rollout.py).
    np.testing.assert_array_equal(out.action, dist.sample(seed=key))
    np.testing.assert_allclose(out.log_prob, log_probs[jnp.arange(16), out.action], rtol=1e-6)
    # entropy = -sum_a p(a) log p(a)
    entropy = -jnp.sum(jnp.exp(log_probs) * log_probs, -1)
    np.testing.assert_allclose(out.entropy, entropy, rtol=1e-5)
    np.testing.assert_allclose(out.value, value, rtol=1e-6)
    greedy = policy.get_action(obs)
    np.testing.assert_array_equal(greedy.action, policy.act(obs))
    np.testing.assert_allclose(greedy.log_prob, jnp.max(log_probs, -1), rtol=1e-6)
    one = policy.get_action(obs[2])
    assert one.action.shape == () and one.log_prob.shape == ()
    np.testing.assert_allclose(one.log_prob, greedy.log_prob[2], rtol=1e-6)


def test_evaluate_actions_reproduces_get_action(policy, obs):
    out = policy.get_action(obs, jax.random.key(5))
    evaluation = policy.evaluate_actions(obs, out.action)
    assert isinstance(evaluation, pjp.ActionEvaluation)
    for name in ("log_prob", "entropy", "value"):
        np.testing.assert_allclose(getattr(evaluation, name), getattr(out, name), rtol=1e-6)
    # The other action of CartPole: log(1 - p(action)).
    other = policy.evaluate_actions(obs, 1 - out.action)
    np.testing.assert_allclose(
        jnp.exp(other.log_prob) + jnp.exp(evaluation.log_prob), 1.0, rtol=1e-5
    )
    one = policy.evaluate_actions(obs[7], out.action[7])
    np.testing.assert_allclose(one.log_prob, out.log_prob[7], rtol=1e-6)

    # Differentiable in params: the gradient of the mean log-prob equals the one of the
    # networks' own distribution.
    def mean_log_prob(params):
        return policy.evaluate_actions(obs, out.action, params=params).log_prob.mean()

    def reference(params):
        return policy.networks.apply(params, obs)[0].log_prob(out.action).mean()

    grads = jax.grad(mean_log_prob)(policy.get_params())
    want = jax.grad(reference)(policy.get_params())
    jax.tree.map(lambda g, w: np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-7), grads, want)
    norm = math.sqrt(sum(float(jnp.sum(g**2)) for g in jax.tree.leaves(grads)))
    assert norm > 1e-3


def test_get_action_with_params_acts_with_them_also_under_jit(policy, obs):
    # Another policy's params give that policy's numbers; under jax.jit they are an
    # argument, not constants baked into the trace (docs/guides/acting.md's loop).
    other = untrained(CONFIG, key=7)
    key = jax.random.key(8)
    act = jax.jit(lambda params, obs, key: policy.get_action(obs, key, params=params))
    for source in (other, policy):  # one compiled program, two sets of params
        want = source.get_action(obs, key)
        got = act(source.get_params(), obs, key)
        np.testing.assert_array_equal(got.action, want.action)
        for name in ("log_prob", "entropy", "value"):
            np.testing.assert_allclose(getattr(got, name), getattr(want, name), rtol=1e-6)
    assert act._cache_size() == 1
    greedy = policy.get_action(obs, params=other.get_params())
    np.testing.assert_array_equal(greedy.action, other.act(obs))
    # The policy's own params are untouched: without params= it still acts as itself.
    assert not np.array_equal(policy.get_action(obs).value, greedy.value)
    np.testing.assert_array_equal(policy.get_action(obs).action, policy.act(obs))


def test_action_mask(policy, obs):
    mask = jnp.zeros((16, 2), bool).at[:, 1].set(True)  # only action 1 is valid
    out = policy.get_action(obs, jax.random.key(6), action_mask=mask)
    np.testing.assert_array_equal(out.action, 1)
    np.testing.assert_allclose(out.log_prob, 0.0, atol=1e-6)  # log 1: the only choice
    np.testing.assert_allclose(out.entropy, 0.0, atol=1e-6)
    np.testing.assert_array_equal(policy.get_action(obs, action_mask=mask).action, 1)
    masked = policy.evaluate_actions(obs, out.action, mask)
    np.testing.assert_allclose(masked.log_prob, 0.0, atol=1e-6)
    free = policy.evaluate_actions(obs, out.action)
    assert np.all(free.log_prob < -0.01)  # unmasked: p(1) < 1


def test_continuous_action_is_unclipped_and_its_log_prob_golden():
    config = pjp.PPOConfig(env_name="Pendulum-v1", hidden_sizes=(8,))
    policy = untrained(config)
    params = policy.get_params()
    params["params"]["actor_head"]["out"]["bias"] = jnp.array([5.0])  # mean ~5 > bound 2
    params["params"]["actor_head"]["out"]["kernel"] = jnp.zeros_like(
        params["params"]["actor_head"]["out"]["kernel"]
    )
    policy.set_params(params)
    obs = jax.random.normal(jax.random.key(0), (3, 3))
    greedy = policy.get_action(obs)
    assert greedy.action.shape == (3, 1) and greedy.action.dtype == jnp.float32
    np.testing.assert_allclose(greedy.action, 5.0)  # the mean, unclipped
    # log N(5; 5, exp(log_std_init = 0) = 1) = -0.5 log(2 pi) = -0.918939
    np.testing.assert_allclose(greedy.log_prob, -LOG_SQRT_2PI, rtol=1e-6)
    # Gaussian entropy 0.5 log(2 pi e) = 1.418939
    np.testing.assert_allclose(greedy.entropy, LOG_SQRT_2PI + 0.5, rtol=1e-6)
    np.testing.assert_allclose(policy.to_env_action(greedy.action), 2.0)  # the env's bound
    np.testing.assert_allclose(policy.act(obs), 2.0)
    sampled = policy.get_action(obs, jax.random.key(1))
    # log N(a; 5, 1) = -(a - 5)^2 / 2 - 0.5 log(2 pi)
    want = -0.5 * (sampled.action[:, 0] - 5.0) ** 2 - LOG_SQRT_2PI
    np.testing.assert_allclose(sampled.log_prob, want, rtol=1e-5)
    assert np.all(np.abs(sampled.action) > 2.0)  # 5 +- 1: every sample is out of bounds
    evaluation = policy.evaluate_actions(obs, sampled.action)
    np.testing.assert_allclose(evaluation.log_prob, sampled.log_prob, rtol=1e-6)
    # The clipped env action has another log-prob: log N(2; 5, 1) = -4.5 - 0.918939.
    clipped = policy.evaluate_actions(obs, policy.to_env_action(sampled.action))
    np.testing.assert_allclose(clipped.log_prob, -4.5 - LOG_SQRT_2PI, rtol=1e-6)


def test_squashed_actions_round_trip():
    config = pjp.PPOConfig(env_name="Pendulum-v1", hidden_sizes=(8,), squash_actions=True)
    policy = untrained(config)
    obs = jax.random.normal(jax.random.key(0), (5, 3))
    dist, _ = policy.networks.apply(policy.get_params(), obs)
    greedy = policy.get_action(obs)
    # The squashed mean: 2 tanh(loc) (bounds [-2, 2]), within the bounds.
    np.testing.assert_allclose(greedy.action, 2.0 * jnp.tanh(dist.loc), rtol=1e-6)
    np.testing.assert_allclose(policy.to_env_action(greedy.action), greedy.action)
    sampled = policy.get_action(obs, jax.random.key(2))
    evaluation = policy.evaluate_actions(obs, sampled.action)
    np.testing.assert_allclose(evaluation.log_prob, sampled.log_prob, rtol=1e-5)
    np.testing.assert_allclose(evaluation.entropy, dist.entropy(), rtol=1e-6)


@pytest.mark.parametrize(
    ("env_name", "shape"), [("ProbeMultiDiscrete-v0", (3,)), ("ProbeMultiBinary-v0", (4,))]
)
def test_multi_discrete_and_multi_binary_round_trip(env_name, shape):
    policy = untrained(pjp.PPOConfig(env_name=env_name, hidden_sizes=(8,)))
    obs = jax.random.normal(jax.random.key(0), (6, *policy.obs_shape))
    out = policy.get_action(obs, jax.random.key(1))
    assert out.action.shape == (6, *shape) and out.action.dtype == jnp.int32
    dist, _ = policy.networks.apply(policy.get_params(), obs)
    np.testing.assert_allclose(out.log_prob, dist.log_prob(out.action), rtol=1e-6)
    evaluation = policy.evaluate_actions(obs, out.action)
    np.testing.assert_allclose(evaluation.log_prob, out.log_prob, rtol=1e-6)
    np.testing.assert_array_equal(policy.get_action(obs).action, policy.act(obs))


def test_multi_discrete_mask_is_flat_per_component():
    policy = untrained(pjp.PPOConfig(env_name="ProbeMultiDiscrete-v0", hidden_sizes=(8,)))
    obs = jax.random.normal(jax.random.key(0), (2, 1))
    # nvec (3, 2, 4): flat flags [3 | 2 | 4]; leave value 2, 0 and 3 of the components.
    mask = jnp.zeros((2, 9), bool).at[:, jnp.array([2, 3, 8])].set(True)
    out = policy.get_action(obs, jax.random.key(1), action_mask=mask)
    np.testing.assert_array_equal(out.action, [[2, 0, 3], [2, 0, 3]])
    np.testing.assert_allclose(out.log_prob, 0.0, atol=1e-6)  # each component certain
    two = mask.at[:, 4].set(True)  # component 1 may also be 1
    evaluation = policy.evaluate_actions(obs, jnp.array([[2, 1, 3], [2, 0, 3]]), two)
    dist, _ = policy.networks.apply(policy.get_params(), obs)
    p1 = jax.nn.softmax(dist.distribution.logits[:, 1, :2], -1)  # [2, 2] component 1
    np.testing.assert_allclose(
        evaluation.log_prob, jnp.log(p1[jnp.arange(2), jnp.array([1, 0])]), rtol=1e-5
    )


def test_recurrent_state_is_used_advanced_and_kept():
    config = pjp.PPOConfig(recurrent="gru", recurrent_size=8, hidden_sizes=(16,))
    policy = untrained(config)
    networks, params = policy.networks, policy.get_params()
    obs = jax.random.normal(jax.random.key(0), (3, 4))
    no_reset = jnp.zeros((3,), bool)
    state0 = networks.initial_state(3)
    state1, dist1, value1 = networks.step(params, state0, obs, no_reset)
    state2, dist2, value2 = networks.step(params, state1, obs, no_reset)

    first = policy.get_action(obs, jax.random.key(1))
    np.testing.assert_allclose(policy.state, state1, rtol=1e-6)  # advanced
    np.testing.assert_allclose(first.value, value1, rtol=1e-6)
    np.testing.assert_allclose(first.log_prob, dist1.log_prob(first.action), rtol=1e-6)
    # evaluate_actions re-evaluates the last step (from the state it began at) and keeps
    # the policy's state.
    evaluation = policy.evaluate_actions(obs, first.action)
    np.testing.assert_allclose(evaluation.log_prob, first.log_prob, rtol=1e-6)
    np.testing.assert_allclose(evaluation.value, first.value, rtol=1e-6)
    np.testing.assert_allclose(policy.state, state1, rtol=1e-6)

    second = policy.get_action(obs, jax.random.key(2))
    np.testing.assert_allclose(second.value, value2, rtol=1e-5)
    assert not np.allclose(second.value, first.value)  # the state made a difference
    np.testing.assert_allclose(policy.state, state2, rtol=1e-5)
    # A stored state: evaluate the first step again from state0.
    again = policy.evaluate_actions(obs, first.action, state=state0)
    np.testing.assert_allclose(again.log_prob, first.log_prob, rtol=1e-6)
    with pytest.raises(ValueError, match=r"state: expected .*\(3, 8\)"):
        policy.evaluate_actions(obs, first.action, state=jnp.zeros((3, 5)))

    # act without a key steps the same way and takes get_action's greedy action.
    policy.reset()
    greedy = policy.get_action(obs)
    policy.reset()
    np.testing.assert_array_equal(policy.act(obs), greedy.action)
    np.testing.assert_allclose(policy.state, state1, rtol=1e-6)
    policy.reset(jnp.array([True, False, False]))
    np.testing.assert_allclose(policy.state[0], 0.0)  # restarted env 0 only
    np.testing.assert_allclose(policy.state[1:], state1[1:], rtol=1e-6)


def test_wrong_shapes_raise_naming_the_expected_shape(policy, obs):
    with pytest.raises(ValueError, match=r"obs shape \(3, 5\): expected \(4,\)"):
        policy.get_action(jnp.zeros((3, 5)))
    with pytest.raises(ValueError, match=r"obs shape \(3, 5\): expected \(4,\)"):
        policy.evaluate_actions(jnp.zeros((3, 5)), jnp.zeros((3,), jnp.int32))
    with pytest.raises(ValueError, match=r"actions: expected shape \(16,\).*got \(16, 2\)"):
        policy.evaluate_actions(obs, jnp.zeros((16, 2), jnp.int32))
    with pytest.raises(ValueError, match=r"actions: expected shape \(16,\).*got \(8,\)"):
        policy.evaluate_actions(obs, jnp.zeros((8,), jnp.int32))
    with pytest.raises(ValueError, match=r"action_mask: expected shape \(16, 2\).*got \(16, 3\)"):
        policy.get_action(obs, action_mask=jnp.ones((16, 3), bool))
    with pytest.raises(ValueError, match=r"action: expected shape \(\) or \[B, \*\(\)\]"):
        policy.to_env_action(jnp.zeros((2, 2), jnp.int32))
    pendulum = untrained(pjp.PPOConfig(env_name="Pendulum-v1", hidden_sizes=(8,)))
    with pytest.raises(ValueError, match="only Discrete and MultiDiscrete"):
        pendulum.get_action(jnp.zeros((2, 3)), action_mask=jnp.ones((2, 1), bool))
    with pytest.raises(ValueError, match=r"actions: expected shape \(2, 1\).*got \(2, 2\)"):
        pendulum.evaluate_actions(jnp.zeros((2, 3)), jnp.zeros((2, 2)))


# --------------------------------------------------------------------- predict (SB3)
def test_predict_steps_a_gymnasium_env(policy, obs):
    import gymnasium as gym

    env = gym.make("CartPole-v1")
    observation, _ = env.reset(seed=0)
    action, state = policy.predict(observation)
    # one observation -> one action: a 0-d numpy array of the space's dtype (int32),
    # which gymnasium's Discrete accepts (a JAX scalar it refuses)
    assert isinstance(action, np.ndarray) and action.shape == () and action.dtype == np.int32
    assert state is None  # feed-forward, as SB3's
    assert env.action_space.contains(action)
    assert int(action) == int(policy.act(observation))  # deterministic: act's greedy action
    steps, done = 0, False
    while not done:  # SB3's loop: env.step(policy.predict(obs)[0])
        observation, _, terminated, truncated, _ = env.step(policy.predict(observation)[0])
        steps, done = steps + 1, terminated or truncated
    assert steps >= 8  # CartPole lasts at least 8 steps whatever the actions

    # a batch: [B] actions for a gymnasium vector env, greedy as act's; sampled with a key
    # as act's samples with that key
    actions, _ = policy.predict(np.asarray(obs))
    assert isinstance(actions, np.ndarray) and actions.shape == (16,)
    np.testing.assert_array_equal(actions, policy.act(obs))
    key = jax.random.key(5)
    sampled, _ = policy.predict(obs, deterministic=False, key=key)
    np.testing.assert_array_equal(sampled, policy.act(obs, key))
    envs = gym.vector.SyncVectorEnv([lambda: gym.make("CartPole-v1")] * 2)
    observations, _ = envs.reset(seed=0)
    actions, _ = policy.predict(observations)
    assert actions.shape == (2,) and envs.action_space.contains(actions)
    envs.step(actions)
    # without a key, sampling draws from the policy's own key stream: a new draw per call
    draws = {tuple(policy.predict(obs, deterministic=False)[0]) for _ in range(3)}
    assert len(draws) > 1


def test_predict_box_actions_in_the_env_shape_and_dtype():
    import gymnasium as gym

    policy = untrained(pjp.PPOConfig(env_name="Pendulum-v1", hidden_sizes=(8,)))
    env = gym.make("Pendulum-v1")
    observation, _ = env.reset(seed=0)
    action, state = policy.predict(observation)
    assert action.shape == (1,) and action.dtype == np.float32 and state is None
    assert env.action_space.contains(action)  # within [-2, 2]
    env.step(action)
    actions, _ = policy.predict(np.stack([observation] * 3), deterministic=False)
    assert actions.shape == (3, 1) and np.all(np.abs(actions) <= 2.0)


def test_predict_passes_the_recurrent_state_through():
    config = pjp.PPOConfig(recurrent="gru", recurrent_size=8, hidden_sizes=(16,))
    policy = untrained(config)
    networks, params = policy.networks, policy.get_params()
    obs = np.asarray(jax.random.normal(jax.random.key(0), (3, 4)))
    no_reset = jnp.zeros((3,), bool)
    state1, dist1, _ = networks.step(params, networks.initial_state(3), obs, no_reset)
    state2, dist2, _ = networks.step(params, state1, obs, no_reset)

    actions, state = policy.predict(obs)  # state None: the initial state
    np.testing.assert_allclose(state, state1, rtol=1e-6)
    np.testing.assert_array_equal(actions, np.argmax(dist1.logits, -1))
    actions, state = policy.predict(obs, state)
    np.testing.assert_allclose(state, state2, rtol=1e-5)
    np.testing.assert_array_equal(actions, np.argmax(dist2.logits, -1))
    assert policy.state is None  # act / get_action's kept state is not touched
    # episode_start restarts the rows where True (SB3's name)
    _, restarted = policy.predict(obs, state1, episode_start=np.array([True, False, False]))
    np.testing.assert_allclose(restarted[0], state1[0], rtol=1e-6)
    np.testing.assert_allclose(restarted[1:], state2[1:], rtol=1e-5)
    with pytest.raises(ValueError, match=r"^state: expected the policy state of 3 envs"):
        policy.predict(obs, np.zeros((2, 8), np.float32))
    with pytest.raises(ValueError, match=r"^episode_start: expected 3 flags"):
        policy.predict(obs, state1, episode_start=np.ones(2, bool))


def test_predict_refuses_traced_inputs_and_a_state_of_a_feed_forward_policy(policy, obs):
    with pytest.raises(TypeError, match=r"^Policy.predict returns numpy arrays"):
        jax.jit(lambda o: policy.predict(o)[0])(obs)
    with pytest.raises(ValueError, match=r"^state: a feed-forward policy has no state"):
        policy.predict(obs, jnp.zeros((16, 4)))
    np.testing.assert_array_equal(policy.predict(obs, ())[0], policy.act(obs))
