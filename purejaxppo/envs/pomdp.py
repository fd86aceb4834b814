"""Partially observed variants of gymnax environments (for recurrent policies).

`PendulumNoVel-v1`: gymnax's Pendulum-v1 with the angular velocity removed from the
observation, `[cos(theta), sin(theta)]` only (the "velocity-masked" POMDPs of
Meng et al. 2021, arXiv:2102.12344, and of recurrent PPO benchmarks). A feed-forward
policy cannot tell which way the pendulum swings; a recurrent core can infer the velocity
from two consecutive angles.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from gymnax.environments import spaces
from gymnax.environments.classic_control.pendulum import EnvParams, EnvState, Pendulum


class PendulumNoVel(Pendulum):
    """Pendulum-v1 observing `[cos(theta), sin(theta)]` (float32 `[2]`), no velocity.

    Dynamics, reward (-(theta^2 + 0.1 theta_dot^2 + 0.001 u^2)) and the 200-step time
    limit are Pendulum-v1's.
    """

    def get_obs(self, state: EnvState, params: EnvParams | None = None, key=None) -> jax.Array:
        return jnp.array([jnp.cos(state.theta), jnp.sin(state.theta)]).squeeze()

    @property
    def name(self) -> str:
        return "PendulumNoVel-v1"

    def observation_space(self, params: EnvParams) -> spaces.Box:
        high = jnp.ones((2,), jnp.float32)
        return spaces.Box(-high, high, shape=(2,), dtype=jnp.float32)


#: env id -> class of the partially observed envs (registered with gymnax by `registry`).
POMDP_ENVS = {"PendulumNoVel-v1": PendulumNoVel}
