"""The kinds of env, decided once: how each steps, what it logs, and what it supports.

Four kinds differ in how they reset, step, batch and render:

* `JAX`: a JAX env with the gymnax API (gymnax, probes, Brax, Playground, Jumanji,
  Craftax, Navix, XLand-MiniGrid, MetaBBO, your own `gymnax.Environment`): vmapped inside
  the compiled program, one row per env.
* `ENVPOOL`: "envpool:<task>" (MuJoCo, Atari): EnvPool's C++ pool called from inside the
  program; one pool per program, on one host and one device.
* `AGENTS`: "jaxmarl:<id>" with `multi_agent: ippo | mappo`: the A agents of each env as
  rows of the batch (`envs.agent_rows`).
* `HOST`: "gymnasium:<id>": a gymnasium vector env on the host, called from inside the
  program (`envs.host_calls`); one vector env per program, on one host and one device.

`kind_of(env)` / `kind_of_id(env_id)` pick the kind; `EnvKind.rows` adapts an env into the
`RowsEnv` the rollout steps (brax's `wrap`, rejax's `compat`: an adapter below the loop,
never a branch inside it); `check(operation, ...)` refuses an operation a kind does not
support, with one message per cell of `CAPABILITIES` (what to do instead), before anything
compiles or is written. `capability_table()` renders that table for the docs
(docs/guides/env-suites.md; a test checks the page against it).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from purejaxppo.envs import episodes
from purejaxppo.envs.agent_rows import agent_rows
from purejaxppo.envs.host import is_host_env, is_host_env_id
from purejaxppo.envs.rows import RowsEnv, envpool_rows, vmapped_envs
from purejaxppo.envs.suites.envpool import EnvPoolEnv, is_envpool_id
from purejaxppo.envs.suites.jaxmarl import is_multi_agent_env
from purejaxppo.kinds.agents import configure_env, env_for_networks, make_marl_networks
from purejaxppo.networks import Networks, make_networks

__all__ = [
    "AGENTS",
    "ENVPOOL",
    "HOST",
    "JAX",
    "KINDS",
    "OPERATIONS",
    "EnvKind",
    "as_env",
    "capability_table",
    "check",
    "check_runs_devices",
    "kind_of",
    "kind_of_id",
]

#: Operation -> how it is named in messages and the docs' table.
OPERATIONS: dict[str, str] = {
    "train": "train (`purejaxppo train`, `make_train(config)(key)`)",
    "seeds": "several seeds (`--num-seeds`, `pjp.train_seeds`)",
    "sweep": "sweeps over settings and seeds (`purejaxppo sweep`, `pjp.sweep`)",
    "batched_runs": "runs batched in one program (`jax.vmap(train)`, a JAX sweep)",
    "runs_on_devices": "batched runs split over several devices",
    "data_parallel": "data-parallel training (`make_data_parallel_train`: envs over devices)",
    "processes": "one run over several processes or hosts (`purejaxppo train --num-processes`)",
    "eval": "evaluation (`pjp.evaluate`, `purejaxppo eval`)",
    "eval_freq": "evaluation during training (`eval_freq`, `eval_splits`, `best/`)",
    "video": "video (`--video`, `video_freq`)",
    "collect": "datasets of episodes (`purejaxppo collect`, `collect_freq`)",
    "info_metrics": "the env's info entries as metrics (`info_metrics`)",
    "reset_ratio": "resets of a share of the envs at a time (`reset_ratio`)",
    "export": "export to PyTorch / ONNX (`purejaxppo export`)",
    "policy": "acting from a run (`pjp.Policy.load`)",
    "resume": "resume one run (`purejaxppo train --resume`)",
    "pbt": "population-based training (`purejaxppo pbt`)",
    "pbt_resume": "resume a PBT population (`purejaxppo pbt --resume`)",
    "tune": "hyperparameter search with Optuna (`purejaxppo tune`, `pjp.tune`)",
}


@dataclass(frozen=True)
class EnvKind:
    """One kind of env.

    name: short id ("jax", "envpool", "agents", "host").
    title: how messages and the docs name it.
    refusals: operation (a key of `OPERATIONS`) -> what to do instead; every operation not
      listed works.
    host_calls: the envs live on the host, outside the program (EnvPool's pool,
      gymnasium's vector env), which calls them at every step (`envs.host_calls`). What
      follows from it is read through the properties below and
      `drivers.program.local_program` (such a program is never exported: `jax.export`
      refuses its custom calls).
    loop: which episode loop evaluation, datasets and videos use: "program" and
      "agents" share `acting.episodes` (one jitted `lax.scan` over the kind's `RowsEnv`;
      for "agents" each agent acts on its row, and the team reward counts), "host"
      (`acting.host`: Python steps around the jitted policy step).
    episodes_of: env -> its `envs.episodes.Episodes` (where an episode ends, what it
      scores and what a video keeps).
    notes: operation -> how it works for this kind, where that differs (docs only).
    """

    name: str
    title: str
    refusals: Mapping[str, str]
    host_calls: bool = False
    loop: str = "program"
    episodes_of: Callable[[Any], episodes.Episodes] = lambda env: episodes.STEPS
    notes: Mapping[str, str] = field(default_factory=dict)

    @property
    def episodes_restart_on_resume(self) -> bool:
        """The envs' state lives outside the checkpoint (on the host: `host_calls`), so a
        resumed run's driver restarts their episodes from a fresh reset."""
        return self.host_calls

    @property
    def vmap_init_runs(self) -> bool:
        """Batched runs share one env instance (one pool / vector env of R x N envs:
        `host_calls`), so their inits are vmapped (`parallel.batch_runs(vmap_init=True)`),
        not mapped."""
        return self.host_calls

    def supports(self, operation: str) -> bool:
        """Whether `operation` (a key of `OPERATIONS`) works for this kind."""
        if operation not in OPERATIONS:
            raise ValueError(f"operation={operation!r}: must be one of {list(OPERATIONS)}")
        return operation not in self.refusals

    def error(self, operation: str, env_id: str) -> ValueError:
        """The one-line ValueError refusing `operation` for `env_id` of this kind."""
        return ValueError(
            f"env_name={env_id!r} ({self.title}): {OPERATIONS[operation]} is not supported "
            f"for this kind of env; {self.refusals[operation]}"
        )

    def rows(
        self,
        env: Any,
        env_params: Any,
        info_keys: tuple[str, ...] = (),
        reset_ratio: int | None = None,
    ) -> RowsEnv:
        """The `RowsEnv` the rollout steps."""
        return _ROWS[self.name](env, env_params, info_keys, reset_ratio)

    def configure(self, config: Any, env: Any) -> Any:
        """The env a run of `config` trains: multi-agent checks and MAPPO's world state
        (`kinds.agents.configure_env`); host envs stepped as `host_vectorization` says
        (`HostEnv.vectorized`); other kinds' envs unchanged.

        Raises:
          ValueError: `multi_agent` that does not match the env (`configure_env`).
        """
        return _CONFIGURE.get(self.name, configure_env)(config, env)

    def acting_env(self, env: Any, networks: Networks) -> Any:
        """`env` as `networks` read it in evaluation, datasets and videos (agents:
        MAPPO's world state added where a tower reads it, `kinds.agents.env_for_networks`).

        Raises:
          ValueError: the networks read a world state that `env` cannot give.
        """
        return env_for_networks(env, networks) if self.loop == "agents" else env

    def networks(self, config: Any, env: Any, env_params: Any) -> Networks:
        """The built-in actor-critic for this kind (agents: the shared policy of
        `kinds.agents.make_marl_networks`, MAPPO's towers)."""
        make = make_marl_networks if self.name == "agents" else make_networks
        return make(config, env, env_params)


_ROWS: dict[str, Callable[..., RowsEnv]] = {
    "jax": vmapped_envs,
    "envpool": envpool_rows,  # the adapter's batching rule makes the vmap one pool call
    "agents": lambda env, env_params, info_keys, reset_ratio: agent_rows(env, env_params),
    "host": vmapped_envs,  # the adapter's batching rule makes the vmap one vector-env call
}

_CONFIGURE: dict[str, Callable[[Any, Any], Any]] = {
    "host": lambda config, env: env.vectorized(config.host_vectorization),
}

JAX = EnvKind(name="jax", title="JAX env", refusals={})

ENVPOOL = EnvKind(
    name="envpool",
    title="EnvPool env",
    host_calls=True,
    episodes_of=episodes.envpool_episodes,
    refusals={
        "runs_on_devices": (
            "the runs of a program share one pool on the host, stepped from one device: use "
            "one device (devices=1, --devices 1)"
        ),
        "data_parallel": "the pool lives on one host and one device: train on one device",
        "processes": "the pool lives on one host and one device: train in one process",
        "reset_ratio": "the pool resets each env on the host when it ends: set reset_ratio: null",
    },
    notes={
        "tune": "trials one at a time, compiled once; a trial's seeds share the pool",
        "resume": "restarts the pool's episodes; params, optimizer and statistics go on",
        "pbt_resume": (
            "restarts the pool's episodes; params, optimizer, statistics and hyperparameters go on"
        ),
        "eval": "Atari: whole games (every life), raw scores, as `episode_return`",
        "video": (
            "Atari: the observations' newest frames, the whole game; MuJoCo: an episode of "
            "its gymnasium twin `gymnasium:<id>`, rendered by MuJoCo (EnvPool renders no frames)"
        ),
    },
)

AGENTS = EnvKind(
    name="agents",
    title="multi-agent JaxMARL env",
    loop="agents",
    refusals={
        "data_parallel": "train on one device (batched runs may still use several)",
        "processes": "train in one process (batched runs may still use several devices)",
        "reset_ratio": "JaxMARL's step resets each env itself: set reset_ratio: null",
        "info_metrics": (
            "leave info_metrics empty: each agent's return (info/episode_return/<agent>) "
            "and the env's outcomes (SMAX: info/won) are logged already"
        ),
    },
    notes={
        "eval": "the team return, every agent acting on its row",
        "collect": (
            "an agent axis per step (`[S, A, ...]`), the team reward as `reward`; .npz "
            "chunks only (no Minari dataset)"
        ),
        "eval_freq": "the team return; `best/` the best team return",
        "video": "MPE envs, drawn from the state; other JaxMARL envs raise naming the env",
        "policy": "acts on rows, one per agent",
    },
)

HOST = EnvKind(
    name="host",
    title="host env (gymnasium)",
    loop="host",
    host_calls=True,
    refusals={
        "runs_on_devices": (
            "the runs of a program share one vector env on the host, stepped from one "
            "device: use one device (devices=1, --devices 1)"
        ),
        "data_parallel": "the vector env lives on one host and one device: train on one device",
        "processes": "the vector env lives on one host and one device: train in one process",
        "info_metrics": (
            "its info dicts stay on the host, outside the compiled update: leave "
            "info_metrics empty (episode returns and lengths are logged)"
        ),
        "reset_ratio": "each host env resets on the host when it ends: set reset_ratio: null",
    },
    notes={
        "seeds": "R seeds x N envs in one vector env, stepped from one program",
        "tune": "trials one at a time, compiled once; a trial's seeds share the vector env",
        "sweep": "each program's runs in one vector env of R x N copies",
        "batched_runs": "one vector env of R x N copies, one host call per step",
        "resume": "restarts the vector env's episodes; params, optimizer, statistics go on",
        "pbt_resume": (
            "restarts the vector env's episodes; params, optimizer, statistics and "
            "hyperparameters go on"
        ),
        "eval": "episodes stepped on the host around the jitted policy step",
        "eval_freq": "episodes stepped on the host between segments",
        "video": "gymnasium's render_mode='rgb_array' frames",
        "collect": "episodes stepped on the host around the jitted policy step",
    },
)

#: Every kind, in the order of the docs' table.
KINDS: tuple[EnvKind, ...] = (JAX, ENVPOOL, AGENTS, HOST)


def kind_of_id(env_id: str, multi_agent: str | None = None) -> EnvKind:
    """The kind of a `make_env` id, from its prefix alone (nothing imported or built):
    "gymnasium:" host, "envpool:" EnvPool, "jaxmarl:" (or `multi_agent` set) agents as
    rows, anything else a JAX env."""
    if is_host_env_id(env_id):
        return HOST
    if is_envpool_id(env_id):
        return ENVPOOL
    if multi_agent is not None or env_id.startswith("jaxmarl:"):
        return AGENTS
    return JAX


def kind_of(env: Any) -> EnvKind:
    """The kind of an env object (a `make_env` result or your own env)."""
    if is_host_env(env):
        return HOST
    if isinstance(env, EnvPoolEnv):
        return ENVPOOL
    if is_multi_agent_env(env):
        return AGENTS
    return JAX


def as_env(env: Any) -> Any:
    """An env argument as an env object: a gymnasium env factory (a callable, e.g.
    `lambda: MyEnv()` or a `gymnasium.Env` subclass) becomes a host env
    (`envs.suites.gymnasium.from_factory`); env objects (gymnax API, `HostEnv`, JaxMARL)
    and None are returned unchanged.

    Raises:
      ValueError: a `gymnasium.Env` instance (a run needs new copies: pass a factory), or
        something that is neither an env nor callable; the factory's errors
        (`from_factory`).
    """
    if env is None:
        return None
    gymnasium = sys.modules.get("gymnasium")
    if gymnasium is not None and isinstance(env, gymnasium.Env):
        raise ValueError(
            f"env={env!r}: a gymnasium.Env instance; a run steps several new copies, so "
            f"pass a factory instead (env=lambda: gymnasium.make(...) or your Env class)"
        )
    if not isinstance(env, type) and hasattr(env, "observation_space"):
        return env  # an env object (gymnax API, `HostEnv`, JaxMARL, spaces only)
    if callable(env):
        from purejaxppo.envs.suites.gymnasium import from_factory

        return from_factory(env)
    raise ValueError(
        f"env={env!r}: pass an env object (gymnax API) or a gymnasium env factory (a callable)"
    )


def check(
    operation: str, env_id: str, env: Any = None, *, multi_agent: str | None = None
) -> EnvKind:
    """Returns the kind of `env` (or of `env_id` when no env object is given) after
    checking that it supports `operation`.

    Raises:
      ValueError: `operation` is refused for that kind: one line naming the env, its kind,
        the operation and what to do instead (`EnvKind.error`).
    """
    kind = kind_of(env) if env is not None else kind_of_id(env_id, multi_agent)
    if not kind.supports(operation):
        raise kind.error(operation, env_id)
    return kind


def check_runs_devices(env_id: str, num_devices: int) -> None:
    """Raises the `runs_on_devices` refusal when batched runs of `env_id` would be split
    over `num_devices` > 1 devices."""
    kind = kind_of_id(env_id)
    if num_devices > 1 and not kind.supports("runs_on_devices"):
        message = str(kind.error("runs_on_devices", env_id))
        raise ValueError(f"{message} (asked for {num_devices} devices)")


def capability_table() -> str:
    """The Markdown table of operations x kinds (docs/guides/env-suites.md)."""
    header = "| operation | " + " | ".join(k.title for k in KINDS) + " |"
    lines = [header, "|" + " --- |" * (len(KINDS) + 1)]
    for operation, label in OPERATIONS.items():
        cells = []
        for kind in KINDS:
            if not kind.supports(operation):
                cells.append(f"no: {kind.refusals[operation]}")
            else:
                cells.append(f"yes ({kind.notes[operation]})" if operation in kind.notes else "yes")
        lines.append(f"| {label} | " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join(lines) + "\n"
