"""JaxMARL multi-agent environments (`"jaxmarl:<id>"`, e.g. "jaxmarl:MPE_simple_spread_v3").

Rutherford et al. 2024, "JaxMARL: Multi-Agent RL Environments and Algorithms in JAX",
arXiv:2311.10090. One env here is one JaxMARL env of A agents; its arrays carry the agents
as a leading axis `[A]` (agent i = `env.agents[i]`), and `purejaxppo.kinds.agents` turns
them into extra rows of the batch (IPPO / MAPPO with one shared policy).

- `reset(key, params) -> (obs [A, D], state)`;
  `step(key, state, action [A], params) -> (obs, state, reward [A], terminated [A],
  truncated [A], info)` with auto-reset (the reset's key split off as JaxMARL does) and
  `info["final_observation"]` (the observation the step led to, before the reset).
- `terminated` / `truncated`: JaxMARL's `dones["__all__"]` ends the episode for every
  agent; it is a truncation when the episode ran `max_steps` steps (MPE and Overcooked
  always end so; SMAX also ends when a team is beaten, a termination), else a
  termination (envs without `max_steps`, e.g. Hanabi, end by terminations only).
- Observations: the agents' 1-D observations, zero-padded at the end to the longest
  (`padded_obs` lists the agents padded); agents with observations of other ranks and
  differing shapes are refused. With the kwarg `agent_ids: true` an agent-id one-hot
  `[A]` is appended (the policy is shared: Yu et al. 2022 / JaxMARL's IPPO add it too).
- Actions: every agent must have the same action space (Discrete(n) or Box); differing
  spaces are refused with a ValueError naming the agents.
- Action masks: an env with `get_avail_actions` (SMAX) or `get_legal_moves` (Hanabi:
  the agent not on turn has only the no-op) gives dict observations
  `{"obs": [A, D], "action_mask": [A, n] bool}` (the mask of the state the observation
  came from), which the policy reads through `PPOConfig.action_mask_key` (default
  "action_mask"): unavailable actions get probability 0 (Huang & Ontanon 2020).
- Outcome (`outcome_keys`): SMAX's `info["won"]` `[A]` float32, 1.0 at a step that ends
  an episode with every enemy dead and an ally alive (JaxMARL's won-battle condition),
  else 0.0; `purejaxppo.kinds.agents` logs its mean over ended episodes (the win rate).
- Team reward (`shared_reward`, `team_reward`): the reward of the team at one step. Envs
  whose agents all receive one shared reward (`SHARED_REWARD_ENVS`: SMAX against a
  scripted enemy, Hanabi, Overcooked, Switch Riddle, MABrax) count it once; the others
  (MPE, SMAX with both teams as agents, general-sum games) sum it over the agents. This is
  what JaxMARL's baselines log (jaxmarl/wrappers/baselines.py): MPE through
  `MPELogWrapper`, which multiplies every agent's reward by the number of agents ("As per
  on-policy codebase") before the scripts average over agents (= the sum over agents);
  SMAX through `SMAXLogWrapper`, per-agent returns unscaled, averaged over agents (= the
  shared reward once). A Hanabi episode's shared reward summed is the game's score.
  The kwarg `shared_reward: true | false` overrides the table for one env.
- World state (MAPPO's critic input, `with_world_state()`): `env.get_world_state(state)`
  where the env has one (SMAX), else for MPE the concatenation of all agents'
  observations, as JaxMARL's MAPPO baselines (`MPEWorldStateWrapper`) build it. Other envs
  have none: `with_world_state()` raises a ValueError naming the env. With the kwarg
  `world_state_ids: true` (default: `agent_ids`), an env's own world state (SMAX) gets
  the agent-id one-hot appended per agent row, as JaxMARL's `SMAXWorldStateWrapper` does
  with OBS_WITH_AGENT_ID, which adds no id to the agents' observations: JaxMARL's SMAX
  MAPPO is `agent_ids: false, world_state_ids: true` (MPE's world state already holds
  the agents' observations with their ids).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from gymnax.environments import spaces

from purejaxppo.envs.suites._common import SuiteParams, raw_key, select, unknown_name
from purejaxppo.envs.suites.jaxmarl_kwargs import (
    check_kwargs_known,
    check_kwargs_ranges,
    import_jaxmarl,
)
from purejaxppo.errors import short

WON = "won"

#: JaxMARL env classes (matched by name anywhere in the env's class hierarchy) whose
#: agents all receive the same reward at every step, checked in their `step` code
#: (jaxmarl 0.2.0): `EnemySMAX` (HeuristicEnemySMAX, LearnedPolicyEnemySMAX: the allies
#: are the agents and share their team's reward), `HanabiGame` and `Overcooked` /
#: `OvercookedV2` / `SwitchRiddle` (`{agent: reward for agent in agents}`), `MABraxEnv`
#: (one Brax reward for every agent). Not shared: MPE (a collision penalty per agent),
#: `SMAX` (two teams), STORM, Coin Game, JaxNav (rewards per agent).
SHARED_REWARD_ENVS = frozenset(
    {"EnemySMAX", "HanabiGame", "Overcooked", "OvercookedV2", "SwitchRiddle", "MABraxEnv"}
)

EXTRA = "jaxmarl"


def _gymnax_space(space: Any, where: str) -> Any:
    """A gymnax space from a JaxMARL Discrete / Box."""
    kind = type(space).__name__
    if kind == "Discrete":
        return spaces.Discrete(int(space.n))
    if kind == "Box":
        shape = tuple(int(s) for s in space.shape)
        low = np.broadcast_to(np.asarray(space.low, np.float32), shape)
        high = np.broadcast_to(np.asarray(space.high, np.float32), shape)
        return spaces.Box(low, high, shape, jnp.float32)
    raise ValueError(f"{where}: the {kind} space is not supported (Discrete or Box only)")


class JaxMARLEnv:
    """A JaxMARL `MultiAgentEnv` as a gymnax-style env with an agent axis `[A]`."""

    def __init__(
        self,
        name: str,
        env: Any,
        *,
        agent_ids: bool = False,
        world_state_ids: bool | None = None,
        world_state: bool = False,
        shared_reward: bool | None = None,
    ):
        self.name = name
        self.env = env
        self.agents = tuple(env.agents)
        self.num_agents = len(self.agents)
        self.agent_ids = agent_ids
        self._world_state_ids = agent_ids if world_state_ids is None else world_state_ids
        self.world_state = world_state
        self.default_params = SuiteParams()
        inner = getattr(env, "_env", env)  # SMAX's heuristic-enemy wrapper holds the SMAX
        self.max_steps = getattr(env, "max_steps", getattr(inner, "max_steps", None))
        # The longest episode, for the runners that play whole episodes (evaluate, collect,
        # video): MPE's `done` compares the step counter before its increment, so its
        # episodes last max_steps + 1 steps (26 of MPE's 25; tests/test_marl.py). One step
        # more than an env needs is never played: the runners stop at the episode's end.
        self.max_steps_in_episode = None if self.max_steps is None else self.max_steps + 1
        self._action_space = self._common_action_space()
        # the shapes reset gives (Overcooked's spaces declare [W, H, C] for [H, W, C] arrays)
        reset_obs, _ = jax.eval_shape(env.reset, jax.random.PRNGKey(0))
        shapes = {a: tuple(reset_obs[a].shape) for a in self.agents}
        if len(set(shapes.values())) > 1 and any(len(s) != 1 for s in shapes.values()):
            raise ValueError(
                f"env_name={name!r}: agents have observations of differing shapes {shapes}; "
                "only 1-D observations of differing lengths can be padded"
            )
        self.obs_shape = max(shapes.values())
        self.padded_obs = tuple(a for a in self.agents if shapes[a] != self.obs_shape)
        self.has_world_state = hasattr(env, "get_world_state") or name.startswith("jaxmarl:MPE")
        self._mask_fn = _mask_fn(env)
        self.action_masks = self._mask_fn is not None
        smax = hasattr(env, "num_allies") and _overrides_avail_actions(env)
        self.outcome_keys = (WON,) if smax else ()
        if shared_reward is None:
            shared_reward = any(c.__name__ in SHARED_REWARD_ENVS for c in type(env).__mro__)
        self.shared_reward = bool(shared_reward)

    def _common_action_space(self) -> Any:
        spaces_by_agent = {
            a: _gymnax_space(self.env.action_space(a), f"{self.name} agent {a}")
            for a in self.agents
        }
        described = {a: _describe(s) for a, s in spaces_by_agent.items()}
        if len(set(described.values())) > 1:
            raise ValueError(
                f"env_name={self.name!r}: agents have differing action spaces {described}; "
                "a shared policy needs one action space (padding actions is not supported)"
            )
        return spaces_by_agent[self.agents[0]]

    # --------------------------------------------------------------------- variants
    def with_world_state(self) -> JaxMARLEnv:
        """This env whose observations are `{"obs": [A, D], "world_state": [A, W]}`.

        Raises:
          ValueError: the env has no world state (naming the env and what is missing).
        """
        if not self.has_world_state:
            raise ValueError(
                f"multi_agent='mappo': env_name={self.name!r} has no world state for the "
                "centralised critic (no get_world_state method, and it is not an MPE env "
                "whose agents' observations make one); use multi_agent: ippo"
            )
        return JaxMARLEnv(
            self.name,
            self.env,
            agent_ids=self.agent_ids,
            world_state_ids=self._world_state_ids,
            world_state=True,
            shared_reward=self.shared_reward,
        )

    def team_reward(self, reward: jax.Array) -> jax.Array:
        """The team's reward: `reward[..., 0]` where the agents share one reward
        (`shared_reward`), else `reward.sum(-1)`.

        Args:
          reward: float32 `[..., A]`, the agents' rewards (per step, or summed over an
            episode).
        Returns:
          float32 `[...]`.
        """
        return reward[..., 0] if self.shared_reward else jnp.sum(reward, axis=-1)

    # ----------------------------------------------------------------------- spaces
    def policy_obs_space(self) -> spaces.Box:
        """One agent's policy input: its (padded) observation, plus the id one-hot."""
        if len(self.obs_shape) != 1:
            return spaces.Box(-jnp.inf, jnp.inf, self.obs_shape, jnp.float32)
        size = self.obs_shape[0] + (self.num_agents if self.agent_ids else 0)
        return spaces.Box(-jnp.inf, jnp.inf, (size,), jnp.float32)

    @property
    def world_state_ids(self) -> bool:
        """Whether each agent row's world state ends with the agent-id one-hot."""
        return self._world_state_ids and hasattr(self.env, "get_world_state")

    def world_state_size(self) -> int:
        """W, the length of the world state (with the agent-id one-hot, if any)."""
        obs, state = jax.eval_shape(self.env.reset, jax.random.PRNGKey(0))
        size = int(jax.eval_shape(self._world_state, obs, state).shape[0])
        return size + (self.num_agents if self.world_state_ids else 0)

    def row_observation(self, params: Any = None) -> Any:
        """One agent's row of the `[A, ...]` observation `reset` returns, as
        `jax.ShapeDtypeStruct` leaves (`envs.episodes.row_observation`)."""
        example, _ = jax.eval_shape(self.reset, jax.random.key(0), params)
        return jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape[1:], x.dtype), example)

    def observation_space(self, params: Any = None) -> Any:
        """One agent's observation space: a Box, or a Dict of "obs" with "action_mask"
        (envs with action masks) and "world_state" (under MAPPO)."""
        del params
        if not (self.world_state or self.action_masks):
            return self.policy_obs_space()
        entries = {"obs": self.policy_obs_space()}
        if self.action_masks:
            entries["action_mask"] = spaces.Box(0, 1, (self._action_space.n,), jnp.bool_)
        if self.world_state:
            size = self.world_state_size()
            entries["world_state"] = spaces.Box(-jnp.inf, jnp.inf, (size,), jnp.float32)
        return spaces.Dict(entries)

    def action_space(self, params: Any = None) -> Any:
        """The action space every agent shares."""
        del params
        return self._action_space

    # ------------------------------------------------------------------ observations
    def _world_state(self, obs: Mapping[str, jax.Array], state: Any) -> jax.Array:
        if hasattr(self.env, "get_world_state"):
            return jnp.asarray(self.env.get_world_state(state), jnp.float32).reshape(-1)
        return jnp.concatenate([jnp.ravel(obs[a]) for a in self.agents]).astype(jnp.float32)

    def _observe(self, obs: Mapping[str, jax.Array], state: Any) -> Any:
        """`[A, D]` float32 (padded, with the id one-hot), or the dict of
        `observation_space`."""
        rows = []
        for agent in self.agents:
            o = jnp.asarray(obs[agent], jnp.float32)
            if len(self.obs_shape) == 1:
                o = jnp.pad(o, (0, self.obs_shape[0] - o.shape[0]))
            rows.append(o)
        stacked = jnp.stack(rows)
        if self.agent_ids and len(self.obs_shape) == 1:
            stacked = jnp.concatenate([stacked, jnp.eye(self.num_agents)], axis=1)
        if not (self.world_state or self.action_masks):
            return stacked
        entries = {"obs": stacked}
        if self.action_masks:
            avail = self._mask_fn(state)
            entries["action_mask"] = jnp.stack([avail[a] for a in self.agents]).astype(bool)
        if self.world_state:
            world = self._world_state(obs, state)
            world = jnp.tile(world[None], (self.num_agents, 1))
            if self.world_state_ids:
                world = jnp.concatenate([world, jnp.eye(self.num_agents)], axis=1)
            entries["world_state"] = world
        return entries

    # ------------------------------------------------------------------- reset / step
    def reset(self, key: jax.Array, params: Any = None) -> tuple[Any, Any]:
        """`(obs [A, ...], state)` of a fresh episode."""
        del params
        obs, state = self.env.reset(raw_key(key))
        return self._observe(obs, state), state

    def step(self, key: jax.Array, state: Any, action: jax.Array, params: Any = None) -> tuple:
        """One step of all agents (`action` `[A]`), auto-resetting when the episode ends."""
        del params
        step_key, reset_key = jax.random.split(raw_key(key))
        actions = {a: action[i] for i, a in enumerate(self.agents)}
        obs_st, state_st, rewards, dones, _ = self.env.step_env(step_key, state, actions)
        final_obs = self._observe(obs_st, state_st)
        obs_re, state_re = self.env.reset(reset_key)
        done = jnp.asarray(dones["__all__"], bool)
        inner = getattr(state_st, "state", state_st)
        if self.max_steps is None:  # no time limit (Hanabi): every end is a termination
            truncated = jnp.zeros_like(done)
        elif hasattr(inner, "step"):
            truncated = jnp.logical_and(done, inner.step >= self.max_steps)
        else:  # a time limit and no step counter (Overcooked ends only at it)
            truncated = done
        if self.outcome_keys:  # SMAX: a battle decided at the time limit is no truncation
            truncated = jnp.logical_and(truncated, ~_decided(self.env, state_st))
        terminated = jnp.logical_and(done, jnp.logical_not(truncated))
        new_state = select(done, state_re, state_st)
        obs = select(done, self._observe(obs_re, state_re), final_obs)
        reward = jnp.stack([jnp.asarray(rewards[a], jnp.float32) for a in self.agents])
        agents = (self.num_agents,)
        info = {"final_observation": final_obs}
        if WON in self.outcome_keys:
            info[WON] = jnp.broadcast_to(jnp.logical_and(done, _won(self.env, state_st)), agents)
            info[WON] = info[WON].astype(jnp.float32)
        return (
            obs,
            new_state,
            reward,
            jnp.broadcast_to(terminated, agents),
            jnp.broadcast_to(truncated, agents),
            info,
        )

    def __repr__(self) -> str:
        return f"JaxMARLEnv({self.name!r}, agents={self.num_agents})"


