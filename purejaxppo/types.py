"""Carries and outputs of the training loop (all pytrees, built with keywords)."""

from __future__ import annotations

from typing import Any, NamedTuple, Protocol

import jax
from flax import struct

Params = Any
PyTree = Any


class Env(Protocol):
    """An environment object, as the acting API takes one: what `make_env` returns (a gymnax
    `Environment`, a suite's adapter, an EnvPool or gymnasium env, a JaxMARL env), or your
    own env with gymnax's API: `reset(key, params) -> (obs, state)`, `step(key, state,
    action, params) -> (obs, state, reward, terminated, truncated, info)` and the spaces
    below. A structural type (any object with these methods is one); `Policy` reads only
    the spaces."""

    def observation_space(self, params: Any = None) -> Any:
        """The observation space under `params` (a gymnax space)."""

    def action_space(self, params: Any = None) -> Any:
        """The action space under `params` (a gymnax space)."""


class EnvParams(Protocol):
    """The params an env's `reset` / `step` take (`make_env`'s second result): gymnax's
    `EnvParams` (a flax struct: `max_steps_in_episode`, physics, ...), a suite's params,
    or None for envs that take their settings at construction (gymnasium). A structural
    type that any value is."""


class Transition(NamedTuple):
    """One rollout, stacked over time: every field has leading axes `[T, N]`.

    `final_obs` is gymnax 1.0's `info["final_observation"]`: the observation the step led
    to before any auto-reset. Its value bootstraps the return at truncated steps.
    """

    obs: jax.Array  # [T, N, *obs_shape], env dtype (or a dict / tuple of such arrays)
    # [T, N] int32 (Discrete), [T, N, K] int32 (MultiDiscrete / MultiBinary), [T, N, A]
    # float32 (Box: the unclipped sample; with squash_actions, inside the bounds)
    action: jax.Array
    log_prob: jax.Array  # [T, N] float32; log pi_old(action | obs)
    value: jax.Array  # [T, N] float32; V_old(obs)
    reward: jax.Array  # [T, N] float32
    terminated: jax.Array  # [T, N] bool; the MDP ended (no bootstrap)
    truncated: jax.Array  # [T, N] bool; a time limit cut the episode (bootstrap)
    final_obs: jax.Array  # [T, N, *obs_shape]; observation after the step, before reset
    # Policy state entering the step, before `reset` is applied: a pytree of [T, N, ...]
    # leaves ([T, N, S] float32 for the built-in cores; () for feed-forward policies).
    policy_state: PyTree
    reset: jax.Array  # [T, N] bool; the previous step ended the episode (state restarts)


@struct.dataclass
class TrainState:
    """Network parameters and optimizer state of one agent."""

    params: Params  # flax params of the actor-critic
    opt_state: (
        PyTree  # optax state of `update.make_optimizer` (Adam count, mu, nu on raveled params)
    )


@struct.dataclass
class EnvCarry:
    """Environment-side carry of the rollout: N envs as R rows of the batch.

    R = N for single-agent envs; R = N * A for JaxMARL's A agents per env (row n * A + a:
    agent a of env n; `envs.agent_rows`). What the policy reads and writes is per row;
    the envs' state and episode counters keep the layout their kind needs (`kinds`).
    """

    # The envs' state, leading axis [N] (JAX, EnvPool, JaxMARL); () for host envs, whose
    # state lives on the host.
    env_state: PyTree
    obs: jax.Array  # [R, *obs_shape]; current observation of each row
    # Undiscounted return of the running episode: [N] float32 (JaxMARL: [N, A], per agent).
    episode_return: jax.Array
    episode_length: jax.Array  # [N] int32; steps of each env's running episode
    # Policy state for the next step (`Networks.initial_state(R)` pytree; () feed-forward),
    # not yet reset: `Networks.step` restarts the rows where `reset`.
    policy_state: PyTree
    reset: jax.Array  # [R] bool; the previous step ended the row's episode (True at start)
    # [R] float32 discounted return of the running episode, for `normalize_rewards`
    # (`purejaxppo.normalize.normalize_rewards`; single-agent runs); None when off.
    discounted_return: jax.Array | None = None

    def stepped(self, out: Any, policy_state: PyTree) -> EnvCarry:
        """The carry after one step: `out` is the step's `envs.rows.EnvStep` (its env
        state, observations, episode counters and `reset`), `policy_state` the policy's
        state after the step; `discounted_return` is left as it was."""
        return self.replace(
            env_state=out.env_state,
            obs=out.obs,
            episode_return=out.episode_return,
            episode_length=out.episode_length,
            policy_state=policy_state,
            reset=out.reset,
        )


@struct.dataclass
class RunnerState:
    """Everything one agent's training carries from one update to the next."""

    train_state: TrainState
    env: EnvCarry
    key: jax.Array  # typed PRNG key
    update_step: jax.Array  # int32 scalar; updates done so far


class TrainOutput(NamedTuple):
    """What `train(key, hparams)` returns.

    `metrics` maps the names of `purejaxppo.metrics.UpdateMetrics` to float32
    `[num_updates]` arrays (`[S, num_updates]` under vmap).
    """

    runner_state: RunnerState
    metrics: dict[str, jax.Array]

    @property
    def train_state(self) -> TrainState:
        """The final `TrainState` (params and optimizer state)."""
        return self.runner_state.train_state
