"""`make_train`: the whole PPO run as one pure, jittable function of a key and hyperparameters."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp

from purejaxppo.callback import MetricsCallback, make_emitter
from purejaxppo.collectives import psum_flat
from purejaxppo.config import PPOConfig
from purejaxppo.envs.host_calls import errors_of_envs
from purejaxppo.hyperparams import Hyperparams, check_hyperparams
from purejaxppo.kinds import resolve_env
from purejaxppo.learning import LEARN_METRICS, explained_variance, make_learn
from purejaxppo.metrics import METRICS, UpdateMetrics
from purejaxppo.networks import Networks
from purejaxppo.rollout import critic_apart, make_normalizing_rollout, make_rollout
from purejaxppo.train_setup import TrainFns, TrainSetup, make_init, prepare
from purejaxppo.types import RunnerState, TrainOutput
from purejaxppo.update import initial_learning_rates

__all__ = [
    "METRICS",
    "TrainFns",
    "explained_variance",
    "initial_learning_rates",
    "make_init",
    "make_train",
    "make_train_fns",
    "resolve_env",
]


def make_train_fns(
    config: PPOConfig,
    env: Any = None,
    env_params: Any = None,
    *,
    axis_name: str | None = None,
    num_shards: int = 1,
    networks: Networks | None = None,
    callback: MetricsCallback | None = None,
    callback_every: int = 1,
    init_params: Any = None,
) -> TrainFns:
    """Builds the pure functions of a PPO run for `config` (see `make_train`).

    `init_params`: a warm start (see `make_train`). `config.init_from` is a path that the
    drivers (`purejaxppo train`, `--num-seeds`, `sweep`, `pbt`) resolve to parameters
    themselves; here it must come with its `init_params`.

    `callback` / `callback_every`: see `make_train` (they apply to `train` only; the
    segmented `run` / `update` never call back).

    `axis_name` and `num_shards` are for data-parallel training of ONE agent over
    `num_shards` devices (`parallel.make_data_parallel_train` calls this inside
    `shard_map`): each device steps `num_envs // num_shards` of the agent's envs with its
    own keys (the shard index folded in), gradients, advantage-normalisation statistics,
    episode statistics and metrics are reduced over `axis_name`, and parameters stay
    identical on every device. With `num_shards=1` the keys are those of the ordinary run.

    Raises:
      ValueError: if `num_shards` does not divide `num_envs`, or the per-device batch
        does not split into `num_minibatches` minibatches; for an `info_metrics` key the
        env's info does not have, `action_histogram` with non-Discrete actions, or
        `callback_every < 1` (`train_setup.prepare`).
    """
    setup = prepare(
        config,
        env,
        env_params,
        networks=networks,
        callback_every=callback_every,
        num_shards=num_shards,
        axis_name=axis_name,
    )
    if init_params is None and config.init_from is not None:
        raise ValueError(
            f"init_from={config.init_from!r}: make_train takes the warm start's parameters, "
            "not its path: pass init_params=pjp.load_init_params(config.init_from, "
            "config.init_parts, config.init_step)[0]"
        )

    def shard_key(key: jax.Array) -> jax.Array:
        """This device's key for its envs / shuffles (the key itself on one device)."""
        if num_shards == 1:
            return key
        return jax.random.fold_in(key, jax.lax.axis_index(axis_name))

    init = make_init(
        config, setup, num_envs=setup.num_envs, shard_key=shard_key, init_params=init_params
    )
    update = make_update(config, setup, shard_key, axis_name)

    def run(
        runner: RunnerState, hparams: Hyperparams, num_updates: int
    ) -> tuple[RunnerState, dict[str, jax.Array]]:
        return jax.lax.scan(lambda r, _: update(r, hparams), runner, None, length=num_updates)

    run_and_emit = None
    if callback is not None:
        run_and_emit = make_run_and_emit(
            update, run, make_emitter(callback), config.num_updates, callback_every
        )

    train = _make_train_fn(config, init, run, run_and_emit)
    return TrainFns(
        init=init,
        update=update,
        run=run,
        train=train,
        apply=setup.networks.apply,
        networks=setup.networks,
        metric_names=setup.metric_names,
        kind=setup.kind,
        setup=setup,
        hparams=Hyperparams.from_config(config),
    )


def _make_train_fn(
    config: PPOConfig, init: Callable[..., RunnerState], run: Callable, run_and_emit: Any
) -> Callable[..., TrainOutput]:
    """`train(key, hparams=None, run_index=None, init_params=None)` (see `make_train`); an
    env's error in a host call raises its own `EnvError` (`envs.host_calls.errors_of_envs`)."""

    def train(
        key: jax.Array,
        hparams: Hyperparams | None = None,
        run_index: Any = None,
        init_params: Any = None,
    ) -> TrainOutput:
        if hparams is None:
            # The barrier keeps XLA from constant-folding the config's values, so that
            # train(key) computes bitwise what train(key, Hyperparams.from_config(config))
            # and the segmented driver (drivers/single.py, drivers/segments.py) compute.
            hparams = jax.lax.optimization_barrier(Hyperparams.from_config(config))
        else:
            check_hyperparams(hparams, config, where="train: hparams: ")  # concrete only
        runner = init(key, init_params)
        if run_and_emit is None:  # the program of a run without a callback
            runner, metrics = run(runner, hparams, config.num_updates)
        else:
            index = jnp.asarray(-1 if run_index is None else run_index, jnp.int32)
            runner, metrics = run_and_emit(runner, hparams, index)
        return TrainOutput(runner_state=runner, metrics=metrics)

    # An env's error in a host call (gymnasium, EnvPool) is raised as its own `EnvError`.
    return errors_of_envs(train)


