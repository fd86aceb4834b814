"""The setup of `train.make_train_fns`: the `TrainFns` tuple, the env and networks a run
trains, `make_init`, and every check of a run's settings against its env, done once,
before anything compiles.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from purejaxppo import kinds
from purejaxppo.config import PPOConfig
from purejaxppo.envs.resets import check_reset_ratio
from purejaxppo.envs.rows import RowsEnv, info_keys_of
from purejaxppo.hyperparams import Hyperparams
from purejaxppo.loops import LoopPlan, loop_plan
from purejaxppo.memory import check_memory, observation_size
from purejaxppo.metrics import METRICS, extra_metric_names
from purejaxppo.networks import Networks
from purejaxppo.networks.custom import param_labels
from purejaxppo.types import RunnerState, TrainOutput, TrainState
from purejaxppo.update import initial_learning_rates, make_optimizer
from purejaxppo.warm_start import apply_init, check_init, source_parts

__all__ = ["TrainFns", "TrainSetup", "make_init", "prepare"]


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
    kind: the kind of env the run trains on (`kinds`): what the drivers ask of it
    setup: the `TrainSetup` the functions were built from (its env, networks and rows,
        resolved once: `kinds.resolve`), for whatever else of the run needs them
        (`make_init`, `checkpoint.load_checkpoint`)
    hparams: the config's traced fields (`Hyperparams.from_config`), float32 scalars:
        what `train(key)` runs with, and the `hparams` to give `run` / `update` for the
        config's own values
    """

    init: Callable[[jax.Array], RunnerState]
    update: Callable[[RunnerState, Hyperparams], tuple[RunnerState, dict[str, jax.Array]]]
    run: Callable[[RunnerState, Hyperparams, int], tuple[RunnerState, dict[str, jax.Array]]]
    train: Callable[..., TrainOutput]
    apply: Callable[..., Any]
    networks: Networks
    metric_names: tuple[str, ...] = METRICS
    kind: kinds.EnvKind = kinds.JAX
    setup: TrainSetup | None = None
    hparams: Hyperparams | None = None


class TrainSetup(NamedTuple):
    """What `prepare` resolved and checked for one run."""

    env: Any
    env_params: Any  # the env's (None for a host env's own)
    networks: Networks
    num_envs: int  # per device
    num_steps: int
    info_keys: tuple[str, ...]
    num_actions: int | None  # Discrete action count with `action_histogram`, else None
    metric_names: tuple[str, ...]
    kind: kinds.EnvKind  # the kind of env, decided once (`kinds`)
    rows: RowsEnv  # the envs as rows of the batch, what the rollout steps
    plan: LoopPlan  # the loop layout of the update (`loops.loop_plan`), decided once


def _check_sizes(config: PPOConfig, num_shards: int, axis_name: str | None) -> int:
    """The per-device env count, after checking the data-parallel split."""
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
    return num_envs


def _operations(config: PPOConfig, num_shards: int, axis_name: str | None) -> tuple[str, ...]:
    """The operations of `kinds.OPERATIONS` a training run of `config` asks of its env."""
    asked = {
        "train": True,
        "data_parallel": axis_name is not None or num_shards != 1,
        "eval_freq": config.eval_freq > 0 or bool(config.eval_splits),
        "video": config.video_freq > 0,
        "collect": config.collect_freq > 0,
        "info_metrics": bool(config.info_metrics),
        "reset_ratio": config.reset_ratio not in (None, 1),
    }
    return tuple(operation for operation, used in asked.items() if used)


def _check_info_keys(config: PPOConfig, env: Any, env_params: Any) -> None:
    """Refuses an `info_metrics` key the env's info dict does not have."""
    info_keys = tuple(config.info_metrics)
    if info_keys:
        available = info_keys_of(env, env_params)
        unknown = [k for k in info_keys if k not in available]
        if unknown:
            raise ValueError(
                f"info_metrics={list(info_keys)}: {unknown} not in the info dict of "
                f"{config.env_name} (keys: {list(available)})"
            )


def _num_actions(config: PPOConfig, networks: Networks) -> int | None:
    if not config.action_histogram:
        return None
    if networks.action_spec.kind != "discrete":
        raise ValueError(
            f"action_histogram=True: needs Discrete actions, {config.env_name} has "
            f"{networks.action_spec.kind} actions (their action_mean / action_std are "
            "logged)"
        )
    return networks.action_spec.num_actions


