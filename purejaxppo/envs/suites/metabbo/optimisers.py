"""The optimisers of the `metabbo:` envs: what the action sets each generation (the MDP,
features and rewards they share are `envs.MetaBBOEnv`'s).

* `DEEnv` ("metabbo:DE"): DE's F and CR.
* `DEOperatorEnv` ("metabbo:DE-operator"): DE's mutation operator.
* `PSOEnv` ("metabbo:PSO"): PSO's inertia weight and acceleration coefficients.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from gymnax.environments import spaces

from purejaxppo.envs.suites.metabbo.envs import MetaBBOEnv, MetaBBOParams

__all__ = ["ENVS", "DEEnv", "DEOperatorEnv", "PSOEnv"]


def _knee(action: jax.Array, index: int, lo: Any, default: Any, hi: Any) -> jax.Array:
    """Component `index` of a [-1, 1] action (clipped first) mapped piecewise-linearly to
    [lo, hi] with 0 -> `default`: -1 -> lo, 0 -> default, 1 -> hi."""
    a = jnp.clip(action[index], -1.0, 1.0)
    return jnp.where(a < 0.0, default + a * (default - lo), default + a * (hi - default))


class DEEnv(MetaBBOEnv):
    """`metabbo:DE`: evosax `DifferentialEvolution` (best/1/bin, evosax's default
    elitism; Storn & Price 1997); the action float32 `[3]` in [-1, 1] sets the scale
    factor F in F_RANGE, the crossover rate CR in CR_RANGE and the dither half-width w of
    F for the next generation (LDE's action, Sun et al. 2021, there one (F, CR) in
    [0, 1]^2 per member; here one triple per generation). Every component is a correction
    around evosax's defaults (F = 0.8, CR = 0.9, no dither), mapped piecewise-linearly
    with 0 at the default: F = 0.8 + a (0.8 - 0) for a < 0, 0.8 + a (1 - 0.8) for a >= 0
    (CR alike); w = F_DITHER_MAX max(a2, 0) in [0, 0.5]: the generation draws its F
    uniformly in [max(F - w, 0), min(F + w, 1)] (evosax's dither,
    `differential_weight_min/max`; Das et al. 2005), so a deterministic (greedy) policy
    can choose the per-generation randomness of F that a sampled policy gets from its own
    noise. `default_action()` is [0, 0, 0]: a fresh policy (mean near 0, small std)
    starts at evosax's DE and learns corrections to it (docs/guides/env-suites.md,
    MetaBBO: a map whose zero was not the defaults started the controller elsewhere)."""

    F_RANGE = (0.0, 1.0)
    CR_RANGE = (0.0, 1.0)
    F_DITHER_MAX = 0.5

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        from evosax.algorithms import DifferentialEvolution

        self.algorithm = DifferentialEvolution(self.population_size, jnp.zeros(self.num_dims))

    def action_space(self, params: MetaBBOParams) -> spaces.Box:
        return spaces.Box(-1.0, 1.0, (3,), jnp.float32)

    def algo_params(self, action: jax.Array) -> Any:
        d = self.algorithm.default_params
        f = _knee(action, 0, self.F_RANGE[0], d.differential_weight, self.F_RANGE[1])
        cr = _knee(action, 1, self.CR_RANGE[0], d.crossover_rate, self.CR_RANGE[1])
        w = _knee(action, 2, 0.0, 0.0, self.F_DITHER_MAX)
        return d.replace(
            differential_weight=f,
            differential_weight_min=jnp.maximum(f - w, self.F_RANGE[0]),
            differential_weight_max=jnp.minimum(f + w, self.F_RANGE[1]),
            crossover_rate=cr,
        )

    def default_action(self) -> jax.Array:
        """[0, 0, 0]: the action whose params are evosax's defaults (F = 0.8, CR = 0.9,
        no dither)."""
        return jnp.zeros(3, jnp.float32)


class DEOperatorEnv(MetaBBOEnv):
    """`metabbo:DE-operator`: evosax `DifferentialEvolution` whose mutation strategy the
    discrete action picks each generation (DE-DDQN's operator selection, Sharma et al.
    GECCO 2019, there per member among 4 strategies; here per generation):
    0 rand/1/bin, 1 best/1/bin (evosax's default), 2 rand/2/bin, 3 best/2/bin, all with
    evosax's F = 0.8 and CR = 0.9."""

    OPERATORS = ("rand/1/bin", "best/1/bin", "rand/2/bin", "best/2/bin")

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        from evosax.algorithms import DifferentialEvolution

        solution = jnp.zeros(self.num_dims)
        self.algorithm = DifferentialEvolution(self.population_size, solution, num_diff=1)
        self.algorithm_two = DifferentialEvolution(self.population_size, solution, num_diff=2)

    def action_space(self, params: MetaBBOParams) -> spaces.Discrete:
        return spaces.Discrete(len(self.OPERATORS))

    @property
    def num_actions(self) -> int:
        return len(self.OPERATORS)

    def algo_params(self, action: jax.Array) -> Any:
        return self.algorithm.default_params.replace(elitism=jnp.asarray(action) % 2 == 1)

    def ask(self, key: jax.Array, algo_state: Any, action: jax.Array) -> tuple[Any, Any]:
        params = self.algo_params(action)
        one = self.algorithm.ask(key, algo_state, params)
        two = self.algorithm_two.ask(key, algo_state, params)
        return jax.tree.map(lambda a, b: jnp.where(jnp.asarray(action) >= 2, b, a), one, two)

    def default_action(self) -> jax.Array:
        """best/1/bin, evosax's default DE."""
        return jnp.int32(1)


class PSOEnv(MetaBBOEnv):
    """`metabbo:PSO`: evosax `PSO` (Kennedy & Eberhart 1995); the action float32 `[3]` in
    [-1, 1] sets the inertia weight w in [0, 1] and the cognitive / social coefficients
    c1, c2 in [0, C_MAX] of the next generation (RLEPSO, Yin et al. 2021, Information
    Sciences: the policy sets PSO's w and acceleration coefficients each generation).
    Each component is a correction around evosax's default (w = 0.75, c1 = 1.5,
    c2 = 2.0), mapped piecewise-linearly with 0 at the default (-1 -> the lower bound,
    1 -> the upper), so `default_action()` is [0, 0, 0] and a fresh policy starts at
    PSO's defaults. Population features use the particles' current costs.

    Like evosax's PSO, the swarm has no bound handling: at evosax's defaults (w = 0.75 =
    (c1 + c2) / 2 - 1, the edge of the stable region) or with larger coefficients some
    swarms fly far outside [-5, 5]^D, where ill-conditioned BBOB functions overflow
    float32 into NaN; such a cost counts as +inf (`envs._costs`), so it never becomes the
    best-so-far cost (64 episodes of 50 generations on the quick benchmark's training
    functions with random actions: 149 of the 3,200 steps' best costs were NaN before)."""

    C_MAX = 3.0

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        from evosax.algorithms import PSO

        self.algorithm = PSO(self.population_size, jnp.zeros(self.num_dims))

    def action_space(self, params: MetaBBOParams) -> spaces.Box:
        return spaces.Box(-1.0, 1.0, (3,), jnp.float32)

    def algo_params(self, action: jax.Array) -> Any:
        d = self.algorithm.default_params
        return d.replace(
            inertia_coeff=_knee(action, 0, 0.0, d.inertia_coeff, 1.0),
            cognitive_coeff=_knee(action, 1, 0.0, d.cognitive_coeff, self.C_MAX),
            social_coeff=_knee(action, 2, 0.0, d.social_coeff, self.C_MAX),
        )

    def default_action(self) -> jax.Array:
        """[0, 0, 0]: the action whose params are evosax's defaults (w 0.75, c1 1.5,
        c2 2.0)."""
        return jnp.zeros(3, jnp.float32)


ENVS = {"DE": DEEnv, "DE-operator": DEOperatorEnv, "PSO": PSOEnv}