def plan_rollout(
    config: PPOConfig, setup: TrainSetup, axis_name: str | None = None
) -> Callable[[Any, Any, jax.Array], tuple[Any, Any, Any]]:
    """The rollout `make_update` runs, `rollout(params, carry, key) -> (carry, traj, stats,
    obs_norm)`: `rollout.make_rollout` over the setup's rows (every kind of env), laid out
    by the setup's loop plan (`TrainSetup.plan`): its unroll, and its values after the scan
    where the critic stands apart (`rollout.critic_apart`). `obs_norm` is None, or with
    `normalize_timing: "step"` the statistics the rollout moved (`make_normalizing_rollout`,
    merged over the devices of `axis_name` at every step in data-parallel training)."""
    plan = setup.plan
    batched = plan.batched_values and critic_apart(setup.networks)
    args = (setup.rows, setup.networks, setup.num_steps, plan.rollout_unroll, batched)
    if config.normalize_timing == "step" and config.normalize_observations:
        return make_normalizing_rollout(*args, axis_name=axis_name)
    rollout = make_rollout(*args)
    return lambda params, carry, key: (*rollout(params, carry, key), None)


def make_update(
    config: PPOConfig,
    setup: TrainSetup,
    shard_key: Callable[[jax.Array], jax.Array],
    axis_name: str | None,
) -> Callable[[RunnerState, Hyperparams], tuple[RunnerState, dict[str, jax.Array]]]:
    """`update(runner, hparams) -> (runner, metrics)`: one rollout of `num_steps` steps of
    the vmapped envs, then `learning.make_learn`'s epochs of minibatch steps."""
    networks, num_steps = setup.networks, setup.num_steps
    rollout = plan_rollout(config, setup, axis_name)
    learn_fn = make_learn(
        config, networks, setup.plan, axis_name=axis_name, num_actions=setup.num_actions
    )

    def update(
        runner: RunnerState, hparams: Hyperparams
    ) -> tuple[RunnerState, dict[str, jax.Array]]:
        key, rollout_key, epochs_key = jax.random.split(runner.key, 3)
        params = runner.train_state.params
        env_carry, traj, stats, obs_norm = rollout(params, runner.env, shard_key(rollout_key))
        if axis_name is not None:
            stats = psum_flat(stats, axis_name)  # one all-reduce
        train_state = runner.train_state
        if obs_norm is not None:  # moved at every step: the update keeps them
            train_state = train_state.replace(params={**params, "obs_norm": obs_norm})

        train_state, learned, discounted = learn_fn(
            train_state,
            traj,
            env_carry.policy_state,
            shard_key(epochs_key),
            hparams,
            runner.update_step,
            runner.env.discounted_return,
        )
        env_carry = env_carry.replace(discounted_return=discounted)
        metrics = UpdateMetrics(
            episode_return=stats.mean_return(),
            episode_length=stats.mean_length(),
            episode_count=stats.count,
            env_steps=(runner.update_step + 1).astype(jnp.float32) * config.num_envs * num_steps,
            **{name: learned.pop(name) for name in LEARN_METRICS},
        )._asdict()
        metrics.update(learned)  # action_frac/<i>
        metrics.update(stats.mean_info())
        new_runner = RunnerState(
            train_state=train_state,
            env=env_carry,
            key=key,
            update_step=runner.update_step + 1,
        )
        return new_runner, metrics

    return update


def make_run_and_emit(
    update: Callable[..., Any],
    run: Callable[..., Any],
    emit: Callable[..., Any],
    num_updates: int,
    callback_every: int,
) -> Callable[..., tuple[RunnerState, dict[str, jax.Array]]]:
    """`run_and_emit(runner, hparams, run_index)`: `run` over all updates, handing every
    `callback_every`-th update's metrics to the host: an outer scan over chunks of k
    updates, each an inner scan of `update` followed by one emit (no `cond` in the update
    loop), then the remaining num_updates % k updates without a call."""
    num_chunks, rest = divmod(num_updates, callback_every)

    def run_and_emit(
        runner: RunnerState, hparams: Hyperparams, run_index: jax.Array
    ) -> tuple[RunnerState, dict[str, jax.Array]]:
        def chunk(runner, index):
            if callback_every == 1:  # one scan: update, emit
                runner, last = update(runner, hparams)
                metrics = jax.tree.map(lambda x: x[None], last)
            else:
                runner, metrics = run(runner, hparams, callback_every)
                last = jax.tree.map(lambda x: x[-1], metrics)
            emit(run_index, (index + 1) * callback_every, last)
            return runner, metrics

        runner, metrics = jax.lax.scan(chunk, runner, jnp.arange(num_chunks, dtype=jnp.int32))
        metrics = jax.tree.map(lambda x: x.reshape((num_chunks * callback_every,)), metrics)
        if rest:
            runner, tail = run(runner, hparams, rest)
            metrics = jax.tree.map(lambda x, y: jnp.concatenate([x, y]), metrics, tail)
        return runner, metrics

    return run_and_emit


