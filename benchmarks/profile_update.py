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

    python benchmarks/profile_update.py                       # 1 agent, CartPole, 4 x 128
    python benchmarks/profile_update.py --agents 1 1024 4096 --ops --out /tmp/prof
    python benchmarks/profile_update.py --num-envs 4 64 --num-steps 32 128   # size grid
    python benchmarks/profile_update.py --scaling --scaling-agents 1 64 1024  # 1-D studies
    python benchmarks/profile_update.py --variant u_gae=128+cmdbuf   # experiments/variants.py

Self-limiting: a row starts only while the elapsed time is under `--budget-s` (the
others are written as skipped), and a phase stops repeating its timed call once its
calls took `--phase-budget-s`. Prints two tables and writes
`<out>/profile-<platform>-<time>.json` and `.csv` (default out: benchmarks/results).
`main(argv)` returns the JSON record (tests/test_profile_update.py).
"""

from __future__ import annotations

import argparse
import csv
import importlib.util
import itertools
import json
import os
import re
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


def _load_variants() -> Any:
    """benchmarks/experiments/variants.py, loaded by its path."""
    spec = importlib.util.spec_from_file_location("variants", HERE / "experiments" / "variants.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


variants = _load_variants()

# XLA reads XLA_FLAGS when its backend starts: the variant's flags go in before jax runs.
if "--variant" in sys.argv[:-1]:
    variants.set_xla_flags(sys.argv[sys.argv.index("--variant") + 1], os.environ)

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

import purejaxppo as pjp  # noqa: E402
import purejaxppo.learning as pjp_learning  # noqa: E402  (its gae_advantages: variants may patch it)
from purejaxppo.rollout import make_rollout, next_values  # noqa: E402
from purejaxppo.train_setup import prepare  # noqa: E402
from purejaxppo.update import make_sequences, make_update_epochs, shuffle_minibatches  # noqa: E402

#: The timed phases, in table order (see the module docstring).
PHASES = ("rollout", "bootstrap", "gae", "shuffle", "epochs", "update")
#: The programs whose HLO `--ops` reads, and the named loops (program, which loop).
OP_PROGRAMS = ("rollout", "gae", "epochs", "update")
NAMED_LOOPS = {"rollout_step": "rollout", "minibatch_step": "epochs"}

# ---------------------------------------------------------------------------------------
# HLO op counts


#: Opcodes that launch nothing on their own: data plumbing and control flow (the
#: computations control flow calls are counted where they run).
STRUCTURAL = frozenset(
    {
        "parameter",
        "get-tuple-element",
        "tuple",
        "constant",
        "bitcast",
        "while",
        "conditional",
        "call",
        "after-all",
        "add-dependency",
        "opt-barrier",
        "optimization-barrier",
        "partition-id",
        "replica-id",
        "domain",
        "get-dimension-size",
    }
)

_HEADER = re.compile(r"^(ENTRY\s+)?%?([\w.\-]+)\s+\(.*\{\s*$")
_INSTRUCTION = re.compile(r"^\s*(?:ROOT\s+)?%?[\w.\-]+\s*=\s*(.*)$")
_OPCODE = re.compile(r"\s*([a-z][\w\-]*)\(")


def _opcode(rhs: str) -> str | None:
    """The opcode of an instruction's right-hand side `<shape> <opcode>(...)`."""
    if rhs.startswith("("):  # a tuple shape: skip to its closing parenthesis
        depth = 0
        for end, char in enumerate(rhs):
            depth += {"(": 1, ")": -1}.get(char, 0)
            if depth == 0:
                rhs = rhs[end + 1 :]
                break
    else:
        rhs = rhs.split(" ", 1)[1] if " " in rhs else ""
    match = _OPCODE.match(rhs)
    return match.group(1) if match else None


