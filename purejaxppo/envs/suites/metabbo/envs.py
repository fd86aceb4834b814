"""The `metabbo:` environments: one episode runs an evosax optimiser for a fixed budget of
generations on one BBOB instance, and the action configures each next generation.

MDP (MetaBox, Ma et al. NeurIPS 2023, arXiv:2310.08252, the MetaBBO-RL interface: one env
step = one generation of the low-level optimiser):

- Episode: reset samples a function uniformly from the split's functions (`params.split`,
  "train" or "test") and one of the split's fixed instances: `num_train_instances` on
  "train" (keys `fold_in(PRNGKey(TRAIN_INSTANCE_SEED), i)`), `num_test_instances` on
  "test" (keys `fold_in(PRNGKey(TEST_INSTANCE_SEED), i)`), drawn once when the env is built
  (`problems.instance_bank`; MetaBox's train and test sets are fixed instances too, and
  the compiled step then holds no QR of fresh rotations); it draws the initial population
  uniformly in [-5, 5]^D (MetaBox / LDE) and evaluates it. The episode is truncated after
  `params.max_steps_in_episode` generations (the budget, MetaBox's maxFEs / population
  size); it never terminates. Costs are `f(x) - f_opt` (MetaBox).
- Observation (float32 `[8]`), population features in the spirit of LDE (Sun et al. 2021,
  IEEE TEVC 25(4), "Learning adaptive differential evolution algorithm from optimization
  experiences by policy gradient": population fitness normalised per problem) and of
  DE-DDQN's / RLEPSO's search-progress features (Sharma et al. GECCO 2019; Yin et al. 2021):
  0. progress t / T;
  1. log10(best-so-far cost / c_ref) / 10, with c_ref the initial population's mean cost
     (fitness normalised by the initial spread: 0 at the start, -0.1 per decade gained);
  2. log10(population mean cost / c_ref) / 10;
  3. log10(population cost std / c_ref) / 10;
  4. (mean - best) / (worst - best) of the population costs (skew, in [0, 1]);
  5. diversity: mean distance of the population to its centroid over the initial one;
  6. stagnation: generations since the best-so-far improved, over T;
  7. success rate: fraction of the population whose cost improved in the last generation.
  Each feature is clipped to [-5, 5]; costs are floored at 1e-12 inside the logs.
- Reward: the normalised improvement of the best-so-far cost. `reward="log"` (default):
  (log10 c*_{t-1} - log10 c*_t) / 8 with costs floored at 1e-8 (COCO's final target), so
  an episode's return is the number of decades gained over 8 and every decade counts the
  same, which is what the final-cost comparison of the benchmark measures.
  `reward="relative"`: (c*_{t-1} - c*_t) / c*_0, MetaBox's LDE / RLEPSO reward (returns in
  [0, 1], dominated by the first generations).
  `reward="vs_default"`: the same optimiser also runs with its default params
  (`default_action()`) from the same population with the same keys (common random
  numbers: a paired baseline), and the reward is the change of the log gap
  (log10 d*_t - log10 c*_t) / 8 between the defaults' best-so-far d*_t and ours, floored
  at 1e-8: an episode's return is the decades the policy ends ahead of the defaults over
  8, the benchmark's comparison itself, and the default policy earns exactly 0 every
  step. It costs one more population evaluation per generation.
"""

from __future__ import annotations

import abc
from typing import Any

import jax
import jax.numpy as jnp
from flax import struct
from gymnax.environments import spaces

from purejaxppo.envs.suites._common import SuiteEnv, raw_key, select
from purejaxppo.envs.suites.metabbo import problems

#: Seeds of the fixed instances: instance i of a test (train) function is drawn from the
#: key `fold_in(PRNGKey(TEST_INSTANCE_SEED), i)` (`TRAIN_INSTANCE_SEED`).
TEST_INSTANCE_SEED = 1_000_003
TRAIN_INSTANCE_SEED = 2_000_003
OBS_SIZE = 8
SPLITS = ("train", "test")


@struct.dataclass
class MetaBBOParams:
    """Env params of the `metabbo:` envs.

    max_steps_in_episode: the budget in generations (one env step each), int.
    split: "train" or "test" (static): which functions / instances reset samples.
    """

    max_steps_in_episode: int = 50
    split: str = struct.field(pytree_node=False, default="train")


