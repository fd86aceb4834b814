"""Where one PPO update's time goes, phase by phase, and what XLA compiled for each phase.

Times the phases of `purejaxppo`'s update separately, on whatever platform JAX has (CPU,
GPU), each compiled once as `jit(vmap(...))` over `--agents` independent agents (as
`jax.vmap(make_train(config))` trains them) and repeated `--reps` times inside one
`lax.scan`, so dispatch overhead is amortised:

  rollout    num_steps env steps of num_envs envs (policy forward, sampling, env.step)
  bootstrap  the critic's pass over the [T * N] observations each step led to
  gae        GAE over [T, N] (a T-step backward scan per env)
  shuffle    update_epochs shuffles: permutation + gather of [B] samples into [K, M]
  epochs     update_epochs x num_minibatches Adam steps (their shuffles included)
  update     the whole `update` of `make_train_fns` (what `train` scans over)

Every time is milliseconds per update per call of the vmapped program (all agents
together); `other` is update - (rollout + bootstrap + gae + epochs): sequence cutting,
metrics, the learning-rate schedule. `env_steps_per_s` = agents * num_envs * num_steps /
update; phases timed apart are fused apart, so `other` can come out below 0. With
`--ops`, the optimised HLO (`jax.jit(f).lower(...).compile().as_text()`) of the timed
rollout, GAE, epochs and update programs is read, one repetition of each (the body of
the repetition scan; a program whose scan XLA unrolled is compiled once more without
it): every while loop with its trip count and the ops of its body, counted as fusions,
custom-calls (cuBLAS / oneDNN matmuls) and other non-trivial ops (sort, copy, gather,
...), whose sum `kernels` is about the kernels one loop iteration launches on a GPU
(parameters, tuples, constants, bitcasts and control flow are not counted). `launches`
is a whole update's count: each loop body times its trip count, each conditional's
larger branch (on CPU: thunks, not kernels). The named loops are `rollout_step` (the
rollout's scan body: one env step) and `minibatch_step` (the innermost loop of the
epochs: one Adam step on a minibatch).

    python -m benchmarks.profile_update                       # 1 agent, CartPole, 4 x 128
    python -m benchmarks.profile_update --agents 1 1024 4096 --ops --out /tmp/prof
    python -m benchmarks.profile_update --num-envs 4 64 --num-steps 32 128   # size grid
    python -m benchmarks.profile_update --scaling --scaling-agents 1 64 1024  # 1-D studies
    python -m benchmarks.profile_update --variant u_gae=128+cmdbuf   # experiments/variants.py

Self-limiting: a row starts only while the elapsed time is under `--budget-s` (the
others are written as skipped), and a phase stops repeating its timed call once its
calls took `--phase-budget-s`. Prints two tables and writes
`<out>/profile-<platform>-<time>.json` and `.csv` (default out: benchmarks/results).
`main(argv)` returns the JSON record (tests/test_profile_update.py).
"""

from __future__ import annotations

import argparse
import csv
import itertools
import json
import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from benchmarks import hlo_ops
from benchmarks.experiments import variants
from benchmarks.harness import portable

HERE = Path(__file__).resolve().parent

# XLA reads XLA_FLAGS when its backend starts: the variant's flags go in before jax runs.
if "--variant" in sys.argv[:-1]:
    variants.set_xla_flags(sys.argv[sys.argv.index("--variant") + 1], os.environ)

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

import purejaxppo as pjp  # noqa: E402
import purejaxppo.learning as pjp_learning  # noqa: E402  (its gae_advantages: variants may patch it)
from purejaxppo.rollout import next_values  # noqa: E402
from purejaxppo.sequences import make_sequences  # noqa: E402
from purejaxppo.train import plan_rollout  # noqa: E402
from purejaxppo.train_setup import prepare  # noqa: E402
from purejaxppo.update import make_update_epochs, shuffle_minibatches  # noqa: E402

#: The timed phases, in table order (see the module docstring).
PHASES = ("rollout", "bootstrap", "gae", "shuffle", "epochs", "update")
#: The programs whose HLO `--ops` reads, and the named loops (program, which loop).
OP_PROGRAMS = ("rollout", "gae", "epochs", "update")
NAMED_LOOPS = {"rollout_step": "rollout", "minibatch_step": "epochs"}

