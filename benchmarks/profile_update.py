"""Where one PPO update's time goes, and how time per update scales.

Times the pieces of `purejaxppo`'s update separately, each jitted and `vmap`ped over
agents, repeated `--reps` times inside one `lax.scan` so dispatch overhead is amortised:

  rollout   num_steps env steps of num_envs envs (policy forward + sampling + env.step)
  bootstrap critic pass over the [T*N] final observations
  gae       GAE over [T, N]
  shuffle   permutation + gather into [K, M] minibatches (update_epochs times)
  epochs    update_epochs x num_minibatches Adam steps (incl. their shuffles)
  update    the whole `update` of `make_train_fns` (what `train` scans over)

    python benchmarks/profile_update.py                       # default workload
    python benchmarks/profile_update.py --scaling             # + scaling study
    python benchmarks/profile_update.py --scaling --scaling-agents 1 8 64 1024 4096  # GPU
    python benchmarks/profile_update.py --variant u_gae=128+cmdbuf   # experiments/variants.py

Prints tables and writes `benchmarks/results/profile-<device>-<time>.json`.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from experiments import variants  # noqa: E402

# XLA reads XLA_FLAGS when its backend starts: the variant's flags go in before jax runs.
_VARIANT = "base"
if "--variant" in sys.argv:
    _VARIANT = sys.argv[sys.argv.index("--variant") + 1]
    variants.set_xla_flags(_VARIANT, os.environ)

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import pandas as pd  # noqa: E402

import purejaxppo as pjp  # noqa: E402
import purejaxppo.train as pjp_train  # noqa: E402  (its gae_advantages: variants may patch it)
from purejaxppo.networks import action_spec  # noqa: E402
from purejaxppo.rollout import make_rollout  # noqa: E402
from purejaxppo.update import Batch, make_update_epochs, shuffle_minibatches  # noqa: E402

variants.apply(_VARIANT)


def _time(fn, *args, reps: int) -> float:
    """Seconds per repetition of `fn` (already containing `reps` repetitions)."""
    jax.block_until_ready(fn(*args))  # compile + warm up
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        jax.block_until_ready(fn(*args))
        best = min(best, time.perf_counter() - start)
    return best / reps


def _repeat(body, reps):
    """jit(vmap(x -> scan body reps times)); body: x -> x (same structure)."""

    def run(x):
        return jax.lax.scan(lambda c, _: (body(c), None), x, None, length=reps)[0]

    return jax.jit(jax.vmap(run))


def profile(config: pjp.PPOConfig, agents: int, reps: int) -> dict:
    fns = pjp.make_train_fns(config)
    env, env_params = pjp.make_env(config.env_name, config.env_kwargs)
    spec = action_spec(env, env_params)
    _, apply = pjp.make_networks(config, env, env_params)
    rollout = make_rollout(env, env_params, apply, spec, config.num_steps)
    update_epochs = make_update_epochs(config, apply)
    hp = pjp.Hyperparams.from_config(config)
    keys = jax.random.split(jax.random.key(0), agents)
    runner = jax.jit(jax.vmap(fns.init))(keys)
    T, N = config.num_steps, config.num_envs

    # A real rollout to get realistic data for the later pieces.
    def do_rollout(r):
        key, sub = jax.random.split(r.key)
        env_carry, traj, _ = rollout(r.train_state.params, r.env, sub)
        return r.replace(env=env_carry, key=key), traj

    runner2, traj = jax.jit(jax.vmap(do_rollout))(runner)
    results = {}
    results["rollout"] = _time(_repeat(lambda r: do_rollout(r)[0], reps), runner, reps=reps)

    def bootstrap(c):
        r, t = c
        obs = t.final_obs.reshape((T * N, -1))
        _, v = apply(r.train_state.params, obs)
        return r, t._replace(value=t.value + 1e-9 * v.reshape((T, N)))

    results["bootstrap"] = _time(_repeat(bootstrap, reps), (runner, traj), reps=reps)

    def gae(t):
        adv, _ = jax.vmap(
            pjp_train.gae_advantages, in_axes=(1, 1, 1, 1, 1, None, None), out_axes=1
        )(t.reward, t.value, t.value, t.terminated, t.truncated, hp.gamma, hp.gae_lambda)
        return t._replace(value=adv)

    results["gae"] = _time(_repeat(gae, reps), traj, reps=reps)

    def flat(x):  # [agents, T, N, ...] -> [agents, T*N, ...]
        return x.reshape((x.shape[0], T * N, *x.shape[3:]))

    batch = Batch(
        obs=flat(traj.obs),
        action=flat(traj.action),
        log_prob=flat(traj.log_prob),
        value=flat(traj.value),
        advantages=flat(traj.value),
        returns=flat(traj.value),
    )

    def shuffle(c):
        b, key = c
        key, sub = jax.random.split(key)
        for epoch_key in jax.random.split(sub, config.update_epochs):
            mb = shuffle_minibatches(epoch_key, b, config.num_minibatches)
            b = jax.tree.map(lambda x, y: x + 0 * y.reshape(x.shape).astype(x.dtype), b, mb)
        return b, key

    results["shuffle"] = _time(_repeat(shuffle, reps), (batch, keys), reps=reps)

    def epochs(c):
        ts, key = c
        key, sub = jax.random.split(key)
        ts, _ = update_epochs(ts, batch_one, sub, hp, hp.learning_rate, jnp.float32(1.0))
        return ts, key

    batch_one = jax.tree.map(lambda x: x[0], batch)
    results["epochs"] = _time(_repeat(epochs, reps), (runner.train_state, keys), reps=reps)
    results["update"] = _time(_repeat(lambda r: fns.update(r, hp)[0], reps), runner2, reps=reps)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", type=int, default=1)
    parser.add_argument("--reps", type=int, default=20)
    parser.add_argument("--scaling", action="store_true")
    parser.add_argument("--scaling-agents", type=int, nargs="+", default=[1, 8, 64])
    parser.add_argument("--scaling-envs", type=int, nargs="+", default=[4, 16, 64, 256])
    parser.add_argument("--scaling-steps", type=int, nargs="+", default=[32, 128, 512])
    parser.add_argument("--variant", default="base", help="see benchmarks/experiments/variants.py")
    parser.add_argument("--out-dir", type=Path, default=HERE / "results")
    parser.add_argument(
        "--hlo-out",
        type=Path,
        default=None,
        help="write the optimised HLO of jit(vmap(train)) at --agents here",
    )
    args = parser.parse_args()
    if args.hlo_out:
        train = jax.jit(jax.vmap(pjp.make_train(pjp.PPOConfig())))
        keys = jax.random.split(jax.random.key(0), args.agents)
        args.hlo_out.parent.mkdir(parents=True, exist_ok=True)
        args.hlo_out.write_text(train.lower(keys).compile().as_text())
        print(f"wrote {args.hlo_out}")
    base = pjp.PPOConfig()
    rows = []
    if not (args.scaling and args.agents in args.scaling_agents):  # else its "agents" row
        rows.append(
            {
                "study": "pieces",
                "agents": args.agents,
                "num_envs": base.num_envs,
                "num_steps": base.num_steps,
                **profile(base, args.agents, args.reps),
            }
        )
    if args.scaling:
        for agents in args.scaling_agents:
            rows.append(
                {
                    "study": "agents",
                    "agents": agents,
                    "num_envs": 4,
                    "num_steps": 128,
                    **profile(base, agents, args.reps),
                }
            )
        for num_envs in args.scaling_envs:
            rows.append(
                {
                    "study": "num_envs",
                    "agents": 1,
                    "num_envs": num_envs,
                    "num_steps": 128,
                    **profile(base.replace(num_envs=num_envs), 1, args.reps),
                }
            )
        for num_steps in args.scaling_steps:
            rows.append(
                {
                    "study": "num_steps",
                    "agents": 1,
                    "num_envs": 4,
                    "num_steps": num_steps,
                    **profile(base.replace(num_steps=num_steps), 1, args.reps),
                }
            )
    table = pd.DataFrame(rows)
    ms = table.copy()
    for col in ("rollout", "bootstrap", "gae", "shuffle", "epochs", "update"):
        ms[col] = 1e3 * ms[col]
    ms["env_steps_per_s"] = ms["agents"] * ms["num_envs"] * ms["num_steps"] / (ms["update"] / 1e3)
    with pd.option_context("display.width", 200, "display.float_format", "{:,.3f}".format):
        print("milliseconds per update (vmapped over agents):")
        print(ms.to_string(index=False))
    out = args.out_dir
    out.mkdir(parents=True, exist_ok=True)
    device = jax.devices()[0]
    path = out / f"profile-{device.platform}-{time.strftime('%Y%m%d-%H%M%S')}.json"
    path.write_text(
        json.dumps(
            {
                "jax": jax.__version__,
                "device": str(device),
                "device_kind": getattr(device, "device_kind", device.platform),
                "variant": args.variant,
                "xla_flags": os.environ.get("XLA_FLAGS", ""),
                "rows": table.to_dict(orient="records"),
            },
            indent=1,
        )
    )
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
