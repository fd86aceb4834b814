"""`Networks`: the one interface every policy implements, and `make_networks`.

Rollout, update, train, `Policy`, `evaluate` and the export each have one code path for
feed-forward and recurrent policies: a feed-forward policy is a recurrent one whose state
is the empty pytree `()`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import distrax
import flax.linen as nn
import jax
import jax.numpy as jnp

from purejaxppo.config import PPOConfig
from purejaxppo.networks.actor_critic import ActorCritic
from purejaxppo.networks.cores import core_state_size
from purejaxppo.networks.distributions import make_distribution
from purejaxppo.networks.specs import (
    ActionSpec,
    CoreSettings,
    EncoderSettings,
    ObsInput,
    action_spec,
    check_action_mask,
    check_config,
    observation_inputs,
    split_action_mask,
    zeros_like_space,
)
from purejaxppo.types import Params

State = Any  # a pytree whose leaves have a leading batch axis [B, ...]; () when stateless


class Networks(NamedTuple):
    """An actor-critic as pure functions (optax-style: a NamedTuple of closures).

    init(key) -> params
    initial_state(batch) -> state: pytree of `[batch, ...]` leaves (zeros `[batch, S]`
        float32 for the built-in cores; `()` for feed-forward policies)
    step(params, state, obs [B, ...], reset [B] bool) -> (state, dist [B], value [B])
        one step for B envs: rows of `state` with `reset` (the previous step ended their
        episode) restart from `initial_state` first. `dist` is a distrax distribution
        with batch shape `[B]`, `value` float32 `[B]`.
    unroll(params, state, obs [T, B, ...], resets [T, B] bool)
        -> (state after step T-1, dist with batch shape [T, B], value [T, B])
        `step` over T steps (a `lax.scan` for recurrent policies; one batched pass for
        feed-forward ones), as the update re-runs the rollout's sequences.
    apply(params, obs [B, ...]) -> (dist [B], value [B])
        the feed-forward shortcut: one step from `initial_state` (for a recurrent policy,
        what an episode's first step computes).
    action_spec: the env's `ActionSpec`.
    module: the flax module (`ActorCritic` for the built-in networks; the export maps its
        parameters), or None.
    stateful: False when the state is `()` (feed-forward).
    normalization: `purejaxppo.normalize.NormSettings` when the networks take raw
        observations and normalise them with the params' `obs_norm` statistics (see
        `normalize.with_normalization`); None otherwise.
    """

    init: Callable[[jax.Array], Params]
    initial_state: Callable[[int], State]
    step: Callable[..., tuple[State, distrax.Distribution, jax.Array]]
    unroll: Callable[..., tuple[State, distrax.Distribution, jax.Array]]
    apply: Callable[..., tuple[distrax.Distribution, jax.Array]]
    action_spec: ActionSpec
    module: nn.Module | None = None
    stateful: bool = False
    normalization: Any = None


def _encoder_inputs(config: PPOConfig, space: Any) -> tuple[ObsInput, ...]:
    """`observation_inputs(space)`; with `normalize_observations`, a plain array arrives
    standardised (`normalize.obs_leaves`), so its encoder skips the bounds rescaling."""
    inputs = observation_inputs(space)
    if config.normalize_observations and len(inputs) == 1 and not inputs[0].path:
        inputs = (inputs[0]._replace(shift=0.0, scale=1.0),)
    return inputs


def reset_state(state: State, reset: jax.Array, initial: State) -> State:
    """`initial` in the rows `[B]` where `reset`, `state` elsewhere (any pytree)."""

    def pick(init: jax.Array, current: jax.Array) -> jax.Array:
        flag = reset.reshape(reset.shape + (1,) * (current.ndim - reset.ndim))
        return jnp.where(flag, init, current)

    return jax.tree.map(pick, initial, state)


def batch_size_of(obs: Any) -> int:
    return jax.tree.leaves(obs)[0].shape[0]


def state_size(config: PPOConfig) -> int:
    """S, floats of policy state per env for a config's built-in network (0: feed-forward).

    Separate actor / critic towers (`share_encoder: false` with a core) carry both states,
    `[actor S, critic S]`.
    """
    size = core_state_size(CoreSettings.from_config(config))
    if config.recurrent is not None and not config.shares_encoder:
        size *= 2
    return size


def head_hidden_sizes(config: PPOConfig) -> tuple[int, ...]:
    """The hidden layers of the actor and critic heads: `config.head_hidden_sizes`, or by
    default none (feed-forward) / one of `hidden_sizes[-1]` units (on a recurrent core)."""
    if config.head_hidden_sizes is not None:
        return tuple(config.head_hidden_sizes)
    return (config.hidden_sizes[-1],) if config.recurrent is not None else ()


def make_networks(
    config: PPOConfig,
    env: Any,
    env_params: Any = None,
    *,
    tower_inputs: tuple[tuple[str, ...], tuple[str, ...]] | None = None,
) -> Networks:
    """Builds the actor-critic of `config` for an environment (see `actor_critic.py`).

    Args:
      config: uses `hidden_sizes`, `activation`, `encoder` and its conv settings,
        `conv_impl`, `latent_dim`, `head_hidden_sizes`, `share_encoder`,
        `squash_actions`, `log_std_init`, `action_mask_key`, `recurrent`,
        `recurrent_size`, `recurrent_layers` and the `transformer_*` / `memory_len`
        fields.
      env, env_params: a gymnax-API environment: Discrete, Box, MultiDiscrete or
        MultiBinary actions; observations an array of any shape (flattened for the MLP,
        `[H, W, C]` for the conv encoders) or a gymnax `Dict` / `Tuple` of arrays.
        `env_params` defaults to `env.default_params`.
      tower_inputs: `(actor keys, critic keys)`, the top-level keys of a dict
        observation each separate tower encodes (MAPPO: `(("obs",), ("world_state",))`,
        `kinds.agents.make_marl_networks`); None: both towers encode every input.

    Returns:
      `Networks`. `dist` is a distrax distribution with batch shape `[B]` (see
      `make_distribution`; Box actions: `MultivariateNormalDiag` over `[B, A]` unclipped
      actions, or `SquashedDiagGaussian` over actions within the bounds).

    Raises:
      ValueError: for an unsupported action space, or settings that do not fit the env
        (conv encoder without image observations, convs that shrink the image below 1x1,
        `squash_actions` without finite Box bounds, an action mask on Box / MultiBinary
        actions or of the wrong shape), naming the field and value; `tower_inputs`
        with a shared torso, or naming keys the observation does not have.
    """
    if env_params is None:
        env_params = getattr(env, "default_params", None)
    spec = action_spec(env, env_params)
    obs_space = env.observation_space(env_params)
    encoded_space, mask_key = split_action_mask(obs_space, config.action_mask_key)
    check_action_mask(spec, obs_space, mask_key, env)
    inputs = _encoder_inputs(config, encoded_space)
    check_config(config, spec, inputs, env)
    _check_tower_inputs(config, inputs, tower_inputs)
    core = CoreSettings.from_config(config)
    stateful = core.kind is not None
    module = ActorCritic(
        num_outputs=spec.num_actions,
        continuous=spec.kind == "continuous",
        inputs=inputs,
        encoder_settings=EncoderSettings.from_config(config),
        core_settings=core,
        shared=config.shares_encoder,
        head_hidden_sizes=head_hidden_sizes(config),
        log_std_init=config.log_std_init,
        tower_inputs=tower_inputs,
    )
    size = state_size(config)
    squash = config.squash_actions

    def initial_state(batch: int) -> State:
        return jnp.zeros((batch, size), jnp.float32) if stateful else ()

    def as_module_state(state: State) -> jax.Array | None:
        return state if stateful else None

    def as_state(module_state: jax.Array | None) -> State:
        return module_state if stateful else ()

    def distribution(actor_out, log_std, obs):
        mask = None if mask_key is None else obs[mask_key]
        return make_distribution(spec, actor_out, log_std, squash, mask)

    def init(key: jax.Array) -> Params:
        return module.init(key, as_module_state(initial_state(1)), zeros_like_space(obs_space, 1))

    def step(params: Params, state: State, obs: Any, reset: jax.Array):
        state = reset_state(state, reset, initial_state(batch_size_of(obs)))
        state, actor_out, value, log_std = module.apply(params, as_module_state(state), obs)
        return as_state(state), distribution(actor_out, log_std, obs), value

    unroll = _make_unroll(module, stateful, initial_state, distribution)

    def apply(params: Params, obs: Any):
        batch = batch_size_of(obs)
        _, dist, value = step(params, initial_state(batch), obs, jnp.ones((batch,), bool))
        return dist, value

    networks = Networks(
        init=init,
        initial_state=initial_state,
        step=step,
        unroll=unroll,
        apply=apply,
        action_spec=spec,
        module=module,
        stateful=stateful,
    )
    return ensure_normalization(networks, config, env, env_params)


def _check_tower_inputs(
    config: PPOConfig, inputs: tuple[Any, ...], tower_inputs: tuple[tuple[str, ...], ...] | None
) -> None:
    """`tower_inputs` needs separate towers, and keys the encoded observation has."""
    if tower_inputs is None:
        return
    if config.shares_encoder:
        raise ValueError(
            f"share_encoder={config.share_encoder!r}: the actor and the critic see different "
            f"inputs ({tower_inputs[0]} and {tower_inputs[1]}), so they need separate towers; "
            "set share_encoder: false"
        )
    keys = {spec.path[0] for spec in inputs if spec.path}
    for tower, wanted in zip(("actor", "critic"), tower_inputs, strict=True):
        if not wanted or not set(wanted) <= keys:
            raise ValueError(
                f"the {tower} encodes {wanted}, but the observation's encoded entries are "
                f"{sorted(keys)}"
            )


def _make_unroll(module: ActorCritic, stateful: bool, initial_state: Any, distribution: Any):
    """`Networks.unroll` of `make_networks`: encodes `[T, B]` observations in one batch,
    scans the recurrent core (if any) over T with resets, then applies the heads."""

    def unroll(params: Params, state: State, obs: Any, resets: jax.Array):
        steps, batch = resets.shape

        def flat(x):  # [T, B, ...] -> [T*B, ...]
            return x.reshape((steps * batch, *x.shape[2:]))

        features = module.apply(params, jax.tree.map(flat, obs), method="encode")
        if stateful:
            features = jax.tree.map(lambda f: f.reshape((steps, batch, -1)), features)
            initial = initial_state(batch)

            def body(carry, inputs):
                x, reset = inputs
                carry = reset_state(carry, reset, initial)
                return module.apply(params, carry, x, method="step_core")

            state, outs = jax.lax.scan(body, state, (features, resets))
            features = jax.tree.map(flat, outs)
        actor_out, value, log_std = module.apply(params, features, method="heads")
        actor_out = actor_out.reshape((steps, batch, actor_out.shape[-1]))
        return state, distribution(actor_out, log_std, obs), value.reshape((steps, batch))

    return unroll


def ensure_normalization(
    networks: Networks, config: PPOConfig, env: Any, env_params: Any = None
) -> Networks:
    """`networks` wrapped by `normalize.with_normalization` when the config asks for
    `normalize_observations` / `normalize_rewards` and it is not wrapped yet.

    Raises:
      ValueError: `normalize_observations` with nothing to normalise (a Discrete index
        observation, or a dict / tuple without float vectors), naming the env.
    """
    from purejaxppo.normalize import with_normalization

    wanted = config.normalize_observations or config.normalize_rewards
    if not wanted or networks.normalization is not None:
        return networks
    if env_params is None:
        env_params = getattr(env, "default_params", None)
    obs_space = env.observation_space(env_params)
    _, mask_key = split_action_mask(obs_space, config.action_mask_key)
    from purejaxppo.envs.episodes import row_observation

    example = row_observation(env, env_params)  # one row's, with the dtypes it really has
    try:
        return with_normalization(
            networks,
            example,
            observations=config.normalize_observations,
            rewards=config.normalize_rewards,
            obs_clip=config.obs_clip,
            mask_key=mask_key,
        )
    except ValueError as err:
        raise ValueError(f"env_name={config.env_name!r}: {err}") from None