def parse_hlo(text: str) -> tuple[dict[str, list[tuple[str, str]]], str]:
    """`({computation: [(opcode, line), ...]}, entry name)` of an HLO module's text."""
    computations: dict[str, list[tuple[str, str]]] = {}
    entry, current = None, None
    for line in text.splitlines():
        if current is None:
            header = _HEADER.match(line)
            if header:
                current = header.group(2)
                computations[current] = []
                if header.group(1):
                    entry = current
            continue
        if line.strip() == "}":
            current = None
            continue
        instruction = _INSTRUCTION.match(line)
        if instruction:
            opcode = _opcode(instruction.group(1))
            if opcode is not None:
                computations[current].append((opcode, line))
    if entry is None:
        raise ValueError("HLO text without an ENTRY computation")
    return computations, entry


def _called(line: str, *attributes: str) -> list[str]:
    names = []
    for attribute in attributes:
        match = re.search(rf"\b{attribute}=(\{{[^}}]*\}}|%?[\w.\-]+)", line)
        if match:
            names += [n.strip().lstrip("%") for n in match.group(1).strip("{}").split(",")]
    return [n for n in names if n]


def _trip_count(line: str) -> int | None:
    match = re.search(r'"known_trip_count":\{"n":"(\d+)"', line)
    return int(match.group(1)) if match else None


def _kind(opcode: str) -> str:
    if opcode == "fusion":
        return "fusions"
    if opcode == "custom-call":
        return "custom_calls"
    return "other"


def _counts(ops: Counter) -> dict[str, int]:
    kernels = ops["fusions"] + ops["custom_calls"] + ops["other"]
    return {
        "fusions": ops["fusions"],
        "custom_calls": ops["custom_calls"],
        "other": ops["other"],
        "kernels": kernels,
    }


def count_ops(text: str) -> dict[str, Any]:
    """Op counts of a compiled program's optimised HLO text (`compile().as_text()`).

    Returns `{"launches": int, "top": {...}, "loops": [...]}`. `top` counts the entry
    computation's own ops: `fusions`, `custom_calls`, `other` and `kernels` (their sum);
    ops of the conditionals (their larger branch) and calls it makes count with it,
    loops apart. Each of `loops` (outermost first, in program order) is one while loop:
    `index` (in the list), `parent` (the index of the loop it is in, None at the top),
    `depth` (0 at the top), `trip_count` (None where XLA does not know it), its body's own
    counts (as `top`), and `launches_per_iteration` (its body and condition, nested loops
    times their trip counts included). `launches`: the program's estimated kernel
    launches per call (a loop of unknown trip count counts once).

    Raises:
      ValueError: for text without an ENTRY computation.
    """
    computations, entry = parse_hlo(text)
    loops: list[dict[str, Any]] = []

    def walk(name: str, parent: int | None, own: Counter, stack: tuple[str, ...]) -> int:
        """Adds `name`'s own ops to `own`; returns its launches (nested loops included)."""
        if name in stack or name not in computations:  # recursion guard / unknown callee
            return 0
        stack = (*stack, name)
        launches = 0
        for opcode, line in computations[name]:
            if opcode == "while":
                trip = _trip_count(line)
                depth = 0 if parent is None else loops[parent]["depth"] + 1
                index = len(loops)
                loops.append({"index": index, "parent": parent, "depth": depth, "trip_count": trip})
                body_ops: Counter = Counter()
                per_iteration = sum(walk(b, index, body_ops, stack) for b in _called(line, "body"))
                per_iteration += sum(
                    walk(c, index, Counter(), stack) for c in _called(line, "condition")
                )
                loops[index].update(_counts(body_ops), launches_per_iteration=per_iteration)
                launches += (trip or 1) * per_iteration
            elif opcode == "conditional":
                branches = _called(
                    line, "branch_computations", "true_computation", "false_computation"
                )
                costs = []
                for branch in branches:
                    branch_ops: Counter = Counter()
                    costs.append((walk(branch, parent, branch_ops, stack), branch_ops))
                if costs:
                    cost, branch_ops = max(costs, key=lambda c: c[0])
                    own.update(branch_ops)
                    launches += cost
            elif opcode in ("call", "async-start"):
                callees = _called(line, "to_apply", "calls")
                launches += sum(walk(c, parent, own, stack) for c in callees)
            elif opcode not in STRUCTURAL and not opcode.startswith("async-"):
                own[_kind(opcode)] += 1
                launches += 1
        return launches

    top: Counter = Counter()
    launches = walk(entry, None, top, ())
    return {"launches": launches, "top": _counts(top), "loops": loops}


