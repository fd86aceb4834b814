"""What one fresh process of `benchmarks.compile_time` measures (`--child KIND`): the
trace, lower and compile of one program (`train:`, `runs_init:`, `dp_init:`, `rejax:`),
or a whole call split by JAX's own compile events (`check`, `eval`, `seeds`, `sweep`,
`tune`, `pbt`, `pbt_static`, and `first_update_split`: the `purejaxppo train` command run
in this process up to its first metrics row); `program_size`, the StableHLO measure
`tests/test_program_size.py` pins. The kinds are defined in `benchmarks/compile_time.py`'s
docstring. Imports neither purejaxppo nor JAX at module level: the `rejax:` kinds run in
the peer's venv.
"""

from __future__ import annotations

import os
import re
import sys
import tempfile
import threading
import time
from pathlib import Path

from benchmarks.harness import ROOT

#: Configs of the `train:NAME/AGENTS` kinds.
CONFIGS = {
    "cartpole": "configs/cartpole.yaml",
    "minatar_cnn": "configs/breakout_minatar_cnn.yaml",
    "gru": "configs/memory_chain_gru.yaml",
    "mujoco": "configs/mujoco.yaml",
}
#: The drivers of many runs (timed as whole calls) and their runs' updates.
MANY_RUNS = ("seeds", "sweep", "tune", "pbt", "pbt_static")
MANY_RUNS_UPDATES = 4
#: Runs of the `runs_init:` kinds.
RUNS_INIT_RUNS = 4
#: CPU devices of the `dp_init:` kinds (`jax_num_cpu_devices`, set in the child).
DATA_PARALLEL_DEVICES = 2
#: `purejaxppo train` of CartPole after `purejaxppo`: the `first_update` and
#: `first_update_split` kinds' command (the run directory is added per run).
FIRST_UPDATE_ARGS = (
    "train",
    "--config",
    "configs/cartpole.yaml",
    "--total-timesteps",
    "20480",
    "--no-progress",
)
#: How often `first_update_split`'s child reads its run's metrics.csv (seldom: the reading
#: thread takes the interpreter's lock from the tracing one; 5 ms cost it ~0.5 s).
SPLIT_POLL_S = 0.05
#: The environment variable naming the `first_update_split` run's directory.
RUN_DIR_ENV = "COMPILE_TIME_RUN_DIR"
#: JAX's compile events (`jax._src.dispatch`): the trace, lower and XLA compile (or cache
#: load) of one program each.
EVENTS = {
    "/jax/core/compile/jaxpr_trace_duration": "trace_s",
    "/jax/core/compile/jaxpr_to_mlir_module_duration": "lower_s",
    "/jax/core/compile/backend_compile_duration": "compile_s",
}
CACHE_HIT = "/jax/compilation_cache/cache_hits"
#: The first line of an MLIR operation in pretty-printed StableHLO text: after the
#: indentation and an optional `%results =`, a dotted op name (`stablehlo.add`,
#: `func.call`, the generic `"stablehlo.case"`) or func's short `call` / `return`.
OP_LINE = re.compile(r'^\s*(?:%[^=]*=\s*)?"?(?:[a-z_]+\.[a-z_][\w.]*|call|return)\b')


def program_size(text: str) -> dict[str, int]:
    """`{"lines": n, "ops": n}` of a lowered program's StableHLO text (`as_text()`): its
    lines, and those that begin an operation (`OP_LINE`; not the lines that only open or
    close a region, `}`, `} do {`, `cond {`, nor the `module` line)."""
    lines = text.splitlines()
    return {"lines": len(lines), "ops": sum(1 for line in lines if OP_LINE.match(line))}


def _listen() -> dict:
    """Sums JAX's compile events from now on into the returned dict."""
    import jax

    totals = {"trace_s": 0.0, "lower_s": 0.0, "compile_s": 0.0, "programs": 0, "cache_hits": 0}

    def duration(event: str, seconds: float, **_) -> None:
        if event in EVENTS:
            totals[EVENTS[event]] += seconds
            totals["programs"] += event.endswith("backend_compile_duration")

    def count(event: str, **_) -> None:
        totals["cache_hits"] += event == CACHE_HIT

    jax.monitoring.register_event_duration_secs_listener(duration)
    jax.monitoring.register_event_listener(count)
    return totals


def _train(name: str, agents: str) -> dict:
    import jax

    import purejaxppo as pjp

    start = time.perf_counter()
    train = pjp.make_train(pjp.PPOConfig.from_yaml(ROOT / CONFIGS[name]))
    setup_s = time.perf_counter() - start
    if agents == "1":
        fn, keys = jax.jit(train), jax.random.key(0)
    else:
        fn, keys = jax.jit(jax.vmap(train)), jax.random.split(jax.random.key(0), 8)
    return _timed(fn, (keys,), {"setup_s": setup_s})


