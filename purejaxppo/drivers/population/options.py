"""PBT's static options, their checks, and the members' keys and initial hyperparameters."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from purejaxppo.config import PPOConfig
from purejaxppo.drivers.population.search import SearchSpace
from purejaxppo.drivers.settings import sample_random
from purejaxppo.hyperparams import Hyperparams

#: Exploit strategies (`pbt(exploit=...)`).
EXPLOITS = ("truncation", "tournament")


#: Explore strategies (`pbt(explore=...)`).
EXPLORES = ("perturb", "resample")


@dataclasses.dataclass(frozen=True)
class PBTOptions:
    """Static settings of a PBT run (see `pbt` for their meaning)."""

    population: int
    ready_every: int
    exploit: str = "truncation"
    explore: str = "perturb"
    truncation_fraction: float = 0.25
    tournament_size: int = 3
    elitism: bool = True
    perturb_factors: tuple[float, float] = (0.8, 1.2)
    resample_probability: float = 0.25
    fitness_window: int | None = None
    seed: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "perturb_factors", tuple(self.perturb_factors))

    def to_dict(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out["perturb_factors"] = list(self.perturb_factors)
        return out


def _is_int(value: Any) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float, np.number)) and not isinstance(value, bool)


def check_options(options: PBTOptions, config: PPOConfig, num_devices: int) -> None:
    o = options
    if isinstance(o.population, bool) or not isinstance(o.population, (int, np.integer)):
        raise ValueError(f"population={o.population!r}: must be an integer >= 1")
    if o.population < 1:
        raise ValueError(f"population={o.population}: must be >= 1")
    if o.population % num_devices:
        raise ValueError(
            f"population={o.population} must be divisible by the number of devices "
            f"{num_devices} (every device trains the same number of members)"
        )
    if not isinstance(o.ready_every, (int, np.integer)) or o.ready_every < 1:
        raise ValueError(f"ready_every={o.ready_every!r}: must be an integer >= 1")
    if o.ready_every > config.num_updates:
        raise ValueError(
            f"ready_every={o.ready_every} is larger than the run: num_updates = "
            f"total_timesteps // (num_envs*num_steps) = {config.total_timesteps} // "
            f"{config.batch_size} = {config.num_updates}"
        )
    if o.exploit not in EXPLOITS:
        raise ValueError(f"exploit={o.exploit!r}: must be one of {EXPLOITS}")
    if o.explore not in EXPLORES:
        raise ValueError(f"explore={o.explore!r}: must be one of {EXPLORES}")
    if not 0 < o.truncation_fraction <= 0.5:
        raise ValueError(f"truncation_fraction={o.truncation_fraction}: must be in (0, 0.5]")
    size = o.tournament_size
    most = o.population if o.exploit == "tournament" else math.inf  # used by tournament only
    if not _is_int(size) or not 1 <= size <= most:
        raise ValueError(
            f"tournament_size={size!r}: must be an integer in [1, population={o.population}] "
            f"(exploit={o.exploit!r})"
        )
    factors = o.perturb_factors
    if len(factors) != 2 or not all(_is_number(f) and 0 < f < math.inf for f in factors):
        raise ValueError(f"perturb_factors={factors!r}: must be two finite positive factors")
    if not 0 <= o.resample_probability <= 1:
        raise ValueError(f"resample_probability={o.resample_probability}: must be in [0, 1]")
    if o.fitness_window is not None and not 1 <= o.fitness_window <= o.ready_every:
        raise ValueError(
            f"fitness_window={o.fitness_window}: must be in [1, ready_every={o.ready_every}]"
        )


def member_keys(seed: int, population: int) -> jax.Array:
    """Typed keys `[P]` of the members: `jax.random.split(jax.random.split(
    jax.random.key(seed))[0], P)`; the second half of the first split drives selection,
    mutation and evaluation."""
    return jax.random.split(jax.random.split(jax.random.key(seed))[0], population)


def population_key(seed: int) -> jax.Array:
    """Typed key of the population step (selection, mutation, evaluation)."""
    return jax.random.split(jax.random.key(seed))[1]


def initial_hparams(
    config: PPOConfig, space: SearchSpace, population: int, seed: int
) -> Hyperparams:
    """`[P]` Hyperparams: the config's values, searched fields drawn (numpy, seeded with
    `seed`) by `drivers.settings.sample_random` from `search`'s distributions."""
    base = Hyperparams.from_config(config)
    draws = sample_random(space.spec, population, seed) if space.names else [{}] * population
    members = [
        base.replace(**{k: jnp.asarray(v, jnp.float32) for k, v in draw.items()}) for draw in draws
    ]
    return jax.tree.map(lambda *xs: np.stack([np.asarray(x) for x in xs]), *members)