def _mask_fn(env: Any) -> Any:
    """`state -> {agent: mask}`: `get_avail_actions`, else `get_legal_moves`, else None."""
    if _overrides_avail_actions(env):
        return env.get_avail_actions
    return getattr(env, "get_legal_moves", None)


def _overrides_avail_actions(env: Any) -> bool:
    """True when the env implements `get_avail_actions` (the base class raises)."""
    import_jaxmarl()
    from jaxmarl.environments.multi_agent_env import MultiAgentEnv

    method = getattr(type(env), "get_avail_actions", None)
    return method is not None and method is not MultiAgentEnv.get_avail_actions


def _won(env: Any, state: Any) -> jax.Array:
    """SMAX: every enemy dead and an ally alive (bool scalar)."""
    alive = getattr(state, "state", state).unit_alive
    return jnp.logical_and(~jnp.any(alive[env.num_allies :]), jnp.any(alive[: env.num_allies]))


def _decided(env: Any, state: Any) -> jax.Array:
    """SMAX: one team has no unit alive (bool scalar)."""
    alive = getattr(state, "state", state).unit_alive
    return jnp.logical_or(~jnp.any(alive[env.num_allies :]), ~jnp.any(alive[: env.num_allies]))


def _describe(space: Any) -> str:
    if isinstance(space, spaces.Discrete):
        return f"Discrete({space.n})"
    return f"Box{tuple(space.shape)}"


