"""Population-based training (Jaderberg et al. 2017, arXiv:1711.09846) as one program.

`pbt(config, population=P, ready_every=K, search={...})` trains P members of one config
whose searched hyperparameters (traced fields, `TRACED_FIELDS`) start from draws of
`search`'s distributions. Every K updates ("a generation") every member gets a fitness
(mean episode return over the generation's last `fitness_window` updates, or, with
`config.eval_freq` > 0, the mean return of `eval_episodes` evaluation episodes on the first
eval split), then:

* exploit: members chosen by `exploit` copy another member's state -- every field of its
  `RunnerState` except `env`, `key` and `update_step` (so params, optimizer state and any
  statistics the runner carries) -- and its hyperparameters:
  `"truncation"` (the bottom `truncation_fraction` of the ranking copies a uniformly drawn
  member of the top fraction) or `"tournament"` (AgileRL's tournament selection: every
  member but the elite is replaced by the winner of a tournament of `tournament_size`
  members drawn with replacement; with `elitism` the best member is kept unchanged);
* explore: the replaced members' searched values are changed: `"perturb"` (each value
  multiplied by 0.8 or 1.2 with equal probability, clipped to its search range) or
  `"resample"` (each value redrawn from its initial distribution with probability
  `resample_probability`).

A member whose parameters or losses are not finite is `diverged`: its fitness is -inf, it
is never a parent, and it is replaced at the next exploit whenever a finite parent exists.

Training, fitness, selection, copying and mutation run in ONE jitted program: a
`lax.scan` over generations whose body runs K updates of all members (`vmap`, split over
the devices along `parallel.RUNS_AXIS`) and then the population step on the whole
population (XLA gathers across devices). The Python driver calls it in segments of whole
generations only to draw a progress bar and write checkpoints; the numbers do not depend
on the segmentation.

Member m starts from the key `jax.random.split(jax.random.key(seed) ..., P)[m]` (see
`member_keys`); with a population of 1 (which never exploits) the member's run is the
plain run `make_train(config)(member_keys(seed, 1)[0], hparams)` bit for bit.
"""

from __future__ import annotations

import dataclasses
import inspect
import math
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import jax
import numpy as np
from jax.sharding import PartitionSpec as P

from purejaxppo import fingerprint, parallel
from purejaxppo.config import PPOConfig
from purejaxppo.drivers.population import storage
from purejaxppo.drivers.population.groups import StaticPBT
from purejaxppo.drivers.population.options import (
    PBTOptions,
    check_options,
    initial_hparams,
    member_keys,
    population_key,
)
from purejaxppo.drivers.population.program import (
    COMPILES,
    PopulationState,
    cached_programs,
    initial_state,
    place_state,
    replicated_key,
)
from purejaxppo.drivers.population.results import (
    PBTResult,
    build_result,
    joined_history,
    json_ready,
)
from purejaxppo.drivers.population.search import SearchSpace, parse_search
from purejaxppo.drivers.population.static import check_static_options, split_search
from purejaxppo.drivers.segments import (
    RESUME_KEY_STREAM,
    SegmentHooks,
    SegmentOptions,
    largest_divisor_at_most,
    progress_bar,
    run_segments,
    speed_postfix,
)
from purejaxppo.train import METRICS


