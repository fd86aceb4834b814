"""Worker for tests/test_parallel.py: runs in its own process with several CPU devices.

    python tests/parallel_worker.py devices OUT.npz
        one process, 4 fake CPU devices: the sweep on 1 and on 4 devices, data-parallel
        CartPole on 4 devices (learning), data-parallel on 1 device vs the ordinary run,
        the 4-device gradient vs the 1-device gradient on one minibatch, and the
        normalisation statistics over 4 devices (both timings).
    python tests/parallel_worker.py distributed OUT_DIR PROCESS_ID PORT
        one of 2 processes (2 fake CPU devices each) joined by `jax.distributed`: the same
        sweep through the command line (`purejaxppo sweep --coordinator ...`, each process
        writes its table part) and a short data-parallel run over the 4 global devices.

Not a test module (pytest collects only test_*.py); the tests compare what it saves.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np

#: The sweep both modes run: a 2x2 grid x 3 seeds of short CartPole runs.
SWEEP_CONFIG = {"num_envs": 4, "num_steps": 16, "total_timesteps": 4 * 16 * 12}
SWEEP_GRID = {"learning_rate": [1e-3, 3e-4], "ent_coef": [0.0, 0.01]}
SWEEP_SEEDS = 3
#: A short data-parallel run both modes compare (8 envs over 4 devices, 6 updates).
DP_SHORT = {"num_envs": 8, "num_steps": 16, "total_timesteps": 8 * 16 * 6}
#: Data-parallel CartPole that must learn: the default config's 4 x 128 batch with 8 envs
#: (2 per device) x 64 steps, 300k env steps.
DP_LEARN = {"num_envs": 8, "num_steps": 64, "total_timesteps": 300_000}


def sweep_metrics(table) -> np.ndarray:
    """[12, updates, metrics] float64 array of the sweep table, in run order."""
    from purejaxppo.train import METRICS

    table = table.sort_values(["run", "update"])
    runs = table["run"].nunique()
    values = table[list(METRICS)].to_numpy(np.float64)
    return values.reshape(runs, -1, len(METRICS))


def leaves(tree) -> list[np.ndarray]:
    import jax

    from purejaxppo.parallel import to_host

    return [np.asarray(x) for x in jax.tree.leaves(to_host(tree))]


def gradient_results(short) -> dict[str, np.ndarray]:
    """Data-parallel minibatch gradient vs one device's, and the all-reduces it issues
    (runs inside `devices_mode`, on its 4 CPU devices)."""
    import jax
    import jax.numpy as jnp

    import purejaxppo as pjp
    from purejaxppo import parallel
    from purejaxppo.sequences import Batch
    from purejaxppo.update import make_minibatch_grads

    results: dict[str, np.ndarray] = {}
    # Gradient on one minibatch of 64 samples: 4 devices x 16 (pmean) vs 1 device x 64.
    fns = pjp.make_train_fns(short)
    params = fns.init(jax.random.key(2)).train_state.params
    keys = jax.random.split(jax.random.key(3), 6)
    # 64 feed-forward samples: sequences of one step, [K = 64, L = 1].
    batch = Batch(
        obs=jax.random.normal(keys[0], (64, 1, 4)),
        action=jax.random.randint(keys[1], (64, 1), 0, 2),
        log_prob=-jax.random.uniform(keys[2], (64, 1), minval=0.3, maxval=1.2),
        value=jax.random.normal(keys[3], (64, 1)),
        advantages=3.0 * jax.random.normal(keys[4], (64, 1)) + 1.0,
        returns=jax.random.normal(keys[5], (64, 1)),
        initial_state=(),
        resets=jnp.zeros((64, 1), bool),
    )
    hparams = pjp.Hyperparams.from_config(short)
    single = jax.jit(make_minibatch_grads(short, fns.networks))(params, batch, hparams, 1.0)
    mesh = parallel.make_mesh(4, parallel.DATA_AXIS)
    P = jax.sharding.PartitionSpec
    sharded_fn = jax.jit(
        jax.shard_map(
            lambda p, b, h: make_minibatch_grads(short, fns.networks, parallel.DATA_AXIS)(
                p, b, h, 1.0
            ),
            mesh=mesh,
            in_specs=(P(), P(parallel.DATA_AXIS), P()),
            out_specs=P(),
            check_vma=False,
        )
    )
    compiled = sharded_fn.lower(params, batch, hparams).compile()  # run and read: one compile
    sharded = compiled(params, batch, hparams)
    results["grad_single"] = np.concatenate([x.ravel() for x in leaves(single[0])])
    results["grad_sharded"] = np.concatenate([x.ravel() for x in leaves(sharded[0])])
    results["loss_single"] = np.asarray([float(x) for x in single[1]])
    results["loss_sharded"] = np.asarray([float(x) for x in sharded[1]])
    # Operands of each all-reduce of the compiled step (gloo runs one allreduce each).
    hlo = compiled.as_text()
    operands = [len(args.split(",")) for args in re.findall(r" all-reduce\(([^)]*)\)", hlo)]
    results["grad_allreduce_operands"] = np.asarray(sorted(operands))
    # pmean_flat is lax.pmean bit for bit: a [8, 3, 5], an [8] and a [64, 4] leaf.
    tree = {"w": jax.random.normal(keys[0], (8, 3, 5)), "b": jnp.arange(8.0) / 3.0}
    tree["m"] = batch.obs[:, 0]
    both = jax.jit(
        jax.shard_map(
            lambda t: (
                parallel.pmean_flat(t, parallel.DATA_AXIS),
                jax.lax.pmean(t, parallel.DATA_AXIS),
            ),
            mesh=mesh,
            in_specs=P(parallel.DATA_AXIS),
            out_specs=P(),
            check_vma=False,
        )
    )(tree)
    results["pmean_flat_equal"] = np.array(
        all(np.array_equal(a, b) for a, b in zip(leaves(both[0]), leaves(both[1]), strict=True))
    )
    results.update(statistics_results(mesh, keys))
    return results


def statistics_results(mesh, keys) -> dict[str, np.ndarray]:
    """`all_gather_flat` against `lax.all_gather`, and the advantages of 3 masked
    minibatches normalised over 4 devices (`normalize_advantages`)."""
    import jax
    import jax.numpy as jnp

    from purejaxppo import parallel
    from purejaxppo.collectives import all_gather_flat
    from purejaxppo.update import normalize_advantages

    P = jax.sharding.PartitionSpec
    tree = {"a": jax.random.normal(keys[0], (8, 3)), "n": jnp.arange(8, dtype=jnp.int32)}
    gathered = jax.jit(
        jax.shard_map(
            lambda t: (
                all_gather_flat(t, parallel.DATA_AXIS),
                jax.lax.all_gather(t, parallel.DATA_AXIS),
            ),
            mesh=mesh,
            in_specs=P(parallel.DATA_AXIS),
            out_specs=P(),
            check_vma=False,
        )
    )(tree)
    pairs = zip(leaves(gathered[0]), leaves(gathered[1]), strict=True)
    results = {"all_gather_flat_equal": np.array(all(np.array_equal(a, b) for a, b in pairs))}
    # [S = 3, M = 16 (4 per device), L = 2], a third of the samples masked out.
    advantages = 5.0 * jax.random.normal(keys[1], (3, 16, 2)) + 2.0
    mask = jax.random.uniform(keys[2], (3, 16, 2)) > 0.33
    split = P(None, parallel.DATA_AXIS)
    normalized = jax.jit(
        jax.shard_map(
            lambda a, m: normalize_advantages(a, m, parallel.DATA_AXIS),
            mesh=mesh,
            in_specs=(split, split),
            out_specs=split,
            check_vma=False,
        )
    )(advantages, mask)
    results["adv_normalized"] = np.asarray(parallel.to_host(normalized))
    results["adv_raw"], results["adv_mask"] = np.asarray(advantages), np.asarray(mask)
    return results


def init_once_results(config) -> dict[str, np.ndarray]:
    """The segmented data-parallel run's init (`make_data_parallel_run`) on 4 devices,
    compiled by `parallel.jit_once` and, with it swapped for `jax.jit`, at XLA's defaults."""
    import jax

    from purejaxppo import parallel

    results, real, swapped = {}, parallel.jit_once, []

    def default(fn):
        swapped.append(fn)  # the swap took: the init was compiled by `jax.jit`
        return jax.jit(fn)

    try:
        for name, jit in (("once", real), ("default", default)):
            parallel.jit_once = jit
            run = parallel.make_data_parallel_run(config, devices=4)
            runner = run.init(jax.random.key(7))
            results[f"dp4_init_{name}"] = np.concatenate(
                [np.ravel(x).view(np.uint8) for x in leaves(runner)]
            )
    finally:
        parallel.jit_once = real
    results["dp4_init_default_compiles"] = np.asarray(len(swapped))
    return results


