"""The compiled side of `tune`: one static combination's B lanes, each training one
trial, side by side in one program (`jit(vmap(run))` over a segment of updates), split
over the local devices that divide B (`parallel.runs_mesh`: on a CPU, the
`jax_num_cpu_devices` that the command line sets to the usable cores).

A lane takes a new trial at a segment boundary (its own key, hyperparameters, and fresh
parameters and optimizer state: the init program's state of that lane replaces its own,
`jnp.where` lane by lane, and the other lanes' state is left untouched). A trial's numbers are those
of `jax.vmap(make_train(config))` for its key `jax.random.key(seed)`: the lanes are
batched runs like a sweep's (tests/test_tune.py checks it bitwise).

A host env ("envpool:", "gymnasium:": `kinds.EnvKind.host_calls`) keeps every lane's
envs in one pool / vector env on the host, on one device, which an init resets whole: its
lanes are placed together (one trial's seeds, `Tuner` runs such trials one at a time) and
initialised by one vmapped init, as a sweep's chunk of runs is.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import PartitionSpec as P

from purejaxppo import stored_programs
from purejaxppo.config import TRACED_FIELDS, PPOConfig
from purejaxppo.drivers import warm
from purejaxppo.drivers.segments import largest_divisor_at_most
from purejaxppo.drivers.tune.evaluation import make_lanes_evaluator
from purejaxppo.drivers.tune.objective import EVAL_RETURN
from purejaxppo.guards import LOSS_METRICS
from purejaxppo.hyperparams import Hyperparams
from purejaxppo.parallel import RUNS_AXIS, make_mesh, make_runs_program, runs_mesh
from purejaxppo.train import make_train_fns


def segment_updates(num_updates: int, reports: int) -> int:
    """Updates per segment: the largest divisor of `num_updates` that is at most
    ceil(num_updates / reports), so every trial reports at the same update counts.

    Example: 12 updates, 4 reports -> 3; 97 updates (a prime), 10 reports -> 1.
    """
    return largest_divisor_at_most(num_updates, math.ceil(num_updates / max(reports, 1)))


@dataclasses.dataclass
class Lane:
    """One trial in a lane: the Optuna trial, its config and seed, and its history."""

    trial: Any  # optuna.Trial
    config: PPOConfig  # the base config with the trial's parameters
    seed: int  # its key: jax.random.key(seed)
    done: int = 0  # updates trained
    task: int = 0  # the index of its task (`tasks`)
    values: list[np.ndarray] = dataclasses.field(default_factory=list)  # metric [L] each
    counts: list[np.ndarray] = dataclasses.field(default_factory=list)  # episodes [L] each

    def curve(self) -> tuple[np.ndarray, np.ndarray]:
        """The objective metric and the ended episodes of every update so far `[done]`."""
        return np.concatenate(self.values), np.concatenate(self.counts)


class LaneGroup:
    """`width` lanes of one static combination (`config`: its static fields), trained in
    segments of `segment` updates (`segment_updates(config.num_updates, reports)`).

    `init_params`: a warm start shared by every lane (`warm.load_warm_start`), or None.
    `eval_episodes` > 0: after each segment every lane plays that many greedy episodes
    (`evaluation.make_lanes_evaluator`), its mean return the metric `eval_return`.
    """

    def __init__(
        self,
        config: PPOConfig,
        width: int,
        reports: int,
        metric: str,
        init_params: Any = None,
        eval_episodes: int = 0,
    ):
        fns = make_train_fns(warm.program_config(config))
        warm.check_warm_start(fns, init_params)
        self.host = fns.kind.host_calls  # one pool / vector env for every lane
        self.config, self.width, self.init_params = config, width, init_params
        self.num_updates = config.num_updates
        self.segment = segment_updates(self.num_updates, reports)
        trained = () if eval_episodes else (metric,)
        self.fetched = tuple(dict.fromkeys((*trained, "episode_count", *LOSS_METRICS)))
        self.evaluate = None
        if eval_episodes:
            self.evaluate = make_lanes_evaluator(config, fns.networks, eval_episodes, self.host)
        self.lanes: list[Lane | None] = [None] * width
        base = Hyperparams.from_config(config)
        self.hparams = {n: np.full(width, np.asarray(getattr(base, n))) for n in TRACED_FIELDS}
        one = np.asarray(jax.random.key_data(jax.random.key(0)))
        self.key_data = np.zeros((width, *one.shape), one.dtype)
        self.runner = None
        self.compiled = False  # the segment program ran once

        def init_one(key_data: jax.Array, init_params: Any) -> Any:
            return fns.init(jax.random.wrap_key_data(key_data), init_params)

        def merge(fresh_lanes: jax.Array, fresh: Any, old: Any) -> Any:
            def pick(new: jax.Array, kept: jax.Array) -> jax.Array:
                mask = fresh_lanes.reshape(fresh_lanes.shape + (1,) * (new.ndim - 1))
                return jnp.where(mask, new, kept)

            return jax.tree.map(pick, fresh, old)

        length = self.segment
        # The lanes split over the local devices that divide `width` (`runs_mesh`), each
        # device training its share as a sweep's chunk does; `lax.map` over the inits, as
        # `parallel.batch_runs` (XLA:CPU's batched QR).
        self.mesh = runs_mesh(config.env_name, "auto", width) or make_mesh(1, RUNS_AXIS)
        each = (lambda f, kd: jax.vmap(f)(kd)) if self.host else jax.lax.map
        # kept in the store (`stored_programs`; a warm start is an argument here)
        store = stored_programs.directory_for(host_calls=self.host, warm_start=False)
        key_config = warm.program_config(config)
        self._init = make_runs_program(
            lambda kd, ip: each(lambda k: init_one(k, ip), kd),
            self.mesh,
            in_specs=(P(RUNS_AXIS), P()),
            once=True,
            stored=("tune/init", key_config, store),
        )
        self._merge = jax.jit(merge)
        self._run = make_runs_program(
            jax.vmap(lambda runner, hp: fns.run(runner, hp, length)),
            self.mesh,
            stored=(f"tune/segment/{length}", key_config, store),
        )

    def free(self) -> list[int]:
        """The lanes without a trial."""
        return [i for i, lane in enumerate(self.lanes) if lane is None]

    def active(self) -> bool:
        return any(lane is not None for lane in self.lanes)

    def place(self, lanes: Mapping[int, Lane]) -> None:
        """Starts each given lane's trial: its hyperparameters and key, fresh parameters
        and optimizer state (those lanes re-initialised; the others untouched). A host
        env's lanes start together (every lane given: the init resets its pool).

        Raises:
          ValueError: a host env's lanes given in part while others train."""
        if self.host and len(lanes) != self.width:
            raise ValueError(f"a host env's {self.width} lanes start together, not {len(lanes)}")
        mask = np.zeros(self.width, bool)
        for index, lane in lanes.items():
            hparams = Hyperparams.from_config(lane.config)
            for name in TRACED_FIELDS:
                self.hparams[name][index] = np.asarray(getattr(hparams, name))
            self.key_data[index] = np.asarray(jax.random.key_data(jax.random.key(lane.seed)))
            self.lanes[index] = lane
            mask[index] = True
        fresh = self._init(self.key_data, self.init_params)  # every lane's: cheap
        keep = self.runner is not None and not self.host
        self.runner = self._merge(mask, fresh, self.runner) if keep else fresh

    def run_segment(self) -> dict[str, np.ndarray]:
        """Trains every lane `segment` updates; returns the metrics the driver reads
        (objective metric, `episode_count`, the losses), float32 `[B, segment]`, on the
        host. Idle lanes train on (their rows are ignored)."""
        hparams = Hyperparams(**{n: jnp.asarray(v) for n, v in self.hparams.items()})
        self.runner, metrics = self._run(self.runner, hparams)
        fetched = jax.device_get({name: metrics[name] for name in self.fetched})
        if self.evaluate is not None:  # every lane's greedy episodes `[B, episodes]`
            lanes = [(0, 0) if lane is None else (lane.seed, lane.done) for lane in self.lanes]
            seeds = [seed for seed, _ in lanes]
            updates = [done + self.segment for _, done in lanes]
            returns = self.evaluate(self.runner.train_state.params, seeds, updates)
            fetched[EVAL_RETURN] = returns.astype(np.float64).mean(axis=1)
        self.compiled = True
        return fetched


