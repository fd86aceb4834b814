"""Issue #12: how to train on a gymnasium (host) env — measure both designs, keep the faster.

* **host loop** (`purejaxppo.host_train`, what `make_train` runs for "gymnasium:<id>"): a
  Python loop calls a jitted policy step (`Networks.step` + sample, all N envs) once per env
  step, steps the gymnasium vector env in NumPy, then calls the jitted PPO update (`learn`).
* **host callback** (a prototype here): the whole update is one jitted function as for
  gymnax envs; the rollout's `lax.scan` steps the gymnasium vector env through
  `jax.experimental.io_callback(..., ordered=True)`, one callback per env step.

Both run the same PPO update (`learning.make_learn`) on CartPole-v1 with the standard
workload's sizes (4 envs x 128 steps, 4 epochs x 4 minibatches). Per design: compile +
first update, then the median seconds per update over `--updates` updates (interleaved
repeats), the env steps/s that gives, and the time of `--updates` env-stepping-only
rollouts (no update) to separate the per-step overhead. Writes
`benchmarks/results/gymnasium_host.json`.

    python benchmarks/gymnasium_host.py --updates 20 --repeats 3
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import io_callback

import purejaxppo as pjp
from purejaxppo.envs import make_env
from purejaxppo.hyperparams import Hyperparams
from purejaxppo.learning import make_learn
from purejaxppo.networks import to_env_action
from purejaxppo.train import make_train_fns


def make_callback_update(config, env, networks):
    """`update(runner, hparams) -> (runner, episode_return)`: one jitted PPO update whose
    rollout steps the host env through an ordered `io_callback` per step."""
    num_envs, num_steps = config.num_envs, config.num_steps
    vec = env.make_vec(num_envs)
    obs0 = vec.reset(0)
    obs_shape = jax.ShapeDtypeStruct(obs0.shape, obs0.dtype)
    result = (
        obs_shape,
        jax.ShapeDtypeStruct((num_envs,), jnp.float32),
        jax.ShapeDtypeStruct((num_envs,), bool),
        jax.ShapeDtypeStruct((num_envs,), bool),
        obs_shape,
    )

    def host_step(env_action):
        return vec.step(np.asarray(env_action))

    learn_fn = make_learn(config, networks)

    def env_step(params, carry, key):
        obs, policy_state, reset, ep_ret, stats = carry
        policy_state_next, dist, value = networks.step(params, policy_state, obs, reset)
        action, log_prob = dist.sample_and_log_prob(seed=key)
        env_action = to_env_action(networks.action_spec, action)
        next_obs, reward, terminated, truncated, final_obs = io_callback(
            host_step, result, env_action, ordered=True
        )
        done = terminated | truncated
        ep_ret = ep_ret + reward
        stats = stats + jnp.stack([jnp.sum(jnp.where(done, ep_ret, 0.0)), jnp.sum(done)])
        transition = pjp.Transition(
            obs=obs,
            action=action,
            log_prob=log_prob,
            value=value,
            reward=reward,
            terminated=terminated,
            truncated=truncated,
            final_obs=final_obs,
            policy_state=policy_state,
            reset=reset,
        )
        carry = (next_obs, policy_state_next, done, jnp.where(done, 0.0, ep_ret), stats)
        return carry, transition

    @jax.jit
    def update(state, hparams):
        train_state, carry, key, step = state
        key, rollout_key, epochs_key = jax.random.split(key, 3)
        carry = carry[:4] + (jnp.zeros(2),)
        carry, traj = jax.lax.scan(
            lambda c, k: env_step(train_state.params, c, k),
            carry,
            jax.random.split(rollout_key, num_steps),
        )
        train_state, _, _ = learn_fn(train_state, traj, carry[1], epochs_key, hparams, step)
        episode_return = carry[4][0] / jnp.maximum(carry[4][1], 1)
        return (train_state, carry, key, step + 1), episode_return

    @jax.jit
    def rollout_only(state):
        train_state, carry, key, step = state
        carry, traj = jax.lax.scan(
            lambda c, k: env_step(train_state.params, c, k),
            carry[:4] + (jnp.zeros(2),),
            jax.random.split(key, num_steps),
        )
        return traj.reward.sum()

    def init(runner):
        carry = (
            jnp.asarray(obs0),
            networks.initial_state(num_envs),
            jnp.ones((num_envs,), bool),
            jnp.zeros((num_envs,)),
            jnp.zeros(2),
        )
        return (runner.train_state, carry, runner.key, runner.update_step)

    return init, update, rollout_only


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

    # host loop: fns.update; rollout-only = the loop without `learn`.
    loop_state = runner

    def loop_step(state):
        return fns.update(state, hparams)

    cb_init, cb_update, cb_rollout = make_callback_update(config, env, fns.networks)
    cb_state = cb_init(runner)

    def cb_step(state):
        return cb_update(state, hparams)

    rows = {
        "host_loop": {"first_s": None, "update_s": []},
        "callback": {"first_s": None, "update_s": []},
    }
    for repeat in range(args.repeats):
        loop_state, first, times = time_design("host_loop", loop_step, loop_state, args.updates)
        rows["host_loop"]["update_s"] += times
        if repeat == 0:
            rows["host_loop"]["first_s"] = first
        cb_state, first, times = time_design("callback", cb_step, cb_state, args.updates)
        rows["callback"]["update_s"] += times
        if repeat == 0:
            rows["callback"]["first_s"] = first

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
    def rollout_loop():
        # the host loop's rollout is inseparable from its update in `fns.update`; time the
        # same per-step work: policy step + env step
        from purejaxppo.networks import to_env_action as tea

        @jax.jit
        def policy_step(params, obs, reset, key_data):
            _, dist, value = fns.networks.step(params, (), obs, reset)
            action, log_prob = dist.sample_and_log_prob(seed=jax.random.wrap_key_data(key_data))
            return action, tea(fns.networks.action_spec, action), log_prob, value

        vec = env.make_vec(config.num_envs)
        obs = vec.reset(0)
        reset = np.ones(config.num_envs, bool)
        keys = np.asarray(
            jax.random.key_data(jax.random.split(jax.random.key(1), config.num_steps))
        )
        params = runner.train_state.params
        jax.block_until_ready(policy_step(params, obs, reset, keys[0]))
        out = []
        for _ in range(5):
            start = time.perf_counter()
            for t in range(config.num_steps):
                _, env_action, _, _ = jax.device_get(policy_step(params, obs, reset, keys[t]))
                obs, _, term, trunc, _ = vec.step(env_action)
                reset = term | trunc
            out.append(time.perf_counter() - start)
        return statistics.median(out)

    def rollout_cb():
        jax.block_until_ready(cb_rollout(cb_state))
        out = []
        for _ in range(5):
            start = time.perf_counter()
            jax.block_until_ready(cb_rollout(cb_state))
            out.append(time.perf_counter() - start)
        return statistics.median(out)

    def env_only():
        vec = env.make_vec(config.num_envs)
        vec.reset(0)
        action = np.zeros(config.num_envs, np.int64)
        start = time.perf_counter()
        for _ in range(config.num_steps):
            vec.step(action)
        return time.perf_counter() - start

    rollout_times = {"host_loop": rollout_loop(), "callback": rollout_cb()}
    for row in table:
        row["rollout_s"] = round(rollout_times[row["design"]], 4)
        row["update_without_rollout_s"] = round(row["median_update_s"] - row["rollout_s"], 4)
    env_s = env_only()
    print(
        f"CartPole-v1, {config.num_envs} envs x {config.num_steps} steps per update, "
        f"gymnasium SyncVectorEnv alone: {env_s * 1e3:.1f} ms per {config.num_steps} steps"
    )
    header = list(table[0])
    print(" | ".join(header))
    for row in table:
        print(" | ".join(str(row[k]) for k in header))
    faster = min(table, key=lambda r: r["median_update_s"])["design"]
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
