"""The actor-critic module: encoder(s), optional recurrent core(s), heads.

One module for every built-in policy. Submodules (their names are the parameter names):

* shared torso (`share_encoder`, the default for recurrent cores): `encoder`, `core`;
  separate towers: `actor_encoder`, `critic_encoder`, `actor_core`, `critic_core`.
* `actor_head` / `critic_head`: `Head`s (`dense_<i>` hidden layers, then `out`;
  orthogonal 0.01 / 1.0 as CleanRL) with `head_hidden_sizes` hidden layers; by default
  feed-forward heads are linear and heads on a recurrent core have one hidden layer of
  `hidden_sizes[-1]` units.
* `log_std` `[A]`: state-independent log standard deviation of Box actions
  (init `log_std_init`, default 0).

Separate towers may see different entries of a dict observation (`tower_inputs`: the
top-level keys of the actor's and of the critic's; MAPPO's actor on `"obs"`, its
centralised critic on `"world_state"`); by default both see every encoded input.

The default config (flat "mlp" encoders, separate towers) computes CleanRL's `Agent`:
two MLPs on the flattened observation.
"""

from __future__ import annotations

from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp

from purejaxppo.networks.cores import Core, core_state_size
from purejaxppo.networks.layers import Encoder, Head
from purejaxppo.networks.specs import CoreSettings, EncoderSettings, ObsInput


class ActorCritic(nn.Module):
    """Encoders, cores and heads; see the module docstring for the parameter names.

    Calling it is one step for B envs: `(state [B, S] or None, obs [B, ...]) -> (state,
    actor_out [B, A], value [B], log_std [A] or None)`; `actor_out` are logits
    (Discrete / MultiDiscrete / MultiBinary) or the Gaussian mean (Box). The methods
    `encode`, `step_core` and `heads` let `Networks.unroll` run the encoder and heads on
    all T*B inputs at once and scan only the core.
    """

    num_outputs: int
    continuous: bool
    inputs: tuple[ObsInput, ...]
    encoder_settings: EncoderSettings
    core_settings: CoreSettings
    shared: bool
    head_hidden_sizes: tuple[int, ...]
    log_std_init: float = 0.0
    # (actor keys, critic keys): the top-level dict keys each separate tower encodes;
    # None: both encode every input.
    tower_inputs: tuple[tuple[str, ...], tuple[str, ...]] | None = None

    def tower(self, index: int) -> tuple[ObsInput, ...]:
        """The inputs tower `index` (0 actor, 1 critic) encodes."""
        if self.tower_inputs is None:
            return self.inputs
        keys = self.tower_inputs[index]
        return tuple(spec for spec in self.inputs if spec.path[:1] and spec.path[0] in keys)

    def setup(self) -> None:
        enc, core = self.encoder_settings, self.core_settings
        stateful = core.kind is not None
        if self.shared:
            self.encoder = Encoder(self.inputs, enc)
            if stateful:
                self.core = Core(core)
        else:
            self.actor_encoder = Encoder(self.tower(0), enc)
            self.critic_encoder = Encoder(self.tower(1), enc)
            if stateful:
                self.actor_core = Core(core)
                self.critic_core = Core(core)
        act = enc.activation
        self.actor_head = Head(self.head_hidden_sizes, act, self.num_outputs, 0.01)
        self.critic_head = Head(self.head_hidden_sizes, act, 1, 1.0)
        if self.continuous:
            self.log_std = self.param(
                "log_std", nn.initializers.constant(self.log_std_init), (self.num_outputs,)
            )

    def encode(self, obs: Any) -> tuple[jax.Array, ...]:
        """obs `[B, ...]` -> features: `(shared [B, F],)` or `(actor [B, F], critic [B, F])`."""
        if self.shared:
            return (self.encoder(obs),)
        return self.actor_encoder(obs), self.critic_encoder(obs)

    def step_core(
        self, state: jax.Array | None, features: tuple[jax.Array, ...]
    ) -> tuple[jax.Array | None, tuple[jax.Array, ...]]:
        """One core step on the features (identity without a core)."""
        if self.core_settings.kind is None:
            return state, features
        if self.shared:
            state, out = self.core(state, features[0])
            return state, (out,)
        size = core_state_size(self.core_settings)
        actor_state, actor_out = self.actor_core(state[:, :size], features[0])
        critic_state, critic_out = self.critic_core(state[:, size:], features[1])
        return jnp.concatenate([actor_state, critic_state], axis=-1), (actor_out, critic_out)

    def heads(self, outs: tuple[jax.Array, ...]) -> tuple[jax.Array, jax.Array, jax.Array | None]:
        """Torso outputs -> (actor_out `[B, A]`, value `[B]`, log_std `[A]` or None)."""
        actor_in, critic_in = (outs[0], outs[0]) if self.shared else outs
        log_std = self.log_std if self.continuous else None
        return self.actor_head(actor_in), self.critic_head(critic_in)[:, 0], log_std

    def __call__(self, state: jax.Array | None, obs: Any) -> tuple[Any, ...]:
        state, outs = self.step_core(state, self.encode(obs))
        return (state, *self.heads(outs))