# HLO op counts per loop body: benchmarks/hlo_ops.py.
count_ops, per_repetition, named_loop = (
    hlo_ops.count_ops,
    hlo_ops.per_repetition,
    hlo_ops.named_loop,
)


def _repeat(body: Callable[[Any, Any], Any], reps: int) -> Callable[..., Any]:
    """`jit(vmap(x, hp -> body applied reps times))`; body: (x, hp) -> x (same structure);
    `hp` (the hyperparameters) is an argument shared by every agent, as in `train`."""

    def run(x, hp):
        return jax.lax.scan(lambda c, _: (body(c, hp), None), x, None, length=reps)[0]

    return jax.jit(jax.vmap(run, in_axes=(0, None)))


def _once(body: Callable[[Any, Any], Any]) -> Callable[..., Any]:
    return jax.jit(jax.vmap(body, in_axes=(0, None)))


def _time_compiled(compiled: Any, args: tuple, reps: int, repeats: int, budget_s: float) -> float:
    """Seconds per repetition: best of up to `repeats` calls of `compiled` (each `reps`
    repetitions), stopping once the calls took `budget_s`. One untimed warm-up call."""
    jax.block_until_ready(compiled(*args))
    best, spent = float("inf"), 0.0
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(compiled(*args))
        elapsed = time.perf_counter() - start
        best, spent = min(best, elapsed), spent + elapsed
        if spent >= budget_s:
            break
    return best / reps


def make_phases(config: pjp.PPOConfig) -> tuple[dict[str, Callable], Callable, Callable]:
    """`(bodies, make_inputs, prepare_fns)` of the phases of `config`'s update.

    `bodies[phase](x, hp) -> x` is one repetition of the phase on one agent's data;
    `make_inputs(keys)` returns `{phase: x}` (leading axis `[agents]`) built from one real
    rollout of freshly initialised agents.
    """
    setup = prepare(config)
    fns = pjp.make_train_fns(config)
    networks = setup.networks
    # `train.make_update`'s rollout. Its values after the scan (the GPU layout) are dead
    # code in `rollout_body`, which keeps the carry: the phase times the scan alone.
    rollout = plan_rollout(config, setup)
    update_epochs = make_update_epochs(config, networks, None, setup.plan)
    seq_len = config.seq_len if networks.stateful else 1

    def rollout_body(r, hp):
        key, sub = jax.random.split(r.key)
        env_carry, *_ = rollout(r.train_state.params, r.env, sub)
        return r.replace(env=env_carry, key=key)

    def bootstrap_body(c, hp):
        r, traj, carry, bias = c
        # `bias` (the previous repetition's values, scaled to nothing) keeps XLA from
        # hoisting the pass out of the repetition loop.
        traj = traj._replace(
            final_obs=jax.tree.map(
                lambda o: o + bias.astype(o.dtype) if jnp.issubdtype(o.dtype, jnp.floating) else o,
                traj.final_obs,
            )
        )
        value = next_values(networks, r.train_state.params, traj, carry)
        return r, traj, carry, 1e-30 * jnp.mean(value)

    method = "associative" if setup.plan.gae == "associative" else "scan"

    def advantages(traj, next_value, hp):
        return jax.vmap(
            lambda *xs: pjp_learning.gae_advantages(*xs, hp.gamma, hp.gae_lambda, method),
            in_axes=1,
            out_axes=1,
        )(traj.reward, traj.value, next_value, traj.terminated, traj.truncated)

    def gae_body(c, hp):
        traj, next_value = c
        adv, _ = advantages(traj, next_value, hp)
        return traj._replace(value=adv), next_value

    def shuffle_body(c, hp):
        batch, key = c
        key, sub = jax.random.split(key)
        for epoch_key in jax.random.split(sub, config.update_epochs):
            minibatches = shuffle_minibatches(epoch_key, batch, config.num_minibatches)
            # The shuffled batch is the next repetition's batch: nothing is dead code.
            batch = jax.tree.map(lambda x, y: y.reshape(x.shape), batch, minibatches)
        return batch, key

    def epochs_body(c, hp):
        train_state, batch, key = c
        key, sub = jax.random.split(key)
        rates = pjp_learning.learning_rates(config, jnp.int32(0), hp)
        train_state, _ = update_epochs(train_state, batch, sub, hp, rates, jnp.float32(1.0))
        return train_state, batch, key

    def update_body(r, hp):
        return fns.update(r, hp)[0]

    bodies = {
        "rollout": rollout_body,
        "bootstrap": bootstrap_body,
        "gae": gae_body,
        "shuffle": shuffle_body,
        "epochs": epochs_body,
        "update": update_body,
    }

    def make_inputs(keys: jax.Array) -> dict[str, Any]:
        hp = pjp.Hyperparams.from_config(config)

        def first(key):
            r = fns.init(key)
            k1, k2 = jax.random.split(r.key)
            carry, traj, *_ = rollout(r.train_state.params, r.env, k1)
            next_value = next_values(networks, r.train_state.params, traj, carry)
            adv, ret = advantages(traj, next_value, hp)
            batch = make_sequences(traj, adv, ret, seq_len)
            return r, traj, carry, next_value, batch, k2

        r, traj, carry, next_value, batch, key = jax.jit(jax.vmap(first))(keys)
        zeros = jnp.zeros((keys.shape[0],), jnp.float32)
        return {
            "rollout": r,
            "bootstrap": (r, traj, carry, zeros),
            "gae": (traj, next_value),
            "shuffle": (batch, key),
            "epochs": (r.train_state, batch, key),
            "update": r,
        }

    return bodies, make_inputs, fns


