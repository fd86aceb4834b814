"""`metabbo:` envs (evosax optimisers on BBOB as gymnax 1.0 envs): the API (6-tuple,
`final_observation`, truncation at the budget), the batched step equal to `SuiteEnv.step`,
determinism per key, the default action reproducing an evosax run, the bad-input errors,
and a short PPO learning check (issue #27).

Compiles are what cost time on 2 CPU cores, so one jitted rollout (`traj`, 13 steps of
`env.step` next to `SuiteEnv.step`) serves the API, equality, determinism and evosax
tests, and problems are small (D = 10, P = 10, BBOB f1 and f3); DE-operator and PSO share
one compile. Measured: 194 s for the module on 2 CPU cores at load average ~3 from other
jobs (the learning check 137 s, mostly its compile), 345 s at load average ~6.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import evosax  # noqa: F401  (CI installs the extra: a missing one must fail, not skip)
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import purejaxppo  # noqa: F401  (sets the XLA flags before jax compiles)
from purejaxppo._xla_flag import LEVEL3_OPTIONS
from purejaxppo.config import PPOConfig
from purejaxppo.envs import make_env
from purejaxppo.envs.suites._common import SuiteEnv, raw_key
from purejaxppo.envs.suites.metabbo import problems
from purejaxppo.envs.suites.metabbo.rollout import make_run_instances
from purejaxppo.networks import make_networks
from purejaxppo.policy import make_act
from purejaxppo.train import make_train

KWARGS = {
    "train_functions": [1, 3],
    "test_functions": [2],
    "population_size": 10,
    "max_steps_in_episode": 6,
}
NUM_STEPS = 13
CONFIGS = Path(__file__).resolve().parents[1] / "configs"


@pytest.fixture(scope="module")
def de():
    return make_env("metabbo:DE", KWARGS)


@pytest.fixture(scope="module")
def traj(de):
    """`run(key) -> (obs0, state0, ours, reference, direct_best, batch_obs)`, one compile
    for the module: from `env.reset(key)`, 13 steps of `env.step` with the default action
    (keys `split(key, 13)`) and at every step `SuiteEnv.step` from the same state with the
    same key; evosax's DifferentialEvolution run directly with its default params on the
    same instance for the budget of 6 generations (keys split as `SuiteEnv.step` and
    `MetaBBOEnv.step_env` document), its best fitness; and `vmap(env.reset)` over
    `split(key, 3)`, the observations `[3, 8]`. Compiled at XLA's level 3
    (`LEVEL3_OPTIONS`): the batched and the suite's step are bitwise equal there, and may
    differ in the last bit at purejaxppo's CPU default, level 2."""
    env, params = de
    action = env.default_action()
    steps = int(params.max_steps_in_episode)

    def direct(key, problem):
        algo = evosax.algorithms.DifferentialEvolution(10, jnp.zeros(10))
        algo_params = algo.default_params
        x, _, _, eval_key, init_key = env.sample_start(raw_key(key), params)
        fitness = problems.evaluate(env.problem, eval_key, x, problem)
        state = algo.init(init_key, x, fitness, algo_params)

        def body(state, step_key):
            step_key, _ = jax.random.split(raw_key(step_key))
            ask_key, eval_key, tell_key = jax.random.split(step_key, 3)
            x, state = algo.ask(ask_key, state, algo_params)
            fitness = problems.evaluate(env.problem, eval_key, x, problem)
            state, _ = algo.tell(tell_key, x, fitness, state, algo_params)
            return state, None

        keys = jax.random.split(key, NUM_STEPS)[:steps]
        state, _ = jax.lax.scan(body, state, keys)
        return state.best_fitness

    def run(key):
        def body(state, step_key):
            ours = env.step(step_key, state, action, params)
            reference = SuiteEnv.step(env, step_key, state, action, params)
            return ours[1], (ours[:1] + ours[2:], reference[:1] + reference[2:])

        obs0, state = env.reset(key, params)
        _, (ours, reference) = jax.lax.scan(body, state, jax.random.split(key, NUM_STEPS))
        batch_obs, _ = jax.vmap(env.reset, in_axes=(0, None))(jax.random.split(key, 3), params)
        return obs0, state, ours, reference, direct(key, state.problem), batch_obs

    return jax.jit(run, compiler_options=LEVEL3_OPTIONS)


