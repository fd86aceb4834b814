"""Actor-critic networks (flax linen) and distrax action distributions."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import distrax
import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
from gymnax.environments import spaces

from purejaxppo.config import PPOConfig
from purejaxppo.types import Params

_ACTIVATIONS: dict[str, Callable[[jax.Array], jax.Array]] = {
    "tanh": nn.tanh,
    "relu": nn.relu,
    "gelu": nn.gelu,
    "silu": nn.silu,
    "elu": nn.elu,
    "leaky_relu": nn.leaky_relu,
}


class ActionSpec(NamedTuple):
    """Static description of an action space."""

    discrete: bool
    num_actions: int  # number of categories (discrete) or action dimensions (continuous)
    shape: tuple[int, ...]  # shape of one action as the env expects it
    low: Any  # np.ndarray bounds (continuous) or None
    high: Any


def action_spec(env: Any, env_params: Any) -> ActionSpec:
    """Reads a gymnax action space into an `ActionSpec`.

    Raises:
      ValueError: for action spaces other than `Discrete` and `Box` (MultiDiscrete,
        MultiBinary and dict spaces are not supported yet).
    """
    space = env.action_space(env_params)
    if isinstance(space, spaces.Discrete):
        return ActionSpec(True, int(space.n), (), None, None)
    if isinstance(space, spaces.Box):
        shape = tuple(int(s) for s in np.shape(np.zeros(space.shape)))
        low = np.broadcast_to(np.asarray(space.low, np.float32), shape)
        high = np.broadcast_to(np.asarray(space.high, np.float32), shape)
        return ActionSpec(False, int(np.prod(shape)) if shape else 1, shape, low, high)
    raise ValueError(
        f"action space {type(space).__name__} of {getattr(env, 'name', env)} is not supported; "
        "purejaxppo handles Discrete (categorical) and Box (diagonal Gaussian) actions"
    )


class MLP(nn.Module):
    """Dense layers with orthogonal(sqrt 2) init, then a linear head of `out_size`."""

    hidden_sizes: Sequence[int]
    activation: str
    out_size: int
    head_scale: float

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        act = _ACTIVATIONS[self.activation]
        for size in self.hidden_sizes:
            x = nn.Dense(size, kernel_init=nn.initializers.orthogonal(math.sqrt(2.0)))(x)
            x = act(x)
        return nn.Dense(self.out_size, kernel_init=nn.initializers.orthogonal(self.head_scale))(x)


class ActorCritic(nn.Module):
    """Separate actor and critic MLPs on the flattened observation (CleanRL's `Agent`).

    Returns `(actor_out [B, A], value [B])`, where actor_out are logits (discrete) or the
    Gaussian mean (continuous). Continuous policies also own a state-independent
    `log_std` parameter `[A]`, initialised to 0. Init as CleanRL: orthogonal, sqrt(2)
    hidden, 0.01 for the policy head and 1.0 for the value head, zero biases.
    """

    num_outputs: int
    hidden_sizes: Sequence[int]
    activation: str
    continuous: bool

    @nn.compact
    def __call__(self, obs: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array | None]:
        x = obs.reshape((obs.shape[0], -1)).astype(jnp.float32)
        actor_out = MLP(self.hidden_sizes, self.activation, self.num_outputs, 0.01, name="actor")(x)
        value = MLP(self.hidden_sizes, self.activation, 1, 1.0, name="critic")(x)[:, 0]
        log_std = None
        if self.continuous:
            log_std = self.param("log_std", nn.initializers.zeros, (self.num_outputs,))
        return actor_out, value, log_std


def make_distribution(
    spec: ActionSpec, actor_out: jax.Array, log_std: jax.Array | None
) -> distrax.Distribution:
    """Categorical(logits) for discrete, MultivariateNormalDiag(mean, exp(log_std)) else."""
    if spec.discrete:
        return distrax.Categorical(logits=actor_out)
    return distrax.MultivariateNormalDiag(
        loc=actor_out, scale_diag=jnp.broadcast_to(jnp.exp(log_std), actor_out.shape)
    )


def make_networks(
    config: PPOConfig, env: Any, env_params: Any
) -> tuple[Callable[[jax.Array], Params], Callable[[Params, jax.Array], tuple[Any, jax.Array]]]:
    """Builds the actor-critic for an environment.

    Args:
      config: uses `hidden_sizes` and `activation`.
      env, env_params: a gymnax-API environment (Discrete or Box actions; observations of
        any shape, flattened for the MLP).

    Returns:
      `(init, apply)`: `init(key) -> params`; `apply(params, obs)` with obs
      `[B, *obs_shape]` returns `(dist, value)`, a distrax distribution over actions with
      batch shape `[B]` (`Categorical`, or `MultivariateNormalDiag` over `[B, A]`
      unclipped actions) and float32 values `[B]`.

    Raises:
      ValueError: for an unsupported action space.
    """
    spec = action_spec(env, env_params)
    module = ActorCritic(
        num_outputs=spec.num_actions,
        hidden_sizes=tuple(config.hidden_sizes),
        activation=config.activation,
        continuous=not spec.discrete,
    )
    obs_shape = tuple(env.observation_space(env_params).shape)

    def init(key: jax.Array) -> Params:
        return module.init(key, jnp.zeros((1, *obs_shape), jnp.float32))

    def apply(params: Params, obs: jax.Array) -> tuple[distrax.Distribution, jax.Array]:
        actor_out, value, log_std = module.apply(params, obs)
        return make_distribution(spec, actor_out, log_std), value

    return init, apply
