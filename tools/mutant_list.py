"""The named PPO bugs of `python -m tools.mutants`: each one exact source edit (the old
text, occurring exactly once in its file, and the new text) with the target that should
catch it. The runner is `tools/mutants.py`.
"""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["MUTANTS", "Mutant"]


class Mutant(NamedTuple):
    """One named bug: `old` (exactly once in `file`) replaced by `new`."""

    name: str  # short id, kebab-case
    description: str  # the bug, in words
    file: str  # path relative to the repository root
    old: str  # exact text, occurring exactly once in `file`
    new: str  # its replacement
    # the config `check` runs on (configs/*.yaml), "gate" (every row of the learning
    # gate) or "gate:ROW[,ROW]" (those rows: `gate:learn:cartpole`)
    target: str


MUTANTS: tuple[Mutant, ...] = (
    Mutant(
        "adv-sign-flipped",
        "the advantage sign flipped in the clipped surrogate (ascends on bad actions)",
        "purejaxppo/losses.py",
        "    pg_loss = jnp.maximum(\n"
        "        -advantages * ratio, -advantages * jnp.clip(ratio, 1.0 - clip_coef, 1.0 + clip_coef)\n",
        "    pg_loss = jnp.maximum(\n"
        "        advantages * ratio, advantages * jnp.clip(ratio, 1.0 - clip_coef, 1.0 + clip_coef)\n",
        "configs/cartpole.yaml",
    ),
    Mutant(
        "gae-bootstrap-from-v-s",
        "GAE's TD error bootstraps from V(s_t) instead of V(s'_t)",
        "purejaxppo/gae.py",
        "    delta_t = reward_t + gamma * not_terminated * next_value_t - value_t\n",
        "    delta_t = reward_t + gamma * not_terminated * value_t - value_t\n",
        "configs/cartpole.yaml",
    ),
    Mutant(
        "truncation-as-termination",
        "a time-limit truncation zeroes the bootstrap, as a real termination does",
        "purejaxppo/gae.py",
        "    not_terminated = 1.0 - jnp.asarray(terminated_t, jnp.float32)\n",
        "    not_terminated = 1.0 - jnp.logical_or(terminated_t, truncated_t).astype(jnp.float32)\n",
        "configs/pendulum.yaml",
    ),
    Mutant(
        "termination-as-truncation",
        "a real termination bootstraps from V(final observation), as a truncation does",
        "purejaxppo/gae.py",
        "    not_terminated = 1.0 - jnp.asarray(terminated_t, jnp.float32)\n",
        "    not_terminated = jnp.ones_like(reward_t)\n",
        "configs/cartpole.yaml",
    ),
    Mutant(
        "truncation-bootstraps-from-reset-obs",
        "a time limit bootstraps from V(the next episode's reset observation) instead of "
        "V(final observation): the auto-reset observation stored as the final one",
        "purejaxppo/rollout.py",
        "            final_obs=out.final_obs,\n",
        "            final_obs=out.obs,\n",
        "configs/cartpole.yaml",
    ),
    Mutant(
        "gae-no-discount",
        "the discount dropped from GAE's TD error: delta = r + V(s') - V(s)",
        "purejaxppo/gae.py",
        "    delta_t = reward_t + gamma * not_terminated * next_value_t - value_t\n",
        "    delta_t = reward_t + not_terminated * next_value_t - value_t\n",
        "configs/cartpole.yaml",
    ),
    Mutant(
        "rnn-no-reset-in-rollout",
        "the recurrent state is never reset at episode starts in the rollout (the update "
        "still resets it)",
        "purejaxppo/rollout.py",
        "            params, carry.policy_state, carry.obs, carry.reset\n",
        "            params, carry.policy_state, carry.obs, jnp.zeros_like(carry.reset)\n",
        "configs/memory_chain_gru.yaml",
    ),
    Mutant(
        "rnn-stored-state-after-step",
        "the rollout stores the recurrent state after each step instead of the one "
        "entering it, so the update re-runs sequences from the wrong state",
        "purejaxppo/rollout.py",
        "            policy_state=carry.policy_state,\n",
        "            policy_state=policy_state,\n",
        "configs/memory_chain_gru.yaml",
    ),
    Mutant(
        "logprob-of-clipped-action",
        "the rollout stores the log-prob of the action clipped to the bounds instead of "
        "the sample's (continuous actions)",
        "purejaxppo/rollout.py",
        "        out = envs.step(env_key, carry, to_env_action(networks.action_spec, action))\n",
        "        env_action = to_env_action(networks.action_spec, action)\n"
        "        log_prob = dist.log_prob(env_action.reshape(action.shape).astype(action.dtype))\n"
        "        out = envs.step(env_key, carry, env_action)\n",
        "configs/pendulum.yaml",
    ),
    Mutant(
        "mask-ignored-when-sampling",
        "the action mask is ignored by the acting step (the rollout samples masked "
        "actions; the update's unroll still masks)",
        "purejaxppo/networks/factory.py",
        "        return as_state(state), distribution(actor_out, log_std, obs), value\n",
        "        return as_state(state), make_distribution(spec, actor_out, log_std, squash), value\n",
        "configs/probe_masked_action.yaml",
    ),
    Mutant(
        "vloss-to-old-values",
        "the value loss regresses V on the rollout's old values instead of the returns",
        "purejaxppo/update.py",
        "                flat(minibatch.returns),\n",
        "                flat(minibatch.value),\n",
        "configs/cartpole.yaml",
    ),
    Mutant(
        "obs-norm-not-when-acting",
        "observation normalisation applied in the update's unroll but not when acting "
        "(the rollout's step, and its values, see raw observations)",
        "purejaxppo/normalize.py",
        "    def step(params, state, obs, reset):\n        own, obs = prepare(params, obs)\n",
        "    def step(params, state, obs, reset):\n        own, _ = prepare(params, obs)\n",
        "configs/pendulum_normalized.yaml",
    ),
    Mutant(
        "ratio-against-new-logprob",
        "the ratio is taken against the new log-prob detached instead of the rollout's "
        "(ratio == 1 always: no clipping, no trust region; approx_kl reads 0)",
        "purejaxppo/losses.py",
        "    log_ratio = log_prob - old_log_prob\n",
        "    log_ratio = log_prob - jax.lax.stop_gradient(log_prob)\n",
        "configs/cartpole.yaml",
    ),
    Mutant(
        "pessimistic-bound-flipped",
        "the surrogate takes the optimistic bound (min of the losses, i.e. max of the "
        "objectives) instead of the pessimistic one: the clip never binds",
        "purejaxppo/losses.py",
        "    pg_loss = jnp.maximum(\n        -advantages * ratio,",
        "    pg_loss = jnp.minimum(\n        -advantages * ratio,",
        "configs/cartpole.yaml",
    ),
    Mutant(
        "entropy-sign-flipped",
        "the entropy bonus sign flipped (the loss rewards low entropy)",
        "purejaxppo/losses.py",
        "    entropy = jnp.mean(entropy)\n"
        "    loss = actor_coef * (pg_loss - ent_coef * entropy) + vf_coef * v_loss\n",
        "    entropy = jnp.mean(entropy)\n"
        "    loss = actor_coef * (pg_loss + ent_coef * entropy) + vf_coef * v_loss\n",
        "configs/cartpole.yaml",
    ),
    Mutant(
        "vclip-around-current-value",
        "the clipped value loss clips around the current prediction instead of the rollout's V_old",
        "purejaxppo/losses.py",
        "        value_clipped = old_value + jnp.clip(value - old_value, -clip_coef, clip_coef)\n"
        "        v_loss = 0.5 * jnp.maximum(v_loss_unclipped, jnp.square(value_clipped - "
        "returns)).mean()\n",
        "        value_clipped = value + jnp.clip(value - old_value, -clip_coef, clip_coef)\n"
        "        v_loss = 0.5 * jnp.maximum(v_loss_unclipped, jnp.square(value_clipped - "
        "returns)).mean()\n",
        "configs/cartpole.yaml",
    ),
    Mutant(
        "lambda-crosses-time-limit",
        "GAE's lambda recursion carried across a time limit (`not_terminated` where "
        "`not_done` belongs): a truncated step's advantage adds the next episode's",
        "purejaxppo/gae.py",
        "        backward, jnp.zeros((), jnp.float32), (delta_t, not_done), reverse=True\n",
        "        backward, jnp.zeros((), jnp.float32), (delta_t, not_terminated), reverse=True\n",
        "configs/cartpole.yaml",
    ),
    Mutant(
        "lambda-ignored",
        "GAE's lambda ignored: the update always uses lambda = 1 (Monte-Carlo returns)",
        "purejaxppo/learning.py",
        "        gae_lambda=hparams.gae_lambda,\n",
        "        gae_lambda=1.0,\n",
        "configs/cartpole.yaml",
    ),
    Mutant(
        "adv-norm-skipped",
        "advantages left unnormalised although norm_adv is on",
        "purejaxppo/losses.py",
        "    if axis_name is None:\n"
        "        return (advantages - advantages.mean()) / (advantages.std() + 1e-8)\n",
        "    if axis_name is None:\n        return advantages\n",
        "configs/cartpole.yaml",
    ),
)