def per_repetition(ops: dict[str, Any], reps: int) -> dict[str, Any] | None:
    """`count_ops` of one repetition of a program that repeats a phase `reps` times in a
    top-level scan (`_repeat`): the scan's body as the top, the loops inside it one level
    up. None when no top-level loop of `reps` trips is found (e.g. XLA unrolled it)."""
    candidates = [
        loop for loop in ops["loops"] if loop["depth"] == 0 and loop["trip_count"] == reps
    ]
    if not candidates:
        return None
    outer = max(candidates, key=lambda loop: loop["launches_per_iteration"])
    inside: list[dict[str, Any]] = []
    renumber: dict[int, int] = {}
    for loop in ops["loops"]:
        parent = loop["parent"]
        if parent == outer["index"] or parent in renumber:
            renumber[loop["index"]] = len(inside)
            inside.append(
                {
                    **loop,
                    "index": len(inside),
                    "parent": None if parent == outer["index"] else renumber[parent],
                    "depth": loop["depth"] - 1,
                }
            )
    top = {k: outer[k] for k in ("fusions", "custom_calls", "other", "kernels")}
    return {"launches": outer["launches_per_iteration"], "top": top, "loops": inside}


def named_loop(ops: dict[str, Any], which: str, trip: int) -> dict[str, Any] | None:
    """One loop of a program's `count_ops`: with `which` = "outermost", the shallowest
    loop of `trip` trips (the rollout's step scan), with "innermost" the deepest (the
    epochs' minibatch scan); ties go to the loop with the most kernels (CPU programs also
    hold small loops of their own, e.g. threefry's rounds). Loops of unknown trip count
    are candidates when none has `trip`. None when there is no candidate (XLA removes a
    scan of one step)."""
    candidates = [loop for loop in ops["loops"] if loop["trip_count"] == trip]
    candidates = candidates or [loop for loop in ops["loops"] if loop["trip_count"] is None]
    if not candidates:
        return None
    sign = 1 if which == "innermost" else -1
    return max(candidates, key=lambda loop: (sign * loop["depth"], loop["kernels"]))


# ---------------------------------------------------------------------------------------
# The phases


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


def _make_rollout(setup: Any, config: pjp.PPOConfig) -> Callable[..., Any]:
    """`make_rollout` as `train.make_update` calls it (the envs as rows of the batch where
    the library has `TrainSetup.rows`, else its older (env, env_params, ...) signature)."""
    if hasattr(setup, "rows"):
        return make_rollout(setup.rows, setup.networks, setup.num_steps)
    return make_rollout(
        setup.env,
        setup.env_params,
        setup.networks,
        setup.num_steps,
        setup.info_keys,
        config.reset_ratio,
    )


def make_phases(config: pjp.PPOConfig) -> tuple[dict[str, Callable], Callable, Callable]:
    """`(bodies, make_inputs, prepare_fns)` of the phases of `config`'s update.

    `bodies[phase](x, hp) -> x` is one repetition of the phase on one agent's data;
    `make_inputs(keys)` returns `{phase: x}` (leading axis `[agents]`) built from one real
    rollout of freshly initialised agents.
    """
    setup = prepare(config)
    fns = pjp.make_train_fns(config)
    networks = setup.networks
    rollout = _make_rollout(setup, config)
    update_epochs = make_update_epochs(config, networks)
    seq_len = config.seq_len if networks.stateful else 1

    def rollout_body(r, hp):
        key, sub = jax.random.split(r.key)
        env_carry, _, _ = rollout(r.train_state.params, r.env, sub)
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

    def advantages(traj, next_value, hp):
        return jax.vmap(
            lambda *xs: pjp_learning.gae_advantages(*xs, hp.gamma, hp.gae_lambda),
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
            carry, traj, _ = rollout(r.train_state.params, r.env, k1)
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
        "argv": list(sys.argv[1:] if argv is None else argv),
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