def normalization_results(prefix: str, output) -> dict[str, np.ndarray]:
    """`{prefix}_counts`: the observation and reward statistics' sample counts after a
    data-parallel run; `{prefix}_replicas_equal`: both the same on every device."""
    import jax

    stats = {k: output.train_state.params[k] for k in ("obs_norm", "reward_norm")}
    shards_equal = (
        np.array_equal(np.asarray(leaf.addressable_shards[0].data), np.asarray(s.data))
        for leaf in jax.tree.leaves(stats)
        for s in leaf.addressable_shards
    )
    return {
        f"{prefix}_counts": np.asarray([float(stats[k]["count"]) for k in stats]),
        f"{prefix}_replicas_equal": np.array(all(shards_equal)),
    }


def step_timing_results(norm) -> dict[str, np.ndarray]:
    """`normalize_timing: "step"` over 4 devices: one rollout of 8 envs (2 per device) of
    `ProbeScaledObs` (observations that do not depend on the actions) both raw and with
    the per-step statistics merged over the devices, and a whole data-parallel run."""
    import jax
    from jax.sharding import PartitionSpec as P

    import purejaxppo as pjp
    from purejaxppo import parallel
    from purejaxppo.envs.probes import ProbeScaledObs
    from purejaxppo.rollout import make_normalizing_rollout, make_rollout
    from purejaxppo.train import make_train_fns

    axis, steps = parallel.DATA_AXIS, 8
    config = pjp.PPOConfig(
        env_name="ProbeScaledObs-v0",
        num_envs=8,
        num_steps=steps,
        total_timesteps=8 * steps,
        num_minibatches=1,
        normalize_observations=True,
        normalize_timing="step",
    )
    fns = make_train_fns(config, ProbeScaledObs())
    runner = jax.jit(fns.init)(jax.random.key(7))
    rows, networks = fns.setup.rows, fns.setup.networks
    raw = make_rollout(rows, networks, steps)
    stepped = make_normalizing_rollout(rows, networks, steps, axis_name=axis)

    def per_device(params, carry, key_data):
        index = jax.lax.axis_index(axis)
        key = jax.random.fold_in(jax.random.wrap_key_data(key_data), index)
        _, raw_traj, _ = raw(params, carry, key)
        _, traj, _, obs_norm = stepped(params, carry, key)
        per_copy = jax.tree.map(lambda x: x[None], obs_norm)  # [1, ...]: each device's own
        return raw_traj.obs, raw_traj.final_obs, traj.obs, traj.final_obs, per_copy

    mesh = parallel.make_mesh(4, axis)
    rollout = jax.jit(
        jax.shard_map(
            per_device,
            mesh=mesh,
            in_specs=(P(), P(axis), P()),
            out_specs=(*(P(None, axis),) * 4, P(axis)),
            check_vma=False,
        )
    )
    key_data = jax.random.key_data(jax.random.key(11))
    out = rollout(runner.train_state.params, runner.env, key_data)
    results = {
        f"step_{name}": np.asarray(value)
        for name, value in zip(("raw_obs", "raw_final", "obs", "final"), out[:4], strict=True)
    }
    for name in ("count", "mean", "var"):
        results[f"step_norm_{name}"] = np.asarray(jax.tree.leaves(out[4][name])[0])

    # The whole data-parallel run: the rollout's statistics reach the params, the same on
    # every device.
    trained = parallel.make_data_parallel_train(norm.replace(normalize_timing="step"), devices=4)
    results.update(normalization_results("step_dp4", trained(jax.random.key(1))))
    return results


