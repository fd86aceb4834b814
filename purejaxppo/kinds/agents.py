"""Multi-agent PPO with one shared policy: IPPO and MAPPO over JaxMARL envs.

IPPO (de Witt et al. 2020, "Is Independent Learning All You Need in the StarCraft
Multi-Agent Challenge?", arXiv:2011.09533) and MAPPO (Yu et al. 2022, "The Surprising
Effectiveness of PPO in Cooperative Multi-Agent Games", arXiv:2103.01955), with parameter
sharing as in JaxMARL's baselines (Rutherford et al. 2024, arXiv:2311.10090).

The A agents of each of the N envs are extra rows of the batch (`envs.agent_rows`, the
`RowsEnv` of `kinds.AGENTS`): row `n * A + a` is agent a of env n, so a rollout is a
`Transition` `[T, N * A]` and everything after it (GAE per row = per agent, the minibatch
epochs, the PPO loss) is the single-agent code unchanged; this module configures the env
and the shared policy.
The gradient of the shared parameters is thus the gradient on the stacked batch.

- `multi_agent: ippo`: actor and critic see the agent's own observation.
- `multi_agent: mappo`: the actor sees the agent's observation, the critic the env's
  world state (`JaxMARLEnv.with_world_state`): the built-in network's separate towers
  (`make_networks(..., tower_inputs=...)`), each an MLP of `hidden_sizes`, with its own
  GRU / LSTM core under `recurrent` (JaxMARL's `mappo_rnn_*` baselines: a GRU per tower).

Recurrent policies (`recurrent: gru | lstm`, IPPO or MAPPO) carry one state per row
(agent of an env), restarted where that agent's episode ended (`reset` per row); the
update's minibatches split the rows, keeping each row's sequence whole.

Episode statistics are per env: `episode_return` is the team return, the team reward
(`JaxMARLEnv.team_reward`) summed over the episode: the one reward the agents share where
they share it (SMAX against a scripted enemy, Hanabi, Overcooked: counted once, not once
per agent), else the sum over agents of their rewards (MPE). Either way it is the return
JaxMARL's baselines log and plot (their MPE returns are the sum over agents, their SMAX
returns the shared reward once), so the two compare directly.
`info/episode_return/<agent>` is each agent's own return over the same episodes (each
equal to `episode_return` where the reward is shared, else summing to it), and envs with
an episode outcome add it (SMAX: `info/won`, the fraction of the ended episodes won).
"""

from __future__ import annotations

from typing import Any

from purejaxppo.config import PPOConfig
from purejaxppo.envs.suites.jaxmarl import JaxMARLEnv, is_multi_agent_env
from purejaxppo.networks import Networks, make_networks

__all__ = ["MULTI_AGENT", "configure_env", "env_for_networks", "make_marl_networks"]

#: Values of `PPOConfig.multi_agent` (None: single-agent PPO).
MULTI_AGENT = ("ippo", "mappo")


def configure_env(config: PPOConfig, env: Any) -> Any:
    """The env a multi-agent run trains (with a world state under MAPPO), after checks.

    Idempotent; a single-agent config with a single-agent env returns `env` unchanged.

    Raises:
      ValueError: `multi_agent` set for a single-agent env, a JaxMARL env without
        `multi_agent`, MAPPO on an env without a world state, or settings multi-agent
        runs do not support (normalize_rewards, action_histogram), or
        `share_encoder: true` under MAPPO (its towers see different inputs). What the
        kind of env cannot do (devices, evaluation, video, collect) is refused from
        `kinds`' table.
    """
    multi = is_multi_agent_env(env)
    if config.multi_agent is None:
        if multi:
            raise ValueError(
                f"env_name={config.env_name!r} has {env.num_agents} agents: set "
                f"multi_agent to one of {MULTI_AGENT}"
            )
        return env
    if not multi:
        raise ValueError(
            f"multi_agent={config.multi_agent!r}: env_name={config.env_name!r} is a "
            "single-agent env; multi-agent PPO needs a JaxMARL env (jaxmarl:<id>)"
        )
    unsupported = {
        "share_encoder: true (its actor and critic see different inputs)": (
            config.multi_agent == "mappo" and config.share_encoder is True
        ),
        "normalize_rewards": config.normalize_rewards,
        "action_histogram": config.action_histogram,
    }
    for name, used in unsupported.items():
        if used:
            raise ValueError(
                f"multi_agent={config.multi_agent!r}: {name} is not supported for "
                "multi-agent runs yet"
            )
    if config.multi_agent == "mappo" and not env.world_state:
        return env.with_world_state()
    return env


def make_marl_networks(config: PPOConfig, env: JaxMARLEnv, env_params: Any = None) -> Networks:
    """The shared policy: `make_networks` on the agent's observation (IPPO), or for MAPPO
    its separate towers with the actor on `obs["obs"]` and a centralised critic on
    `obs["world_state"]`.

    Shapes (MAPPO): actor input `[B, D]`, critic input `[B, W]`, outputs `[B, n]` logits
    (Box: Gaussian means `[B, A']`) and values `[B]`, B = rows (agents x envs); with a
    recurrent core the state is `[B, 2 S]` (actor's, then critic's).
    """
    if config.multi_agent != "mappo":
        return make_networks(config, env, env_params)
    return make_networks(config, env, env_params, tower_inputs=(("obs",), ("world_state",)))


def env_for_networks(env: JaxMARLEnv, networks: Networks) -> JaxMARLEnv:
    """`env` as the networks read it: with MAPPO's world state when a tower of the
    built-in networks encodes `world_state` (`make_marl_networks`) and `env` has none
    (an env from `make_env`, e.g. the evaluation episodes during training), else `env`.

    Raises:
      ValueError: the networks read a world state that `env` cannot give
        (`JaxMARLEnv.with_world_state`).
    """
    towers = getattr(networks.module, "tower_inputs", None) or ()
    if not env.world_state and any("world_state" in keys for keys in towers):
        return env.with_world_state()
    return env