def profile_row(
    config: pjp.PPOConfig,
    agents: int,
    reps: int,
    repeats: int,
    phase_budget_s: float,
    ops: bool,
    hlo_dir: Path | None = None,
) -> dict[str, Any]:
    """One row: milliseconds per update of every phase at `agents` vmapped agents,
    compile seconds, and with `ops` the op counts (see the module docstring)."""
    bodies, make_inputs, _ = make_phases(config)
    keys = jax.random.split(jax.random.key(0), agents)
    inputs = make_inputs(keys)
    hp = pjp.Hyperparams.from_config(config)
    row: dict[str, Any] = {
        "agents": agents,
        "env": config.env_name,
        "num_envs": config.num_envs,
        "num_steps": config.num_steps,
        "update_epochs": config.update_epochs,
        "num_minibatches": config.num_minibatches,
        "hidden_sizes": "-".join(map(str, config.hidden_sizes)),
        "reps": reps,
    }
    compile_s, texts = 0.0, {}
    for phase in PHASES:
        start = time.perf_counter()
        compiled = _repeat(bodies[phase], reps).lower(inputs[phase], hp).compile()
        compile_s += time.perf_counter() - start
        if ops and phase in OP_PROGRAMS:
            texts[phase] = compiled.as_text()
        seconds = _time_compiled(compiled, (inputs[phase], hp), reps, repeats, phase_budget_s)
        row[f"{phase}_ms"] = 1e3 * seconds
    row["other_ms"] = row["update_ms"] - sum(
        row[f"{p}_ms"] for p in ("rollout", "bootstrap", "gae", "epochs")
    )
    row["env_steps_per_s"] = agents * config.num_envs * config.num_steps / (row["update_ms"] / 1e3)
    row["compile_s"] = compile_s
    if ops:
        row.update(op_columns(bodies, inputs, hp, texts, config, agents, reps, hlo_dir))
    return row


def op_columns(bodies, inputs, hp, texts, config, agents, reps, hlo_dir) -> dict[str, Any]:
    """The `--ops` columns of a row: `ops` (`count_ops` of one repetition of each of
    `OP_PROGRAMS`, read from the timed programs' HLO `texts`; a program whose repetition
    loop XLA unrolled is compiled once more without it), the named loops' counts, and
    each program's launches per update."""
    columns: dict[str, Any] = {"ops": {}}
    for program in OP_PROGRAMS:
        text = texts[program]
        counted = per_repetition(count_ops(text), reps)
        if counted is None:
            text = _once(bodies[program]).lower(inputs[program], hp).compile().as_text()
            counted = count_ops(text)
        columns["ops"][program] = counted
        if hlo_dir is not None:
            hlo_dir.mkdir(parents=True, exist_ok=True)
            name = f"{program}-agents{agents}-{config.num_envs}x{config.num_steps}.hlo"
            (hlo_dir / name).write_text(text)
    trips = {"rollout_step": config.num_steps, "minibatch_step": config.num_minibatches}
    for name, program in NAMED_LOOPS.items():
        which = "outermost" if name == "rollout_step" else "innermost"
        loop = named_loop(columns["ops"][program], which, trips[name])
        fields = ("kernels", "fusions", "custom_calls", "other", "trip_count")
        for field in (*fields, "launches_per_iteration"):
            columns[f"{name}_{field}"] = None if loop is None else loop[field]
    for program in OP_PROGRAMS:
        columns[f"{program}_launches"] = columns["ops"][program]["launches"]
    return columns


