"""Peer benchmark: rejax 0.1.3's PPO on the standard CartPole workload. One JSON line on stdout.

Runs inside the rejax virtualenv (see setup_rejax_venv.sh; rejax needs gymnax 0.0.9), from
the repository root (or with rejax's packages on PYTHONPATH under another interpreter):

    benchmarks/.venv-rejax/bin/python -m benchmarks.peers.rejax_ppo --agents 8 [--repeats 2]

Workload (same as purejaxppo's default PPOConfig): CartPole-v1, 4 envs x 128 steps,
total_timesteps // 512 updates (500,000 -> 976 updates = 499,712 env steps per agent),
4 epochs x 4 minibatches, 64-64 tanh MLP, lr 2.5e-4 linearly annealed to 0 per update,
gamma 0.99, GAE lambda 0.95, clip 0.2, entropy 0.01, value 0.5, max_grad_norm 0.5.
Agents are independent seeds: `jax.jit(jax.vmap(algo.train))` over PRNG keys, as in
rejax's README, compiled once with `.lower().compile()`.

Only training is timed: rejax's in-training evaluation callback is replaced by a no-op
(`skip_initial_evaluation=True`, one eval "period" covering the whole run). After the
timed runs, rejax's own evaluation (`rejax.evaluate.evaluate`, 128 episodes with the
stochastic policy, the callback `PPO.create` installs) is run once on the final train
states, untimed, to give `final_return`.

Everything except the final JSON line goes to stderr.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

# Same XLA setting purejaxppo applies on import (it works around a CPU deadlock of vmapped
# programs on jax 0.10.x), so both libraries run under the same XLA flags.
_CPU_SCHEDULER_FLAG = "--xla_cpu_enable_concurrency_optimized_scheduler"
if _CPU_SCHEDULER_FLAG not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = (
        os.environ.get("XLA_FLAGS", "") + f" {_CPU_SCHEDULER_FLAG}=false"
    ).strip()

NUM_ENVS = 4
NUM_STEPS = 128
NUM_EPOCHS = 4
NUM_MINIBATCHES = 4
LEARNING_RATE = 2.5e-4


def make_algo(total_timesteps: int):
    """rejax's PPO on the standard workload: `(algo, steps_per_agent, num_updates)`.

    Also used by `benchmarks/trace_update.py` (the same program, traced).
    """
    import rejax

    batch_size = NUM_ENVS * NUM_STEPS
    num_updates = total_timesteps // batch_size
    steps_per_agent = num_updates * batch_size
    updates_per_iteration = NUM_EPOCHS * NUM_MINIBATCHES

    def learning_rate(count):
        # optax counts minibatch steps; anneal per PPO update (iteration) like purejaxppo /
        # CleanRL: lr_k = lr0 * (1 - k / num_updates) for update k = 0 .. num_updates - 1.
        update = count // updates_per_iteration
        return LEARNING_RATE * (1.0 - update / num_updates)

    algo = rejax.PPO.create(
        env="CartPole-v1",
        num_envs=NUM_ENVS,
        num_steps=NUM_STEPS,
        num_epochs=NUM_EPOCHS,
        num_minibatches=NUM_MINIBATCHES,
        # rejax runs ceil(eval_freq / 512) iterations per eval period and
        # ceil(total_timesteps / eval_freq) periods: one period of exactly num_updates.
        total_timesteps=steps_per_agent,
        eval_freq=steps_per_agent,
        skip_initial_evaluation=True,
        learning_rate=learning_rate,  # optax.adam accepts a schedule
        gamma=0.99,
        gae_lambda=0.95,
        clip_eps=0.2,
        ent_coef=0.01,
        vf_coef=0.5,
        max_grad_norm=0.5,
        normalize_observations=False,
        normalize_rewards=False,
        agent_kwargs={"activation": "tanh", "hidden_layer_sizes": (64, 64)},
    )
    return algo, steps_per_agent, num_updates


def training_only(algo):
    """`algo` with rejax's in-training evaluation callback replaced by a no-op, so that only
    training is timed or traced (bench_cartpole.py, trace_update.py, compile_split.py)."""
    return algo.replace(eval_callback=lambda algo, ts, rng: ())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", type=int, required=True)
    parser.add_argument("--total-timesteps", type=int, default=500_000)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--repeat-budget-s",
        type=float,
        default=float("inf"),
        help="stop repeating once the runs so far took this many seconds",
    )
    parser.add_argument(
        "--ops",
        action="store_true",
        help="add kernel / loop counts of one update (benchmarks/hlo_ops.py)",
    )
    args = parser.parse_args()

    # Keep stdout for the one JSON line: anything printed by the libraries (Python or C
    # level) goes to stderr.
    json_out = os.fdopen(os.dup(sys.stdout.fileno()), "w")
    sys.stdout.flush()
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())

    import importlib.metadata as md
    import resource

    import jax
    import numpy as np

    if args.total_timesteps < NUM_ENVS * NUM_STEPS:
        parser.error(f"--total-timesteps must be at least {NUM_ENVS * NUM_STEPS}")
    algo, steps_per_agent, num_updates = make_algo(args.total_timesteps)
    rejax_eval_callback = algo.eval_callback
    algo = training_only(algo)

    keys = jax.random.split(jax.random.PRNGKey(args.seed), args.agents)
    train = jax.jit(jax.vmap(algo.train))
    start = time.perf_counter()
    compiled = train.lower(keys).compile()
    compile_s = time.perf_counter() - start
    ops = None
    if args.ops:
        from benchmarks import hlo_ops

        ops = hlo_ops.update_summary(compiled.as_text(), num_updates)
    times = []
    for i in range(args.repeats):
        start = time.perf_counter()
        train_state, _ = jax.block_until_ready(compiled(keys))
        times.append(time.perf_counter() - start)
        print(f"rejax agents={args.agents} repeat {i}: {times[-1]:.3f} s", file=sys.stderr)
        if sum(times) >= args.repeat_budget_s:
            break
    run_s = min(times)

    device = jax.devices()[0]
    stats = device.memory_stats() if device.platform != "cpu" else None
    peak = (
        stats.get("peak_bytes_in_use")
        if stats
        else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    )

    # Untimed: rejax's own end-of-training evaluation on the final train states.
    eval_keys = jax.random.split(jax.random.PRNGKey(args.seed + 1), args.agents)
    evaluate = jax.jit(jax.vmap(lambda ts, key: rejax_eval_callback(algo, ts, key)))
    _, eval_returns = jax.block_until_ready(evaluate(train_state, eval_keys))
    final_return = float(np.mean(np.asarray(eval_returns)))

    global_step = np.asarray(train_state.global_step)
    assert (global_step == steps_per_agent).all(), (global_step, steps_per_agent)

    notes = [
        "jax.jit(jax.vmap(PPO.train)) over agent seeds; rejax's in-training evaluation "
        "replaced by a no-op callback (skip_initial_evaluation=True, eval_freq = "
        "total_timesteps), so run_s times training only",
        "lr annealing: supported via an optax schedule passed as learning_rate "
        "(rejax has no anneal flag); linear to 0 per PPO update, constant within an update",
        "rejax PPO differs from the CleanRL/purejaxppo recipe: max_grad_norm is applied "
        "with optax.clip (element-wise value clip at +-0.5), not clip_by_global_norm; "
        "separate actor and critic networks with separate Adam states and separate "
        "backward passes per minibatch; Adam eps 1e-8 (optax default, not configurable) "
        "vs 1e-5; flax default Dense init (lecun normal, zero bias) not orthogonal",
        "same as purejaxppo: per-minibatch advantage normalisation, clipped value loss "
        "(clip 0.2), no observation/reward normalisation, truncation treated as done",
        f"XLA_FLAGS={os.environ.get('XLA_FLAGS', '')} (same as purejaxppo sets on import)",
    ]
    row = {
        "library": "rejax",
        "version": md.version("rejax"),
        "gymnax": md.version("gymnax"),
        "jax": jax.__version__,
        "device": getattr(device, "device_kind", device.platform),
        "platform": device.platform,
        "agents": args.agents,
        "total_timesteps": steps_per_agent,
        "num_updates": num_updates,
        "compile_s": compile_s,
        **({"hlo_ops": ops} if ops is not None else {}),
        "run_s": run_s,
        "run_s_all": times,
        "ms_per_update": 1e3 * run_s / num_updates,
        "env_steps_per_s": args.agents * steps_per_agent / run_s,
        "peak_memory_bytes": peak,
        "peak_memory_kind": "device peak_bytes_in_use" if stats else "process max RSS",
        "final_return": final_return,
        "final_return_source": (
            "rejax's evaluation (rejax.evaluate.evaluate via PPO.create's eval_callback: "
            "128 episodes, stochastic policy, up to 500 steps) run once, untimed, on each "
            "agent's final train state; mean over episodes and agents. rejax records no "
            "training-episode returns."
        ),
        "notes": "; ".join(notes),
    }
    json_out.write(json.dumps(row) + "\n")
    json_out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
