"""Rerun a tuned setting in Stable-Baselines3 (RL Zoo's library): SB3 PPO on a gymnasium
id with `configs/acrobot.yaml`'s settings (`rlzoo_tuner.acrobot_sampler`: 16 envs x 128
steps, 4 epochs of 4 minibatches, the learning rate annealed linearly, gamma 0.99, 64-64
tanh actor and critic, no normalisation) and the tuned fields, one run per seed:

    rlzoo-venv/bin/python -m benchmarks.peers.sb3_rerun --env Acrobot-v1 \
        --params '{"learning_rate": 0.001, ...}' --total-timesteps 102400 --seeds 100 101

Each run's score is `final_return`: the mean return of the training episodes that end in
the last `--window` fraction of its env steps (default 0.2, as `pjp.sweep`'s
`final_return` averages the last 10 of 50 updates). Prints, as its last line, one JSON
object: `final_returns` (per seed), `episodes` (per seed, in the window), `seconds`.

Imports neither purejaxppo nor JAX.
"""

from __future__ import annotations

import argparse
import json
import time


def final_return(episodes: list[tuple[int, float]], total: int, window: float) -> float:
    """Mean return of the `(end step, return)` episodes ending after `(1 - window) *
    total` steps (NaN when none did)."""
    tail = [r for step, r in episodes if step > (1.0 - window) * total]
    return sum(tail) / len(tail) if tail else float("nan")


def run(env_id: str, params: dict, seed: int, total: int) -> list[tuple[int, float]]:
    """One SB3 PPO run; the `(env step at its end, return)` of every finished episode."""
    import optuna
    from stable_baselines3 import PPO
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.env_util import make_vec_env

    from benchmarks.peers.rlzoo_tuner import acrobot_sampler

    class Episodes(BaseCallback):
        def __init__(self):
            super().__init__()
            self.done: list[tuple[int, float]] = []

        def _on_step(self) -> bool:
            for info in self.locals["infos"]:
                if "episode" in info:
                    self.done.append((self.num_timesteps, float(info["episode"]["r"])))
            return True

    env = make_vec_env(env_id, n_envs=16, seed=seed)
    fixed = optuna.trial.FixedTrial(params)
    kwargs = acrobot_sampler(fixed, None, 16, None)  # the learning rate annealed linearly
    model = PPO("MlpPolicy", env, seed=seed, device="cpu", verbose=0, **kwargs)
    episodes = Episodes()
    model.learn(total_timesteps=total, callback=episodes)
    return episodes.done


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--env", default="Acrobot-v1")
    parser.add_argument("--params", required=True, help="JSON object of the tuned fields")
    parser.add_argument("--total-timesteps", type=int, required=True)
    parser.add_argument("--seeds", type=int, nargs="+", required=True)
    parser.add_argument("--window", type=float, default=0.2)
    args = parser.parse_args()
    start = time.perf_counter()
    params = json.loads(args.params)
    finals, counts = [], []
    for seed in args.seeds:
        episodes = run(args.env, params, seed, args.total_timesteps)
        finals.append(final_return(episodes, args.total_timesteps, args.window))
        counts.append(sum(step > (1 - args.window) * args.total_timesteps for step, _ in episodes))
    record = {"final_returns": finals, "episodes": counts, "seconds": time.perf_counter() - start}
    print(json.dumps(record))


if __name__ == "__main__":
    main()
