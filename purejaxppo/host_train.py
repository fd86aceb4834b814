"""Training on a host env (`envs.host.HostEnv`, e.g. "gymnasium:CartPole-v1").

A Python loop around two compiled functions: the policy step (`Networks.step` and the
action sample for all N envs, one call per env step) and the PPO update (`learning.make_learn`,
the same function `make_train` runs after its rollouts). The envs step on the host in
between. benchmarks/gymnasium_host.py measures it against stepping the env from inside one
jitted rollout with `jax.experimental.io_callback`: on a quiet 2-core CPU the two tie
(median 64.2 ms vs 64.5 ms per 512-step update of CartPole-v1; best 51.6 vs 45.7 ms), so
the host loop, which needs no callback support and shares `learn` with users' own loops,
is kept; see benchmarks/results/gymnasium_host.json.

`make_train_fns(config)` returns these functions for a host env (`TrainFns.host` True), so
`make_train`, `purejaxppo train` and `drivers.single.train_and_log` need no other change.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from purejaxppo.callback import MetricsCallback
from purejaxppo.config import PPOConfig
from purejaxppo.envs.host import HostEnv, HostVecEnv
from purejaxppo.hyperparams import Hyperparams
from purejaxppo.learning import LEARN_METRICS, make_learn
from purejaxppo.networks import Networks, to_env_action
from purejaxppo.train_setup import TrainFns, TrainSetup, make_init, prepare
from purejaxppo.types import EnvCarry, RunnerState, TrainOutput, Transition

__all__ = ["make_host_train_fns"]

#: `fold_in` index (of a runner's key) of the seed the host envs are reset with.
ENV_SEED_STREAM = 0x6E7


def make_host_train_fns(
    config: PPOConfig,
    env: HostEnv,
    *,
    networks: Networks | None = None,
    callback: MetricsCallback | None = None,
    callback_every: int = 1,
    setup: TrainSetup | None = None,
    init_params: Any = None,
) -> TrainFns:
    """`TrainFns` for a host env (see `make_train_fns`; `host` is True).

    `init(key)` is pure and jittable (the carry's observations are zeros until the envs
    are reset); `update`, `run` and `train` step the envs on the host and must be called
    without jit / vmap. The N envs are created and reset (env i seeded from the runner's
    key, + i) whenever `run` is given a runner other than the one it last returned (a
    fresh `init`, a restored checkpoint: a resumed run restarts its episodes); otherwise
    they continue where the last call left them.

    `setup`: what `train_setup.prepare` returned for this run (`make_train_fns` passes
    it); None prepares it here.

    Raises:
      ValueError: `info_metrics` (host envs have no traced info dict), `num_minibatches`
        that does not divide the batch, `callback_every < 1` (`train_setup.prepare`).
    """
    if setup is None:
        setup = prepare(config, env, networks=networks, callback_every=callback_every)
    if not setup.host:
        raise ValueError(f"env_name={config.env_name!r}: not a host env (use make_train_fns)")
    networks, metric_names = setup.networks, setup.metric_names
    init = make_init(config, setup.env, None, networks=networks, init_params=init_params)
    update = _make_host_update(config, setup)

    def run(
        runner: RunnerState, hparams: Hyperparams, num_updates: int, emit=None
    ) -> tuple[RunnerState, dict[str, jax.Array]]:
        rows = []
        for _ in range(num_updates):
            runner, metrics = update(runner, hparams)
            rows.append(metrics)
            if emit is not None:
                emit(int(runner.update_step), metrics)
        stacked = {
            name: jnp.asarray(np.stack([np.asarray(r[name]) for r in rows]))
            for name in metric_names
        }
        return runner, stacked

    def train(
        key: jax.Array, hparams: Hyperparams | None = None, run_index: Any = None
    ) -> TrainOutput:
        leaves = [key, hparams, *jax.tree.leaves(hparams)]
        if any(isinstance(x, jax.core.Tracer) for x in leaves):
            raise ValueError(
                f"env_name={config.env_name!r} steps on the host (not a JAX env): its train "
                "function cannot be traced (jax.jit / jax.vmap over seeds or "
                "hyperparameters); call it directly, one agent at a time"
            )
        if hparams is None:
            hparams = Hyperparams.from_config(config)
        emit = None
        if callback is not None:
            index = -1 if run_index is None else int(run_index)

            def emit(update_count: int, metrics: dict[str, Any]) -> None:
                if update_count % callback_every == 0:
                    callback(index, update_count, {k: float(v) for k, v in metrics.items()})

        runner = jax.jit(init)(key)
        runner, metrics = run(runner, hparams, config.num_updates, emit)
        return TrainOutput(runner_state=runner, metrics=metrics)

    return TrainFns(
        init=init,
        update=update,
        run=run,
        train=train,
        apply=networks.apply,
        networks=networks,
        metric_names=metric_names,
        host=True,
        kind=setup.kind,
    )


def _make_policy_fns(networks: Networks, num_envs: int, num_steps: int) -> tuple[Any, ...]:
    """The compiled pieces of a host rollout: `policy_step`, `split_keys`, `env_seed`."""

    @jax.jit
    def policy_step(params, policy_state, obs, reset, key_data):
        # Raw key data: slicing a NumPy array per step costs nothing, indexing a JAX
        # array of keys one dispatch each.
        key = jax.random.wrap_key_data(key_data)
        policy_state, dist, value = networks.step(params, policy_state, obs, reset)
        action, log_prob = dist.sample_and_log_prob(seed=key)
        return policy_state, action, to_env_action(networks.action_spec, action), log_prob, value

    @jax.jit
    def split_keys(key):
        key, rollout_key, epochs_key = jax.random.split(key, 3)
        return key, jax.random.key_data(jax.random.split(rollout_key, num_steps)), epochs_key

    @jax.jit
    def env_seed(key):
        return jax.random.randint(
            jax.random.fold_in(key, ENV_SEED_STREAM), (), 0, 2**31 - num_envs, jnp.int32
        )

    return policy_step, split_keys, env_seed


def _host_rollout(
    vec: HostVecEnv, policy_step: Any, params: Any, carry: EnvCarry, step_keys: np.ndarray
) -> tuple[Transition, EnvCarry, tuple[float, float, float]]:
    """Steps the N host envs `len(step_keys)` times from `carry`: the trajectory
    (`[T, N]` leaves), the carry after it (its `discounted_return` unchanged) and the
    sums (return, length, count) over the episodes that ended."""
    obs, policy_state, reset = carry.obs, carry.policy_state, carry.reset
    episode_return = np.asarray(carry.episode_return)
    episode_length = np.asarray(carry.episode_length)
    return_sum = length_sum = count = 0.0
    steps = []
    for step_key in step_keys:
        next_state, action, env_action, log_prob, value = jax.device_get(
            policy_step(params, policy_state, obs, reset, step_key)
        )
        next_obs, reward, terminated, truncated, final_obs = vec.step(np.asarray(env_action))
        done = terminated | truncated
        episode_return = episode_return + reward
        episode_length = episode_length + 1
        return_sum += float(episode_return[done].sum())
        length_sum += float(episode_length[done].sum())
        count += float(done.sum())
        steps.append(
            (obs, action, log_prob, value, reward, terminated, truncated, final_obs)
            + (policy_state, reset)
        )
        episode_return = np.where(done, 0.0, episode_return).astype(np.float32)
        episode_length = np.where(done, 0, episode_length).astype(np.int32)
        obs, policy_state, reset = next_obs, next_state, done
    traj = Transition(*jax.tree.map(lambda *xs: np.stack(xs), *steps))
    carry = EnvCarry(
        env_state=(),
        obs=jax.tree.map(jnp.asarray, obs),
        episode_return=jnp.asarray(episode_return),
        episode_length=jnp.asarray(episode_length),
        policy_state=policy_state,
        reset=jnp.asarray(reset),
        discounted_return=carry.discounted_return,
    )
    return traj, carry, (return_sum, length_sum, count)


def _make_host_update(config: PPOConfig, setup: TrainSetup) -> Any:
    """`update(runner, hparams) -> (runner, metrics)` stepping the envs on the host."""
    networks, num_envs, num_steps = setup.networks, setup.num_envs, setup.num_steps
    learn_fn = jax.jit(make_learn(config, networks, num_actions=setup.num_actions))
    policy_step, split_keys, env_seed = _make_policy_fns(networks, num_envs, num_steps)
    live: dict[str, Any] = {"vec": None, "runner": None}

    def start_envs(runner: RunnerState) -> RunnerState:
        """Creates (once) and resets the N envs; the carry restarts every episode."""
        if live["vec"] is None:
            live["vec"] = setup.env.make_vec(num_envs, config.host_vectorization)
        obs = live["vec"].reset(int(env_seed(runner.key)))
        carry = runner.env.replace(
            obs=jax.tree.map(jnp.asarray, obs),
            episode_return=jnp.zeros((num_envs,), jnp.float32),
            episode_length=jnp.zeros((num_envs,), jnp.int32),
            policy_state=networks.initial_state(num_envs),
            reset=jnp.ones((num_envs,), bool),
        )
        return runner.replace(env=carry)

    def update(
        runner: RunnerState, hparams: Hyperparams
    ) -> tuple[RunnerState, dict[str, jax.Array]]:
        if runner is not live["runner"]:
            runner = start_envs(runner)
        key, step_keys, epochs_key = split_keys(runner.key)
        params = runner.train_state.params
        traj, carry, (return_sum, length_sum, count) = _host_rollout(
            live["vec"], policy_step, params, runner.env, np.asarray(step_keys)
        )
        train_state, learned, discounted = learn_fn(
            runner.train_state,
            traj,
            carry.policy_state,
            epochs_key,
            hparams,
            runner.update_step,
            runner.env.discounted_return,
        )
        nan = np.float32(np.nan)
        metrics = {
            "episode_return": np.float32(return_sum / count) if count else nan,
            "episode_length": np.float32(length_sum / count) if count else nan,
            "episode_count": np.float32(count),
            **{name: learned[name] for name in LEARN_METRICS},
            "env_steps": np.float32((int(runner.update_step) + 1) * num_envs * num_steps),
        }
        metrics = {name: metrics.get(name, learned.get(name)) for name in setup.metric_names}
        new_runner = RunnerState(
            train_state=train_state,
            env=carry.replace(discounted_return=discounted),
            key=key,
            update_step=runner.update_step + 1,
        )
        live["runner"] = new_runner
        return new_runner, metrics

    return update
