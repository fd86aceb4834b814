"""Rerun a tuned setting in Stable-Baselines3 (RL Zoo's library): SB3 PPO on a gymnasium
id with the quality study's settings of `--space` (`rlzoo_tuner.quality_kwargs`; acrobot:
`configs/acrobot.yaml`'s 16 envs x 128 steps, 4 epochs of 4 minibatches, gamma 0.99, no
normalisation; pendulum: `configs/pendulum_normalized.yaml`'s 32 envs x 64 steps, 4 epochs
of 8 minibatches, gamma 0.9, VecNormalize of observations and rewards; hopper:
`configs/mujoco.yaml`'s 32 envs x 64 steps, 10 epochs of 32 minibatches, gamma 0.99,
VecNormalize; all with the learning rate annealed linearly and 64-64 tanh actor and critic)
and the tuned fields, one run per seed:

    rlzoo-venv/bin/python -m benchmarks.peers.sb3_rerun --env Acrobot-v1 --space acrobot \
        --params '{"learning_rate": 0.001, ...}' --total-timesteps 102400 --seeds 100 101

Each run's score is `final_return`: the mean return of the training episodes that end in
the last `--window` fraction of its env steps (default 0.2, as `pjp.sweep`'s
`final_return` averages the last 10 of 50 updates). With `--greedy-episodes N`, each
trained model also plays N deterministic episodes, as RL Zoo's tuner scores a trial
(`evaluate_policy(..., deterministic=True)` on one env of its own, seeded `seed + 1000`,
its VecNormalize's observation statistics the training env's, frozen, and raw rewards).
Prints, as its last line, one JSON object: `final_returns` (per seed), `episodes` (per
seed, in the window), `greedy_returns` (per seed, the mean of its N episodes; empty
without `--greedy-episodes`), `seconds`.

Imports neither purejaxppo nor JAX.
"""

from __future__ import annotations

import argparse
import json
import time

from benchmarks.peers.rlzoo_tuner import QUALITY_ENVS  # standard library imports only


def final_return(episodes: list[tuple[int, float]], total: int, window: float) -> float:
    """Mean return of the `(end step, return)` episodes ending after `(1 - window) *
    total` steps (NaN when none did)."""
    tail = [r for step, r in episodes if step > (1.0 - window) * total]
    return sum(tail) / len(tail) if tail else float("nan")


def run(
    env_id: str, space: str, params: dict, seed: int, total: int, greedy_episodes: int = 0
) -> tuple[list[tuple[int, float]], float]:
    """One SB3 PPO run: the `(env step at its end, return)` of every finished episode
    (its raw return: Monitor records it beneath VecNormalize), and the mean return of
    `greedy_episodes` deterministic episodes of the trained model (NaN when 0)."""
    import optuna
    from stable_baselines3 import PPO
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.vec_env import VecNormalize

    from benchmarks.peers.rlzoo_tuner import quality_kwargs, sample_quality

    class Episodes(BaseCallback):
        def __init__(self):
            super().__init__()
            self.done: list[tuple[int, float]] = []

        def _on_step(self) -> bool:
            for info in self.locals["infos"]:
                if "episode" in info:
                    self.done.append((self.num_timesteps, float(info["episode"]["r"])))
            return True

    n_envs, normalize = QUALITY_ENVS[space]
    env = make_vec_env(env_id, n_envs=n_envs, seed=seed)
    sampled = sample_quality(optuna.trial.FixedTrial(params))
    kwargs = quality_kwargs(sampled, n_envs, space)  # the learning rate annealed linearly
    if normalize:  # RL Zoo's `normalize: True`, its discount the task's gamma
        env = VecNormalize(env, gamma=kwargs["gamma"])
    model = PPO("MlpPolicy", env, seed=seed, device="cpu", verbose=0, **kwargs)
    episodes = Episodes()
    model.learn(total_timesteps=total, callback=episodes)
    if not greedy_episodes:
        return episodes.done, float("nan")
    from stable_baselines3.common.evaluation import evaluate_policy
    from stable_baselines3.common.vec_env import sync_envs_normalization

    eval_env = make_vec_env(env_id, n_envs=1, seed=seed + 1000)
    if normalize:  # as RL Zoo's evaluation env: frozen statistics, raw rewards
        eval_env = VecNormalize(eval_env, training=False, norm_reward=False, gamma=kwargs["gamma"])
        sync_envs_normalization(env, eval_env)
    returns, _ = evaluate_policy(
        model,
        eval_env,
        n_eval_episodes=greedy_episodes,
        deterministic=True,
        return_episode_rewards=True,
    )
    return episodes.done, float(sum(returns) / len(returns))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--env", default="Acrobot-v1")
    parser.add_argument("--space", choices=sorted(QUALITY_ENVS), default="acrobot")
    parser.add_argument("--params", required=True, help="JSON object of the tuned fields")
    parser.add_argument("--total-timesteps", type=int, required=True)
    parser.add_argument("--seeds", type=int, nargs="+", required=True)
    parser.add_argument("--window", type=float, default=0.2)
    parser.add_argument("--greedy-episodes", type=int, default=0)
    args = parser.parse_args()
    start = time.perf_counter()
    params = json.loads(args.params)
    finals, counts, greedy = [], [], []
    for seed in args.seeds:
        episodes, greedy_return = run(
            args.env, args.space, params, seed, args.total_timesteps, args.greedy_episodes
        )
        finals.append(final_return(episodes, args.total_timesteps, args.window))
        counts.append(sum(step > (1 - args.window) * args.total_timesteps for step, _ in episodes))
        if args.greedy_episodes:
            greedy.append(greedy_return)
    record = {
        "final_returns": finals,
        "episodes": counts,
        "greedy_returns": greedy,
        "seconds": time.perf_counter() - start,
    }
    print(json.dumps(record))


if __name__ == "__main__":
    main()