def check_lanes_memory(config: PPOConfig, lanes: int) -> int:
    """Refuses `lanes` trials of `config` trained at once whose estimated memory
    (`memory.estimate_bytes` of one run, times the lanes on one device; on a CPU every
    lane shares the RAM) exceeds the device's free memory. Returns the lanes' bytes.

    Raises:
      ValueError: one line naming `batch`, the estimate, the free memory and the largest
        batch that fits; also the config's own refusals (`train_setup.prepare`).
    """
    from purejaxppo import memory
    from purejaxppo.train_setup import prepare

    setup = prepare(warm.program_config(config))
    obs_size = memory.observation_size(setup.env, setup.env_params)
    per_run = max(memory.estimate_bytes(config, setup.networks, setup.num_envs, obs_size), 1)
    free, where = memory.available_bytes()
    devices = jax.local_devices()
    shared = devices[0].platform == "cpu"  # the CPU devices share one RAM
    per_device = lanes if shared else -(-lanes // len(devices))
    need = per_run * per_device
    if free is not None and need > free:
        fits = max(0, free // per_run) * (1 if shared else len(devices))
        fix = f"use --batch {fits} or less" if fits else "use a smaller config (purejaxppo check)"
        raise ValueError(
            f"batch={lanes}: {lanes} trials at once need about {need / 2**30:.2f} GiB "
            f"({per_run / 2**10:,.0f} KiB each, purejaxppo.memory), more than the "
            f"{free / 2**30:.2f} GiB of {where}; {fix}"
        )
    return need
