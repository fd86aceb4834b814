"""One step of a policy for your own loop: the action with its log-probability, entropy and
value (`Policy.get_action`), and the log-probability, entropy and value of given actions
(`Policy.evaluate_actions`), as AgileRL's `get_action` / `evaluate_actions`.

Built on `Networks.step` and the same distributions the rollout samples from
(`networks.distributions`), so a custom PPO loss on these numbers is the library's.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import distrax
import jax
import jax.numpy as jnp

from purejaxppo.networks import (
    ActionSpec,
    Networks,
    State,
    apply_action_mask,
    multi_discrete_logits,
    select_action,
)
from purejaxppo.types import Params


class ActionOutput(NamedTuple):
    """An action of the policy with its log-probability, entropy and value
    (`Policy.get_action`; AgileRL's `action, log_prob, entropy, value`).

    `action` is in the policy's action space, the array the rollout stores as
    `Transition.action` and `log_prob` is of: for Box actions the unclipped Gaussian
    sample (or the squashed sample, already within the bounds, with `squash_actions`).
    The env takes `to_env_action(spec, action)` (`Policy.to_env_action`: Box actions
    clipped to the bounds and given the env's action shape; the others as int32).
    """

    action: jax.Array  # [B] int32 (Discrete), [B, K] / [B, n] int32, or [B, A] float32 (Box)
    log_prob: jax.Array  # [B] float32, log pi(action | obs)
    entropy: jax.Array  # [B] float32, of the action distribution
    value: jax.Array  # [B] float32, V(obs)


class ActResult(NamedTuple):
    """`Policy.act(obs, key, return_model_output=True)`'s result: the actions and the
    model's outputs they were chosen from (a tuple: `action, output = policy.act(...)`).
    No batch axis for one observation."""

    # [B] int32 (Discrete), [B, *action_shape] int32 (MultiDiscrete, MultiBinary) or
    # float32 (Box, within the bounds): what `env.step` takes
    action: jax.Array
    # `logits` (log-probabilities [B, n] / [B, K, max n], or Bernoulli logits [B, n]), or
    # `mean` and `log_std` of the (pre-squash) Gaussian [B, A]; and `value` [B]; float32
    model_output: dict[str, jax.Array]


class ActionEvaluation(NamedTuple):
    """Log-probability, entropy and value of given actions (`Policy.evaluate_actions`;
    AgileRL's `log_prob, entropy, value`)."""

    log_prob: jax.Array  # [B] float32, log pi(action | obs)
    entropy: jax.Array  # [B] float32, of the action distribution
    value: jax.Array  # [B] float32, V(obs)


def action_shape(spec: ActionSpec) -> tuple[int, ...]:
    """Shape of one action in the policy's action space (what `ActionOutput.action`
    holds per row, and `evaluate_actions` takes): `()` Discrete, `(K,)` MultiDiscrete,
    `(n,)` MultiBinary, `(A,)` Box with A = `spec.num_actions` (the env's action shape
    flattened)."""
    if spec.kind == "discrete":
        return ()
    if spec.kind == "multi_discrete":
        return (len(spec.nvec),)
    return (spec.num_actions,)


def mask_distribution(
    spec: ActionSpec, dist: distrax.Distribution, mask: jax.Array | None
) -> distrax.Distribution:
    """`dist` `[B]` with the actions where `mask` `[B, spec.num_actions]` is 0 / False made
    impossible (`apply_action_mask`; on top of any mask the observation carries).
    Discrete and MultiDiscrete only (the mask is the flat `[B, sum(nvec)]` for
    MultiDiscrete, as `PPOConfig.action_mask_key` takes it); None returns `dist`."""
    if mask is None:
        return dist
    if spec.kind == "discrete":
        return distrax.Categorical(logits=apply_action_mask(dist.logits, mask))
    logits = dist.distribution.logits  # [B, K, max(nvec)], padding PAD_LOGIT
    # The flat mask split like the logits; its padding (PAD_LOGIT != 0) keeps the padding.
    valid = multi_discrete_logits(jnp.asarray(mask, jnp.float32), spec.nvec)
    return distrax.Independent(distrax.Categorical(logits=apply_action_mask(logits, valid)), 1)


def make_act(networks: Networks) -> Any:
    """`act(params, state, obs [B], reset [B], key, temperature) -> (state, actions, outputs)`.

    One policy step for B envs from `networks.step` and `select_action` (the same code the
    rollout's networks and the export mirror): temperature 1 samples, 0 is greedy
    (`Policy.act`).
    """

    def act(params, state, obs, reset, key, temperature):
        state, dist, value = networks.step(params, state, obs, reset)
        action, outputs = select_action(networks.action_spec, dist, value, key, temperature)
        return state, action, outputs

    return act


def make_get_action(networks: Networks) -> Any:
    """`get_action(params, state, obs, reset, key, mask, greedy) -> (state, ActionOutput)`.

    One policy step for B envs: `networks.step(params, state [B, ...], obs [B, ...],
    reset [B] bool)`, then an action `[B, ...]` with its log-probability, the entropy of
    its distribution and the value `[B]`. Sampled as the rollout samples it
    (`dist.sample_and_log_prob(seed=key)`, `rollout.make_env_step`), or with `greedy`
    (a Python bool; `key` unused) the mode: the argmax (per component for
    MultiDiscrete, logit > 0 per bit for MultiBinary) or the Gaussian mean (with
    `squash_actions` the squashed mean), with its log-probability. `mask` `[B, A]`
    (or None) restricts Discrete / MultiDiscrete actions (`mask_distribution`).
    """

    def get_action(
        params: Params,
        state: State,
        obs: Any,
        reset: jax.Array,
        key: jax.Array,
        mask: jax.Array | None,
        greedy: bool,
    ) -> tuple[State, ActionOutput]:
        state, dist, value = networks.step(params, state, obs, reset)
        dist = mask_distribution(networks.action_spec, dist, mask)
        if greedy:
            action = dist.mode()
            log_prob = dist.log_prob(action)
        else:
            action, log_prob = dist.sample_and_log_prob(seed=key)
        return state, ActionOutput(action, log_prob, dist.entropy(), value)

    return get_action


def make_evaluate_actions(networks: Networks) -> Any:
    """`evaluate_actions(params, state, obs, reset, actions, mask) -> ActionEvaluation`.

    The log-probability `[B]` of given actions (the policy's action space,
    `action_shape`: for Box the unclipped sample, not the clipped env action), the
    entropy `[B]` and the value `[B]` after one `networks.step` from `state` `[B, ...]`:
    the numbers the update recomputes for a stored transition (`update.py`).
    Differentiable in `params`. `mask` as in `make_get_action`.
    """

    def evaluate_actions(
        params: Params,
        state: State,
        obs: Any,
        reset: jax.Array,
        actions: jax.Array,
        mask: jax.Array | None,
    ) -> ActionEvaluation:
        _, dist, value = networks.step(params, state, obs, reset)
        dist = mask_distribution(networks.action_spec, dist, mask)
        return ActionEvaluation(dist.log_prob(actions), dist.entropy(), value)

    return evaluate_actions
