"""How to train on a gymnasium (host) env — measure both designs.

* **in program** (what `make_train` runs for "gymnasium:<id>"): the whole
  update is one jitted function as for gymnax envs; the rollout's `lax.scan` steps the
  gymnasium vector env through one unordered `io_callback` per env step
  (`envs.host_calls.batched_call`), so runs batch under `vmap` into one vector env.
* **host loop** (the library's earlier design, rebuilt here): a Python loop calls a
  jitted policy step (`Networks.step` + sample, all N envs) once per env step, steps the
  gymnasium vector env in NumPy, then calls the jitted PPO update (`learn`).

Both run the same PPO update (`learning.make_learn`) on CartPole-v1 with the standard
workload's sizes (4 envs x 128 steps, 4 epochs x 4 minibatches). Per design: compile +
first update, then the median seconds per update over `--updates` updates (interleaved
repeats), the env steps/s that gives, and the time of env-stepping-only rollouts (no
update) to separate the per-step overhead; then `--runs` runs vmapped in one program (one
vector env of R x N copies) against R times one run's update. Writes
`benchmarks/results/gymnasium_host.json`.

    python -m benchmarks.gymnasium_host --updates 20 --repeats 3
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
from pathlib import Path

import jax
import numpy as np

import purejaxppo as pjp
from purejaxppo.envs import make_env
from purejaxppo.hyperparams import Hyperparams
from purejaxppo.learning import make_learn
from purejaxppo.loops import loop_plan
from purejaxppo.networks import to_env_action
from purejaxppo.rollout import make_rollout
from purejaxppo.train import make_train_fns
from purejaxppo.train_setup import make_init, prepare


def make_policy_step(networks):
    """The host loop's jitted step: `(params, obs, reset, key data) -> (action, env
    action, log_prob, value)` for all N envs (feed-forward policy)."""

    @jax.jit
    def policy_step(params, obs, reset, key_data):
        _, dist, value = networks.step(params, (), obs, reset)
        action, log_prob = dist.sample_and_log_prob(seed=jax.random.wrap_key_data(key_data))
        return action, to_env_action(networks.action_spec, action), log_prob, value

    return policy_step


def make_host_loop_update(config, env, networks):
    """`update(state, hparams) -> (state, None)`: a Python rollout loop around the jitted
    policy step, then the jitted `learn` on the stacked transitions."""
    num_envs, num_steps = config.num_envs, config.num_steps
    vec = env.make_vec(num_envs)
    policy_step = make_policy_step(networks)
    learn_fn = jax.jit(make_learn(config, networks, loop_plan(config.loop_layout)))
    live = {"obs": vec.reset(0), "reset": np.ones(num_envs, bool)}

    def rollout(params, key):
        keys = np.asarray(jax.random.key_data(jax.random.split(key, num_steps)))
        obs, reset, steps = live["obs"], live["reset"], []
        for t in range(num_steps):
            action, env_action, log_prob, value = jax.device_get(
                policy_step(params, obs, reset, keys[t])
            )
            next_obs, reward, terminated, truncated, final_obs = vec.step(env_action)
            steps.append(
                (obs, action, log_prob, value, reward, terminated, truncated, final_obs, (), reset)
            )
            obs, reset = next_obs, terminated | truncated
        live["obs"], live["reset"] = obs, reset
        return pjp.Transition(*jax.tree.map(lambda *xs: np.stack(xs), *steps))

    def update(state, hparams):
        train_state, key, step = state
        key, rollout_key, epochs_key = jax.random.split(key, 3)
        traj = rollout(train_state.params, rollout_key)
        train_state, _, _ = learn_fn(train_state, traj, (), epochs_key, hparams, step)
        return (train_state, key, step + 1), None

    def rollout_only(state):
        return rollout(state[0].params, state[1])

    return update, rollout_only


def make_program_rollout(config):
    """The in-program rollout alone (no update), jitted: `() -> transitions`, each call
    128 steps of its own vector env from where the last call left it."""
    setup = prepare(config)
    rollout = jax.jit(make_rollout(setup.rows, setup.networks, config.num_steps))
    runner = jax.jit(make_init(config, setup.env, networks=setup.networks))(jax.random.key(0))
    live = {"carry": runner.env}

    def run():
        live["carry"], traj, _ = rollout(runner.train_state.params, live["carry"], runner.key)
        return traj

    return run


def time_batched(fns, hparams, runs, updates):
    """Median seconds of one update of `runs` runs vmapped in one program (their envs
    one vector env of runs x num_envs copies)."""
    keys = jax.random.split(jax.random.key(1), runs)
    runners = jax.jit(jax.vmap(fns.init))(keys)
    update = jax.jit(jax.vmap(fns.update, in_axes=(0, None)))
    runners = jax.block_until_ready(update(runners, hparams))[0]  # compile
    times = []
    for _ in range(updates):
        start = time.perf_counter()
        runners = jax.block_until_ready(update(runners, hparams))[0]
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def time_design(name, step_fn, state, updates):
    start = time.perf_counter()
    state, _ = step_fn(state)
    jax.block_until_ready(jax.tree.leaves(state)[0])
    first = time.perf_counter() - start
    times = []
    for _ in range(updates):
        start = time.perf_counter()
        state, _ = step_fn(state)
        jax.block_until_ready(jax.tree.leaves(state))
        times.append(time.perf_counter() - start)
    return state, first, times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--updates", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--num-envs", type=int, default=4)
    parser.add_argument(
        "--runs", type=int, default=8, help="runs batched in one program (one vector env)"
    )
    parser.add_argument("--out", default="benchmarks/results/gymnasium_host.json")
    args = parser.parse_args()
    config = pjp.PPOConfig(
        env_name="gymnasium:CartPole-v1",
        num_envs=args.num_envs,
        num_steps=128,
        total_timesteps=500_000,
    )
    hparams = Hyperparams.from_config(config)
    env, _ = make_env(config.env_name)
    fns = make_train_fns(config)
    runner = jax.jit(fns.init)(jax.random.key(0))

    # in program: the library's jitted update (its rollout calls the vector env).
    program_update = jax.jit(fns.update)
    program_rollout = make_program_rollout(config)

    def program_step(state):
        return program_update(state, hparams)

    loop_update, loop_rollout = make_host_loop_update(config, env, fns.networks)
    loop_state = (runner.train_state, runner.key, runner.update_step)

    def loop_step(state):
        return loop_update(state, hparams)

    states = {"in_program": runner, "host_loop": loop_state}
    steps = {"in_program": program_step, "host_loop": loop_step}
    rows = {name: {"first_s": None, "update_s": []} for name in steps}
    for repeat in range(args.repeats):
        for name, step_fn in steps.items():
            states[name], first, times = time_design(name, step_fn, states[name], args.updates)
            rows[name]["update_s"] += times
            if repeat == 0:
                rows[name]["first_s"] = first

    batch = config.num_envs * config.num_steps
    table = []
    for name, row in rows.items():
        median = statistics.median(row["update_s"])
        table.append(
            {
                "design": name,
                "compile_and_first_update_s": round(row["first_s"], 3),
                "median_update_s": round(median, 4),
                "min_update_s": round(min(row["update_s"]), 4),
                "env_steps_per_s": round(batch / median, 1),
                "updates_timed": len(row["update_s"]),
            }
        )

    # rollouts alone (128 env steps of 4 envs), median of 5
    def median_of_5(fn):
        jax.block_until_ready(fn())
        out = []
        for _ in range(5):
            start = time.perf_counter()
            jax.block_until_ready(fn())
            out.append(time.perf_counter() - start)
        return statistics.median(out)

    rollout_times = {
        "in_program": median_of_5(program_rollout),
        "host_loop": median_of_5(lambda: loop_rollout(states["host_loop"])),
    }

    def env_only():
        vec = env.make_vec(config.num_envs)
        vec.reset(0)
        action = np.zeros(config.num_envs, np.int64)
        start = time.perf_counter()
        for _ in range(config.num_steps):
            vec.step(action)
        return time.perf_counter() - start

    for row in table:
        row["rollout_s"] = round(rollout_times[row["design"]], 4)
        row["update_without_rollout_s"] = round(row["median_update_s"] - row["rollout_s"], 4)
    env_s = env_only()
    batched = time_batched(fns, hparams, args.runs, args.updates)
    one = table[0]["median_update_s"]
    print(
        f"{args.runs} runs batched in one program (one vector env of {args.runs} x "
        f"{config.num_envs}): {batched:.4f} s per update of all runs, against "
        f"{args.runs} x {one:.4f} = {args.runs * one:.4f} s one run after another "
        f"({args.runs * one / batched:.2f}x)"
    )
    print(
        f"CartPole-v1, {config.num_envs} envs x {config.num_steps} steps per update, "
        f"gymnasium SyncVectorEnv alone: {env_s * 1e3:.1f} ms per {config.num_steps} steps"
    )
    header = list(table[0])
    print(" | ".join(header))
    for row in table:
        print(" | ".join(str(row[k]) for k in header))
    faster = min(table, key=lambda r: r["median_update_s"])["design"]
    ratio = table[1]["median_update_s"] / table[0]["median_update_s"]
    print(f"in program: {ratio:.2f}x the host loop's speed per update (median)")
    print(f"faster: {faster}")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(
        json.dumps(
            {
                "workload": {
                    "env": config.env_name,
                    "num_envs": config.num_envs,
                    "num_steps": config.num_steps,
                    "update_epochs": config.update_epochs,
                    "num_minibatches": config.num_minibatches,
                },
                "env_only_s_per_rollout": round(env_s, 4),
                "rows": table,
                "batched_runs": {
                    "runs": args.runs,
                    "median_update_s": round(batched, 4),
                    "one_after_another_s": round(args.runs * one, 4),
                    "speedup": round(args.runs * one / batched, 2),
                },
                "faster": faster,
                "device": str(jax.devices()[0]),
                "jax": jax.__version__,
                "machine": platform.processor() or platform.machine(),
                "cpu_count_note": "shared 2-core CPU: absolute numbers are noisy, the ratio is the point",
            },
            indent=2,
        )
        + "\n"
    )
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