def _runs_init(name: str, options: str) -> dict:
    """The init program of `RUNS_INIT_RUNS` runs that the seeds, sweep, tune and PBT
    drivers compile (`parallel.make_runs_program(warm.init_runs(fns.init, ...), mesh,
    warm.runs_specs(0))` on one device), compiled with `compiled.ONCE_COMPILER_OPTIONS`
    (`once`, what the drivers do) or XLA's defaults (`default`)."""
    import jax
    import numpy as np

    import purejaxppo as pjp
    from purejaxppo import compiled, parallel
    from purejaxppo.drivers import warm

    start = time.perf_counter()
    fns = pjp.make_train_fns(pjp.PPOConfig.from_yaml(ROOT / CONFIGS[name]))
    mesh = parallel.make_mesh(1, parallel.RUNS_AXIS)
    init = warm.init_runs(fns.init, lambda runner: runner)
    fn = parallel.make_runs_program(init, mesh, warm.runs_specs(0))  # a `jax.jit`
    keys = np.stack([jax.random.key_data(jax.random.key(s)) for s in range(RUNS_INIT_RUNS)])
    compiler_options = compiled.ONCE_COMPILER_OPTIONS if options == "once" else None
    row = {"setup_s": time.perf_counter() - start}
    return _timed(fn, (keys, None), row, compiler_options)


def _dp_init(name: str, options: str) -> dict:
    """The init program of one run data-parallel over `DATA_PARALLEL_DEVICES` CPU devices
    (`parallel.make_data_parallel_run`: what `purejaxppo train --coordinator` compiles),
    taken from the library as it hands it to `parallel.jit_once`, compiled with
    `compiled.ONCE_COMPILER_OPTIONS` (`once`, what the run does) or XLA's defaults."""
    import jax

    jax.config.update("jax_num_cpu_devices", DATA_PARALLEL_DEVICES)
    import numpy as np
    from jax.sharding import PartitionSpec as P

    import purejaxppo as pjp
    from purejaxppo import compiled, parallel

    start = time.perf_counter()
    config = pjp.PPOConfig.from_yaml(ROOT / CONFIGS[name])
    handed, once = [], parallel.jit_once
    parallel.jit_once = lambda fn: handed.append(fn) or once(fn)
    try:
        run = parallel.make_data_parallel_run(config, DATA_PARALLEL_DEVICES)
    finally:
        parallel.jit_once = once
    (init,) = handed  # the shard_map of the init over the data axis
    key = np.asarray(jax.random.key_data(jax.random.key(0)))
    compiler_options = compiled.ONCE_COMPILER_OPTIONS if options == "once" else None
    row = {"setup_s": time.perf_counter() - start}
    return _timed(jax.jit(init), (parallel.to_global(key, run.mesh, P()),), row, compiler_options)


def _rejax(agents: str) -> dict:
    """The peer's program, timed as `_train` times ours; runs in the rejax venv, without
    importing purejaxppo (the peer's own script sets the CPU-scheduler flag)."""
    import jax

    from benchmarks.peers.rejax_ppo import make_algo, training_only

    start = time.perf_counter()
    algo = training_only(make_algo(500_000)[0])
    setup_s = time.perf_counter() - start
    if agents == "1":
        fn, keys = jax.jit(algo.train), jax.random.PRNGKey(0)
    else:
        fn, keys = jax.jit(jax.vmap(algo.train)), jax.random.split(jax.random.PRNGKey(0), 8)
    return _timed(fn, (keys,), {"setup_s": setup_s})


def _timed(fn, args: tuple, row: dict, compiler_options: dict | None = None) -> dict:
    """Trace, lower and compile `fn` at `args` (its arguments), each timed, into `row`."""
    totals = _listen()
    start = time.perf_counter()
    traced = fn.trace(*args)
    row["trace_s"] = time.perf_counter() - start
    start = time.perf_counter()
    lowered = traced.lower()
    row["lower_s"] = time.perf_counter() - start
    start = time.perf_counter()
    lowered.compile(compiler_options=compiler_options)
    row["compile_s"] = time.perf_counter() - start
    row["wall_s"] = row["trace_s"] + row["lower_s"] + row["compile_s"]
    row["cache_hits"] = totals["cache_hits"]
    return {**row, **program_size(lowered.as_text())}