def allreduces_per_update(config, num_devices: int) -> int:
    """The arrays all-reduced in one data-parallel update on `num_devices` devices (each
    a gloo round trip): the operands of every `psum` of its jaxpr, times the trip count
    of the scans around it (the longest branch of a `cond`)."""
    import jax
    from jax.extend.core import ClosedJaxpr, Jaxpr

    import purejaxppo as pjp
    from purejaxppo import parallel
    from purejaxppo.types import RunnerState

    P = jax.sharding.PartitionSpec
    fns = pjp.make_train_fns(config, axis_name=parallel.DATA_AXIS, num_shards=num_devices)
    mesh = parallel.make_mesh(num_devices, parallel.DATA_AXIS)
    spec = RunnerState(train_state=P(), env=P(parallel.DATA_AXIS), key=P(), update_step=P())
    runner = jax.eval_shape(
        jax.shard_map(fns.init, mesh=mesh, in_specs=P(), out_specs=spec, check_vma=False),
        jax.random.key(0),
    )
    update = jax.shard_map(
        fns.update, mesh=mesh, in_specs=(spec, P()), out_specs=(spec, P()), check_vma=False
    )
    jaxpr = jax.make_jaxpr(update)(runner, pjp.Hyperparams.from_config(config))

    def count(jaxpr: Jaxpr) -> int:
        total = 0
        for eqn in jaxpr.eqns:
            if eqn.primitive.name == "psum":
                total += len(eqn.invars)
            if eqn.primitive.name == "cond":
                total += max(count(branch.jaxpr) for branch in eqn.params["branches"])
                continue
            times = eqn.params["length"] if eqn.primitive.name == "scan" else 1
            for value in eqn.params.values():
                for sub in value if isinstance(value, (list, tuple)) else [value]:
                    if isinstance(sub, (ClosedJaxpr, Jaxpr)):
                        total += times * count(getattr(sub, "jaxpr", sub))
        return total

    return count(jaxpr.jaxpr)


