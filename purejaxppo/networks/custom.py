"""Bring your own networks: a `Networks` from a user's flax actor and critic modules.

AgileRL's `actor_network` / `critic_network`, MetaBox's `networks={"actor": ...,
"critic": ...}`: the user's modules replace the built-in encoders and heads; the action
distribution, masks, env-action conversion and everything after stay the library's.
"""

from __future__ import annotations

from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp

from purejaxppo.networks.distributions import make_distribution
from purejaxppo.networks.factory import Networks
from purejaxppo.networks.specs import (
    action_spec,
    check_action_mask,
    split_action_mask,
    zeros_like_space,
)
from purejaxppo.types import Params


def networks_from_modules(
    actor: nn.Module,
    critic: nn.Module,
    env: Any,
    env_params: Any = None,
    *,
    action_mask_key: str | None = "action_mask",
    log_std_init: float = 0.0,
) -> Networks:
    """A feed-forward `Networks` from flax modules `actor(obs) -> actor_out` and
    `critic(obs) -> value`.

    Args:
      actor: maps observations `[B, ...]` (the env's, a dict / tuple for structured
        observations, the action mask included) to float32 actor outputs
        `[B, num_actions]`: logits (Discrete, MultiDiscrete `[B, sum(nvec)]`,
        MultiBinary) or the Gaussian mean (Box; a state-independent `log_std` `[A]` is
        added beside the module's params, init `log_std_init`).
      critic: maps the same observations to values `[B]` or `[B, 1]`.
      env, env_params: the environment (its spaces fix the action head).
      action_mask_key: the dict-observation entry holding the action mask (None: off).
      log_std_init: initial `log_std` of Box actions (the std starts at exp of it).

    The params are `{"params": {"actor": ..., "critic": ..., "log_std": ...}}`, so
    `actor_learning_rate` / `critic_learning_rate` apply to the two modules. Training,
    checkpoints, `Policy`, `evaluate`, sweeps and PBT take the result
    (`make_train(config, networks=...)`); the export refuses it (it maps only the built-in
    `ActorCritic`).

    Raises:
      ValueError: for an unsupported action space or a mask that does not fit it, or when
        the modules' outputs have the wrong shapes (at `init`).
    """
    if env_params is None:
        env_params = getattr(env, "default_params", None)
    spec = action_spec(env, env_params)
    obs_space = env.observation_space(env_params)
    _, mask_key = split_action_mask(obs_space, action_mask_key)
    check_action_mask(spec, obs_space, mask_key, env)
    continuous = spec.kind == "continuous"

    def outputs(params: Params, obs: Any) -> tuple[jax.Array, jax.Array]:
        p = params["params"]
        actor_out = actor.apply({"params": p["actor"]}, obs)
        value = critic.apply({"params": p["critic"]}, obs)
        return actor_out, value.reshape(value.shape[0])

    def init(key: jax.Array) -> Params:
        actor_key, critic_key = jax.random.split(key)
        obs = zeros_like_space(obs_space, 2)
        params = {
            "actor": actor.init(actor_key, obs)["params"],
            "critic": critic.init(critic_key, obs)["params"],
        }
        if continuous:
            params["log_std"] = jnp.full((spec.num_actions,), log_std_init, jnp.float32)
        actor_out = jax.eval_shape(actor.apply, {"params": params["actor"]}, obs)
        value = jax.eval_shape(critic.apply, {"params": params["critic"]}, obs)
        _check_output_shapes(actor_out.shape, value.shape, spec, env)
        return {"params": params}

    def apply(params: Params, obs: Any):
        actor_out, value = outputs(params, obs)
        log_std = params["params"]["log_std"] if continuous else None
        mask = None if mask_key is None else obs[mask_key]
        return make_distribution(spec, actor_out, log_std, False, mask), value

    def step(params: Params, state: Any, obs: Any, reset: jax.Array):
        del reset  # stateless
        dist, value = apply(params, obs)
        return state, dist, value

    def unroll(params: Params, state: Any, obs: Any, resets: jax.Array):
        steps, batch = resets.shape
        flat = jax.tree.map(lambda x: x.reshape((steps * batch, *x.shape[2:])), obs)
        actor_out, value = outputs(params, flat)
        actor_out = actor_out.reshape((steps, batch, actor_out.shape[-1]))
        log_std = params["params"]["log_std"] if continuous else None
        mask = None if mask_key is None else obs[mask_key]
        dist = make_distribution(spec, actor_out, log_std, False, mask)
        return state, dist, value.reshape((steps, batch))

    def initial_state(batch: int) -> tuple:
        del batch
        return ()

    return Networks(
        init=init,
        initial_state=initial_state,
        step=step,
        unroll=unroll,
        apply=apply,
        action_spec=spec,
        module=None,
        stateful=False,
    )


def _check_output_shapes(actor_shape: tuple, value_shape: tuple, spec: Any, env: Any) -> None:
    """ValueError unless the modules map a batch of 2 observations to `[2, A]` / `[2]`."""
    if actor_shape != (2, spec.num_actions):
        raise ValueError(
            f"actor module outputs {actor_shape} for a batch of 2 observations; the "
            f"{spec.kind} actions of {getattr(env, 'name', env)} need [B, {spec.num_actions}]"
        )
    if value_shape not in ((2,), (2, 1)):
        raise ValueError(
            f"critic module outputs {value_shape} for a batch of 2 observations; "
            "values must be [B] or [B, 1]"
        )


def param_labels(params: Params) -> Any:
    """ "actor", "critic" or "shared" for every leaf of a params tree (for
    `actor_learning_rate` / `critic_learning_rate`): top-level names starting with
    "actor" and `log_std` are the actor's, names starting with "critic" the critic's, the
    rest (a shared encoder / core) "shared" (trained with `learning_rate`)."""

    def label(name: str) -> str:
        if name.startswith("actor") or name == "log_std":
            return "actor"
        if name.startswith("critic"):
            return "critic"
        return "shared"

    inner = params["params"] if isinstance(params, dict) and "params" in params else params
    labels = {name: jax.tree.map(lambda _, n=name: label(n), sub) for name, sub in inner.items()}
    if inner is params:
        return labels
    # Other collections (the normalisation statistics, `purejaxppo.normalize`) get zero
    # gradients; any label leaves them unchanged.
    others = {k: jax.tree.map(lambda _: "shared", v) for k, v in params.items() if k != "params"}
    return {"params": labels, **others}