def test_api_truncates_at_budget_and_reports_final_observation(de, traj):
    env, params = de
    obs0, state, *_ = jax.eval_shape(traj, jax.random.key(0))
    assert obs0.shape == (8,) and obs0.dtype == jnp.float32
    assert env.action_space(params).shape == (3,)
    step = jax.eval_shape(env.step, jax.random.key(1), state, env.default_action(), params)
    assert len(step) == 6
    # 13 steps of a 6-generation budget: truncation after steps 6 and 12, never terminated
    _, _, (obs, reward, terminated, truncated, info), *_ = traj(jax.random.key(2))
    np.testing.assert_array_equal(np.flatnonzero(np.asarray(truncated)), [5, 11])
    assert not np.any(np.asarray(terminated))
    assert reward.dtype == jnp.float32 and np.all(np.asarray(reward) >= 0.0)
    assert np.any(np.asarray(reward) > 0.0)
    # at the budget the step returns the reset's observation (progress feature 0 is t/T)
    # and info["final_observation"] the last generation's (t/T = 6/6 = 1)
    assert float(obs[5, 0]) == 0.0 and float(info["final_observation"][5, 0]) == 1.0
    assert float(obs[4, 0]) == pytest.approx(5 / 6)
    assert np.all(np.isfinite(np.asarray(obs)))
    assert set(np.asarray(info["function"]).tolist()) <= {1, 3}


def test_batched_step_equals_suite_step_and_is_deterministic(de, traj):
    for key in (jax.random.key(4), jax.random.key(5)):
        _, _, ours, reference, *_ = traj(key)
        jax.tree.map(np.testing.assert_array_equal, ours, reference)
    again = traj(jax.random.key(4))
    first = traj(jax.random.key(4))
    other = traj(jax.random.key(5))
    jax.tree.map(np.testing.assert_array_equal, again, first)
    assert not np.array_equal(np.asarray(first[2][0]), np.asarray(other[2][0]))
    # vmapped over envs: each row equals the unbatched reset (traj's first output)
    keys = jax.random.split(jax.random.key(6), 3)
    obs_b = traj(jax.random.key(6))[-1]
    obs_1 = traj(keys[1])[0]
    np.testing.assert_allclose(np.asarray(obs_b[1]), np.asarray(obs_1), rtol=1e-6)


def test_default_action_reproduces_evosax_de_run(de, traj):
    """The env with `default_action()` ([0, 0, 0]: F = 0.8, CR = 0.9, no dither) and
    evosax's DifferentialEvolution run directly with its default params (same instance,
    same keys; `traj`) reach the same best fitness after the budget of 6 generations."""
    env, params = de
    steps = int(params.max_steps_in_episode)
    _, state0, (_, _, _, _, info), _, best_fitness, _ = traj(jax.random.key(7))
    defaults = env.algo_params(env.default_action())
    assert float(defaults.differential_weight) == pytest.approx(0.8)
    assert float(defaults.crossover_rate) == pytest.approx(0.9)
    assert int(state0.function) in (1, 3)
    np.testing.assert_allclose(
        float(info["best_cost"][steps - 1]),
        float(best_fitness - state0.problem.f_opt),
        rtol=1e-5,
        atol=1e-6,
    )


@pytest.mark.parametrize(
    ("env_id", "kwargs", "match"),
    [
        ("metabbo:DEE", {}, "Close matches: DE"),
        ("metabbo:pso", {}, "PSO"),
        ("metabbo:DE", {"train_functions": [0, 3, 25]}, r"\[0, 25\] are not BBOB function ids"),
        ("metabbo:DE", {"test_functions": ["spheer"]}, "close matches: sphere"),
        ("metabbo:DE", {"num_dims": 1}, "num_dims=1: evosax's BBOB supports"),
        ("metabbo:DE", {"partition": "hard"}, "partition='hard'"),
        ("metabbo:DE", {"popsize": 10}, r"\['popsize'\] not accepted"),
        ("metabbo:DE", {"population_size": 3}, "population_size=3"),
        ("metabbo:DE", {"num_train_instances": 0}, "num_train_instances=0"),
    ],
)
def test_bad_input(env_id, kwargs, match):
    with pytest.raises(ValueError, match=match):
        make_env(env_id, kwargs)