# ---------------------------------------------------------------------------------------
# The command


def _table(rows: Sequence[dict[str, Any]], columns: Sequence[str]) -> str:
    def show(value: Any) -> str:
        if isinstance(value, float):
            return f"{value:,.0f}" if abs(value) >= 1e4 else f"{value:,.3f}"
        return "-" if value is None else str(value)

    cells = [[show(row.get(c)) for c in columns] for row in rows]
    widths = [max(len(c), *(len(r[i]) for r in cells)) for i, c in enumerate(columns)]
    lines = ["  ".join(c.rjust(w) for c, w in zip(columns, widths, strict=True))]
    lines += ["  ".join(v.rjust(w) for v, w in zip(r, widths, strict=True)) for r in cells]
    return "\n".join(lines)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", type=int, nargs="+", default=[1], help="vmapped agents")
    parser.add_argument("--env", default="CartPole-v1")
    parser.add_argument("--num-envs", type=int, nargs="+", default=[4])
    parser.add_argument("--num-steps", type=int, nargs="+", default=[128])
    parser.add_argument("--update-epochs", type=int, default=4)
    parser.add_argument("--num-minibatches", type=int, default=4)
    parser.add_argument("--hidden-sizes", default="64,64", help="comma-separated widths")
    parser.add_argument("--reps", type=int, default=20, help="repetitions per timed call")
    parser.add_argument("--repeats", type=int, default=3, help="timed calls (best is kept)")
    parser.add_argument(
        "--phase-budget-s", type=float, default=5.0, help="stop repeating a phase after this"
    )
    parser.add_argument(
        "--budget-s", type=float, default=600.0, help="start no row after this many seconds"
    )
    parser.add_argument(
        "--scaling",
        action="store_true",
        help="also one-at-a-time studies: --scaling-agents at the first --num-envs / "
        "--num-steps, then at 1 agent --scaling-envs and --scaling-steps",
    )
    parser.add_argument("--scaling-agents", type=int, nargs="+", default=[1, 8, 64])
    parser.add_argument("--scaling-envs", type=int, nargs="+", default=[4, 16, 64, 256])
    parser.add_argument("--scaling-steps", type=int, nargs="+", default=[32, 128, 512])
    parser.add_argument("--ops", action="store_true", help="count HLO ops (from the HLO text)")
    parser.add_argument("--hlo-dir", type=Path, default=None, help="with --ops: keep the HLO")
    parser.add_argument(
        "--loop-layout", default="auto", help="PPOConfig.loop_layout: auto, compact, unrolled"
    )
    parser.add_argument("--variant", default="base", help="see benchmarks/experiments/variants.py")
    parser.add_argument("--out", "--out-dir", dest="out", type=Path, default=HERE / "results")
    args = parser.parse_args(argv)
    for name in (
        "agents",
        "num_envs",
        "num_steps",
        "scaling_agents",
        "scaling_envs",
        "scaling_steps",
    ):
        bad = [v for v in getattr(args, name) if v < 1]
        if bad:
            parser.error(f"--{name.replace('_', '-')}={bad[0]}: must be >= 1")
    for name in ("reps", "repeats", "update_epochs", "num_minibatches"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')}={getattr(args, name)}: must be >= 1")
    try:
        args.hidden_sizes = tuple(int(w) for w in args.hidden_sizes.split(","))
    except ValueError:
        parser.error(f"--hidden-sizes={args.hidden_sizes!r}: expected widths like 64,64")
    return args


def cells(args: argparse.Namespace) -> list[tuple[str, int, int, int]]:
    """`(study, agents, num_envs, num_steps)` of every row, without repeats: the grid
    `--agents` x `--num-envs` x `--num-steps`, then with `--scaling` the agents study (at
    the first num_envs / num_steps), the num_envs and the num_steps studies (1 agent)."""
    rows = [
        ("grid", agents, envs, steps)
        for envs, steps, agents in itertools.product(args.num_envs, args.num_steps, args.agents)
    ]
    if args.scaling:
        envs, steps = args.num_envs[0], args.num_steps[0]
        rows += [("agents", a, envs, steps) for a in args.scaling_agents]
        rows += [("num_envs", 1, e, steps) for e in args.scaling_envs]
        rows += [("num_steps", 1, envs, t) for t in args.scaling_steps]
    seen, unique = set(), []
    for study, *size in rows:
        if tuple(size) not in seen:
            seen.add(tuple(size))
            unique.append((study, *size))
    return unique


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Runs the profile; returns the record written to the JSON file."""
    args = parse_args(argv)
    variants.apply(args.variant)
    started = time.perf_counter()
    rows: list[dict[str, Any]] = []
    for study, agents, num_envs, num_steps in cells(args):
        config = pjp.PPOConfig(
            env_name=args.env,
            num_envs=num_envs,
            num_steps=num_steps,
            total_timesteps=num_envs * num_steps,
            update_epochs=args.update_epochs,
            num_minibatches=args.num_minibatches,
            hidden_sizes=args.hidden_sizes,
            loop_layout=args.loop_layout,
        )
        if time.perf_counter() - started > args.budget_s:
            skipped = f"over --budget-s {args.budget_s:g}"
            rows.append(
                {
                    "study": study,
                    "agents": agents,
                    "num_envs": num_envs,
                    "num_steps": num_steps,
                    "skipped": skipped,
                }
            )
            continue
        row = profile_row(
            config, agents, args.reps, args.repeats, args.phase_budget_s, args.ops, args.hlo_dir
        )
        rows.append({"study": study, **row})
        print(
            f"profile: agents={agents} {num_envs}x{num_steps}: update {row['update_ms']:.3f} ms",
            file=sys.stderr,
            flush=True,
        )

    ran = [row for row in rows if "skipped" not in row]
    print("milliseconds per update (all agents of the vmapped program together):")
    size = ["study", "agents", "num_envs", "num_steps"]
    print(_table(ran, [*size, *(f"{p}_ms" for p in PHASES), "other_ms", "env_steps_per_s"]))
    if args.ops:
        print("\nHLO ops: kernels per loop iteration (fusions + custom-calls + other), launches")
        columns = [*size]
        for name in NAMED_LOOPS:
            columns += [f"{name}_{f}" for f in ("kernels", "fusions", "custom_calls", "trip_count")]
        columns += [f"{program}_launches" for program in OP_PROGRAMS]
        print(_table(ran, columns))
    for row in rows:
        if "skipped" in row:
            print(
                f"skipped agents={row['agents']} {row['num_envs']}x{row['num_steps']}: "
                f"{row['skipped']}"
            )

    device = jax.devices()[0]
    record = {
        "jax": jax.__version__,
        "purejaxppo": pjp.__version__,
        "platform": device.platform,
        "device": str(device),
        "device_kind": getattr(device, "device_kind", device.platform),
        "variant": args.variant,
        "xla_flags": os.environ.get("XLA_FLAGS", ""),
        "argv": [portable(a) for a in (sys.argv[1:] if argv is None else argv)],
        "phases": list(PHASES),
        "units": "milliseconds per update of all agents together; compile_s seconds",
        "elapsed_s": time.perf_counter() - started,
        "rows": rows,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    stem = args.out / f"profile-{device.platform}-{time.strftime('%Y%m%d-%H%M%S')}"
    stem.with_suffix(".json").write_text(json.dumps(record, indent=1))
    flat = [{k: v for k, v in row.items() if k != "ops"} for row in rows]
    columns = list(dict.fromkeys(k for row in flat for k in row))
    with open(stem.with_suffix(".csv"), "w", newline="") as file:
        writer = csv.DictWriter(file, fieldnames=columns)
        writer.writeheader()
        writer.writerows(flat)
    record["paths"] = [str(stem.with_suffix(".json")), str(stem.with_suffix(".csv"))]
    print(f"wrote {stem}.json and .csv")
    return record


if __name__ == "__main__":
    main()
