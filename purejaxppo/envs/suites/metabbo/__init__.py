"""MetaBBO environments (`"metabbo:<optimiser>"`): PPO configures an evosax black-box
optimiser while it runs on BBOB problems, MetaBox's setting (Ma et al. NeurIPS 2023).

- `metabbo:DE`: continuous float32 `[3]` in [-1, 1]: F, CR and the dither width of F of
  the next generation of differential evolution (LDE, Sun et al. 2021);
- `metabbo:DE-operator`: `Discrete(4)`: the DE mutation strategy of the next generation
  (DE-DDQN, Sharma et al. 2019);
- `metabbo:PSO`: continuous float32 `[3]` in [-1, 1]: PSO's inertia weight and cognitive /
  social coefficients (RLEPSO, Yin et al. 2021).

Observations float32 `[8]`, rewards float32; episodes end by truncation only (`truncated`
at the budget of `max_steps_in_episode` generations; `terminated` is always False). The
state, reward and episode are documented in `purejaxppo.envs.suites.metabbo.envs`.
`EnvParams.split` ("train" / "test", static) selects the functions (and instances) reset
samples, so a config's `eval_splits: {test: {split: test}}` reports the held-out split.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from purejaxppo.envs.suites._common import check_kwargs, unknown_name
from purejaxppo.envs.suites.metabbo.problems import (
    FUNCTION_NAMES,
    PARTITIONS,
    check_num_dims,
    function_ids,
)
from purejaxppo.errors import short
from purejaxppo.memory import ENV_PARTS, Part, check_parts

EXTRA = "metabbo"
NAMES = ("DE", "DE-operator", "PSO")
DEFAULTS = {
    "partition": "easy",
    "train_functions": None,
    "test_functions": None,
    "num_dims": 10,
    "population_size": 20,
    "num_test_instances": 5,
    "num_train_instances": 32,
    "reward": "log",
    "max_steps_in_episode": 50,
}
REWARDS = ("log", "relative", "vs_default")
#: Bytes of one instance's constants per `num_dims**2` (the rotations R and Q, float32),
#: and how many times that the drawing of a bank holds at its peak.
ROTATION_BYTES, DRAW_COPIES = 2 * 4, 2
#: float32 entries of one env's state per `population_size * num_dims` (the population,
#: its trial / velocity / personal bests, the default run of `reward="vs_default"`, the
#: next state and the step's temporaries; measured about 4 (DE) to 8 (PSO) per state).
STATE_FLOATS = 12


def memory_parts(env_kwargs: Mapping[str, Any], num_envs: int, constants: bool = True) -> list:
    """The `memory.Part`s of `num_envs` `metabbo:` envs built from `env_kwargs`: the
    fixed instances' constants (`K = num_train_instances + num_test_instances` instances
    of two `D x D` float32 rotations, `DRAW_COPIES` times while drawn; with `constants`),
    charged to `num_dims` (or to the instance counts where those grew more), and the
    env states (`num_envs * STATE_FLOATS * P * D` float32), charged to `population_size`
    (or `num_dims`). [] when a size is not an int (`make` reports it).
    """
    kw = {**DEFAULTS, **env_kwargs}
    names = ("num_dims", "population_size", "num_train_instances", "num_test_instances")
    if any(isinstance(kw[n], bool) or not isinstance(kw[n], int) for n in names):
        return []
    dims, size = kw["num_dims"], kw["population_size"]
    parts = []
    if constants:
        count = kw["num_train_instances"] + kw["num_test_instances"]
        field, value = "num_dims", dims
        if count / 37 > (dims / 10) ** 2:  # the defaults: 32 + 5 instances of 10 dims
            field = max(("num_train_instances", "num_test_instances"), key=lambda n: kw[n])
            value = kw[field]
        nbytes = DRAW_COPIES * count * (ROTATION_BYTES * dims * dims + 4 * dims + 64)
        what = f"the {count} fixed instances' rotations, 2 x {dims}x{dims} float32 each"
        parts.append(Part(f"env_kwargs.{field}", value, nbytes, what))
    field, value = ("num_dims", dims) if dims / 10 > size / 20 else ("population_size", size)
    nbytes = num_envs * 4 * (STATE_FLOATS * size * dims + 16 * size)
    what = f"{num_envs} env state(s) of a {size} x {dims} population"
    parts.append(Part(f"env_kwargs.{field}", value, nbytes, what))
    return parts


def _positive_int(name: str, env_id: str, value: Any, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"env_kwargs of {env_id}: {name}={value!r} must be an int >= {minimum}")
    return value


def make(name: str, env_kwargs: Mapping[str, Any]) -> tuple[Any, Any]:
    """Builds `"metabbo:<name>"` (name one of "DE", "DE-operator", "PSO").

    env_kwargs (all optional):
      partition: MetaBox's "easy" (default) or "difficult" split of BBOB f1..f24 in train
        and test functions (`problems.PARTITIONS`).
      train_functions, test_functions: BBOB ids 1..24 or evosax names; each replaces the
        partition's list (e.g. a two-function training set `[1, 3]`).
      num_dims: D, the problem dimension (default 10; an int >= 2). The fixed instances
        hold two D x D rotations each: their memory (`memory_parts`) must fit in the
        device's free memory.
      population_size: P (default 20; >= 4 for DE's mutation); one env's P x D
        population must fit too.
      num_test_instances: fixed instances per test function (default 5).
      num_train_instances: fixed instances per training function (default 32).
      reward: "log" (default), "relative" (MetaBox's) or "vs_default" (the change of the
        log gap to the optimiser's defaults run alongside), see `envs`.
      max_steps_in_episode: the budget in generations (default 50; an EnvParams field).

    Returns `(env, env_params)`; `env_params.split` is "train".

    Raises:
      ImportError: evosax is not installed (names the extra `metabbo`).
      ValueError: an unknown optimiser (close matches), unknown kwargs, function ids
        outside 1..24 or unknown names (naming them), an unsupported dimension (one
        line), or a bad partition / reward / size; sizes whose constants and one env's
        state (`memory_parts`) exceed the device's free memory (naming the size that
        dominates, before anything is built); any exception while building the env (one
        line naming the kwargs given).
    """
    if name not in NAMES:
        raise unknown_name("metabbo", name, NAMES)
    env_id = f"metabbo:{name}"
    check_kwargs("metabbo", name, env_kwargs, DEFAULTS)
    kw = {**DEFAULTS, **env_kwargs}
    if kw["partition"] not in PARTITIONS:
        raise ValueError(
            f"env_kwargs of {env_id}: partition={kw['partition']!r} is not one of "
            f"{sorted(PARTITIONS)}"
        )
    if kw["reward"] not in REWARDS:
        raise ValueError(f"env_kwargs of {env_id}: reward={kw['reward']!r} is not one of {REWARDS}")
    train, test = PARTITIONS[kw["partition"]]
    if kw["train_functions"] is not None:
        train = function_ids(f"env_kwargs of {env_id}: train_functions", kw["train_functions"])
    if kw["test_functions"] is not None:
        test = function_ids(f"env_kwargs of {env_id}: test_functions", kw["test_functions"])
    try:
        num_dims = check_num_dims(kw["num_dims"])
    except ValueError as err:
        raise ValueError(f"env_kwargs of {env_id}: {err}") from None
    population_size = _positive_int("population_size", env_id, kw["population_size"], 4)
    instances = _positive_int("num_test_instances", env_id, kw["num_test_instances"], 1)
    train_instances = _positive_int("num_train_instances", env_id, kw["num_train_instances"], 1)
    budget = _positive_int("max_steps_in_episode", env_id, kw["max_steps_in_episode"], 1)
    try:
        import evosax  # noqa: F401
    except ImportError as err:
        raise ImportError(
            f"{env_id} needs the optional extra: pip install 'purejaxppo[{EXTRA}]' ({err})"
        ) from None
    from purejaxppo.envs.suites.metabbo.optimisers import ENVS

    check_parts(memory_parts(kw, num_envs=1), f"building {env_id} (env_kwargs)")
    try:
        env = ENVS[name](
            env_id,
            train_functions=train,
            test_functions=test,
            num_dims=num_dims,
            population_size=population_size,
            num_test_instances=instances,
            reward=kw["reward"],
            max_steps_in_episode=budget,
            num_train_instances=train_instances,
        )
    except Exception as err:  # e.g. the device running out of memory while drawing
        given = ", ".join(f"{k}={short(v, 60)}" for k, v in sorted(env_kwargs.items()))
        first = (str(err).strip().splitlines() or [""])[0][:200]
        raise ValueError(
            f"env_kwargs of {env_id}: building the env from {given or 'defaults'} failed "
            f"({type(err).__name__}: {first})"
        ) from None
    return env, env.default_params


ENV_PARTS["metabbo"] = lambda env_kwargs, num_envs: memory_parts(env_kwargs, num_envs, False)

__all__ = ["EXTRA", "FUNCTION_NAMES", "NAMES", "PARTITIONS", "make", "memory_parts"]