def test_splits_and_fixed_instances():
    env, params = make_env("metabbo:DE")
    assert env.train_functions == problems.PARTITIONS["easy"][0]
    assert env.test_functions == (1, 2, 3, 5, 15, 16, 17, 21)
    assert env.split_functions(params.replace(split="test")) == env.test_functions
    with pytest.raises(ValueError, match="split='valid'"):
        env.split_functions(params.replace(split="valid"))
    # the banks: 32 train and 5 test instances from fixed seeds, so every env built with
    # the same dimension has the same instances (those of the module's `de` fixture too)
    assert env.banks["train"].x_opt.shape == (32, 10)
    assert env.banks["test"].R.shape == (5, 10, 10)
    other, _ = make_env("metabbo:DE", KWARGS)
    jax.tree.map(np.testing.assert_array_equal, env.banks, other.banks)
    assert not np.allclose(env.banks["train"].x_opt[0], env.banks["test"].x_opt[0])
    assert int(env.instance(3, 2, "test").fn_id) == env.functions.index(3)
    with pytest.raises(ValueError, match="num_instances=6 > the 5 fixed instances"):
        make_run_instances(env, params.replace(split="test"), None, [1], 6, 1)


def test_operator_and_pso_envs_run_and_improve():
    """Each env, driven by its default action for 6 generations on f1 (sphere), 4 runs
    (both envs in one compiled program): the best-so-far cost is finite, never increases,
    and improves on average (a single run of 6 generations with P = 10 may not improve);
    the default DE-operator action is best/1/bin, i.e. evosax's default DE (elitism);
    PSO's is evosax's w, c1, c2."""
    envs = {
        name: make_env(f"metabbo:{name}", {**KWARGS, "train_functions": [1]})
        for name in ("DE-operator", "PSO")
    }

    def episode(env, params, key):
        _, state = env.reset_env(key, params)

        def body(state, step_key):
            _, state, _, _, _, _ = env.step_env(step_key, state, env.default_action(), params)
            return state, state.best_cost

        _, costs = jax.lax.scan(body, state, jax.random.split(key, 6))
        return jnp.concatenate([state.best_cost[None], costs])

    @jax.jit
    def run(keys):
        return {
            name: jax.vmap(lambda k, e=env, p=params: episode(e, p, k))(keys)
            for name, (env, params) in envs.items()
        }

    keys = jnp.stack([jax.random.PRNGKey(seed) for seed in range(4)])
    for name, costs in run(keys).items():
        costs = np.asarray(costs)
        assert costs.shape == (4, 7)
        assert np.all(np.isfinite(costs)) and np.all(np.diff(costs, axis=-1) <= 0.0), name
        assert costs[:, -1].mean() < costs[:, 0].mean(), name
    operator_env, operator_params = envs["DE-operator"]
    assert operator_env.action_space(operator_params).n == 4
    assert bool(operator_env.algo_params(operator_env.default_action()).elitism)
    pso_env, pso_params = envs["PSO"]
    assert pso_env.action_space(pso_params).shape == (3,)
    defaults = pso_env.algo_params(pso_env.default_action())
    np.testing.assert_allclose(
        [defaults.inertia_coeff, defaults.cognitive_coeff, defaults.social_coeff],
        [0.75, 1.5, 2.0],
        rtol=1e-6,
    )


def test_a_swarm_that_flies_off_keeps_a_finite_best_cost():
    """PSO particles far outside the domain (evosax's PSO has no bound handling) overflow
    an ill-conditioned BBOB function into NaN; that cost counts as +inf, so the
    best-so-far cost and the reward stay finite (the NaN used to become the best cost)."""
    env, params = make_env("metabbo:PSO", {**KWARGS, "train_functions": [12]})  # bent cigar
    _, state = env.reset(jax.random.key(0), params)
    flying = state.algo_state.replace(velocity=jnp.full_like(state.algo_state.velocity, 1e30))
    x, _ = env.ask(jax.random.key(1), flying, env.default_action())
    key, action = jax.random.key(2), env.default_action()
    _, after, reward, *_ = env.step(key, state.replace(algo_state=flying), action, params)
    assert float(jnp.min(jnp.abs(x))) > 1e20
    assert float(after.best_cost) == float(state.best_cost) and np.isfinite(float(reward))


