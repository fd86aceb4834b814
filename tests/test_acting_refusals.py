"""The acting API refuses what it cannot evaluate (concrete inputs; traced ones pass
unchecked): action masks with a row that allows nothing, actions outside the action space,
non-finite observations, mis-shaped rollouts for trajectory windows, and a recurrent
policy stepped inside `jax.jit`."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import purejaxppo as pjp
from purejaxppo.actions import make_get_action
from purejaxppo.types import Transition


def untrained(key=0, **fields):
    config = pjp.PPOConfig(hidden_sizes=(8,), **fields)
    env, env_params = pjp.make_env(config.env_name, config.env_kwargs)
    params = pjp.make_networks(config, env, env_params).init(jax.random.key(key))
    return pjp.Policy(params, config)


@pytest.fixture(scope="module")
def cartpole():
    return untrained()


@pytest.fixture(scope="module")
def multi_discrete():
    return untrained(env_name="ProbeMultiDiscrete-v0")  # nvec (3, 2, 4), obs [1]


OBS = np.asarray(jax.random.normal(jax.random.key(1), (4, 4)))


# --------------------------------------------------------------------- 1. action masks
def test_mask_row_without_an_allowed_action_is_refused(cartpole):
    mask = np.array([[1, 0], [0, 0], [1, 1], [0, 0]])
    with pytest.raises(ValueError, match=r"action_mask rows \[1, 3\] \(2 of 4\) allow no action"):
        cartpole.get_action(OBS, jax.random.key(0), action_mask=mask)
    with pytest.raises(ValueError, match=r"action_mask rows \[1, 3\]"):
        cartpole.evaluate_actions(OBS, np.zeros(4, np.int32), mask)
    with pytest.raises(ValueError, match=r"action_mask allows no action.*Discrete\(2\)"):
        cartpole.get_action(OBS[0], action_mask=np.zeros(2, bool))
    # With an allowed action in every row: rows of one choice take it, with log 1 = 0.
    mask = np.array([[1, 0], [0, 1], [1, 1], [0, 1]])
    out = cartpole.get_action(OBS, jax.random.key(0), action_mask=mask)
    np.testing.assert_array_equal(np.asarray(out.action)[[0, 1, 3]], [0, 1, 1])
    np.testing.assert_allclose(np.asarray(out.log_prob)[[0, 1, 3]], 0.0, atol=1e-6)


def test_multi_discrete_mask_needs_a_value_per_component(multi_discrete):
    obs = np.zeros((2, 1), np.float32)
    mask = np.ones((2, 9), bool)
    mask[1, 3:5] = False  # row 1: no value of component 1 (flat entries 3, 4)
    with pytest.raises(
        ValueError, match=r"action_mask rows \[1\] \(1 of 2\) allow no value of components \[1\]"
    ):
        multi_discrete.get_action(obs, jax.random.key(0), action_mask=mask)
    with pytest.raises(ValueError, match=r"allows no value of components \[0, 1\]"):
        multi_discrete.get_action(obs[0], action_mask=np.r_[np.zeros(5), np.ones(4)])


def test_traced_mask_is_not_checked(cartpole):
    # Inside jax.jit the mask is a tracer: no host check (and no error), the call runs.
    step = jax.jit(lambda mask: cartpole.get_action(OBS, action_mask=mask).action)
    assert step(np.zeros((4, 2), bool)).shape == (4,)


# --------------------------------------------------------------------- 2. actions
@pytest.mark.parametrize(
    ("actions", "match"),
    [
        (
            [0, 2, 1, 0],
            r"actions\[1\] = 2: outside \[0, 2\) \(Discrete\(2\): integers in \[0, 2\)\)",
        ),
        ([0, 1, -1, 0], r"actions\[2\] = -1: outside \[0, 2\)"),
        ([0.0, 1.0, 0.5, 0.0], r"actions\[2\] = 0.5: not an integer \(Discrete\(2\)"),
        ([0.0, np.nan, 1.0, 0.0], r"actions\[1\] = nan: must be finite \(Discrete\(2\)"),
    ],
)
def test_discrete_actions_outside_the_space_are_refused(cartpole, actions, match):
    with pytest.raises(ValueError, match=match):
        cartpole.evaluate_actions(OBS, np.array(actions))


def test_discrete_to_env_action_and_integral_floats(cartpole):
    with pytest.raises(ValueError, match=r"action\[3\] = 7: outside \[0, 2\)"):
        cartpole.to_env_action(np.array([0, 1, 1, 7]))
    with pytest.raises(ValueError, match=r"^action = inf: must be finite"):
        cartpole.to_env_action(np.float32(np.inf))
    # Integral floats are the same actions as the ints.
    ints = cartpole.evaluate_actions(OBS, np.array([0, 1, 1, 0]))
    floats = cartpole.evaluate_actions(OBS, np.array([0.0, 1.0, 1.0, 0.0]))
    np.testing.assert_array_equal(floats.log_prob, ints.log_prob)
    np.testing.assert_array_equal(cartpole.to_env_action(np.array([1.0, 0.0])), [1, 0])


def test_multi_discrete_and_multi_binary_actions_per_component(multi_discrete):
    obs = np.zeros((2, 1), np.float32)
    with pytest.raises(
        ValueError,
        match=r"actions\[1, 1\] = 2: outside \[0, 2\) \(MultiDiscrete\(nvec=\(3, 2, 4\)\)",
    ):
        multi_discrete.evaluate_actions(obs, np.array([[2, 1, 3], [0, 2, 0]]))
    with pytest.raises(ValueError, match=r"action\[2\] = 4: outside \[0, 4\)"):
        multi_discrete.to_env_action(np.array([0, 1, 4]))
    binary = untrained(env_name="ProbeMultiBinary-v0")
    obs = np.zeros((1, *binary.obs_shape), np.float32)
    with pytest.raises(ValueError, match=r"actions\[0, 3\] = 2: outside \[0, 2\) \(MultiBinary"):
        binary.evaluate_actions(obs, np.array([[0, 1, 1, 2]]))


def test_box_actions_finite_and_squashed_within_the_bounds():
    pendulum = untrained(env_name="Pendulum-v1")  # Box(1,), bounds [-2, 2]
    obs = np.zeros((2, 3), np.float32)
    with pytest.raises(
        ValueError,
        match=r"actions\[1, 0\] = nan: must be finite \(Box\(shape \(1,\), low=-2.0, high=2.0\)\)",
    ):
        pendulum.evaluate_actions(obs, np.array([[0.0], [np.nan]], np.float32))
    with pytest.raises(ValueError, match=r"action\[0, 0\] = -inf: must be finite"):
        pendulum.to_env_action(np.array([[-np.inf], [0.0]], np.float32))
    # Out of the bounds is legal for the unbounded Gaussian: log N(5; mean, std) as usual.
    dist, _ = pendulum.networks.apply(pendulum.get_params(), obs)
    far = np.array([[5.0], [-7.0]], np.float32)
    np.testing.assert_allclose(
        pendulum.evaluate_actions(obs, far).log_prob, dist.log_prob(far), rtol=1e-6
    )
    np.testing.assert_array_equal(pendulum.to_env_action(far), [[2.0], [-2.0]])
    # Squashed: the policy gives nothing outside [-2, 2] a density; the bounds themselves are fine.
    squashed = untrained(env_name="Pendulum-v1", squash_actions=True)
    with pytest.raises(
        ValueError, match=r"actions\[1, 0\] = 2.5: outside the bounds \[low, high\]"
    ):
        squashed.evaluate_actions(obs, np.array([[0.0], [2.5]], np.float32))
    edge = squashed.evaluate_actions(obs, np.array([[2.0], [-2.0]], np.float32))
    assert np.all(np.isfinite(edge.log_prob))


def test_traced_actions_are_not_checked(cartpole):
    # Under jax.grad the params are traced, the actions concrete: the actions are checked.
    # Under jax.jit the actions are traced: not looked at (as documented), the call runs.
    with pytest.raises(ValueError, match=r"actions\[0\] = 3"):
        jax.grad(
            lambda p: cartpole.evaluate_actions(
                OBS, np.array([3, 0, 0, 0]), params=p
            ).log_prob.sum()
        )(cartpole.get_params())
    run = jax.jit(lambda a: cartpole.evaluate_actions(OBS, a).log_prob)
    assert run(np.array([3, 0, 0, 0])).shape == (4,)


# --------------------------------------------------------------------- 3. observations
def test_non_finite_observations_are_refused(cartpole):
    bad = OBS.copy()
    bad[2, 1] = np.nan
    with pytest.raises(
        ValueError,
        match=r"obs\[2, 1\] = nan: must be finite; obs \(shape \(4, 4\)\) holds 1 NaN / inf",
    ):
        cartpole.get_action(bad, jax.random.key(0))
    bad[0, 3] = -np.inf
    with pytest.raises(ValueError, match=r"obs\[0, 3\] = -inf: must be finite.*holds 2 NaN"):
        cartpole.evaluate_actions(jnp.asarray(bad), np.zeros(4, np.int32))
    with pytest.raises(ValueError, match=r"obs\[1, 1\] = nan"):  # bad[2, 1], a row on
        cartpole.act(bad[1:])
    with pytest.raises(ValueError, match=r"obs\[3\] = inf"):
        cartpole.get_action(np.array([0.0, 0.0, 0.0, np.inf], np.float32))
    # Traced observations are not looked at.
    out = jax.jit(lambda obs: cartpole.get_action(obs).value)(bad)
    assert out.shape == (4,)


# --------------------------------------------------------------------- 4. windows
T, N = 6, 2


def rollout(**changes):
    t, n = np.meshgrid(np.arange(T), np.arange(N), indexing="ij")
    code = (10 * t + n).astype(np.float32)  # [T, N]
    fields = dict(
        obs=code[..., None],
        action=code.astype(np.int32),
        log_prob=code,
        value=code,
        reward=code,
        terminated=np.zeros((T, N), bool),
        truncated=np.zeros((T, N), bool),
        final_obs=code[..., None],
        policy_state=np.stack([code, -code], axis=-1),
        reset=np.zeros((T, N), bool),
    )
    return Transition(**{**fields, **changes}), code


@pytest.mark.parametrize(
    ("field", "make", "match"),
    [
        (
            "advantages",
            lambda c: c.T,
            r"advantages has shape \(2, 6\): expected \[T, N\] = \(6, 2\)",
        ),
        ("returns", lambda c: c[:, 0], r"returns has shape \(6,\): expected \[T, N\] = \(6, 2\)"),
        (
            "obs",
            lambda c: c.T[..., None],
            r"traj.obs has shape \(2, 6, 1\): expected leading axes \[T, N\] = \(6, 2\)",
        ),
        ("log_prob", lambda c: c[:4], r"traj.log_prob has shape \(4, 2\): expected \[T, N\]"),
        ("action", lambda c: c.T.astype(np.int32), r"traj.action has shape \(2, 6\)"),
        ("policy_state", lambda c: np.zeros((N, T, 2)), r"traj.policy_state has shape \(2, 6, 2\)"),
    ],
)
def test_windows_refuse_mis_shaped_rollouts(field, make, match):
    traj, code = rollout()
    advantages, returns = code, code
    if field == "advantages":
        advantages = make(code)
    elif field == "returns":
        returns = make(code)
    else:
        traj = traj._replace(**{field: make(code)})
    with pytest.raises(ValueError, match=match):
        pjp.trajectory_minibatches(
            jax.random.key(0), traj, advantages, returns, timesteps=3, num_windows=4
        )
    # Shapes are static: the same refusal under jax.jit.
    with pytest.raises(ValueError, match=match):
        jax.jit(
            lambda key: pjp.trajectory_minibatches(
                key, traj, advantages, returns, timesteps=3, num_windows=4
            )
        )(jax.random.key(0))


def test_windows_dict_obs_leaf_is_named():
    traj, code = rollout()
    traj = traj._replace(obs={"a": code[..., None], "b": code.T[..., None]})
    with pytest.raises(ValueError, match=r"traj.obs\['b'\] has shape \(2, 6, 1\)"):
        pjp.trajectory_minibatches(jax.random.key(0), traj, code, code, timesteps=3, num_windows=4)


# --------------------------------------------------------------------- 5. recurrent + jit
def test_recurrent_policy_refuses_the_first_traced_call_and_stays_usable():
    policy = untrained(recurrent="gru", recurrent_size=4)
    obs = np.asarray(jax.random.normal(jax.random.key(2), (3, 4)))
    key = jax.random.key(3)
    for _ in range(2):  # the first traced call is refused, and again the next time
        with pytest.raises(
            ValueError, match=r"Policy.get_action: a recurrent policy .*make_get_action"
        ):
            jax.jit(lambda o: policy.get_action(o, key).action)(obs)
    with pytest.raises(ValueError, match=r"Policy.act: a recurrent policy"):
        jax.jit(lambda o: policy.act(o))(obs)
    assert policy.state is None  # nothing traced was kept
    first = policy.get_action(obs, key)  # concrete calls still work, as ever
    second = policy.get_action(obs, key)
    with pytest.raises(ValueError, match=r"Policy.reset: a recurrent policy"):
        jax.jit(lambda done: policy.reset(done))(np.ones(3, bool))
    assert not isinstance(policy.state, jax.core.Tracer)

    # The way the message names: the pure step, with the state passed and returned,
    # reproduces the policy's two steps under jax.jit.
    step = jax.jit(make_get_action(policy.networks), static_argnames="greedy")
    state = policy.initial_state(3)
    no_reset = jnp.zeros((3,), bool)
    for want in (first, second):
        state, got = step(policy.get_params(), state, obs, no_reset, key, None, greedy=False)
        np.testing.assert_array_equal(got.action, want.action)
        np.testing.assert_allclose(got.log_prob, want.log_prob, rtol=1e-6)
        np.testing.assert_allclose(got.value, want.value, rtol=1e-6)
    np.testing.assert_allclose(state, policy.state, rtol=1e-6)


def test_feed_forward_get_action_under_jit_still_works(cartpole):
    act = jax.jit(lambda params, obs, key: cartpole.get_action(obs, key, params=params))
    for _ in range(2):
        out = act(cartpole.get_params(), OBS, jax.random.key(4))
        np.testing.assert_array_equal(
            out.action, cartpole.get_action(OBS, jax.random.key(4)).action
        )


# --------------------------------------------------------------------- 6. plain arguments
@pytest.mark.parametrize(
    ("probability", "ok"),
    [
        (np.float32(1.5), False),  # numpy scalars are range-checked like floats
        (np.array(1.5), False),  # and 0-d arrays
        (jnp.float32(-0.1), False),
        (float("nan"), False),
        (True, False),
        ("0.5", False),
        (None, False),
        (np.float64(0.5), True),
        (np.array(0.25), True),
        (1, True),  # an int probability is passed on as a float (bernoulli wants floats)
        (np.int64(0), True),
    ],
)
def test_windows_range_check_reads_numpy_scalars(probability, ok):
    traj, code = rollout()

    def windows():
        return pjp.trajectory_minibatches(
            jax.random.key(0),
            traj,
            code,
            code,
            timesteps=np.int64(3),  # numpy integers are ints
            num_windows=np.int32(4),
            prob_go_from_end=probability,
        )

    if ok:
        assert windows().mask.shape == (4, 3)
    else:
        with pytest.raises(ValueError, match=r"^prob_go_from_end=.*must be a number in \[0, 1\]"):
            windows()


@pytest.mark.parametrize("count", [2.0, True, np.int64(0), "3"])
def test_windows_counts_are_ints_ge_1(count):
    traj, code = rollout()
    with pytest.raises(ValueError, match=r"^timesteps=.*: must be an int >= 1"):
        pjp.trajectory_minibatches(
            jax.random.key(0), traj, code, code, timesteps=count, num_windows=4
        )


@pytest.mark.parametrize(
    ("arguments", "error", "match"),
    [
        (dict(max_steps=0), ValueError, r"^max_steps=0: must be an int >= 1$"),
        (dict(max_steps=-5), ValueError, r"^max_steps=-5: must be an int >= 1$"),
        (dict(max_steps=2.5), ValueError, r"^max_steps=2.5: must be an int >= 1$"),
        (dict(num_episodes=2.5), ValueError, r"^num_episodes=2.5: must be an int >= 1$"),
        (dict(num_episodes=0), ValueError, r"^num_episodes=0: must be an int >= 1$"),
        (dict(num_episodes=np.int64(-1)), ValueError, r"^num_episodes=np.int64\(-1\): must"),
        (dict(greedy="no"), TypeError, r"^greedy='no': must be a bool \(True or False\)$"),
        (dict(greedy=1), TypeError, r"^greedy=1: must be a bool"),
        (dict(key=0), TypeError, r"^evaluate: key: expected one PRNG key .*jax.random.key\(0\)"),
    ],
)
def test_evaluate_refuses_bad_arguments_in_one_line(cartpole, arguments, error, match):
    with pytest.raises(error, match=match):
        pjp.evaluate(cartpole, **{"num_episodes": 2, **arguments})


def test_evaluate_takes_numpy_scalars(cartpole):
    result = pjp.evaluate(
        cartpole, num_episodes=np.int64(3), max_steps=np.int32(7), greedy=np.bool_(True)
    )
    # 3 episodes, each cut at 7 steps at most (an untrained CartPole policy lasts >= 8)
    assert result.returns.shape == (3,) and result.lengths.max() <= 7
    np.testing.assert_array_equal(result.returns, result.lengths)  # reward 1 per step


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (
            lambda p: p.act(OBS, 0),
            TypeError,
            r"^act: key: expected one PRNG key \(jax.random.key\(seed\)\), got 0 \(int\); "
            r"for the seed 0 pass jax.random.key\(0\)$",
        ),
        (
            lambda p: p.get_action(OBS, np.int64(3)),
            TypeError,
            r"^get_action: key: .*jax.random.key\(3\)",
        ),
        (
            lambda p: p.act(OBS, jax.random.split(jax.random.key(0), 4)),
            TypeError,
            r"act: key: expected one PRNG key .*a batch of keys of shape \(4,\)",
        ),
        (lambda p: p.act(np.zeros((0, 4))), ValueError, r"obs has shape \(0, 4\): an empty batch"),
        (
            lambda p: p.get_action(np.zeros((0, 4)), jax.random.key(0)),
            ValueError,
            r"an empty batch \(B = 0\)",
        ),
        (
            lambda p: p.get_action(OBS, params={"params": {}}),
            ValueError,
            r"^get_action: params do not match this policy's \(a dict with no array leaves\)",
        ),
        (
            lambda p: p.evaluate_actions(
                OBS,
                np.zeros(4, np.int32),
                params=jax.tree.map(lambda x: np.zeros(np.shape(x) + (1,)), p.get_params()),
            ),
            ValueError,
            r"^evaluate_actions: params do not match .*\['params'\].* has shape \(.*, 1\), "
            r"the policy's",
        ),
        (lambda p: p.initial_state(-1), ValueError, r"^batch=-1: must be an int >= 1$"),
        (lambda p: p.initial_state(2.0), ValueError, r"^batch=2.0: must be an int >= 1$"),
        (lambda p: p.predict(OBS, deterministic="no"), TypeError, r"^deterministic='no'"),
    ],
)
def test_acting_api_refuses_bad_arguments_in_one_line(cartpole, call, error, match):
    with pytest.raises(error, match=match) as info:
        call(cartpole)
    assert "\n" not in str(info.value)


def test_initial_state_takes_numpy_ints():
    policy = untrained(recurrent="gru", recurrent_size=4)
    assert policy.initial_state(np.int64(3)).shape == (3, 4)


def test_load_refuses_what_is_not_a_run_directory(tmp_path):
    with pytest.raises(TypeError, match=r"^Policy.load: path=None: expected a run directory"):
        pjp.Policy.load(None)
    with pytest.raises(ValueError, match=r"no such run directory"):
        pjp.Policy.load(tmp_path / "missing")
    config = tmp_path / "cartpole.yaml"
    config.write_text("env_name: CartPole-v1\n")
    with pytest.raises(ValueError) as info:
        pjp.Policy.load(config)
    assert str(info.value) == (
        f"Policy.load: {config} is a YAML config, not a run directory; train it first with "
        f"purejaxppo train --config {config}, then load the run directory"
    )
    tune = tmp_path / "tune"
    tune.mkdir()
    (tune / "request.yaml").write_text("config: {}\nsearch:\n  gamma: [uniform, 0.9, 0.99]\n")
    with pytest.raises(ValueError, match=r"is a tune output directory.*no best.yaml yet"):
        pjp.Policy.load(tune)
    (tune / "best.yaml").write_text("gamma: 0.95\n")
    with pytest.raises(ValueError) as info:
        pjp.Policy.load(str(tune))
    assert str(info.value) == (
        f"Policy.load: {tune} is a tune output directory, not a run directory; its best "
        f"trial's config is {tune / 'best.yaml'}: train it with purejaxppo train --config "
        f"{tune / 'best.yaml'}, then load that run directory"
    )
    with pytest.raises(ValueError, match=r"is not a run directory \(no config.yaml"):
        pjp.Policy.load(tmp_path)


@pytest.mark.parametrize(
    ("arguments", "error", "match"),
    [
        (dict(greedy="no"), TypeError, r"greedy='no': must be a bool"),
        (dict(max_steps=0), ValueError, r"max_steps=0: must be an int >= 1"),
        (dict(key=7), TypeError, r"key: expected one PRNG key .*jax.random.key\(7\)"),
    ],
)
def test_record_and_collect_refuse_bad_arguments_before_playing(
    cartpole, tmp_path, arguments, error, match
):
    from purejaxppo.acting.video import record_episode

    with pytest.raises(error, match=match):
        record_episode(cartpole, **arguments)
    out = tmp_path / "dataset"
    with pytest.raises(error, match=r"^collect: " + match):
        pjp.collect(cartpole, 2, out, **arguments)
    assert not out.exists()  # refused before anything was written
    with pytest.raises(ValueError, match=r"^collect: num_episodes=2.5: must be an int >= 1$"):
        pjp.collect(cartpole, 2.5, out)
