"""`make_train`: the whole PPO run as one pure, jittable function of a key and hyperparameters."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from purejaxppo.callback import MetricsCallback, make_emitter
from purejaxppo.config import Hyperparams, PPOConfig
from purejaxppo.envs import make_env
from purejaxppo.envs.host import is_host_env
from purejaxppo.learning import LEARN_METRICS, explained_variance, make_learn
from purejaxppo.metrics import METRICS, UpdateMetrics, extra_metric_names
from purejaxppo.networks import Networks, ensure_normalization, make_networks
from purejaxppo.networks.custom import param_labels
from purejaxppo.rollout import host_env_carry, info_keys_of, make_rollout, reset_envs
from purejaxppo.types import RunnerState, TrainOutput, TrainState
from purejaxppo.update import make_optimizer

__all__ = [
    "METRICS",
    "TrainFns",
    "explained_variance",
    "make_init",
    "make_train",
    "make_train_fns",
]


class TrainFns(NamedTuple):
    """The pieces of a training run; all pure and jittable.

    init(key) -> RunnerState
    update(runner_state, hparams) -> (runner_state, metrics of one update, scalars)
    run(runner_state, hparams, num_updates) -> (runner_state, metrics [num_updates])
        (`num_updates` is static: jit with `static_argnums=2`)
    train(key, hparams=None, run_index=None) -> TrainOutput
    apply(params, obs [B, ...]) -> (distrax distribution, value [B])
        (`networks.apply`: for recurrent policies one step from the initial state)
    networks: the `Networks` trained
    metric_names: the keys of the metrics dicts, in table-column order: `METRICS`, then
        the env-dependent `action_frac/<i>` and `info/<key>` (see `UpdateMetrics`)
    """

    init: Callable[[jax.Array], RunnerState]
    update: Callable[[RunnerState, Hyperparams], tuple[RunnerState, dict[str, jax.Array]]]
    run: Callable[[RunnerState, Hyperparams, int], tuple[RunnerState, dict[str, jax.Array]]]
    train: Callable[..., TrainOutput]
    apply: Callable[..., Any]
    networks: Networks
    metric_names: tuple[str, ...] = METRICS
    # True for a host env (`envs.host.HostEnv`): `init` is jittable, but `run`, `update`
    # and `train` step the env on the host and must not be wrapped in jit / vmap.
    host: bool = False


def resolve_env(config: PPOConfig, env: Any = None, env_params: Any = None) -> tuple[Any, Any]:
    """`(env, env_params)`: the given env, or `make_env(config.env_name, config.env_kwargs)`;
    a given `env_params` is kept either way (default: the env's own / the config's)."""
    if env is None:
        env, default_params = make_env(config.env_name, config.env_kwargs)
    else:
        default_params = env.default_params
    return env, default_params if env_params is None else env_params


def make_init(
    config: PPOConfig,
    env: Any = None,
    env_params: Any = None,
    *,
    networks: Networks | None = None,
    num_envs: int | None = None,
    shard_key: Callable[[jax.Array], jax.Array] | None = None,
) -> Callable[[jax.Array], RunnerState]:
    """Builds `init(key) -> RunnerState` alone (what `jax.eval_shape` needs to learn the
    state's shapes, e.g. to restore a checkpoint), without the rollout and the update.

    `num_envs` defaults to `config.num_envs`; `shard_key` (data-parallel runs) maps the
    env key to this device's.
    """
    env, env_params = resolve_env(config, env, env_params)
    if networks is None:
        networks = make_networks(config, env, env_params)
    networks = ensure_normalization(networks, config, env, env_params)
    num_envs = config.num_envs if num_envs is None else num_envs

    def init(key: jax.Array) -> RunnerState:
        param_key, env_key, runner_key = jax.random.split(key, 3)
        params = networks.init(param_key)
        tx = make_optimizer(
            config.max_grad_norm,
            initial_learning_rates(config),
            config.adam_eps,
            param_labels(params),
        )
        if shard_key is not None:
            env_key = shard_key(env_key)
        if is_host_env(env):
            env_carry = host_env_carry(env, num_envs, networks)
        else:
            env_carry = reset_envs(env, env_params, env_key, num_envs, networks)
        if config.normalize_rewards:
            env_carry = env_carry.replace(discounted_return=jnp.zeros((num_envs,), jnp.float32))
        return RunnerState(
            train_state=TrainState(params=params, opt_state=tx.init(params)),
            env=env_carry,
            key=runner_key,
            update_step=jnp.zeros((), jnp.int32),
        )

    return init


def initial_learning_rates(config: PPOConfig) -> dict[str, float]:
    """The step sizes of the optimizer's groups at update 0 (for building its state)."""
    base = config.learning_rate
    return {
        "shared": base,
        "actor": base if config.actor_learning_rate is None else config.actor_learning_rate,
        "critic": base if config.critic_learning_rate is None else config.critic_learning_rate,
    }


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
) -> TrainFns:
    """Builds the pure functions of a PPO run for `config` (see `make_train`).

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
        `callback_every < 1`.
    """
    if callback_every < 1:
        raise ValueError(f"callback_every={callback_every!r}: must be >= 1")
    if num_shards < 1 or config.num_envs % num_shards:
        raise ValueError(
            f"num_envs={config.num_envs} must be divisible by the number of devices "
            f"{num_shards} for data-parallel training"
        )
    num_envs, num_steps = config.num_envs // num_shards, config.num_steps
    if (num_envs * num_steps) % config.num_minibatches:
        raise ValueError(
            f"num_minibatches={config.num_minibatches} must divide the per-device batch "
            f"num_envs/devices*num_steps = {num_envs}*{num_steps} = {num_envs * num_steps}"
        )
    if axis_name is None and num_shards != 1:
        raise ValueError(f"num_shards={num_shards} needs an axis_name")
    env, env_params = resolve_env(config, env, env_params)
    if is_host_env(env):
        if axis_name is not None or num_shards != 1:
            raise ValueError(
                f"env_name={config.env_name!r} steps on the host (not a JAX env): "
                "data-parallel training runs the env inside one compiled program and "
                "cannot use it"
            )
        from purejaxppo.host_train import make_host_train_fns

        return make_host_train_fns(
            config, env, networks=networks, callback=callback, callback_every=callback_every
        )
    if networks is None:
        networks = make_networks(config, env, env_params)
    networks = ensure_normalization(networks, config, env, env_params)
    # Feed-forward policies train on single transitions, recurrent ones on sequences.
    seq_len = config.seq_len if networks.stateful else 1
    num_sequences = num_envs * (num_steps // seq_len)
    if num_sequences % config.num_minibatches:
        raise ValueError(
            f"num_minibatches={config.num_minibatches} must divide the per-device number "
            f"of sequences num_envs/devices*num_steps/max_seq_len = {num_envs}*{num_steps}/"
            f"{seq_len} = {num_sequences} (recurrent={config.recurrent!r})"
        )
    info_keys = tuple(config.info_metrics)
    if info_keys:
        available = info_keys_of(env, env_params)
        unknown = [k for k in info_keys if k not in available]
        if unknown:
            raise ValueError(
                f"info_metrics={list(info_keys)}: {unknown} not in the info dict of "
                f"{config.env_name} (keys: {list(available)})"
            )
    num_actions = None
    if config.action_histogram:
        if networks.action_spec.kind != "discrete":
            raise ValueError(
                f"action_histogram=True: needs Discrete actions, {config.env_name} has "
                f"{networks.action_spec.kind} actions (their action_mean / action_std are "
                "logged)"
            )
        num_actions = networks.action_spec.num_actions
    metric_names = METRICS + extra_metric_names(num_actions, info_keys)
    rollout = make_rollout(env, env_params, networks, num_steps, info_keys)
    learn_fn = make_learn(config, networks, axis_name=axis_name, num_actions=num_actions)

    def shard_key(key: jax.Array) -> jax.Array:
        """This device's key for its envs / shuffles (the key itself on one device)."""
        if num_shards == 1:
            return key
        return jax.random.fold_in(key, jax.lax.axis_index(axis_name))

    init = make_init(
        config, env, env_params, networks=networks, num_envs=num_envs, shard_key=shard_key
    )

    def update(
        runner: RunnerState, hparams: Hyperparams
    ) -> tuple[RunnerState, dict[str, jax.Array]]:
        key, rollout_key, epochs_key = jax.random.split(runner.key, 3)
        params = runner.train_state.params
        env_carry, traj, stats = rollout(params, runner.env, shard_key(rollout_key))
        if axis_name is not None:
            stats = jax.lax.psum(stats, axis_name)

        train_state, learned, discounted = learn_fn(
            runner.train_state,
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

    def run(
        runner: RunnerState, hparams: Hyperparams, num_updates: int
    ) -> tuple[RunnerState, dict[str, jax.Array]]:
        return jax.lax.scan(lambda r, _: update(r, hparams), runner, None, length=num_updates)

    emit = None if callback is None else make_emitter(callback)

    def run_and_emit(
        runner: RunnerState, hparams: Hyperparams, run_index: jax.Array
    ) -> tuple[RunnerState, dict[str, jax.Array]]:
        """`run` over all updates, handing every `callback_every`-th update's metrics to
        the host: an outer scan over chunks of k updates, each an inner scan of `update`
        followed by one emit (no `cond` in the update loop), then the remaining
        num_updates % k updates without a call."""
        num_chunks, rest = divmod(config.num_updates, callback_every)

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

    def train(
        key: jax.Array, hparams: Hyperparams | None = None, run_index: Any = None
    ) -> TrainOutput:
        if hparams is None:
            # The barrier keeps XLA from constant-folding the config's values, so that
            # train(key) computes bitwise what train(key, Hyperparams.from_config(config))
            # and the segmented driver (runner.py) compute.
            hparams = jax.lax.optimization_barrier(Hyperparams.from_config(config))
        runner = init(key)
        if emit is None:  # the program of a run without a callback
            runner, metrics = run(runner, hparams, config.num_updates)
        else:
            index = jnp.asarray(-1 if run_index is None else run_index, jnp.int32)
            runner, metrics = run_and_emit(runner, hparams, index)
        return TrainOutput(runner_state=runner, metrics=metrics)

    return TrainFns(
        init=init,
        update=update,
        run=run,
        train=train,
        apply=networks.apply,
        networks=networks,
        metric_names=metric_names,
    )


def make_train(
    config: PPOConfig,
    env: Any = None,
    env_params: Any = None,
    *,
    networks: Networks | None = None,
    callback: MetricsCallback | None = None,
    callback_every: int = 1,
) -> Callable[..., TrainOutput]:
    """Builds `train(key, hparams=None) -> TrainOutput`, one pure function for a whole run.

    `train` initialises the actor-critic and N = `num_envs` environments from `key`, then
    runs `num_updates` PPO updates in a `lax.scan`: a rollout of T = `num_steps` steps of
    the vmapped envs, GAE (`gae_advantages`, truncation-aware), and `update_epochs` epochs
    of `num_minibatches` Adam steps on the PPO-Clip loss (Schulman et al. 2017,
    arXiv:1707.06347). One code path for every policy (`Networks`): the policy state is
    carried in `EnvCarry.policy_state` (`()` for feed-forward policies), V(final obs) is
    computed from the state after each step (`rollout.next_values`), and minibatches are
    env sequences (`update.make_sequences`; single transitions for feed-forward policies). Wrap it in
    `jax.jit`; `jax.vmap` it over keys (`[S]` typed keys) and/or `Hyperparams` with `[S]`
    leaves to train S agents in one compiled program.

    Args:
      config: the static configuration.
      env, env_params: optional gymnax-API environment object to train on instead of
        `make_env(config.env_name, config.env_kwargs)`; `env_params` defaults to the
        env's own (a given `env_params` is used with the config's env too).
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

    Returns:
      `train(key, hparams=None, run_index=None)`: `key` a typed PRNG key
      (`jax.random.key(seed)`); `hparams` a `Hyperparams` pytree (default
      `Hyperparams.from_config(config)`). It returns a `TrainOutput` with the final
      `train_state`, the final `runner_state`, and per-update `metrics` (float32
      `[num_updates]` arrays, see `TrainOutput`).

    Raises:
      ValueError: for an unknown env id or an unsupported action space, an unknown
        `info_metrics` key, or `callback_every < 1`.
    """
    fns = make_train_fns(
        config,
        env,
        env_params,
        networks=networks,
        callback=callback,
        callback_every=callback_every,
    )
    return fns.train