def test_vs_default_reward_is_the_change_of_the_gap_to_a_paired_defaults_run():
    """`reward="vs_default"` on PSO, 3 runs of one episode (6 generations) through the
    batched `env.step`: the default action earns 0 at every step (its paired run is
    itself, up to float32 rounding: XLA fuses the two runs' arithmetic differently, so
    |reward| < 1e-7, a billionth of a decade); a constant other action earns rewards that sum to the final log gap / 8,
    and the paired run's best-so-far cost is the one a "log" env reaches with the default
    action from the same key (same population, same keys)."""
    kwargs = {**KWARGS, "train_functions": [1, 3]}
    paired, params = make_env("metabbo:PSO", {**kwargs, "reward": "vs_default"})
    plain, _ = make_env("metabbo:PSO", kwargs)
    other = jnp.asarray([0.5, -0.5, 0.3], jnp.float32)

    def episode(env, action, key):
        _, state = env.reset(key, params)

        def body(state, step_key):
            _, state, reward, _, _, info = env.step(step_key, state, action, params)
            return state, (reward, info["best_cost"], info.get("default_best", reward))

        _, out = jax.lax.scan(body, state, jax.random.split(key, 6))
        return out

    @jax.jit
    def run(keys):
        return (
            jax.vmap(lambda k: episode(paired, paired.default_action(), k))(keys),
            jax.vmap(lambda k: episode(paired, other, k))(keys),
            jax.vmap(lambda k: episode(plain, plain.default_action(), k))(keys),
        )

    (zero, _, _), (rewards, best, default_best), (_, plain_best, _) = jax.device_get(
        run(jax.random.split(jax.random.key(5), 3))
    )
    assert np.max(np.abs(zero)) < 1e-7
    np.testing.assert_allclose(default_best, plain_best, rtol=1e-5)
    floor = 1e-8
    gap = np.log10(np.maximum(default_best[:, -1], floor)) - np.log10(
        np.maximum(best[:, -1], floor)
    )
    np.testing.assert_allclose(rewards.sum(axis=1), gap / 8.0, rtol=1e-4, atol=1e-6)
    assert np.any(np.abs(rewards) > 1e-4)  # the other action does differ from the defaults


@pytest.mark.parametrize(
    ("name", "fields", "low", "default", "high"),
    [
        # DE: F, CR, and the dither interval [F - w, F + w] clipped to [0, 1] with
        # w = 0.5 max(a2, 0): a = 0 -> (0.8, 0.9, [0.8, 0.8]); a = -1 -> F 0, CR 0, w 0;
        # a = +1 -> F 1, CR 1, w 0.5 -> [0.5, 1.0].
        (
            "DE",
            ("differential_weight", "crossover_rate", "differential_weight_min")
            + ("differential_weight_max",),
            (0.0, 0.0, 0.0, 0.0),
            (0.8, 0.9, 0.8, 0.8),
            (1.0, 1.0, 0.5, 1.0),
        ),
        # PSO: w in [0, 1], c1 and c2 in [0, 3], each 0 at evosax's default.
        (
            "PSO",
            ("inertia_coeff", "cognitive_coeff", "social_coeff"),
            (0.0, 0.0, 0.0),
            (0.75, 1.5, 2.0),
            (1.0, 3.0, 3.0),
        ),
    ],
)
def test_zero_action_is_the_defaults_and_actions_are_corrections(name, fields, low, default, high):
    """The action is a correction around the optimiser's defaults: the zero action (a
    fresh policy's mean) gives evosax's default params exactly, -1 / +1 the bounds, and
    `default_action()` is zero (before, PSO's zero was w 0.5, c1 c2 1.5 and DE's zero
    dithered F by +-0.25, so a fresh policy started away from the defaults)."""
    env, params = make_env(f"metabbo:{name}", KWARGS)
    np.testing.assert_array_equal(env.default_action(), np.zeros(3, np.float32))
    for action, expected in ((0.0, default), (-1.0, low), (1.0, high)):
        got = env.algo_params(jnp.full(3, action, jnp.float32))
        np.testing.assert_allclose([float(getattr(got, f)) for f in fields], expected, atol=1e-6)


@pytest.mark.parametrize("name", ["de", "pso"])
def test_fresh_policy_starts_near_the_defaults_with_a_small_std(name):
    """configs/metabbo_{de,pso}.yaml: tanh-squashed actions, no entropy bonus and
    log_std_init -1, so a fresh policy's greedy action is within 0.05 of the zero action
    (the defaults) and its pre-squash std is exp(-1) = 0.37: with log_std_init 0 the std
    stayed at ~1 through training (0.95 to 1.02 on 3 seeds) and sampled actions spread
    over the whole range. The greedy params sit within 0.05 of the defaults."""
    config = PPOConfig.from_yaml(CONFIGS / f"metabbo_{name}.yaml")
    assert config.squash_actions and config.ent_coef == 0.0 and config.log_std_init == -1.0
    config = dataclasses.replace(config, env_kwargs=KWARGS, eval_splits={})
    env, params = make_env(config.env_name, config.env_kwargs)
    networks = make_networks(config, env, params)
    net_params = networks.init(jax.random.key(0))
    obs, _ = env.reset(jax.random.key(1), params)
    _, action, _ = make_act(networks)(
        net_params, networks.initial_state(1), obs[None], jnp.zeros(1, bool), jax.random.key(2), 0.0
    )
    np.testing.assert_allclose(action[0], np.zeros(3), atol=0.05)
    leaves = jax.tree_util.tree_leaves_with_path(net_params)
    log_std = [leaf for path, leaf in leaves if "log_std" in jax.tree_util.keystr(path)]
    np.testing.assert_allclose(log_std[0], -1.0)


