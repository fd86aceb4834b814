"""The kinds of env (JAX, EnvPool, JaxMARL agents, host), decided once, and what each
supports: the layer above `envs/` (the suites, the rows adapters) and `networks/` (the
built-in actor-critic), below the training program and the drivers.

* `table`: the kinds (`EnvKind`, `JAX`, `ENVPOOL`, `AGENTS`, `HOST`), `kind_of` /
  `kind_of_id`, `check` and the capability table of the docs.
* `resolve`: `resolve(config, env, env_params, networks, operations)`, the env-setup
  sequence of every run written once (env, checks, configuration, networks, rows), and
  `resolve_acting(operation, env, env_params, networks)`, acting's (evaluation, videos,
  datasets: the env as the networks read it, its episodes, its rows).
* `agents`: multi-agent PPO (IPPO / MAPPO) with one shared policy: the env a run of
  `AGENTS` trains and its networks.

    from purejaxppo import kinds
    kind = kinds.check("video", "CartPole-v1")  # an `EnvKind`, or a ValueError
    setup = kinds.resolve(config, operations=("policy",))  # kind, env, networks, rows
"""

from purejaxppo.kinds.resolve import Resolved, resolve, resolve_acting, resolve_env
from purejaxppo.kinds.table import (
    AGENTS,
    ENVPOOL,
    HOST,
    JAX,
    KINDS,
    OPERATIONS,
    EnvKind,
    as_env,
    capability_table,
    check,
    check_runs_devices,
    kind_of,
    kind_of_id,
)

__all__ = [
    "AGENTS",
    "ENVPOOL",
    "HOST",
    "JAX",
    "KINDS",
    "OPERATIONS",
    "EnvKind",
    "Resolved",
    "as_env",
    "capability_table",
    "check",
    "check_runs_devices",
    "kind_of",
    "kind_of_id",
    "resolve",
    "resolve_acting",
    "resolve_env",
]
