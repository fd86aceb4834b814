"""Same-machine peer: stable-baselines3 2.9.2 PPO (PyTorch) or sbx-rl 0.28.0 PPO
(JAX) on a gymnasium MuJoCo id with CleanRL's `ppo_continuous_action.py` settings: 1 env x
2048 steps, 10 epochs x 32 minibatches (batch 64), lr 3e-4 annealed linearly to 0, gamma
0.99, GAE lambda 0.95, clip 0.2, no entropy bonus, vf_coef 0.5, max_grad_norm 0.5,
observation and reward normalisation clipped at 10 (VecNormalize), separate 64-64 tanh
actor and critic with a state-independent log-std (SB3's MlpPolicy default).

    python -m benchmarks.peers.sb3_mujoco --agent sb3 --total-timesteps 100000 --out r.json

Writes one JSON row: agent, env, env steps, wall seconds of `model.learn` (launch of
learning to its end; SB3 compiles nothing, SBX's jit compilation is inside), env steps/s,
and the mean return of the last 10 training episodes (raw rewards, `VecMonitor` below
`VecNormalize`). Run it in its own process pinned to one core; timings on a shared
machine vary.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--agent", choices=["sb3", "sbx"], required=True)
    parser.add_argument("--env", default="HalfCheetah-v4", help="gymnasium MuJoCo id")
    parser.add_argument("--total-timesteps", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, required=True, help="JSON file to write")
    args = parser.parse_args()
    if args.total_timesteps < 2048:
        parser.error("--total-timesteps must be >= 2048 (one rollout)")
    if args.out.exists():
        parser.error(f"--out {args.out}: exists, not overwritten")
    import gymnasium as gym
    import numpy as np
    import torch
    from stable_baselines3.common.vec_env import DummyVecEnv, VecMonitor, VecNormalize

    torch.set_num_threads(1)
    if args.agent == "sb3":
        from stable_baselines3 import PPO
    else:
        from sbx import PPO
    env = VecNormalize(
        VecMonitor(DummyVecEnv([lambda: gym.make(args.env)])),
        norm_obs=True, norm_reward=True, clip_obs=10.0, clip_reward=10.0, gamma=0.99,
    )  # fmt: skip
    kwargs = dict(
        n_steps=2048, batch_size=64, n_epochs=10, learning_rate=lambda p: 3e-4 * p,
        gamma=0.99, gae_lambda=0.95, clip_range=0.2, ent_coef=0.0, vf_coef=0.5,
        max_grad_norm=0.5, seed=args.seed, verbose=0,
    )  # fmt: skip
    if args.agent == "sb3":
        kwargs.update(
            device="cpu",
            policy_kwargs=dict(
                net_arch=dict(pi=[64, 64], vf=[64, 64]), activation_fn=torch.nn.Tanh
            ),
        )
    else:
        import flax.linen as nn

        kwargs["policy_kwargs"] = dict(
            net_arch=dict(pi=[64, 64], vf=[64, 64]), activation_fn=nn.tanh
        )
    model = PPO("MlpPolicy", env, **kwargs)
    t0 = time.perf_counter()
    model.learn(total_timesteps=args.total_timesteps)
    wall = time.perf_counter() - t0
    returns = [info["r"] for info in model.ep_info_buffer]
    steps = model.num_timesteps
    row = {
        "agent": args.agent,
        "env": args.env,
        "env_steps": int(steps),
        "wall_s": round(wall, 1),
        "env_steps_per_s": round(steps / wall),
        "final_return_last10": round(float(np.mean(returns[-10:])), 1) if returns else None,
    }
    args.out.write_text(json.dumps(row) + "\n")
    print(row)


if __name__ == "__main__":
    main()