def make_train(
    config: PPOConfig,
    env: Any = None,
    env_params: Any = None,
    *,
    networks: Networks | None = None,
    callback: MetricsCallback | None = None,
    callback_every: int = 1,
    init_params: Any = None,
) -> Callable[..., TrainOutput]:
    """Builds `train(key, hparams=None) -> TrainOutput`, one pure function for a whole run.

    `train` initialises the actor-critic and N = `num_envs` environments from `key`, then
    runs `num_updates` PPO updates in a `lax.scan`: a rollout of T = `num_steps` steps of
    the vmapped envs, GAE (`gae_advantages`, truncation-aware), and `update_epochs` epochs
    of `num_minibatches` Adam steps on the PPO-Clip loss (Schulman et al. 2017,
    arXiv:1707.06347). One code path for every policy (`Networks`): the policy state is
    carried in `EnvCarry.policy_state` (`()` for feed-forward policies), V(final obs) is
    computed from the state after each step (`rollout.next_values`), and minibatches are
    env sequences (`sequences.make_sequences`; single transitions for feed-forward
    policies). Wrap it in `jax.jit`; `jax.vmap` it over keys (`[S]` typed keys) and/or
    `Hyperparams` with `[S]` leaves to train S agents in one compiled program.

    Args:
      config: the static configuration.
      env, env_params: optional gymnax-API environment object to train on instead of
        `make_env(config.env_name, config.env_kwargs)`, or a gymnasium env factory
        (`env=lambda: MyEnv()`, a host env, stepped on the host from inside the compiled
        program: `train` jits and vmaps as with any env, on one device); `env_params`
        defaults to the env's own (a given `env_params` is
        used with the config's env too).
      networks: optional `Networks` to train instead of `make_networks(config, env,
        env_params)` (bring your own actor and critic, see `networks_from_modules`).
      callback: optional `fn(run, update, metrics)` called on the host, while the jitted
        call runs, after every `callback_every`-th update (update = 1-based count, metrics
        a dict of floats equal to that row of `TrainOutput.metrics`): exactly
        num_updates // callback_every calls per run (`jax.debug.callback`; call
        `jax.effects_barrier()` to wait for the last ones). Under `jax.vmap` over S runs
        the host gets one transfer per emitted update and `fn` is called for each run
        with `run` = its row in the batch (row-major over nested vmaps), or with the
        `run_index` argument of `train` when given (pass one per run, e.g.
        `jax.vmap(train)(keys, None, jnp.arange(S) + offset)`, when runs are split over
        devices or programs). Without a callback, `train` compiles to the same program
        as before callbacks existed (`run_index` is then ignored).
      callback_every: k >= 1, updates between calls.
      init_params: warm start (fine-tuning; `warm_start.py`): a params tree (e.g.
        `Policy.load(run_dir).get_params()` or `TrainOutput.train_state.params`, with its
        `obs_norm` statistics), or a `TrainState` when `config.init_parts` has
        "optimizer". The run starts from its `config.init_parts` (default params and
        normalisation) instead of `networks.init`; required when `config.init_from` is
        set (`pjp.load_init_params(config.init_from, config.init_parts,
        config.init_step)[0]`; the CLI and drivers load it). `train`'s own `init_params` argument replaces it
        and is traced like any argument: `jax.vmap(train, in_axes=(0, None, None,
        None))(keys, None, None, params)` starts S seeds from the same params.

    Returns:
      `train(key, hparams=None, run_index=None, init_params=None)`: `key` a typed PRNG key
      (`jax.random.key(seed)`); `hparams` a `Hyperparams` pytree (default
      `Hyperparams.from_config(config)`). It returns a `TrainOutput` with the final
      `train_state`, the final `runner_state`, and per-update `metrics` (float32
      `[num_updates]` arrays, see `TrainOutput`).

    Raises:
      ValueError: for an unknown env id or an unsupported action space, an unknown
        `info_metrics` key, or `callback_every < 1`; `init_params` (or `init_from`'s
        checkpoint) whose layers / shapes differ from this config's network and env,
        naming the first one; an `init_from` that is not a run directory.
    """
    fns = make_train_fns(
        config,
        env,
        env_params,
        networks=networks,
        callback=callback,
        callback_every=callback_every,
        init_params=init_params,
    )
    return fns.train