def devices_mode(out: Path) -> None:
    import jax

    jax.config.update("jax_num_cpu_devices", 4)
    import purejaxppo as pjp
    from purejaxppo import parallel
    from purejaxppo.drivers.sweeps import sweep

    assert jax.device_count() == 4, jax.devices()
    results: dict[str, np.ndarray] = {}
    config = pjp.PPOConfig(**SWEEP_CONFIG)
    for devices in (1, 4):
        result = sweep(config, seeds=SWEEP_SEEDS, grid=SWEEP_GRID, devices=devices)
        results[f"sweep_{devices}"] = sweep_metrics(result.table)

    # Data-parallel CartPole learns.
    learn = pjp.PPOConfig(**DP_LEARN)
    out_learn = parallel.make_data_parallel_train(learn, devices=4)(jax.random.key(0))
    results["learn_return"] = np.asarray(parallel.to_host(out_learn.metrics["episode_return"]))

    # On one device the data-parallel run is the ordinary run; short run on 4 devices.
    short = pjp.PPOConfig(**DP_SHORT)
    ordinary = jax.jit(pjp.make_train(short))(jax.random.key(1))
    one = parallel.make_data_parallel_train(short, devices=1)(jax.random.key(1))
    four = parallel.make_data_parallel_train(short, devices=4)(jax.random.key(1))
    results["ordinary_params"] = np.concatenate([x.ravel() for x in leaves(ordinary.train_state)])
    results["dp1_params"] = np.concatenate([x.ravel() for x in leaves(one.train_state)])
    results["dp4_params"] = np.concatenate([x.ravel() for x in leaves(four.train_state)])
    results["dp4_return"] = np.asarray(parallel.to_host(four.metrics["episode_return"]))
    # Parameters are replicated: every device holds the same values.
    shards = [
        np.asarray(s.data) for s in jax.tree.leaves(four.train_state.params)[0].addressable_shards
    ]
    results["dp4_replicas_equal"] = np.array(all(np.array_equal(shards[0], s) for s in shards))

    # Normalisation statistics over 4 devices: merged over all devices' observations,
    # the same on every device.
    norm = short.replace(env_name="Pendulum-v1", normalize_observations=True,
                         normalize_rewards=True)  # fmt: skip
    normed = parallel.make_data_parallel_train(norm, devices=4)(jax.random.key(1))
    results.update(normalization_results("dp4_norm", normed))
    results["dp4_norm_var"] = np.asarray(normed.train_state.params["obs_norm"]["var"]["obs"])

    results.update(init_once_results(norm))
    results.update(step_timing_results(norm))
    results.update(gradient_results(short))
    cartpole = pjp.PPOConfig()  # the defaults: 4 envs x 128 steps, 4 epochs x 4 minibatches
    normalized = cartpole.replace(normalize_observations=True, normalize_rewards=True)
    results["update_allreduces"] = np.asarray(
        [allreduces_per_update(c, 4) for c in (cartpole, normalized)]
    )

    # Clear errors before compiling: a non-divisible data-parallel split and a sweep chunk
    # that does not split over the 4 devices.
    errors = []
    try:
        parallel.make_data_parallel_train(short.replace(num_envs=6), devices=4)
    except ValueError as err:
        errors.append(str(err))
    try:
        sweep(config, seeds=SWEEP_SEEDS, grid=SWEEP_GRID, max_runs_per_chunk=6)
    except ValueError as err:
        errors.append(str(err))
    results["errors"] = np.array(errors)
    np.savez(out, **results)


