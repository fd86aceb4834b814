"""`Policy`: a trained actor-critic that acts, and `evaluate`: episodes under vmap + scan.

After the seed library's `PPOPolicy`: `Policy.load(run_dir)`, `policy.act(obs, key,
temperature)`, `policy.reset(done)`, `get_params()` / `set_params()`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from gymnax.environments import spaces

from purejaxppo.config import PPOConfig
from purejaxppo.envs import make_env
from purejaxppo.envs.spaces import episode_limit
from purejaxppo.guards import check_finite_params
from purejaxppo.networks import Networks, State, make_networks, reset_state, select_action
from purejaxppo.types import Params, TrainOutput, TrainState


def observation_shapes(space: Any) -> Any:
    """Shapes of one observation: a tuple for an array space, or a dict / list of them
    for gymnax `Dict` / `Tuple` spaces (the structure `Policy.act` and `evaluate` check)."""
    if isinstance(space, spaces.Dict):
        return {k: observation_shapes(s) for k, s in space.spaces.items()}
    if isinstance(space, spaces.Tuple):
        return [observation_shapes(s) for s in space.spaces]
    return tuple(int(s) for s in space.shape)


def batch_observation(obs: Any, shapes: Any) -> tuple[Any, bool]:
    """`(obs with a leading batch axis, whether obs was one observation)`.

    `obs` is an array (or a dict / tuple of arrays, like the space) of one observation
    `[*shape]` or a batch `[B, *shape]`; every entry must agree.

    Raises:
      ValueError: naming the entry whose structure or shape does not fit `shapes`.
    """
    leaves: list[tuple[str, jax.Array, tuple[int, ...]]] = []

    def visit(node: Any, want: Any, name: str) -> Any:
        if isinstance(want, dict):
            if not isinstance(node, Mapping) or set(node) != set(want):
                got = sorted(node) if isinstance(node, Mapping) else type(node).__name__
                raise ValueError(f"{name}: expected a dict with keys {sorted(want)}, got {got}")
            return {k: visit(node[k], want[k], f"{name}[{k!r}]") for k in want}
        if isinstance(want, list):
            if not isinstance(node, Sequence) or len(node) != len(want):
                raise ValueError(f"{name}: expected a tuple of {len(want)} arrays")
            return tuple(
                visit(n, w, f"{name}[{i}]") for i, (n, w) in enumerate(zip(node, want, strict=True))
            )
        array = jnp.asarray(node)
        if array.shape != want and array.shape[1:] != want:
            raise ValueError(f"{name} shape {array.shape}: expected {want} or [B, *{want}]")
        leaves.append((name, array, want))
        return array

    tree = visit(obs, shapes, "obs")
    singles = {array.shape == want for _, array, want in leaves}
    batches = {array.shape[0] for _, array, want in leaves if array.shape != want}
    if len(singles) > 1 or len(batches) > 1:
        got = {name: array.shape for name, array, _ in leaves}
        raise ValueError(f"obs entries disagree on the batch size: {got}")
    single = singles == {True}
    if single:
        tree = jax.tree.map(lambda x: x[None], tree)
    return tree, single


def make_act(networks: Networks) -> Any:
    """`act(params, state, obs [B], reset [B], key, temperature) -> (state, actions, outputs)`.

    One policy step for B envs from `networks.step` and `select_action` (the same code the
    rollout's networks and the export mirror): temperature 1 samples, 0 is greedy.
    """

    def act(params, state, obs, reset, key, temperature):
        state, dist, value = networks.step(params, state, obs, reset)
        action, outputs = select_action(networks.action_spec, dist, value, key, temperature)
        return state, action, outputs

    return act


def _check_finite(params: Params, what: str) -> None:
    """A policy never acts with NaN / Inf params (it would return action 0 silently)."""
    if not any(isinstance(leaf, jax.core.Tracer) for leaf in jax.tree.leaves(params)):
        check_finite_params(params, what)


class Policy:
    """A PPO policy: params plus the config that fixes its network.

    Recurrent policies (`config.recurrent`) keep the policy state of the envs they act for
    between `act` calls (`[B, S]`, the initial state at first and again when the batch
    size changes); `reset(done)` restarts it where `done` (call it after every env step
    with `terminated | truncated`), `reset()` for all envs. Feed-forward policies have the
    empty state `()`.

    Args:
      params: flax params of the actor-critic (`TrainState.params`).
      config: the run's config (network shape, env id).
      env, env_params: optional environment object; default `make_env(config.env_name,
        config.env_kwargs)`. Only its spaces are used. A given `env_params` is used either
        way.
      networks: optional `Networks` (default `make_networks(config, env, env_params)`).

    Raises:
      ValueError: `params` hold a NaN or Inf (a diverged run), naming the leaf; a
        multi-agent config (`multi_agent` set: not supported by Policy yet).
    """

    def __init__(
        self,
        params: Params,
        config: PPOConfig,
        env: Any = None,
        env_params: Any = None,
        networks: Networks | None = None,
    ):
        from purejaxppo.train import resolve_env

        if config.multi_agent is not None:
            raise ValueError(
                f"Policy: multi_agent={config.multi_agent!r} runs cannot be loaded as a Policy "
                "yet (evaluate and video are single-agent); the trained params are in the run's "
                "checkpoints (purejaxppo.checkpoint.load_checkpoint), and IPPO's shared "
                "policy exports (purejaxppo.export.export_torch / export_onnx)"
            )
        env, env_params = resolve_env(config, env, env_params)
        self.config = config
        self.env, self.env_params = env, env_params
        self.networks = make_networks(config, env, env_params) if networks is None else networks
        self.spec = self.networks.action_spec
        # A tuple, or for dict / tuple observations a dict / list of tuples.
        self.obs_shape = observation_shapes(env.observation_space(env_params))
        self.apply = self.networks.apply
        self.recurrent = self.networks.stateful
        self._state: State | None = None  # [B, S] for recurrent policies
        _check_finite(params, "Policy")
        self._params = params
        self._act = jax.jit(make_act(self.networks))

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

        `kind="best"` loads the checkpoint with the best evaluation return instead;
        `networks` is the run's custom `Networks`, if it trained one; `step` loads the
        kept checkpoint of that update (`list_checkpoints(path)`; keep them all with
        `keep_checkpoints: all`).

        Raises:
          ValueError: no checkpoint, or a corrupt / mismatched one; a `step` that was
            not kept (naming the kept steps).
        """
        from purejaxppo.checkpoint import load_checkpoint

        checkpoint = load_checkpoint(path, kind=kind, networks=networks, step=step)
        return cls(checkpoint.runner_state.train_state.params, checkpoint.config, networks=networks)

    @classmethod
    def from_train_output(cls, source: TrainOutput | TrainState, config: PPOConfig) -> Policy:
        """The policy of a (single-agent) `TrainOutput` or `TrainState`."""
        state = source.train_state if isinstance(source, TrainOutput) else source
        return cls(state.params, config)

    def get_params(self) -> Params:
        return self._params

    def set_params(self, params: Params) -> None:
        """Replaces the params (same structure and shapes; checked)."""
        want = jax.tree.map(np.shape, self._params)
        got = jax.tree.map(np.shape, params)
        if want != got:
            raise ValueError(f"set_params: param shapes {got} do not match the policy's {want}")
        _check_finite(params, "Policy.set_params")
        self._params = params

    def reset(self, done: Any = None) -> None:
        """Restarts the recurrent state where `done` (`[B]` bool, or a scalar for one env);
        `None` resets every env. Feed-forward policies have no state (no-op)."""
        if not self.recurrent or self._state is None:
            return
        if done is None:
            self._state = None
            return
        done = jnp.asarray(done, bool).reshape(-1)
        size = jax.tree.leaves(self._state)[0].shape[0]
        if done.shape[0] != size:
            raise ValueError(
                f"reset: done has {done.shape[0]} entries, the policy acts for {size} envs"
            )
        self._state = reset_state(self._state, done, self.networks.initial_state(size))

    @property
    def state(self) -> State | None:
        """The recurrent state (`[B, S]`; None: feed-forward, or initial at the next act)."""
        return self._state

    hidden = state  # the name before the `Networks` interface

    def initial_state(self, batch: int) -> State:
        """Initial policy state for `batch` envs (`()` for feed-forward policies)."""
        return self.networks.initial_state(batch)

    initial_hidden = initial_state

    # ----------------------------------------------------------------- acting
    def act(
        self,
        obs: jax.typing.ArrayLike,
        key: jax.Array,
        temperature: float = 1.0,
        return_model_output: bool = False,
    ) -> Any:
        """Actions for observations `[B, *obs_shape]` or one observation `[*obs_shape]`.

        Dict / tuple observations are passed the same way (a dict / tuple of such arrays).
        With an action mask in the observation (`PPOConfig.action_mask_key`), masked
        actions are never returned, sampled or greedy.

        temperature 1 samples from the policy, 0 takes the argmax (discrete, per component
        for MultiDiscrete, logit > 0 per bit for MultiBinary) / the mean (continuous; with
        `squash_actions` the squashed pre-tanh mean); in between it sharpens (logits / T)
        or narrows (std * T, before squashing). Continuous actions come within the action
        bounds (clipped, or squashed), ready for `env.step`. See
        `networks.select_action`.

        Returns:
          actions `[B]` int32 / `[B, *action_shape]` int32 (MultiDiscrete, MultiBinary) or
          float32 (Box) (no batch axis for one observation), and with
          `return_model_output` also a dict of the model outputs (`logits`: log-probabilities
          `[B, n]` / `[B, K, max n]`, or Bernoulli logits `[B, n]`; or `mean` and `log_std`
          of the (pre-squash) Gaussian; and `value`).

        Raises:
          ValueError: if obs does not end in the env's observation shape, or temperature < 0.
        """
        if temperature < 0:
            raise ValueError(f"temperature={temperature!r}: must be >= 0")
        batch, single = batch_observation(obs, self.obs_shape)
        size = jax.tree.leaves(batch)[0].shape[0]
        state = self._state
        if state is None or jax.tree.leaves(state)[0].shape[0] != size:
            state = self.networks.initial_state(size)
        state, action, output = self._act(
            self._params, state, batch, jnp.zeros((size,), bool), key, jnp.float32(temperature)
        )
        if self.recurrent:
            self._state = state
        if single:
            action, output = action[0], jax.tree.map(lambda x: x[0], output)
        return (action, output) if return_model_output else action


class EvalResult(NamedTuple):
    """Per-episode results of `evaluate`."""

    returns: np.ndarray  # float32 [num_episodes], undiscounted
    lengths: np.ndarray  # int32 [num_episodes]

    def summary(self) -> dict[str, float]:
        """mean, std and IQM (mean of the middle 50%, Agarwal et al. 2021) of returns."""
        r = np.sort(np.asarray(self.returns, np.float64))
        n = len(r)
        middle = r[n // 4 : n - n // 4] if n >= 4 else r
        return {"mean": float(r.mean()), "std": float(r.std()), "iqm": float(middle.mean())}


def evaluate(
    policy_or_state: Policy | TrainOutput | TrainState,
    env_id: str | None = None,
    num_episodes: int = 100,
    key: jax.Array | None = None,
    greedy: bool = False,
    env_params: Any = None,
    config: PPOConfig | None = None,
    max_steps: int | None = None,
) -> EvalResult:
    """Runs `num_episodes` episodes in parallel (`vmap` over envs, `lax.scan` over time).

    Each env plays exactly one episode (steps after its end are masked out).

    Args:
      policy_or_state: a `Policy`, or a single-agent `TrainOutput` / `TrainState` (then
        `config` is required).
      env_id: env to evaluate on; default the policy's own `config.env_name`.
      num_episodes: episodes (= parallel envs).
      key: PRNG key; default `jax.random.key(0)`.
      greedy: argmax / mean actions instead of sampling.
      env_params: e.g. other physics for a validation split; default the env's own (with
        the config's `env_kwargs` when `env_id` is the training env).
      max_steps: scan length; default `env_params.max_steps_in_episode`.

    Returns:
      `EvalResult` with `returns` float32 `[num_episodes]` and `lengths` int32.

    Raises:
      ValueError: for `num_episodes < 1`, a missing config, or an env whose spaces do
        not match the policy.
    """
    if num_episodes < 1:
        raise ValueError(f"num_episodes={num_episodes!r}: must be >= 1")
    if not isinstance(policy_or_state, Policy):
        if config is None:
            raise ValueError("evaluate: pass config= with a TrainOutput / TrainState")
        policy_or_state = Policy.from_train_output(policy_or_state, config)
    policy = policy_or_state
    cfg = policy.config
    if env_id is None or env_id == cfg.env_name:
        env, default_params = make_env(cfg.env_name, cfg.env_kwargs)
    else:
        env, default_params = make_env(env_id)
    env_params = default_params if env_params is None else env_params
    env_shapes = observation_shapes(env.observation_space(env_params))
    if env_shapes != policy.obs_shape:
        raise ValueError(
            f"evaluate: {env_id} observations {env_shapes} do not match the policy's "
            f"{policy.obs_shape}"
        )
    if max_steps is None:
        max_steps = episode_limit(env, env_params)
    key = jax.random.key(0) if key is None else key
    run = make_episode_runner(policy, env, env_params, num_episodes, max_steps)
    returns, lengths = run(policy.get_params(), key, jnp.float32(0.0 if greedy else 1.0))
    return EvalResult(np.asarray(returns), np.asarray(lengths))


def make_episode_runner(
    policy: Policy | Networks, env: Any, env_params: Any, num_episodes: int, max_steps: int
) -> Any:
    """Jitted `run(params, key, temperature) -> (returns [E], lengths [E])`.

    `policy`: a `Policy` or its `Networks`. Build it once and call it with new params (the
    training loop's periodic evaluation does) to compile once.
    """
    from purejaxppo.envs.host import check_jittable_env

    check_jittable_env(getattr(env, "name", repr(env)), "evaluation (episodes run inside jit)", env)
    networks = policy.networks if isinstance(policy, Policy) else policy
    act = make_act(networks)

    @jax.jit
    def run(params, key, temperature):
        reset_key, scan_key = jax.random.split(key)
        obs, state = jax.vmap(env.reset, in_axes=(0, None))(
            jax.random.split(reset_key, num_episodes), env_params
        )
        no_reset = jnp.zeros((num_episodes,), bool)

        def step(carry, step_key):
            obs, state, ret, length, active, policy_state = carry
            act_key, env_key = jax.random.split(step_key)
            policy_state, action, _ = act(params, policy_state, obs, no_reset, act_key, temperature)
            obs, state, reward, terminated, truncated, _ = jax.vmap(
                env.step, in_axes=(0, 0, 0, None)
            )(jax.random.split(env_key, num_episodes), state, action, env_params)
            ret = ret + jnp.where(active, reward.astype(jnp.float32), 0.0)
            length = length + active.astype(jnp.int32)
            active = jnp.logical_and(active, ~jnp.logical_or(terminated, truncated))
            return (obs, state, ret, length, active, policy_state), None

        init = (
            obs,
            state,
            jnp.zeros(num_episodes, jnp.float32),
            jnp.zeros(num_episodes, jnp.int32),
            jnp.ones(num_episodes, bool),
            networks.initial_state(num_episodes),
        )
        (_, _, ret, length, _, _), _ = jax.lax.scan(
            step, init, jax.random.split(scan_key, max_steps)
        )
        return ret, length

    return run