def pbt(
    config: PPOConfig,
    population: int = 8,
    ready_every: int = 10,
    search: Mapping[str, Sequence[Any]] | None = None,
    exploit: str = "truncation",
    explore: str = "perturb",
    seed: int = 0,
    devices: Sequence[jax.Device] | int | None = None,
    *,
    truncation_fraction: float = 0.25,
    tournament_size: int = 3,
    elitism: bool = True,
    perturb_factors: tuple[float, float] = (0.8, 1.2),
    resample_probability: float = 0.25,
    fitness_window: int | None = None,
    checkpoint_dir: str | Path | None = None,
    checkpoint_every: int = 1,
    resume: bool = False,
    progress: bool = False,
    verbose: bool = True,
    env: Any = None,
    env_params: Any = None,
) -> PBTResult:
    """Population-based training of `population` members in one compiled program.

    Args:
      config: the members' configuration; searched fields start from `search`, the other
        traced fields keep the config's values.
      population: P, members (a multiple of the device count).
      ready_every: K, updates per generation; after every generation but the last the
        population is exploited and explored. If K does not divide `num_updates`, the
        last generation is shorter (one more compiled program).
      search: traced field -> `("uniform" | "log_uniform", low, high)`: initial
        distribution (numpy draws seeded with `seed`, `drivers.settings.sample_random`) and range;
        static field (`static.STATIC_SEARCH_FIELDS`: hidden_sizes, num_minibatches,
        update_epochs, num_steps) -> `("choice", [A, B, ...])`: the population is then
        trained by `groups.StaticPBT` (one program per group of members sharing static
        values, generations on the host; see its module docstring).
      exploit: "truncation" or "tournament" (see the module docstring).
      explore: "perturb" or "resample".
      seed: member m starts from `member_keys(seed, P)[m]`; selection and mutation use
        `population_key(seed)`.
      devices: None (all devices), an int (first n local devices) or a device list; the
        members are split over them (`parallel.RUNS_AXIS`).
      truncation_fraction: top / bottom fraction of truncation selection (0, 0.5].
      tournament_size: k of tournament selection; elitism: keep the best member there.
      perturb_factors: the factors of "perturb".
      resample_probability: per-value redraw probability of "resample".
      fitness_window: updates at the end of a generation whose mean episode return is the
        fitness (default: the whole generation). Ignored when `config.eval_freq` > 0:
        then the fitness is the mean return of `config.eval_episodes` evaluation episodes
        (sampled actions) of the first eval split, run at every generation's end.
      checkpoint_dir: where to save the whole population every `checkpoint_every`
        generations and at the end (orbax, atomic), and, when it starts, the record of
        what decides its results (`purejaxppo.fingerprint`: config, options, search
        spaces, devices). Both searches (traced, static).
      resume: continue from the newest checkpoint in `checkpoint_dir` (same arguments:
        compared with the record first); the result is bitwise the uninterrupted run's
        on CPU (host envs: their episodes restart).
      progress: tqdm bar over generations. verbose: print the plan and compile count.
      env, env_params: optional gymnax-API environment, as for `make_train`.

    Returns:
      `PBTResult`.

    Raises:
      ValueError: before compiling, for a static / unknown searched field, a bad range
        (low >= high), a population not divisible by the device count, `ready_every`
        larger than the run, an unknown exploit / explore name or another bad option,
        naming the field and value, several devices for an "envpool:" id (its members
        share one pool on one device, the default for it); on resume, for a missing
        checkpoint or one written with other arguments, or an "envpool:" id (`kinds`'
        table: `pbt`, `pbt_resume`, `runs_on_devices`); for a static search, a static
        field pbt cannot search, a value the config cannot take, or options that need one
        program (several devices, init_from, eval_freq > 0).
      FingerprintMismatch (a ValueError): on resume, a setting differs from the one the
        population started with, naming the field (before anything compiles).
      TrainingInterrupted: SIGINT / SIGTERM (the stop protocol of `purejaxppo.signals`):
        the running generation finished and, with `checkpoint_dir`, saved; `unit` is
        "generation". A second signal raises `StopNow` at once.
      OSError: ENOSPC, the disk is full (the newest complete checkpoint is kept).
    """
    checked = _check(locals())
    _record_fingerprint(config, checked, checkpoint_dir, resume)
    if checked.mesh is None:  # a static search (`groups.StaticPBT`, one device)
        run = StaticPBT(config, checked.space, checked.static, checked.options)
        saving = {"checkpoint_dir": checkpoint_dir, "checkpoint_every": checkpoint_every}
        return run.train(env, env_params, verbose, **saving, resume=resume, progress=progress)
    space, options, mesh = checked.space, checked.options, checked.mesh
    run = _PBTRun(config, space, options, mesh, checkpoint_dir, checkpoint_every, progress)
    run.plan(env, env_params, verbose)
    run.start(resume)
    return run.train(progress)


def check_pbt(config: PPOConfig, **kwargs: Any) -> None:
    """Raises the `ValueError` that `pbt(config, **kwargs)` raises before it compiles
    (the env's kind, the search, the options, the devices), naming the field and value;
    trains nothing. The command line calls it before it creates the output directory."""
    bound = inspect.signature(pbt).bind(config, **kwargs)
    bound.apply_defaults()
    _check(bound.arguments)


