"""`learn`: the PPO update on its own, for transitions collected by any loop.

`make_train` runs `make_learn`'s function after every rollout; `learn` is the same
function for users who step their environments themselves (AgileRL-style
`learn(experiences)`).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from types import SimpleNamespace
from typing import Any

import jax
import jax.numpy as jnp

from purejaxppo.collectives import merged_moments
from purejaxppo.config import PPOConfig
from purejaxppo.gae import gae_advantages, n_step_advantages
from purejaxppo.hyperparams import Hyperparams
from purejaxppo.loops import LoopPlan, loop_plan
from purejaxppo.metrics import LOOP_METRICS, UpdateMetrics, rollout_statistics
from purejaxppo.networks import Networks
from purejaxppo.normalize import normalize_rewards, normalized_inputs, update_obs_stats
from purejaxppo.rollout import next_values
from purejaxppo.sequences import Batch, make_sequences, trajectory_minibatches
from purejaxppo.types import TrainState, Transition
from purejaxppo.update import make_update_epochs

__all__ = ["explained_variance", "learn", "learning_rates", "make_learn"]

#: The metrics `learn` returns: `UpdateMetrics`' fields in their order, less
#: `metrics.LOOP_METRICS` (the episode statistics and `env_steps` are the caller's: only
#: its loop knows the episodes and the step count). Derived, so it holds every `LossTerms`
#: field.
LEARN_METRICS = tuple(name for name in UpdateMetrics._fields if name not in LOOP_METRICS)


def explained_variance(
    values: jax.Array, returns: jax.Array, axis_name: str | None = None
) -> jax.Array:
    """1 - Var[G - V] / Var[G] over all samples; NaN when Var[G] = 0 (as CleanRL / SB3).

    With `axis_name`, the variances are over the samples of all devices on the axis
    (equal shard sizes assumed).
    """
    if axis_name is None:
        var_returns = jnp.var(returns)
        var_residual = jnp.var(returns - values)
    else:  # every device's moments, merged (one all-reduce)
        local = (returns, returns - values)
        means = tuple(jnp.mean(x) for x in local)
        variances = tuple(jnp.mean(jnp.square(x - m)) for x, m in zip(local, means, strict=True))
        _, (var_returns, var_residual) = merged_moments(means, variances, axis_name)
    return jnp.where(var_returns == 0, jnp.nan, 1.0 - var_residual / var_returns)


def learning_rates(
    config: PPOConfig, update_step: jax.Array, hparams: Hyperparams
) -> dict[str, jax.Array]:
    """Step sizes of update `update_step` (0-based): "shared" (`learning_rate`), "actor",
    "critic" (their own rates, or `learning_rate` where NaN = unset), linearly annealed
    towards `end_learning_rate` over `config.num_updates` with anneal_lr."""
    update_step = jnp.asarray(update_step)

    def annealed(start: jax.Array) -> jax.Array:
        if not config.anneal_lr:
            return start
        frac = update_step.astype(jnp.float32) / config.num_updates
        return start + frac * (hparams.end_learning_rate - start)

    def own(rate: jax.Array) -> jax.Array:
        return jnp.where(jnp.isnan(rate), hparams.learning_rate, rate)

    return {
        "shared": annealed(hparams.learning_rate),
        "actor": annealed(own(hparams.actor_learning_rate)),
        "critic": annealed(own(hparams.critic_learning_rate)),
    }


def _training_batch(
    config: PPOConfig,
    traj: Transition,
    advantages: jax.Array,
    returns: jax.Array,
    key: jax.Array,
    *,
    seq_len: int,
    windows: bool,
) -> tuple[Batch, jax.Array]:
    """`(batch, key)`: the update's `[K, L]` sequences, fixed chunks of `seq_len` steps
    (`key` unchanged) or K trajectory windows drawn with a key split off `key` (the
    chunks' shuffles stay as they were)."""
    if not windows:
        return make_sequences(traj, advantages, returns, seq_len), key
    key, window_key = jax.random.split(key)
    batch = trajectory_minibatches(
        window_key,
        traj,
        advantages,
        returns,
        timesteps=seq_len,
        num_windows=traj.reward.shape[1] * (config.num_steps // seq_len),
        prob_go_from_end=config.window_prob_from_end,
    )
    return batch, key


def _advantage_estimator(config: PPOConfig, plan: LoopPlan, hparams: Hyperparams) -> Callable:
    """`estimate(reward, value, next_value, terminated, truncated) -> (advantages,
    returns)` of one env's `[T]` steps: GAE laid out by `plan`, or n-step returns."""
    if config.advantage_estimator == "n_step":
        return partial(n_step_advantages, gamma=hparams.gamma, n_step=config.n_step)
    return partial(
        gae_advantages,
        gamma=hparams.gamma,
        gae_lambda=hparams.gae_lambda,
        method="associative" if plan.gae == "associative" else "scan",
    )


def make_learn(
    config: PPOConfig,
    networks: Networks,
    plan: LoopPlan,
    *,
    axis_name: str | None = None,
    num_actions: int | None = None,
) -> Callable[..., tuple[TrainState, dict[str, jax.Array]]]:
    """Builds `learn(train_state, traj, last_state, key, hparams, update_step,
    discounted_return=None) -> (train_state, metrics, discounted_return)`, the update that
    `make_train` runs after each rollout (see `learn` for the arguments).

    With `config.normalize_rewards`, `discounted_return` `[N]` is every env's running
    discounted return before the rollout (`EnvCarry.discounted_return`) and the returned
    one its value after; the rewards are scaled before GAE (`normalize.normalize_rewards`).
    With `config.normalize_observations`, `networks` normalise (`ensure_normalization`)
    and the statistics in the params are merged with `traj.obs` after the epochs; with
    `normalize_timing: "step"` the rollout moved them and stored normalised observations
    (`rollout.make_normalizing_rollout`), on which the update learns as they are.

    `plan` (the run's `loops.loop_plan`: `TrainSetup.plan`) lays out the GAE scan and
    the epochs.

    With `config.sequence_sampling` "windows" (stateful networks), the epochs train on
    trajectory windows drawn once per update (`sequences.trajectory_minibatches`, from a key
    split off `key`) instead of the fixed chunks of `sequences.make_sequences`.

    `num_actions` adds the `action_frac/<i>` metrics; with `axis_name` (data-parallel
    training), `traj` is this device's share and everything is reduced over the axis.
    Returns `(train_state, metrics)`: `LEARN_METRICS`, then `action_frac/<i>`.
    """
    seq_len = config.seq_len if networks.stateful else 1
    windows = config.sequence_sampling == "windows" and networks.stateful
    per_step = config.normalize_timing == "step"
    if per_step and config.normalize_observations:
        # The rollout stored normalised observations (`rollout.make_normalizing_rollout`)
        # and already moved the statistics in the params.
        networks = normalized_inputs(networks)
    update_epochs = make_update_epochs(config, networks, axis_name, plan)

    def learn_fn(
        train_state: TrainState,
        traj: Transition,
        last_state: Any,
        key: jax.Array,
        hparams: Hyperparams,
        update_step: jax.Array,
        discounted_return: jax.Array | None = None,
    ) -> tuple[TrainState, dict[str, jax.Array], jax.Array | None]:
        params = train_state.params
        after = SimpleNamespace(policy_state=last_state)  # what next_values reads of a carry
        next_value = next_values(networks, params, traj, after)
        reward, new_stats = traj.reward, {}
        if config.normalize_rewards:
            done = jnp.logical_or(traj.terminated, traj.truncated)
            new_stats["reward_norm"], discounted_return, reward = normalize_rewards(
                params["reward_norm"],
                discounted_return,
                traj.reward,
                done,
                hparams.gamma,
                config.reward_clip,
                axis_name,
                per_step=per_step,
            )
        estimate = _advantage_estimator(config, plan, hparams)
        advantages, returns = jax.vmap(estimate, in_axes=1, out_axes=1)(
            reward, traj.value, next_value, traj.terminated, traj.truncated
        )
        batch, key = _training_batch(
            config, traj, advantages, returns, key, seq_len=seq_len, windows=windows
        )
        rates = learning_rates(config, update_step, hparams)
        actor_coef = (update_step >= config.critic_pretrain_steps).astype(jnp.float32)
        train_state, losses = update_epochs(train_state, batch, key, hparams, rates, actor_coef)
        if config.normalize_observations and not per_step:
            # After the epochs: this update's rollout, bootstrap and epochs all used the
            # statistics it started with (the optimizer left them unchanged).
            new_stats["obs_norm"] = update_obs_stats(
                params["obs_norm"], traj.obs, networks.normalization.leaves, axis_name
            )
        if new_stats:
            train_state = train_state.replace(params={**train_state.params, **new_stats})
        statistics = rollout_statistics(
            traj.value, advantages, returns, traj.log_prob, traj.action, num_actions, axis_name
        )
        metrics = {
            **losses,
            # Windows repeat and pad steps: the variance is the rollout's.
            "explained_variance": explained_variance(
                *((traj.value, returns) if windows else (batch.value, batch.returns)), axis_name
            ),
            "learning_rate": rates["shared"],
            **statistics,
        }
        ordered = {name: metrics.pop(name) for name in LEARN_METRICS}
        return train_state, {**ordered, **metrics}, discounted_return

    return learn_fn


def _refuse_statistics_of_the_rollout(config: PPOConfig) -> None:
    """`learn`'s refusals: the statistics `make_train`'s rollout keeps across calls."""
    if config.normalize_rewards:
        raise ValueError(
            "learn: normalize_rewards=True needs each env's discounted return across calls; "
            "train with make_train, or scale the rewards in your loop"
        )
    if config.normalize_observations and config.normalize_timing == "step":
        raise ValueError(
            "learn: normalize_timing='step' moves the observation statistics inside the "
            "rollout (make_train's); with your own transitions use normalize_timing='update'"
        )


def learn(
    train_state: TrainState,
    transitions: Transition,
    last_obs: Any,
    key: jax.Array,
    hparams: Hyperparams | None = None,
    *,
    config: PPOConfig,
    networks: Networks,
    last_state: Any = None,
    update_step: jax.typing.ArrayLike = 0,
) -> tuple[TrainState, dict[str, jax.Array]]:
    """One PPO update on transitions collected by your own loop: bootstrap values, GAE,
    then `update_epochs` epochs of `num_minibatches` Adam steps on the PPO-Clip loss.

    The same function `make_train` runs after each of its rollouts (so `learn` on a
    rollout of `make_train`'s equals its update bitwise). PPO: Schulman et al. 2017,
    "Proximal Policy Optimization Algorithms", arXiv:1707.06347; GAE: Schulman et al. 2016,
    arXiv:1506.02438 (`gae_advantages`: a terminated step bootstraps nothing, a truncated
    one bootstraps from V(final_obs)). Jittable (`config` and `networks` static: close over
    them, e.g. `jax.jit(partial(learn, config=config, networks=networks))`), and vmappable.

    Args:
      train_state: `TrainState` (params of `networks`, optax state of
        `update.make_optimizer`, e.g. from `make_train_fns(config).init(key)`).
      transitions: `Transition` with leading axes `[T, N]`, T = `config.num_steps` steps
        of N envs (N * T / seq_len must split into `num_minibatches`):
        obs `[T, N, *obs_shape]` (the observation each action was taken in), action
        `[T, N]` int32 (Discrete) / `[T, N, K]` int32 / `[T, N, A]` float32 (the sampled,
        unclipped action), log_prob float32 `[T, N]` (log pi_old(action | obs)), value
        float32 `[T, N]` (V_old(obs)), reward float32 `[T, N]`, terminated / truncated
        bool `[T, N]` (kept apart), final_obs `[T, N, *obs_shape]` (the observation the
        step led to, before any auto-reset: gymnasium's `info["final_obs"]` where the
        episode ended, the next obs elsewhere) or None, policy_state (the policy state
        entering each step, `()` for feed-forward policies), reset bool `[T, N]` (the
        previous step ended the env's episode).
      last_obs: `[N, *obs_shape]`, the observation after step T - 1 (after any reset).
        Used only when `transitions.final_obs` is None: final_obs is then obs shifted by
        one step with `last_obs` last, which is right except after an episode end, so
        then truncated steps are treated as terminated (no bootstrap, as CleanRL).
      key: typed PRNG key of the minibatch shuffles.
      hparams: `Hyperparams` (default `Hyperparams.from_config(config)`).
      config: the static `PPOConfig` (update_epochs, num_minibatches, norm_adv, ...).
      networks: the `Networks` that produced log_prob / value.
      last_state: the policy state after step T - 1 (`[N, ...]` leaves, before any reset);
        required for recurrent policies, `()` / None for feed-forward ones.
      update_step: int, 0-based index of this update (for anneal_lr and
        critic_pretrain_steps).

    Returns:
      `(train_state, metrics)`: metrics maps `LEARN_METRICS` (losses, explained_variance,
      learning_rate, rollout statistics; see `UpdateMetrics`) to float32 scalars.

    Raises:
      ValueError: leaves of `transitions` whose leading axes are not `[T, N]` with
        T = config.num_steps, a recurrent policy without `last_state`, or
        `normalize_rewards` (the running discounted return spans calls; with
        `normalize_observations`, pass networks from `make_networks(config, ...)`: their
        statistics in the params are updated from `transitions.obs`), or
        `normalize_observations` with `normalize_timing: "step"` (moved in the rollout).
    """
    if hparams is None:
        hparams = Hyperparams.from_config(config)
    shape = jnp.shape(transitions.reward)
    if len(shape) != 2 or shape[0] != config.num_steps:
        raise ValueError(
            f"transitions.reward has shape {shape}: expected [T, N] with T = num_steps = "
            f"{config.num_steps}"
        )
    for name in ("obs", "action", "log_prob", "value", "terminated", "truncated", "reset"):
        for leaf in jax.tree.leaves(getattr(transitions, name)):
            if jnp.shape(leaf)[:2] != shape:
                raise ValueError(
                    f"transitions.{name} has shape {jnp.shape(leaf)}: expected leading "
                    f"axes [T, N] = {list(shape)}"
                )
    if last_state is None:
        if networks.stateful:
            raise ValueError("learn: a recurrent policy needs last_state (the state after T-1)")
        last_state = networks.initial_state(shape[1])
    if transitions.final_obs is None:
        final_obs = jax.tree.map(
            lambda o, last: jnp.concatenate([o[1:], jnp.asarray(last)[None]], axis=0),
            transitions.obs,
            last_obs,
        )
        transitions = transitions._replace(
            final_obs=final_obs,
            terminated=jnp.logical_or(transitions.terminated, transitions.truncated),
        )
    _refuse_statistics_of_the_rollout(config)
    learn_fn = make_learn(config, networks, loop_plan(config.loop_layout))
    train_state, metrics, _ = learn_fn(
        train_state, transitions, last_state, key, hparams, jnp.asarray(update_step)
    )
    return train_state, metrics