def is_multi_agent_env(env: Any) -> bool:
    """True for a `JaxMARLEnv` (an env whose arrays carry an agent axis)."""
    return isinstance(env, JaxMARLEnv)


def _rejected(name: str, env_kwargs: Mapping[str, Any], err: BaseException) -> ValueError:
    """One line naming the kwargs given and the first line of the env's own error."""
    given = ", ".join(f"{k}={short(v, 60)}" for k, v in sorted(env_kwargs.items()))
    first = (str(err).strip().splitlines() or [""])[0]
    first = first if len(first) <= 200 else first[:197] + "..."
    return ValueError(
        f"env_kwargs of jaxmarl:{name}: the env rejected {given} ({type(err).__name__}: {first})"
    )


def make(name: str, env_kwargs: Mapping[str, Any]) -> tuple[JaxMARLEnv, SuiteParams]:
    """Builds `"jaxmarl:<id>"` (`jaxmarl.make(id, **env_kwargs)`).

    env_kwargs: `agent_ids` (ours: append an agent-id one-hot to each observation),
    `world_state_ids` (ours: append it to an env's own world state, SMAX's; default
    `agent_ids`),
    `shared_reward` (ours: true / false overrides `SHARED_REWARD_ENVS`, how the team
    reward is formed), and the JaxMARL env's own keyword arguments; for SMAX, `scenario`
    may be a map name ("3m", "2s3z", ...: `jaxmarl.environments.smax.map_name_to_scenario`),
    for Overcooked `layout` a layout name ("cramped_room", ...: `overcooked_layouts`).

    Raises:
      ImportError: jaxmarl is not installed (naming the extra).
      ValueError: one line, for an unknown id (close matches listed); a kwarg the env
        class does not take (its `__init__` parameters, and the keys it reads from or
        forwards its `**kwargs` to: `_accepted_kwargs`), naming the closest known one; a
        count or length out of range (`max_steps` < 1, `num_agents` < 1, ...:
        `jaxmarl_kwargs.INT_KWARGS`); any exception while building the env from the
        kwargs (naming the kwargs given and the env's error); agents with differing
        action spaces or unpaddable observations.
    """
    try:
        jaxmarl = import_jaxmarl()
        from jaxmarl.registration import registered_envs
    except ImportError as err:
        raise ImportError(
            f"jaxmarl:{name} needs the optional extra: pip install 'purejaxppo[{EXTRA}]' ({err})"
        ) from None
    if name not in registered_envs:
        raise unknown_name("jaxmarl", name, registered_envs)
    kwargs = dict(env_kwargs)
    agent_ids = bool(kwargs.pop("agent_ids", False))
    world_state_ids = kwargs.pop("world_state_ids", None)
    shared_reward = kwargs.pop("shared_reward", None)
    check_kwargs_known(name, kwargs)
    for key, value in (("world_state_ids", world_state_ids), ("shared_reward", shared_reward)):
        if value is not None and not isinstance(value, bool):
            raise ValueError(
                f"env_kwargs of jaxmarl:{name}: {key}={value!r} must be true, false or absent"
            )
    check_kwargs_ranges(name, kwargs)
    if isinstance(kwargs.get("layout"), str):
        from jaxmarl.environments.overcooked import overcooked_layouts

        if kwargs["layout"] not in overcooked_layouts:
            raise ValueError(
                f"env_kwargs of jaxmarl:{name}: layout={kwargs['layout']!r} is not an "
                f"Overcooked layout; known: {', '.join(sorted(overcooked_layouts))}"
            )
        kwargs["layout"] = overcooked_layouts[kwargs["layout"]]
    try:
        if isinstance(kwargs.get("scenario"), str):
            from jaxmarl.environments.smax import map_name_to_scenario

            kwargs["scenario"] = map_name_to_scenario(kwargs["scenario"])
        env = jaxmarl.make(name, **kwargs)
        if world_state_ids and not hasattr(env, "get_world_state"):
            raise ValueError(
                f"env_kwargs of jaxmarl:{name}: world_state_ids=True, but the env has no "
                "world state of its own (get_world_state) to append agent ids to"
            )
        suite_env = JaxMARLEnv(
            f"jaxmarl:{name}",
            env,
            agent_ids=agent_ids,
            world_state_ids=world_state_ids,
            shared_reward=shared_reward,
        )
    except Exception as err:  # a kwarg of the wrong type fails deep inside the env
        ours = isinstance(err, ValueError) and str(err).startswith(("env_kwargs of", "env_name="))
        if ours or not env_kwargs:
            raise
        raise _rejected(name, env_kwargs, err) from None
    return suite_env, suite_env.default_params