class _Checked(NamedTuple):
    """`pbt`'s arguments, checked."""

    options: PBTOptions
    space: SearchSpace  # the traced fields searched
    static: Any  # the static fields searched (`static.split_search`)
    mesh: Any  # the members' mesh; None for a static search


def _check(given: Mapping[str, Any]) -> _Checked:
    """The checks of `pbt`'s arguments `given` (by name), before anything compiles."""
    from purejaxppo import kinds

    config, env, devices = given["config"], given["env"], given["devices"]
    kinds.check("pbt", config.env_name, env, multi_agent=config.multi_agent)
    if given["resume"]:  # EnvPool: the pool's state is not checkpointed
        kinds.check("pbt_resume", config.env_name, env, multi_agent=config.multi_agent)
    options = PBTOptions(**{f.name: given[f.name] for f in dataclasses.fields(PBTOptions)})
    traced, static = split_search(given["search"], config)
    if static.names:
        space = parse_search(traced, config) if traced else SearchSpace((), (), (), ())
        num_devices = len(devices) if isinstance(devices, Sequence) else (devices or 1)
        check_static_options(config, num_devices=num_devices)
        check_options(options, config, 1)
        checked = _Checked(options, space, static, None)
    else:
        space = parse_search(given["search"], config)
        mesh = parallel.runs_mesh(config.env_name, devices, options.population)
        check_options(options, config, mesh.devices.size)
        checked = _Checked(options, space, static, mesh)
    if given["resume"] and given["checkpoint_dir"] is None:
        raise ValueError("resume=True needs checkpoint_dir")
    if given["checkpoint_every"] < 1:
        raise ValueError(f"checkpoint_every={given['checkpoint_every']}: must be >= 1")
    if given["resume"]:  # the arguments that decide the results: as the run started
        fingerprint.check(
            given["checkpoint_dir"], _fingerprint_fields(config, checked), what=RESUME
        )
    return checked


def _record_fingerprint(config: PPOConfig, checked: _Checked, directory: Any, resume: bool) -> None:
    """Records what decides the results in the checkpoint directory `directory` (made
    here) when a population starts; on resume (checked already by `_check`) only where
    no record is there yet."""
    if directory is None or jax.process_index() != 0:
        return
    Path(directory).mkdir(parents=True, exist_ok=True)
    fields = _fingerprint_fields(config, checked)
    if resume:
        fingerprint.ensure(directory, fields, what=RESUME)
    else:
        fingerprint.record(directory, fields)


#: How a refused resume names itself (`fingerprint.FingerprintMismatch`).
RESUME = "pbt --resume"


def _fingerprint_fields(config: PPOConfig, checked: _Checked) -> dict[str, Any]:
    """What decides a population's results, recorded in its checkpoint directory when
    it starts and compared on resume (`purejaxppo.fingerprint`): the resolved config, the
    PBT options (population, generation length, seed, exploit / explore and their
    settings), the traced and static search spaces, and the devices the members are
    split over."""
    return {
        "config": config.to_dict(),
        "options": checked.options.to_dict(),
        "search": checked.space.spec,
        "static_search": checked.static.spec,
        "devices": 1 if checked.mesh is None else int(checked.mesh.devices.size),
    }


