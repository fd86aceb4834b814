"""`Policy`: a trained actor-critic that acts, and `evaluate`: episodes under vmap + scan.

After the seed library's `PPOPolicy`: `Policy.load(run_dir)`, `policy.act(obs, key,
temperature)`, `policy.reset(done)`, `get_params()` / `set_params()`; and AgileRL's
`policy.get_action(obs, key)` / `policy.evaluate_actions(obs, actions)`; and
Stable-Baselines3's `policy.predict(obs, state, deterministic) -> (numpy actions, state)`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from purejaxppo.acting_checks import (
    batch_observation,
    check_count,
    check_key,
    check_params,
    check_params_finite,
    check_state,
    checked_action,
    checked_actions,
    checked_mask,
    observation_shapes,
    sampling,
)
from purejaxppo.actions import (
    ActionEvaluation,
    ActionOutput,
    ActResult,
    make_act,
    make_evaluate_actions,
    make_get_action,
)
from purejaxppo.config import PPOConfig
from purejaxppo.networks import Networks, State, to_env_action
from purejaxppo.policy_parts.kept_state import KeptState
from purejaxppo.policy_parts.predict import KeyStream, numpy_actions, predict_inputs
from purejaxppo.policy_parts.spaces import policy_from_spaces
from purejaxppo.types import Env, EnvParams, Params, TrainOutput, TrainState


class Policy:
    """A PPO policy: params plus the config that fixes its network.

    Recurrent policies (`config.recurrent`) keep the policy state of the envs they act for
    between `act` / `get_action` calls (`[B, S]`, the initial state at first and again
    when the batch size changes); `reset(done)` restarts it where `done` (call it after
    every env step with `terminated | truncated`), `reset()` for all envs. Feed-forward
    policies have the empty state `()`. Because that state lives on the Python object, a
    recurrent policy's `act` / `get_action` / `reset` refuse traced inputs (inside
    `jax.jit`, `vmap`, `lax.scan`); there, step with the pure
    `purejaxppo.actions.make_get_action(policy.networks)`, which takes and returns the state.

    The acting methods check the values of concrete inputs (numpy arrays, jax arrays
    outside a trace): finite observations, actions inside the action space, action masks
    that leave every row an action (`purejaxppo.acting_checks`, one numpy pass each).
    Traced inputs are not looked at: a traced call does no host work.

    Args:
      params: flax params of the actor-critic (`TrainState.params`).
      config: the run's config (network shape, env id).
      env: optional environment object (`make_env`'s first result, or your own env with
        gymnax's API); default `make_env(config.env_name, config.env_kwargs)`. Only its
        spaces are used.
      env_params: optional params of the env (`make_env`'s second result); default the
        env's own. A given `env_params` is used either way.
      networks: optional `Networks` (default `make_networks(config, env, env_params)`),
        with observation normalisation added where the config asks for it
        (`kinds.resolve`).

    Raises:
      ValueError: `params` hold a NaN or Inf (a diverged run), naming the leaf; a
        `multi_agent` that does not match the env; an env whose kind refuses acting from
        a run (`kinds.check("policy", ...)`). A multi-agent policy acts on rows, one
        per agent (`[B, ...]` of one agent's observations), shared by every agent.
    """

    def __init__(
        self,
        params: Params,
        config: PPOConfig,
        env: Env | None = None,
        env_params: EnvParams | None = None,
        networks: Networks | None = None,
    ):
        from purejaxppo import kinds

        # Multi-agent: MAPPO's world state; the networks with the run's normalisation.
        setup = kinds.resolve(config, env, env_params, networks, operations=("policy",))
        env, env_params = setup.env, setup.env_params
        self.config = config
        self.env, self.env_params = env, env_params
        self.networks = setup.networks
        self.spec = self.networks.action_spec
        # A tuple, or for dict / tuple observations a dict / list of tuples.
        self.obs_shape = observation_shapes(env.observation_space(env_params))
        self.apply = self.networks.apply
        self.recurrent = self.networks.stateful
        self._kept = KeptState(self.networks)  # recurrent: the state of the envs acted for
        self._predict_keys = KeyStream(config.seed)  # `predict`'s default keys
        check_params_finite(params, "Policy")
        self._params = params
        self._act = jax.jit(make_act(self.networks))
        self._get_action = jax.jit(make_get_action(self.networks), static_argnames="greedy")
        self._evaluate_actions = jax.jit(make_evaluate_actions(self.networks))

    # ----------------------------------------------------------------- construction
    @classmethod
    def load(
        cls,
        path: str | Path,
        kind: str = "last",
        networks: Networks | None = None,
        *,
        step: int | None = None,
    ) -> Policy:
        """Loads the policy of a run directory's newest checkpoint (see `checkpoint.py`).

        Args:
          path: the run directory (`purejaxppo train --run-dir`, `train_and_log`'s
            `run_dir`), or one seed's `seed_<s>/` of a `--num-seeds` run.
          kind: "last" (default): the newest checkpoint of `checkpoints/last`; "best":
            the one with the best evaluation return (`eval_freq`, `checkpoints/best`).
          networks: the run's custom `Networks`, if it trained one (default: the
            built-in actor-critic its config describes).
          step: the kept checkpoint of that update (`list_checkpoints(path)`; 0: the
            initial params of a run started with `save_initial` / `--save-initial`);
            keep them all with `keep_checkpoints: all`. Default: the newest.

        Returns:
          The `Policy` with the checkpoint's params and the run's config and env.

        Raises:
          TypeError: `path` not a str / `os.PathLike` (e.g. None).
          ValueError: `path` that does not exist, or is not a run directory: a YAML config
            (train it first), a `tune` output directory (naming its best.yaml), or any
            other directory without config.yaml and checkpoints/; no checkpoint, or a
            corrupt / mismatched one; a `step` that was not kept (naming the kept steps).
        """
        from purejaxppo.checkpoint import load_checkpoint
        from purejaxppo.load_checks import check_run_dir

        check_run_dir(path)
        checkpoint = load_checkpoint(path, kind=kind, networks=networks, step=step)
        return cls(checkpoint.runner_state.train_state.params, checkpoint.config, networks=networks)

    @classmethod
    def from_train_output(
        cls, source: TrainOutput | TrainState, config: PPOConfig, env: Env | None = None
    ) -> Policy:
        """The policy of a `TrainOutput` or `TrainState`; `env`: the env object or gymnasium
        env factory it trained on when not `config.env_name` (see `make_train`)."""
        state = source.train_state if isinstance(source, TrainOutput) else source
        return cls(state.params, config, env)

    from_spaces = classmethod(policy_from_spaces)  # an untrained policy: `policy_parts.spaces`

    def get_params(self) -> Params:
        return self._params

    def set_params(self, params: Params) -> None:
        """Replaces the params (same structure and shapes; checked).

        Raises:
          ValueError: params of another structure or shapes than the policy's (naming the
            first leaf that differs), or holding a NaN / Inf.
        """
        check_params("set_params: params", params, self._params)
        check_params_finite(params, "Policy.set_params")
        self._params = params

    def reset(self, done: Any = None) -> None:
        """Restarts the recurrent state where `done` (`[B]` bool, or a scalar for one env);
        `None` resets every env. Feed-forward policies have no state (no-op).

        Raises:
          ValueError: `done` of another size than the kept state's batch; a traced `done`
            (inside `jax.jit`: the kept state cannot hold a traced value).
        """
        self._kept.reset(done)

    @property
    def state(self) -> State | None:
        """The recurrent state (`[B, S]`; None: feed-forward, or initial at the next act)."""
        return self._kept.state

    hidden = state  # the name before the `Networks` interface

    def initial_state(self, batch: int) -> State:
        """Initial policy state for `batch` envs (`()` for feed-forward policies).

        Raises:
          ValueError: `batch` not an int >= 1 (numpy integers are ints).
        """
        return self.networks.initial_state(check_count("batch", batch))

    initial_hidden = initial_state

    # ----------------------------------------------------------------- acting
    def act(
        self,
        obs: jax.typing.ArrayLike,
        key: jax.Array | None = None,
        temperature: float | None = None,
        return_model_output: bool = False,
    ) -> jax.Array | ActResult:
        """Actions for observations `[B, *obs_shape]` or one observation `[*obs_shape]`.

        Dict / tuple observations are passed the same way (a dict / tuple of such arrays).
        With an action mask in the observation (`PPOConfig.action_mask_key`), masked
        actions are never returned, sampled or greedy.

        temperature 1 (the default with a `key`) samples from the policy, 0 takes the
        argmax (discrete, per component for MultiDiscrete, logit > 0 per bit for
        MultiBinary) / the mean (continuous; with `squash_actions` the squashed pre-tanh
        mean); in between it sharpens (logits / T) or narrows (std * T, before
        squashing). `key=None` takes the greedy action (temperature 0; deterministic).
        Continuous actions come within the action bounds (clipped, or squashed), ready
        for `env.step`. See `networks.select_action`. A recurrent policy advances its
        kept state.

        Args:
          obs: `[B, *obs_shape]` or one observation `[*obs_shape]`.
          key: PRNG key to sample with; None: greedy.
          temperature: a finite number >= 0; default 1 with a `key`, else 0.
          return_model_output: also return the model's outputs (`ActResult`).

        Returns:
          (jax.Array | ActResult): the actions: `[B]` int32 (Discrete), `[B,
            *action_shape]` int32 (MultiDiscrete, MultiBinary) or float32 (Box), no batch
            axis for one observation. With `return_model_output`, `ActResult(action,
            model_output)`: the actions and a dict of the model's outputs (`logits`:
            log-probabilities `[B, n]` / `[B, K, max n]`, or Bernoulli logits `[B, n]`;
            or `mean` and `log_std` of the (pre-squash) Gaussian; and `value`).

        Raises:
          ValueError: if obs does not end in the env's observation shape, is an empty
            batch, or (concrete obs) holds a NaN / inf (naming the first such entry); a
            temperature that is not a finite number >= 0, or temperature > 0 without a
            key; a recurrent policy called with traced inputs (see `get_action`).
          TypeError: a `key` that is not one PRNG key (e.g. an int seed).
        """
        self._kept.refuse_traced("act", obs, key, temperature)
        key, temperature = sampling("act", key, temperature)
        batch, single = batch_observation(obs, self.obs_shape)
        size = jax.tree.leaves(batch)[0].shape[0]
        state = self._kept.start(size)
        next_state, action, output = self._act(
            self._params, state, batch, jnp.zeros((size,), bool), key, jnp.float32(temperature)
        )
        self._kept.advance(state, next_state)
        if single:
            action, output = action[0], jax.tree.map(lambda x: x[0], output)
        return ActResult(action, output) if return_model_output else action

    def predict(
        self,
        obs: Any,
        state: State | None = None,
        deterministic: bool = True,
        *,
        episode_start: Any = None,
        key: jax.Array | None = None,
    ) -> tuple[np.ndarray, State | None]:
        """Stable-Baselines3's `predict`: `(actions, state)` with numpy actions, ready for
        a gymnasium `env.step(policy.predict(obs)[0])`.

        Actions are those `act` takes (greedy with `deterministic`, else sampled; Box
        actions within the bounds) as a numpy array of the action space's dtype: int32
        `[B]` (Discrete), `[B, *action_shape]` int32 (MultiDiscrete, MultiBinary) or
        float32 (Box); for one unbatched observation one action (`()` for Discrete, a
        0-d array that gymnasium's `Discrete.contains` accepts).

        As in SB3 the recurrent state travels through the call instead of living on the
        policy (the kept state of `act` / `get_action` is not touched): `state` None is the
        initial state, and the returned state goes into the next call; `episode_start`
        (`[B]` bool, SB3's name; a scalar for one observation) restarts it where True.
        Feed-forward policies return None as the state (as SB3 does).

        Args:
          obs: `[B, *obs_shape]` or one observation `[*obs_shape]` (dict / tuple
            observations as in `act`); numpy or concrete jax arrays.
          state: recurrent policies: the state `[B, S]` the previous call returned, or
            None (initial). None (or `()`) for feed-forward policies.
          deterministic: a bool; True (default): the greedy action (argmax / mean), False:
            sampled at temperature 1.
          episode_start: optional bool `[B]` (or a scalar for one observation).
          key: the PRNG key to sample with (`deterministic=False`); default a stream kept
            on the policy, started from `jax.random.key(config.seed)` and split per call.

        Returns:
          `(actions, state)`: numpy actions as above; the next recurrent state `[B, S]`
          (jax arrays), or None for a feed-forward policy.

        Raises:
          TypeError: `deterministic` not a bool; `key` not one PRNG key; traced inputs
            (inside `jax.jit`: numpy results cannot be traced; use `act` or
            `get_action` there).
          ValueError: `obs` as `act` refuses it (shape, empty batch, NaN / inf); `state`
            that is not this policy's state for B envs (naming both shapes), or a state
            given to a feed-forward policy; `episode_start` of another size than B.
        """
        given = predict_inputs(
            obs,
            state,
            deterministic,
            episode_start,
            key,
            shapes=self.obs_shape,
            networks=self.networks,
            keys=self._predict_keys,
        )
        next_state, action, _ = self._act(self._params, *given.step_args())
        actions = numpy_actions(self.env.action_space(self.env_params), action, given.single)
        return actions, (next_state if self.recurrent else None)

    def get_action(
        self,
        obs: jax.typing.ArrayLike,
        key: jax.Array | None = None,
        action_mask: jax.typing.ArrayLike | None = None,
        *,
        params: Params | None = None,
    ) -> ActionOutput:
        """An action with its log-probability, entropy and value (AgileRL's `get_action`).

        Sampled with `key` exactly as the rollout samples (`dist.sample_and_log_prob`);
        `key=None` takes the greedy action (the mode: argmax, per component / bit, or the
        Gaussian mean, squashed with `squash_actions`) and its log-probability. A
        recurrent policy steps from its kept state and advances it, as `act` does.

        `action` is in the policy's action space and `log_prob` is of that action, the
        pair the rollout stores (`Transition.action`, `Transition.log_prob`): for Box
        actions the unclipped Gaussian sample, which may lie outside the bounds. Step the
        env with `to_env_action(action)` (clipped to the bounds, the env's action shape),
        and give `evaluate_actions` the `action` itself, not the clipped one. For
        Discrete, MultiDiscrete and MultiBinary actions, and squashed Box actions (already
        within the bounds), the two are the same numbers.

        Args:
          obs: `[B, *obs_shape]` or one observation `[*obs_shape]` (dict / tuple
            observations as in `act`).
          key: PRNG key; None: greedy.
          action_mask: optional `[B, A]` bool or 0/1 (A = n for Discrete(n), sum(nvec)
            for MultiDiscrete; `[A]` for one observation): only actions where it is
            nonzero can be chosen, on top of any mask the observation carries.
          params: parameters to act with; default the policy's own. Pass them to call
            `get_action` inside `jax.jit` / `lax.scan` (feed-forward policies): the
            policy's own params would be baked into the trace as constants.

        Returns:
          `ActionOutput(action, log_prob, entropy, value)`: action `[B]` int32
          (Discrete), `[B, K]` / `[B, n]` int32 (MultiDiscrete / MultiBinary) or
          `[B, A]` float32 (Box, A = the flattened action size); log_prob, entropy and
          value float32 `[B]`. No batch axis for one observation.

        Value checks (concrete inputs only; traced ones are not looked at): `obs` must be
        finite, and every row of `action_mask` must allow an action (for MultiDiscrete, a
        value of every component): a row that allows none would sample as if unmasked.

        A recurrent policy keeps its state on the Python object, so it cannot step inside
        `jax.jit` / `vmap` / `lax.scan` (the traced state would be kept and break every
        later call): with traced inputs it raises at once. There, step with the pure
        `step = purejaxppo.actions.make_get_action(policy.networks)`:
        `state, out = step(params, state, obs, reset, key, mask, greedy=False)`, from
        `state = policy.initial_state(B)`, `reset` bool `[B]` (True: restart that env's
        state), `mask` None or `[B, A]`.

        Raises:
          ValueError: obs not of the observation shape (naming it), or holding a NaN / inf
            (naming the first such entry, e.g. "obs[3, 1] = nan"); an `action_mask` of
            another shape than `[B, A]`, on Box / MultiBinary actions, or with rows that
            allow no action (naming `action_mask` and those rows); a recurrent policy
            called with traced inputs (naming the pure step to use instead); an empty
            batch; `params` of another structure or shapes than the policy's.
          TypeError: a `key` that is not one PRNG key (e.g. an int seed).
        """
        self._kept.refuse_traced("get_action", obs, key, action_mask, params)
        if key is not None:
            check_key("get_action: key", key)
        if params is not None:
            check_params("get_action: params", params, self._params)
        batch, single = batch_observation(obs, self.obs_shape)
        size = jax.tree.leaves(batch)[0].shape[0]
        mask = checked_mask(self.spec, action_mask, size, single)
        state = self._kept.start(size)
        greedy = key is None
        next_state, output = self._get_action(
            self._params if params is None else params,
            state,
            batch,
            jnp.zeros((size,), bool),
            jax.random.key(0) if greedy else key,
            mask,
            greedy=greedy,
        )
        self._kept.advance(state, next_state)
        return jax.tree.map(lambda x: x[0], output) if single else output

    def evaluate_actions(
        self,
        obs: jax.typing.ArrayLike,
        actions: jax.typing.ArrayLike,
        action_mask: jax.typing.ArrayLike | None = None,
        *,
        state: State | None = None,
        params: Params | None = None,
    ) -> ActionEvaluation:
        """Log-probability, entropy and value of given actions (AgileRL's
        `evaluate_actions`): what a PPO loss needs, differentiable in `params`.

        `actions` are in the policy's action space, as `get_action` returns them (for
        Box actions the unclipped sample; the clipped env action has another
        log-probability wherever the clip moved it). Box actions may also be given in the
        env's action shape `[B, *action_shape]`; they are flattened.

        A recurrent policy evaluates from `state` `[B, S]`, by default the state the last
        `act` / `get_action` call began at (so `evaluate_actions(obs, out.action)` after
        `out = get_action(obs, key)` reproduces `out`), or the initial state when there
        was none or it was for another number of envs; the kept state is not changed.
        Pass the states stored with a batch of transitions to evaluate them
        (`policy.state` before each `get_action`; None there means the initial state,
        `initial_state(B)`).

        Args:
          obs: `[B, *obs_shape]` or one observation `[*obs_shape]`.
          actions: `[B]` int (Discrete), `[B, K]` / `[B, n]` int (MultiDiscrete /
            MultiBinary) or `[B, A]` float (Box); no batch axis for one observation.
          action_mask: as in `get_action` (pass the mask `get_action` used).
          state: recurrent policies: the policy state `[B, S]` entering the step.
          params: parameters to evaluate with (e.g. traced under `jax.grad`); default the
            policy's own.

        Returns:
          `ActionEvaluation(log_prob, entropy, value)`, float32 `[B]` each (scalars for one
          observation).

        Value checks (concrete inputs only; traced ones, e.g. inside your jitted loss,
        are not looked at): `obs` finite, `action_mask` rows allowing an action (as in
        `get_action`), and `actions` values of the action space: Discrete / MultiDiscrete /
        MultiBinary actions finite integers (integral floats accepted) in [0, n), per
        component [0, nvec[k]), or {0, 1}; Box actions finite, and with `squash_actions`
        within [low, high] (the squashed policy gives nothing outside them a density).
        Unsquashed Box actions may lie outside the bounds: the Gaussian is unbounded, and
        such samples are what `get_action` returns.

        Raises:
          ValueError: obs, actions, action_mask or state of another shape than expected
            (naming the argument, the expected and the given shape); an empty batch;
            `params` of another structure or shapes than the policy's; a value check that
            fails (naming `obs`, `actions` or `action_mask`, the first bad index and value,
            and for `actions` the space's bounds).
        """
        if params is not None:
            check_params("evaluate_actions: params", params, self._params)
        batch, single = batch_observation(obs, self.obs_shape)
        size = jax.tree.leaves(batch)[0].shape[0]
        actions = checked_actions(
            self.spec, actions, size, single, bounded=bool(self.config.squash_actions)
        )
        mask = checked_mask(self.spec, action_mask, size, single)
        if state is None:
            state = self._kept.entry_for(size)
        else:
            check_state("state", state, self.networks.initial_state(size), size)
        out = self._evaluate_actions(
            self._params if params is None else params,
            state,
            batch,
            jnp.zeros((size,), bool),
            actions,
            mask,
        )
        return jax.tree.map(lambda x: x[0], out) if single else out

    def to_env_action(self, action: jax.typing.ArrayLike) -> jax.Array:
        """`get_action`'s action `[B, ...]` (or one action) -> what `env.step` takes:
        int32 `[B]` / `[B, *action_shape]`, or for Box float32 `[B, *action_shape]`
        clipped to the bounds (`networks.to_env_action`; the same numbers `act` returns).

        A concrete `action` must hold values of the action space (as `evaluate_actions`
        checks them, but any finite Box action: clipping is what this does); a traced one
        is not checked.

        Raises:
          ValueError: an action of another shape than `get_action` returns; a concrete
            action outside the space (Discrete / MultiDiscrete / MultiBinary: not an
            integer in [0, n) / [0, nvec[k]) / {0, 1}; any kind: NaN / inf), naming
            `action`, the first bad index and value, and the space's bounds.
        """
        batch, single = checked_action(self.spec, action)
        env_action = to_env_action(self.spec, batch)
        return env_action[0] if single else env_action