def _many_runs_call(kind: str, config):
    """The `seeds`, `sweep`, `tune`, `pbt` and `pbt_static` kinds' call (the module
    docstring)."""
    import purejaxppo as pjp

    config = config.replace(total_timesteps=MANY_RUNS_UPDATES * config.num_envs * config.num_steps)
    if kind == "seeds":
        work = Path(os.environ["PUREJAXPPO_COMPILE_CACHE"]).parent  # `_child`'s
        run_dir = Path(tempfile.mkdtemp(prefix="seeds-", dir=work)) / "run"
        return lambda: pjp.train_seeds(
            config, run_dir, 4, progress=False, plot=False, verbose=False
        )
    if kind == "sweep":
        grid = {"learning_rate": [2.5e-4, 1e-3]}
        return lambda: pjp.sweep(config, seeds=2, grid=grid, progress=True, verbose=False)
    search = {"learning_rate": ("log_uniform", 1e-4, 1e-3)}
    if kind == "tune":
        options = pjp.TuneOptions(trials=4, batch=2, reports=1)
        return lambda: pjp.tune(config, search, options, progress=False)
    if kind == "pbt_static":  # two architectures: one program per group and padded size
        search = {**search, "hidden_sizes": ("choice", ["4", "64-64"])}
    return lambda: pjp.pbt(
        config, population=4, ready_every=MANY_RUNS_UPDATES // 2, search=search, verbose=False
    )


def _whole_call(kind: str) -> dict:
    import jax
    import numpy as np

    import purejaxppo as pjp
    from purejaxppo.drivers.check.probes import PROBES

    config = pjp.PPOConfig.from_yaml(ROOT / CONFIGS["cartpole"])
    if kind in MANY_RUNS:
        call = _many_runs_call(kind, config)
    elif kind == "check":
        rows = [probe.row for probe in PROBES if probe.in_battery]

        def call():
            return pjp.check(config, rows=rows, invariants=False, progress=False)
    else:
        env, env_params = pjp.make_env(config.env_name)
        params = pjp.make_networks(config, env, env_params).init(jax.random.key(0))
        policy = pjp.Policy(params, config)

        def call():
            return np.asarray(pjp.evaluate(policy).returns)

    totals = _listen()
    start = time.perf_counter()
    call()
    return {"wall_s": time.perf_counter() - start, **totals}


def first_row_written(metrics: Path) -> bool:
    """Whether a run's `metrics.csv` holds its header and the first update's row."""
    return metrics.exists() and metrics.read_text().count("\n") >= 2


def _first_update_split() -> dict:
    """`purejaxppo train` (`FIRST_UPDATE_ARGS`, run directory `$RUN_DIR_ENV`) run in this
    process by the CLI's own `main`, with JAX's compile events summed until its first
    metrics row (the parent times launch to that row, as for `first_update`)."""
    totals = _listen()
    run_dir = Path(os.environ[RUN_DIR_ENV])
    metrics = run_dir / "metrics.csv"
    first: dict = {}

    def poll() -> None:
        while not first:
            if first_row_written(metrics):
                first.update(totals)
            time.sleep(SPLIT_POLL_S)

    threading.Thread(target=poll, daemon=True).start()
    from purejaxppo.cli.main import main

    # The process's own arguments, as the command has them (`main()` with argv None also
    # stores the run's programs, `stored_programs`)
    sys.argv = ["purejaxppo", *FIRST_UPDATE_ARGS, "--run-dir", str(run_dir)]
    code = main()
    if code != 0:
        raise RuntimeError(f"purejaxppo {' '.join(FIRST_UPDATE_ARGS)} exited with {code}")
    if not first:
        raise RuntimeError("the run exited before its first metrics row was read")
    return first


def measure(kind: str) -> dict:
    """One measurement of `kind` in this process (a fresh one: `main` starts it)."""
    kind = kind.partition("@")[0]  # the variant is in the environment (`_child`)
    if kind.startswith("rejax:"):
        import jax

        jax.config.update("jax_compilation_cache_dir", os.environ["PUREJAXPPO_COMPILE_CACHE"])
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
        jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
        return _rejax(kind.rpartition("/")[2])
    from purejaxppo.platform import enable_compile_cache

    if enable_compile_cache() is None:
        raise RuntimeError("the persistent compile cache is off in the child")
    if kind.startswith("runs_init:"):
        return _runs_init(*kind.removeprefix("runs_init:").split("/"))
    if kind.startswith("dp_init:"):
        return _dp_init(*kind.removeprefix("dp_init:").split("/"))
    if kind.startswith("train:"):
        return _train(*kind.removeprefix("train:").split("/"))
    if kind == "first_update_split":
        return _first_update_split()
    return _whole_call(kind)