class _PBTRun:
    """The state of one `pbt` call and its `SegmentHooks` (segments of generations)."""

    def __init__(self, config, space, options, mesh, checkpoint_dir, checkpoint_every, progress):
        self.config, self.space, self.options, self.mesh = config, space, options, mesh
        self.checkpoint_dir, self.checkpoint_every = checkpoint_dir, checkpoint_every
        self.num_devices = mesh.devices.size
        ready_every = options.ready_every
        self.full, self.tail = divmod(config.num_updates, ready_every)
        self.num_gens = self.full + (self.tail > 0)
        segment = self.full
        if checkpoint_dir is not None:
            segment = math.gcd(segment, checkpoint_every)
        if progress:  # about 20 steps of the bar; segments divide the full generations
            target = max(1, math.ceil(self.full / 20))
            segment = largest_divisor_at_most(segment, target)
        self.segment = segment
        meta = {"config": config.to_dict(), "options": options.to_dict(), "search": space.spec}
        self.meta = json_ready(meta)
        self.history: dict[str, list[np.ndarray]] = {}
        self.done = 0
        self.state: Any = None
        self.start_time = time.perf_counter()

    def plan(self, env: Any, env_params: Any, verbose: bool) -> None:
        """Builds (or reuses) the programs; prints the plan and the compiles it needs."""
        config, options, tail = self.config, self.options, self.tail
        self.init, self.run_generations = cached_programs(
            config, self.space, options, self.mesh, env, env_params
        )
        needed = {(self.segment, options.ready_every)} | ({(1, tail)} if tail else set())
        num_compiles = len(needed - set(self.run_generations.programs))
        if verbose and jax.process_index() == 0:
            shorter = f" (the last of {tail})" if tail else ""
            print(
                f"pbt: {options.population} members x {self.num_gens} generations of "
                f"{options.ready_every} updates{shorter}, exploit={options.exploit}, "
                f"explore={options.explore}, searching {list(self.space.names) or 'nothing'}, "
                f"on {self.num_devices} device(s) -> {num_compiles} compile(s) of the "
                "training program",
                file=sys.stderr,
            )
        self.compiled_before = COMPILES.count

    def start(self, resume: bool) -> None:
        """The initial population, or the newest checkpoint's (same arguments only)."""
        directory = None if self.checkpoint_dir is None else Path(self.checkpoint_dir)
        if resume and (directory / "population").is_dir():
            self._restore(directory / "population")
        elif resume:
            raise ValueError(f"resume: no population checkpoint under {self.checkpoint_dir}")
        else:
            self.state = initial_state(self.init, self.config, self.space, self.options, self.mesh)

    def _restore(self, directory: Path) -> None:
        config, space, options, mesh = self.config, self.space, self.options, self.mesh
        population, seed = options.population, options.seed
        key_data = np.asarray(jax.random.key_data(member_keys(seed, population)))
        abstract = jax.eval_shape(self.init, key_data, None)
        abstract_runner = abstract.replace(key=jax.eval_shape(jax.random.key_data, abstract.key))
        abstract_state = {
            "runner": jax.tree.map(lambda x: np.zeros(x.shape, x.dtype), abstract_runner),
            "hparams": initial_hparams(config, space, population, seed),
            "key": np.asarray(jax.random.key_data(population_key(seed))),
        }
        done, saved, saved_history, saved_meta = storage.load_population(directory, abstract_state)
        saved_meta.pop("generation", None)
        meta = self.meta
        if saved_meta != meta:
            diff = [
                f"{group}.{name}: saved {saved_meta.get(group, {}).get(name)!r} vs given {value!r}"
                for group in meta
                for name, value in meta[group].items()
                if saved_meta.get(group, {}).get(name) != value
            ]
            raise ValueError(
                f"resume: the checkpoint in {self.checkpoint_dir} was written with other "
                f"arguments ({'; '.join(diff) or 'search fields differ'})"
            )
        members = P(parallel.RUNS_AXIS)
        runner = parallel.to_global(saved["runner"], mesh, members)
        runner = runner.replace(key=jax.random.wrap_key_data(runner.key))
        from purejaxppo import kinds  # gymnax starts JAX's backend: not at import

        if kinds.kind_of_id(config.env_name, config.multi_agent).episodes_restart_on_resume:
            runner = self._restart_episodes(runner, done)
        self.state = PopulationState(
            runner=runner,
            hparams=parallel.to_global(saved["hparams"], mesh, members),
            key=replicated_key(np.asarray(saved["key"]), mesh),
        )
        self.history = {k: [np.asarray(v)] for k, v in saved_history.items()}
        self.done = done

    def _restart_episodes(self, runner: Any, done: int) -> Any:
        """An EnvPool pool lives on the host, outside the checkpoint: the resumed members
        start fresh episodes (their inits from `fold_in(fold_in(member key,
        RESUME_KEY_STREAM), done)`), and keep everything else the checkpoint holds
        (params, optimizer state, statistics, keys, hyperparameters), as a single run's
        resume does (`drivers.single`)."""
        options = self.options
        keys = jax.vmap(
            lambda k: jax.random.fold_in(jax.random.fold_in(k, RESUME_KEY_STREAM), done)
        )(member_keys(options.seed, options.population))
        key_data = np.asarray(jax.random.key_data(keys))
        fresh = self.init(parallel.to_global(key_data, self.mesh, P(parallel.RUNS_AXIS)), None)
        print(
            f"resume: {self.config.env_name} is an EnvPool env, whose episodes live on the "
            "host outside the checkpoint: the members start fresh episodes (params, optimizer "
            "state, statistics and hyperparameters continue from the checkpoint)",
            file=sys.stderr,
        )
        return runner.replace(env=fresh.env)

    def length(self, done: int) -> int:
        """Generations in the next segment (the shorter last generation runs alone)."""
        return min(self.segment, self.full - done) if done < self.full else 1

    def run(self, done: int, count: int) -> Any:
        length = self.options.ready_every if done < self.full else self.tail
        # The same input layout every call: one compile.
        state = place_state(self.state, self.mesh)
        COMPILES.active = True
        try:
            self.state, out = self.run_generations(state, done, count, length, self.num_gens - 1)
        finally:
            COMPILES.active = False
        return out

    def process(self, done: int, count: int, fetched: Any) -> dict[str, str]:
        records, metrics = fetched
        chunk = {f"record/{k}": np.asarray(v) for k, v in records.items()}
        # metrics [G, P, K] -> [P, G*K]
        for name in METRICS:
            m = np.asarray(metrics[name])
            chunk[f"metric/{name}"] = np.transpose(m, (1, 0, 2)).reshape(m.shape[1], -1)
        for k, v in chunk.items():
            self.history.setdefault(k, []).append(v)
        population = self.options.population
        steps = int(np.max(records["update_step"][-1])) * self.config.batch_size * population
        best = {"best": f"{np.max(records['fitness'][-1]):.1f}"}
        return {**best, **speed_postfix(steps, time.perf_counter() - self.start_time)}

    def save(self, done: int, due: bool) -> None:
        if self.checkpoint_dir is not None and due:
            directory = Path(self.checkpoint_dir) / "population"
            history = joined_history(self.history)
            storage.save_population(directory, self.state, done, history, self.meta)
            self.saved = True

    def _resume_hint(self) -> str | None:
        return storage.resume_hint(self.checkpoint_dir) if self.saved else None

    def train(self, progress: bool) -> PBTResult:
        """Runs the remaining generations in segments; returns the `PBTResult`."""
        bar = progress_bar(
            self.num_gens,
            initial=self.done,
            unit="generation",
            desc="pbt",
            enabled=progress and jax.process_index() == 0,
        )
        hint = None if self.checkpoint_dir is None else self._resume_hint
        hooks = SegmentHooks(self.length, self.run, self.process, self.save, resume_hint=hint)
        save_freq = self.checkpoint_every if self.checkpoint_dir is not None else 0
        options = SegmentOptions(save_freq=save_freq, stop_on_signals=jax.process_count() == 1)
        # a stop at once before the first save promises none (`signals.hinted`)
        self.saved = self.done > 0
        with bar:
            run_segments(
                self.num_gens, self.done, hooks, bar=bar, options=options, unit="generation"
            )
        joined = joined_history(self.history)
        records = {k.split("/", 1)[1]: v for k, v in joined.items() if k.startswith("record/")}
        metrics = {k.split("/", 1)[1]: v for k, v in joined.items() if k.startswith("metric/")}
        state = self.state
        runner = parallel.to_host(state.runner.replace(key=jax.random.key_data(state.runner.key)))
        final_state = PopulationState(
            runner=runner.replace(key=jax.random.wrap_key_data(np.asarray(runner.key))),
            hparams=parallel.to_host(state.hparams),
            key=np.asarray(jax.random.key_data(state.key)),
        )
        return build_result(
            self.config,
            self.space,
            self.options,
            records=records,
            metrics=metrics,
            final_state=final_state,
            num_compiles=COMPILES.count - self.compiled_before,
            num_devices=self.num_devices,
        )