def distributed_mode(out_dir: Path, process_id: int, port: int) -> None:
    from purejaxppo.cli import main

    grid = [f"{name}={','.join(str(v) for v in values)}" for name, values in SWEEP_GRID.items()]
    argv = ["sweep", "--coordinator", f"127.0.0.1:{port}", "--num-processes", "2"]
    argv += ["--process-id", str(process_id), "--local-devices", "2", "--no-progress"]
    argv += ["--seeds", str(SWEEP_SEEDS), "--out", str(out_dir / "sweep")]
    for item in grid:
        argv += ["--grid", item]
    for name, value in SWEEP_CONFIG.items():
        argv += [f"--{name.replace('_', '-')}", str(value)]
    assert main(argv) == 0

    import jax

    import purejaxppo as pjp
    from purejaxppo import parallel

    assert jax.process_count() == 2 and jax.device_count() == 4
    short = pjp.PPOConfig(**DP_SHORT)
    four = parallel.make_data_parallel_train(short)(jax.random.key(1))
    if process_id == 0:
        np.savez(
            out_dir / "distributed.npz",
            dp4_params=np.concatenate([x.ravel() for x in leaves(four.train_state)]),
            dp4_return=np.asarray(parallel.to_host(four.metrics["episode_return"])),
        )


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    mode = sys.argv[1]
    if mode == "devices":
        devices_mode(Path(sys.argv[2]))
    elif mode == "distributed":
        distributed_mode(Path(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]))
    else:
        raise SystemExit(f"unknown mode {mode!r}")