@struct.dataclass
class MetaBBOState:
    """State of one episode (leaves are per-env scalars unless noted).

    algo_state: the evosax optimiser's state (population [P, D], fitness [P], ...).
    problem: the instance's `MetaBBOBProblem.Params`; function: its BBOB id, int32.
    best_cost: best-so-far cost c*_t; best_cost0: c*_0; cost_ref: c_ref (initial mean).
    diversity0: initial mean distance to the centroid; stagnation: int32 generations
    since c* improved; success_rate: float32; time: int32 generations done.
    default_state, default_best: with `reward="vs_default"`, the same optimiser run with
    its default params from the same population and keys (`default_action()`), and its
    best-so-far cost; otherwise the initial state, never stepped.
    """

    algo_state: Any
    problem: Any
    function: jax.Array
    best_cost: jax.Array
    best_cost0: jax.Array
    cost_ref: jax.Array
    diversity0: jax.Array
    stagnation: jax.Array
    success_rate: jax.Array
    time: jax.Array
    default_state: Any
    default_best: jax.Array


def _diversity(x: jax.Array) -> jax.Array:
    return jnp.mean(jnp.linalg.norm(x - jnp.mean(x, axis=0), axis=-1))


def _costs(fitness: jax.Array, f_opt: jax.Array) -> jax.Array:
    """Costs f(x) - f_opt `[P]`, a NaN one (a BBOB function overflowing float32 far
    outside the domain) counted as +inf, as evosax's PSO counts it for its personal
    bests: it never becomes the best-so-far cost."""
    cost = fitness - f_opt
    return jnp.where(jnp.isnan(cost), jnp.inf, cost)


def _log_gap(default_cost: jax.Array, cost: jax.Array) -> jax.Array:
    """log10 of the defaults' cost over ours, both floored at 1e-8 (COCO's final target):
    decades ahead of the defaults."""
    floor = 1e-8
    return jnp.log10(jnp.maximum(default_cost, floor)) - jnp.log10(jnp.maximum(cost, floor))


def _log_ratio(c: jax.Array, ref: jax.Array) -> jax.Array:
    return jnp.log10(jnp.maximum(c, 1e-12) / jnp.maximum(ref, 1e-12)) / 10.0