def prepare(
    config: PPOConfig,
    env: Any = None,
    env_params: Any = None,
    *,
    networks: Networks | None = None,
    callback_every: int = 1,
    num_shards: int = 1,
    axis_name: str | None = None,
) -> TrainSetup:
    """Resolves the env and networks of a run (`kinds.resolve`, with the operations the
    config asks of the env) and checks its settings against them.

    Raises:
      ValueError: `callback_every < 1`; `num_shards` that does not divide `num_envs`, or a
        per-device batch / number of sequences that `num_minibatches` does not divide; a
        host env with data-parallel training or `info_metrics`; an `info_metrics` key the
        env's info does not have; `action_histogram` with non-Discrete actions; an
        estimated memory need beyond the device's free memory (`memory.check_memory`); a
        `reset_ratio` the env or the per-device num_envs cannot take
        (`envs.resets.check_reset_ratio`).
    """
    if callback_every < 1:
        raise ValueError(f"callback_every={callback_every!r}: must be >= 1")
    num_envs = _check_sizes(config, num_shards, axis_name)
    resolved = kinds.resolve(
        config, env, env_params, networks, _operations(config, num_shards, axis_name)
    )
    env, env_params, networks = resolved.env, resolved.env_params, resolved.networks
    check_memory(config, networks, num_envs, observation_size(env, env_params))
    plan = loop_plan(config.loop_layout)  # the program's loop layout, for every builder
    # Feed-forward policies train on single transitions, recurrent ones on sequences.
    seq_len = config.seq_len if networks.stateful else 1
    num_sequences = num_envs * (config.num_steps // seq_len)
    if num_sequences % config.num_minibatches:
        raise ValueError(
            f"num_minibatches={config.num_minibatches} must divide the per-device number "
            f"of sequences num_envs/devices*num_steps/max_seq_len = {num_envs}*"
            f"{config.num_steps}/{seq_len} = {num_sequences} (recurrent={config.recurrent!r})"
        )
    if config.reset_ratio not in (None, 1):
        check_reset_ratio(config.reset_ratio, env, env_params, num_envs)
    _check_info_keys(config, env, env_params)
    # The kind's rows fix their own keys (agents: per-agent returns and outcomes).
    rows = resolved.rows
    num_actions = _num_actions(config, networks)
    return TrainSetup(
        env=env,
        env_params=env_params,
        networks=networks,
        num_envs=num_envs,
        num_steps=config.num_steps,
        info_keys=rows.info_keys,
        num_actions=num_actions,
        metric_names=METRICS + extra_metric_names(num_actions, rows.info_keys),
        kind=resolved.kind,
        rows=rows,
        plan=plan,
    )


def make_init(
    config: PPOConfig,
    setup: Any = None,
    env_params: Any = None,
    *,
    networks: Networks | None = None,
    num_envs: int | None = None,
    shard_key: Callable[[jax.Array], jax.Array] | None = None,
    init_params: Any = None,
) -> Callable[..., RunnerState]:
    """Builds `init(key, init_params=None) -> RunnerState` alone (what `jax.eval_shape`
    needs to learn the state's shapes, e.g. to restore a checkpoint), without the rollout
    and the update.

    `setup`: the run's resolved setup (`kinds.resolve`'s `Resolved`, or `prepare`'s
    `TrainSetup`), whose networks and rows `init` uses as they are; anything else is an
    env argument as for `make_train` (None: the config's env), resolved here with
    `env_params` and `networks` (`kinds.resolve`).

    `num_envs` defaults to `config.num_envs`; `shard_key` (data-parallel runs) maps the
    env key to this device's. `init_params` (a params tree, or a `TrainState` when
    `config.init_parts` has "optimizer") is a warm start (`warm_start.py`): `init` then
    starts from its `config.init_parts`; an `init_params` argument of `init` (traced or
    not) replaces this default.

    Raises:
      ValueError: `init_params` whose layers / shapes differ from this config's network
        and env (naming the first one); a `Resolved` without rows (resolved without
        "train"); what `kinds.resolve` raises, for an unresolved `setup`.
    """
    if not isinstance(setup, (kinds.Resolved, TrainSetup)):
        setup = kinds.resolve(config, setup, env_params, networks, operations=("train",))
    if setup.rows is None:
        raise ValueError(
            'make_init: the setup has no rows to reset: resolve it with "train" among the '
            'operations (kinds.resolve(config, ..., operations=("train",)))'
        )
    networks, rows = setup.networks, setup.rows  # `rows.reset` needs no info keys
    num_envs = config.num_envs if num_envs is None else num_envs
    parts = tuple(config.init_parts)

    def init(key: jax.Array, init_params: Any = None) -> RunnerState:
        runner = fresh_init(key)
        if init_params is None:
            init_params = default_init
        if init_params is None:
            return runner
        source = source_parts(init_params, parts)
        check_init(runner.train_state, source, parts)
        return runner.replace(train_state=apply_init(runner.train_state, source))

    def fresh_init(key: jax.Array) -> RunnerState:
        param_key, env_key, runner_key = jax.random.split(key, 3)
        params = networks.init(param_key)
        tx = make_optimizer(
            config.max_grad_norm,
            initial_learning_rates(config),
            config.adam_eps,
            param_labels(params),
            config.grad_clip_per_network,
        )
        if shard_key is not None:
            env_key = shard_key(env_key)
        env_carry = rows.reset(env_key, num_envs, networks)
        if config.normalize_rewards:
            env_carry = env_carry.replace(discounted_return=jnp.zeros((num_envs,), jnp.float32))
        return RunnerState(
            train_state=TrainState(params=params, opt_state=tx.init(params)),
            env=env_carry,
            key=runner_key,
            update_step=jnp.zeros((), jnp.int32),
        )

    default_init = init_params
    if init_params is not None:  # checked here, before anything compiles
        abstract = jax.eval_shape(fresh_init, jax.random.key(0))
        check_init(abstract.train_state, source_parts(init_params, parts), parts)
    return init