LEARN_KWARGS = {
    "train_functions": [1, 3],
    "test_functions": [1, 3],
    "population_size": 20,
    "max_steps_in_episode": 25,
}


def learn_and_compare(seeds: int, total_timesteps: int):
    """PPO on `metabbo:DE` with the two training functions f1 (sphere) and f3 (Rastrigin)
    (`seeds` seeds, one vmapped program), then the greedy policies and the default action
    on 8 train instances x 2 optimiser seeds of each function, all in one program.
    Returns mean log10 final best cost `[seeds + 1, 2]` (row `seeds`: the default)."""
    config = dataclasses.replace(
        PPOConfig.from_yaml(CONFIGS / "metabbo_de.yaml"),
        env_kwargs=LEARN_KWARGS,
        num_envs=16,
        num_steps=25,
        total_timesteps=total_timesteps,
        eval_freq=0,
        eval_splits={},
    )
    env, params = make_env(config.env_name, config.env_kwargs)
    networks = make_networks(config, env, params)
    act = make_act(networks)
    keys = jax.random.split(jax.random.key(0), seeds)

    @jax.jit
    def program(keys):
        trained = jax.vmap(make_train(config, env, params))(keys).train_state.params

        def costs(p, use_default):
            def controller(obs, key):
                _, action, _ = act(
                    p, networks.initial_state(1), obs[None], jnp.zeros(1, bool), key, 0.0
                )
                return jnp.where(use_default, env.default_action(), action[0])

            run = make_run_instances(env, params, controller, [1, 3], 8, 2)
            return run(jax.random.PRNGKey(99))[..., -1]

        first = jax.tree.map(lambda x: x[:1], trained)
        both = jax.tree.map(lambda a, b: jnp.concatenate([a, b]), trained, first)
        flags = jnp.arange(seeds + 1) == seeds
        return jax.vmap(costs)(both, flags)

    final = np.asarray(program(keys))  # [seeds + 1, 2, 8, 2]
    return np.log10(np.maximum(final, 1e-8)).mean(axis=(2, 3))


def test_ppo_learns_to_beat_default_de_on_two_training_functions():
    """A short PPO run (16 000 env steps per seed, 3 seeds in one program,
    configs/metabbo_de.yaml: tanh-squashed Gaussian, actions as corrections around the
    defaults, log_std_init -1) on f1 (sphere) + f3 (Rastrigin): the greedy learned F / CR
    / dither width beat DE's defaults (F 0.8, CR 0.9, no dither) in mean log10 final best
    cost over 8 instances x 2 optimiser seeds of each function.

    Values seen (CPU, jax 0.10.2, this config), mean log10 final cost (f1, f3):
      seed 0: (-0.577, 1.842); seed 1: (-0.030, 1.916); seed 2: (-0.922, 1.776);
      default: (0.596, 2.038). Seed means beat the default by 1.10 (f1) and 0.19 (f3);
      all 3 seeds beat it on both.
    Before issue #40 (the zero action dithered F by +-0.25, log_std_init 0): seeds
    (0.092, 1.901), (0.295, 1.864), (0.599, 1.980), seed 2 tying the default on f1; on
    another 2-core AMD EPYC (XLA's CPU numerics differ between machines) f1's seed mean
    beat the default by only 0.015. So the margin is asked on Rastrigin and on the two
    functions together, and 2 of 3 seeds must beat the default on both.
    Without the squashing (a Gaussian clipped to the bounds) all 3 seeds were worse than
    the default on both (greedy means pushed past the bounds).
    """
    costs = learn_and_compare(seeds=3, total_timesteps=16_000)
    learned, default = costs[:-1], costs[-1]
    assert np.all(np.isfinite(costs))
    assert learned[:, 1].mean() < default[1] - 0.05, costs  # f3, Rastrigin
    assert learned.sum(axis=1).mean() < default.sum() - 0.05, costs  # f1 + f3
    assert int(np.sum(np.all(learned < default, axis=1))) >= 2, costs