class MetaBBOEnv(SuiteEnv):
    """Base of the `metabbo:` envs: problem sampling, features, reward and budget.

    Subclasses set `algorithm` (an evosax population-based optimiser), `action_space`,
    `algo_params(action)` (the evosax params of the next generation) and may override
    `ask(key, algo_state, action)`.
    """

    algorithm: Any

    def __init__(
        self,
        name: str,
        *,
        train_functions: tuple[int, ...],
        test_functions: tuple[int, ...],
        num_dims: int,
        population_size: int,
        num_test_instances: int,
        reward: str,
        max_steps_in_episode: int,
        num_train_instances: int = 32,
    ):
        self.name = name
        self.train_functions = train_functions
        self.test_functions = test_functions
        self.functions = tuple(dict.fromkeys(train_functions + test_functions))
        self.num_dims = num_dims
        self.population_size = population_size
        self.num_test_instances = num_test_instances
        self.num_train_instances = num_train_instances
        self.reward_kind = reward
        self._max_steps = max_steps_in_episode
        self.problem = problems.make_problem(self.functions, num_dims)
        self.banks = {
            split: problems.instance_bank(
                jax.vmap(lambda i, s=seed: jax.random.fold_in(jax.random.PRNGKey(s), i))(
                    jnp.arange(count)
                ),
                num_dims,
            )
            for split, seed, count in (
                ("train", TRAIN_INSTANCE_SEED, num_train_instances),
                ("test", TEST_INSTANCE_SEED, num_test_instances),
            )
        }

    @property
    def default_params(self) -> MetaBBOParams:
        return MetaBBOParams(max_steps_in_episode=self._max_steps)

    def observation_space(self, params: MetaBBOParams) -> spaces.Box:
        return spaces.Box(-5.0, 5.0, (OBS_SIZE,), jnp.float32)

    # -- problem instances -------------------------------------------------------------

    def split_functions(self, params: MetaBBOParams) -> tuple[int, ...]:
        """BBOB ids of `params.split`. Raises ValueError for an unknown split."""
        if params.split not in SPLITS:
            raise ValueError(f"split={params.split!r} is not one of {list(SPLITS)}")
        return self.train_functions if params.split == "train" else self.test_functions

    def instance(self, function: Any, instance: Any, split: str) -> Any:
        """`MetaBBOBProblem.Params` of BBOB id `function` (int32 scalar) on the fixed
        instance `instance` (int32 scalar) of `split`."""
        table = jnp.asarray(self.functions, jnp.int32)
        fn_index = jnp.argmax(table == jnp.asarray(function, jnp.int32))
        bank = jax.tree.map(lambda x: x[instance], self.banks[split])
        return bank.replace(fn_id=fn_index.astype(jnp.int32))

    def num_instances(self, split: str) -> int:
        """How many fixed instances `split` has."""
        return self.num_train_instances if split == "train" else self.num_test_instances

    def sample_start(self, key: jax.Array, params: MetaBBOParams) -> tuple:
        """What reset draws before evaluating: `(x [P, D], problem, function, eval_key,
        init_key)`. Keys: key -> (function, instance, start); start -> (population,
        eval, init). The population is uniform in [-5, 5]^D (MetaBox / LDE)."""
        fn_key, inst_key, start_key = jax.random.split(key, 3)
        functions = jnp.asarray(self.split_functions(params), jnp.int32)
        function = jax.random.choice(fn_key, functions)
        count = self.num_instances(params.split)
        instance = jax.random.randint(inst_key, (), 0, count)
        problem = self.instance(function, instance, params.split)
        pop_key, eval_key, init_key = jax.random.split(start_key, 3)
        x = self.initial_population(pop_key)
        return x, problem, function, eval_key, init_key

    def initial_population(self, key: jax.Array) -> jax.Array:
        """float32 `[P, D]` uniform in the BBOB domain [-5, 5]^D."""
        lo, hi = problems.X_RANGE
        shape = (self.population_size, self.num_dims)
        return jax.random.uniform(key, shape, minval=lo, maxval=hi)

    def reset_env(self, key: jax.Array, params: MetaBBOParams):
        x, problem, function, eval_key, init_key = self.sample_start(key, params)
        fitness = problems.evaluate(self.problem, eval_key, x, problem)
        return self.start(init_key, x, fitness, problem, function, params)

    def start(
        self,
        key: jax.Array,
        x: jax.Array,
        fitness: jax.Array,
        problem: Any,
        function: Any,
        params: MetaBBOParams,
    ):
        """Initial `(obs, state)` from the evaluated population x `[P, D]` (fitness
        `[P]`) on the instance `problem`: `algorithm.init(key, x, fitness)` with evosax's
        default params."""
        algo_state = self.algorithm.init(key, x, fitness, self.algorithm.default_params)
        cost = _costs(fitness, problem.f_opt)
        best = jnp.min(cost)
        state = MetaBBOState(
            algo_state=algo_state,
            problem=problem,
            function=jnp.asarray(function, jnp.int32),
            best_cost=best,
            best_cost0=best,
            cost_ref=jnp.maximum(jnp.mean(cost), 1e-12),
            diversity0=jnp.maximum(_diversity(x), 1e-12),
            stagnation=jnp.int32(0),
            success_rate=jnp.float32(0.0),
            time=jnp.int32(0),
            default_state=algo_state,
            default_best=best,
        )
        return self.observe(state, params), state

    # -- one generation ----------------------------------------------------------------

    @abc.abstractmethod
    def algo_params(self, action: jax.Array) -> Any:
        """The optimiser's params for the next generation, from the policy's action."""

    def ask(self, key: jax.Array, algo_state: Any, action: jax.Array) -> tuple[Any, Any]:
        return self.algorithm.ask(key, algo_state, self.algo_params(action))

    def step_env(self, key: jax.Array, state: MetaBBOState, action: Any, params: MetaBBOParams):
        """One generation: key -> (ask, eval, tell) keys; `ask` with the action's params,
        evaluate, `tell` (the fitness the optimiser sees is the raw BBOB value)."""
        ask_key, eval_key, tell_key = jax.random.split(key, 3)
        x, algo_state = self.ask(ask_key, state.algo_state, action)
        fitness = problems.evaluate(self.problem, eval_key, x, state.problem)
        if self.reward_kind == "vs_default":
            x_d, default_state = self.ask(ask_key, state.default_state, self.default_action())
            fitness_d = problems.evaluate(self.problem, eval_key, x_d, state.problem)
            default = self.step_default(tell_key, state, default_state, x_d, fitness_d)
        else:
            default = None
        return self.finish_step(
            tell_key, state, algo_state, action, x, fitness, params, default=default
        )

    def step(self, key: jax.Array, state: MetaBBOState, action: Any, params: Any = None):
        """`SuiteEnv.step` (same keys, same outputs) with the generation's and the
        auto-reset's populations evaluated in one batched call, so the BBOB functions are
        compiled once per step instead of twice."""
        params = self.default_params if params is None else params
        step_key, reset_key = jax.random.split(raw_key(key))
        ask_key, eval_key, tell_key = jax.random.split(step_key, 3)
        x, algo_state = self.ask(ask_key, state.algo_state, action)
        x_re, problem_re, function_re, eval_key_re, init_key_re = self.sample_start(
            reset_key, params
        )
        xs, instances, keys = [x, x_re], [state.problem, problem_re], [eval_key, eval_key_re]
        paired = self.reward_kind == "vs_default"
        if paired:  # the defaults' generation: the same keys (common random numbers)
            x_d, default_state = self.ask(ask_key, state.default_state, self.default_action())
            xs, instances, keys = xs + [x_d], instances + [state.problem], keys + [eval_key]
        stacked = jax.tree.map(lambda *a: jnp.stack(a), *instances)
        fitness = jax.vmap(problems.evaluate, in_axes=(None, 0, 0, 0))(
            self.problem, jnp.stack(keys), jnp.stack(xs), stacked
        )
        default = None
        if paired:
            default = self.step_default(tell_key, state, default_state, x_d, fitness[2])
        obs_st, state_st, reward, terminated, truncated, info = self.finish_step(
            tell_key, state, algo_state, action, x, fitness[0], params, default=default
        )
        obs_re, state_re = self.start(
            init_key_re, x_re, fitness[1], problem_re, function_re, params
        )
        done = jnp.asarray(terminated | truncated, bool)
        info = {
            **info,
            "terminated": jnp.asarray(terminated, bool),
            "truncated": jnp.asarray(truncated, bool),
            "final_observation": obs_st,
        }
        return (
            select(done, obs_re, obs_st),
            select(done, state_re, state_st),
            jnp.asarray(reward, jnp.float32),
            jnp.asarray(terminated, bool),
            jnp.asarray(truncated, bool),
            info,
        )

    def population_costs(self, algo_state: Any, problem: Any) -> jax.Array:
        """Costs `[P]` of the current population (DE: the survivors; PSO: the particles)."""
        return algo_state.fitness - problem.f_opt

    def step_default(self, key, state, default_state, x, fitness):
        """The defaults' run (`reward="vs_default"`) told its generation: `(its
        optimiser state, its best-so-far cost)` after it."""
        params = self.algo_params(self.default_action())
        told, _ = self.algorithm.tell(key, x, fitness, default_state, params)
        best = jnp.minimum(state.default_best, jnp.min(_costs(fitness, state.problem.f_opt)))
        return told, best

    def finish_step(self, key, state, algo_state, action, x, fitness, params, *, default=None):
        """`tell`, the new features, reward and flags of one generation; `default`: the
        defaults' run after it (`step_default`), with `reward="vs_default"`."""
        before = self.population_costs(state.algo_state, state.problem)
        algo_state, _ = self.algorithm.tell(key, x, fitness, algo_state, self.algo_params(action))
        cost = _costs(fitness, state.problem.f_opt)
        best = jnp.minimum(state.best_cost, jnp.min(cost))
        improved = best < state.best_cost
        new_state = state.replace(
            algo_state=algo_state,
            best_cost=best,
            stagnation=jnp.where(improved, 0, state.stagnation + 1).astype(jnp.int32),
            success_rate=jnp.mean(cost < before).astype(jnp.float32),
            time=state.time + 1,
        )
        info = {"best_cost": best, "function": state.function}
        if default is not None:  # the change of the log gap to the defaults' run
            new_state = new_state.replace(default_state=default[0], default_best=default[1])
            before = _log_gap(state.default_best, state.best_cost)
            reward = (_log_gap(default[1], best) - before) / 8.0
            info["default_best"] = default[1]
        elif self.reward_kind == "log":
            gain = _log_gap(state.best_cost, best) / 8.0  # decades gained over 8
            # exactly 0 without improvement (XLA may round the two logs differently)
            reward = jnp.where(improved, jnp.maximum(gain, 0.0), 0.0)
        else:
            gain = (state.best_cost - best) / jnp.maximum(state.best_cost0, 1e-12)
            reward = jnp.where(improved, jnp.maximum(gain, 0.0), 0.0)
        truncated = new_state.time >= params.max_steps_in_episode
        return self.observe(new_state, params), new_state, reward, jnp.bool_(False), truncated, info

    def observe(self, state: MetaBBOState, params: MetaBBOParams) -> jax.Array:
        """The 8 features of the module docstring, float32 `[8]`."""
        cost = self.population_costs(state.algo_state, state.problem)
        lo, hi = jnp.min(cost), jnp.max(cost)
        mean = jnp.mean(cost)
        budget = jnp.maximum(jnp.asarray(params.max_steps_in_episode, jnp.float32), 1.0)
        features = jnp.stack(
            [
                state.time / budget,
                _log_ratio(state.best_cost, state.cost_ref),
                _log_ratio(mean, state.cost_ref),
                _log_ratio(jnp.std(cost), state.cost_ref),
                (mean - lo) / jnp.maximum(hi - lo, 1e-12),
                _diversity(state.algo_state.population) / state.diversity0,
                state.stagnation / budget,
                state.success_rate,
            ]
        )
        return jnp.clip(jnp.nan_to_num(features.astype(jnp.float32)), -5.0, 5.0)
