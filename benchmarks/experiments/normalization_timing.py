"""When the normalisation statistics move: once per update (ours) or at every env step
(SB3's `VecNormalize`), on the Hopper setting of `quality_settings_ab`.

The quality study (`benchmarks.tune_peers_quality`) reran one Hopper-v4 setting at 242.7
in purejaxppo and 339.1 in SB3. `quality_settings_ab` attributes part of it to the value
loss (`clip_vloss`) and rules out the env. The libraries also normalise at different
times:

- ours (`purejaxppo.normalize`) merges the rollout's observations into the statistics
  after the update's epochs, so the first rollout sees the prior (mean 0, variance 1, so
  raw observations) and every step of a rollout sees the same statistics; the reward's
  discounted-return variance moves once per rollout too;
- SB3's `VecNormalize` (stable-baselines3, `common/vec_env/vec_normalize.py`) merges each
  step's observations (the reset ones included) before normalising them, stores the
  normalised observations in its buffer, and moves the return variance at every step.

Here the SB3 timing is a wrapper around the host env's vector env (`VecNormalizeHost`):
it normalises the observations (and the final observations GAE bootstraps from) and the
rewards at every step, with statistics per run (each run's block of `num_envs` copies,
so the runs of one program stay independent), clip 10 and epsilon 1e-8 as SB3; the run
then trains with its own normalisation off for what the wrapper does. The last two
variants are the library's own per-step timing (`normalize_timing: "step"`,
`rollout.make_normalizing_rollout`), which should reproduce the wrapper's. The wrapper also
records each episode's raw return, so every variant is scored on raw returns, as the
study scores reruns: the mean of the last 10 updates' mean episode returns (the sweep's
`final_return` without episode counts, `drivers.report.final_return_of`). For variants
whose rewards reach the run unscaled, the recorded score is checked against the run's own
metrics.

    python -m benchmarks.experiments.normalization_timing              # ~22 min, 2-core CPU
    python -m benchmarks.experiments.normalization_timing --json out.json
    python -m benchmarks.experiments.normalization_timing --only 0 5 6  # the library's, ~8 min

Each variant trains gymnasium's Hopper-v4 (SB3's env) with the task's config and the
setting's four fields, 20 seeds under one `jax.vmap` (one vector env of 20 x 32 copies).
Prints one row per variant: the mean over seeds, the seeds' std, and against the first
variant the paired difference and on how many seeds it is higher.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.harness import machine, write_text

#: Variants: (config changes, the wrapper's per-step normalisation); the first is the base.
VARIANTS: dict[str, tuple[dict[str, Any], dict[str, bool]]] = {
    "ours: statistics once per update (the config)": ({}, {"obs": False, "reward": False}),
    "ours, clip_vloss off": ({"clip_vloss": False}, {"obs": False, "reward": False}),
    "observations per step (SB3), rewards ours": (
        {"normalize_observations": False},
        {"obs": True, "reward": False},
    ),
    "observations and rewards per step (SB3)": (
        {"normalize_observations": False, "normalize_rewards": False},
        {"obs": True, "reward": True},
    ),
    "observations and rewards per step (SB3), clip_vloss off": (
        {"normalize_observations": False, "normalize_rewards": False, "clip_vloss": False},
        {"obs": True, "reward": True},
    ),
    "ours, normalize_timing: step": ({"normalize_timing": "step"}, {"obs": False, "reward": False}),
    "ours, normalize_timing: step, clip_vloss off": (
        {"normalize_timing": "step", "clip_vloss": False},
        {"obs": False, "reward": False},
    ),
}
CLIP, EPS = 10.0, 1e-8  # VecNormalize's clip_obs / clip_reward and epsilon
LAST_UPDATES = 10


class _Moments:
    """Running mean and variance per run (rows), merged as `purejaxppo.normalize.merge`
    does; the prior is SB3's `RunningMeanStd` (mean 0, variance 1, count 1e-4). NumPy, not
    `normalize.merge`: it runs inside the training program's host callback, where a JAX
    computation could wait on the program that is waiting on it."""

    def __init__(self, runs: int, size: int):
        self.mean, self.var = np.zeros((runs, size)), np.ones((runs, size))
        self.count = np.full((runs, 1), 1e-4)

    def update(self, batch: np.ndarray) -> None:
        """Merges `batch` `[runs, n, size]`."""
        n = batch.shape[1]
        delta = batch.mean(1) - self.mean
        total = self.count + n
        m2 = self.var * self.count + batch.var(1) * n + delta**2 * self.count * n / total
        self.mean, self.var, self.count = self.mean + delta * n / total, m2 / total, total

    def scale(self, x: np.ndarray, center: bool = True) -> np.ndarray:
        """`x` `[runs, n, size]` normalised, clipped to +-CLIP."""
        shifted = x - self.mean[:, None] if center else x
        return np.clip(shifted / np.sqrt(self.var[:, None] + EPS), -CLIP, CLIP)


class VecNormalizeHost:
    """A `HostVecEnv` normalising at every step as SB3's `VecNormalize`, per run of
    `per_run` copies, and recording raw episode returns as `(step, run, return)`."""

    def __init__(self, inner: Any, per_run: int, obs: bool, reward: bool, gamma: float):
        self.inner, self.num_envs, self.per_run = inner, inner.num_envs, per_run
        self.runs = inner.num_envs // per_run
        if self.runs * per_run != inner.num_envs:
            raise ValueError(f"{inner.num_envs} copies do not split into runs of {per_run}")
        self.do_obs, self.do_reward, self.gamma = obs, reward, gamma
        self.obs_moments: _Moments | None = None
        self.return_moments = _Moments(self.runs, 1)
        self.discounted = np.zeros(self.num_envs)
        self.raw = np.zeros(self.num_envs)
        self.steps = 0
        self.episodes: list[tuple[int, int, float]] = []

    def _blocks(self, x: Any) -> np.ndarray:
        return np.asarray(x, np.float64).reshape(self.runs, self.per_run, -1)

    def _normalize(self, obs: Any, final_obs: Any = None) -> tuple[Any, Any]:
        if not self.do_obs:
            return obs, final_obs
        blocks = self._blocks(obs)
        if self.obs_moments is None:
            self.obs_moments = _Moments(self.runs, blocks.shape[-1])
        self.obs_moments.update(blocks)
        scaled = [
            self.obs_moments.scale(self._blocks(x)).reshape(np.shape(x)).astype(np.float32)
            for x in (obs, obs if final_obs is None else final_obs)
        ]
        return scaled[0], scaled[1]

    def reset(self, seed: Any) -> Any:
        self.discounted[:] = 0.0
        self.raw[:] = 0.0
        return self._normalize(self.inner.reset(seed))[0]

    def step(self, action: np.ndarray) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, Any]:
        obs, reward, terminated, truncated, final_obs = self.inner.step(action)
        done = terminated | truncated
        self.raw += reward
        self.episodes += [
            (self.steps, int(i) // self.per_run, float(self.raw[i])) for i in np.flatnonzero(done)
        ]
        self.raw[done] = 0.0
        self.steps += 1
        obs, final_obs = self._normalize(obs, final_obs)
        if self.do_reward:
            self.discounted = self.discounted * self.gamma + reward
            self.return_moments.update(self._blocks(self.discounted))
            scaled = self.return_moments.scale(self._blocks(reward), center=False)
            reward = scaled.reshape(-1).astype(np.float32)
            self.discounted[done] = 0.0
        return obs, reward, terminated, truncated, final_obs

    def close(self) -> None:
        self.inner.close()


def wrapped(env: Any, per_run: int, obs: bool, reward: bool, gamma: float) -> tuple[Any, list]:
    """`env` (a `HostEnv`) whose vector envs are `VecNormalizeHost`s, and the list those
    vector envs are appended to (to read their episodes)."""
    from purejaxppo.envs.host import HostEnv

    made: list[VecNormalizeHost] = []

    def make_vec(num_envs: int, mode: str = "sync") -> VecNormalizeHost:
        made.append(VecNormalizeHost(env.make_vec(num_envs, mode), per_run, obs, reward, gamma))
        return made[-1]

    new = HostEnv(
        env.name, env.observation_space(), env.action_space(), make_vec, env.max_steps_in_episode
    )
    return new, made


def final_returns(
    episodes: list[tuple[int, int, float]], runs: int, num_steps: int, updates: int
) -> list[float]:
    """Per run: the mean of the last `LAST_UPDATES` updates' mean episode returns (an
    update in which no episode ended is left out, as `final_return_of` drops NaNs)."""
    finals = []
    for run in range(runs):
        per_update: dict[int, list[float]] = {}
        for step, owner, value in episodes:
            if owner == run and step // num_steps >= updates - LAST_UPDATES:
                per_update.setdefault(step // num_steps, []).append(value)
        finals.append(float(np.mean([np.mean(values) for values in per_update.values()])))
    return finals


def run(updates: int, seeds: list[int], only: list[int] | None = None) -> list[dict]:
    """One row per variant (those at the indices `only` into `VARIANTS`, default all): its
    seeds' final returns (raw rewards)."""
    import jax
    import jax.numpy as jnp

    import purejaxppo as pjp
    from benchmarks.experiments.quality_settings_ab import SETTING
    from benchmarks.tune_peers_quality import TASKS
    from purejaxppo.drivers.report import final_return_of

    spec = TASKS["hopper"]
    base = spec.settings().replace(
        total_timesteps=updates * spec.steps_per_update, env_name="gymnasium:Hopper-v4", **SETTING
    )
    env, _ = pjp.make_env(base.env_name)
    keys = jax.vmap(jax.random.key)(jnp.asarray(seeds))
    rows = []
    chosen = list(VARIANTS.items())
    chosen = chosen if only is None else [chosen[i] for i in only]
    for name, (change, per_step) in chosen:
        start = time.perf_counter()
        config = base.replace(**change)
        host, made = wrapped(env, config.num_envs, gamma=config.gamma, **per_step)
        out = jax.block_until_ready(jax.jit(jax.vmap(pjp.make_train(config, env=host)))(keys))
        (pool,) = [vec for vec in made if vec.num_envs == config.num_envs * len(seeds)]
        finals = final_returns(pool.episodes, len(seeds), config.num_steps, updates)
        if not per_step["reward"]:  # the rewards the run saw are raw: its metrics agree
            own = [
                final_return_of(np.asarray(r), None, last=LAST_UPDATES)[0]
                for r in out.metrics["episode_return"]
            ]
            if not np.allclose(own, finals, rtol=1e-4):
                raise RuntimeError(f"{name}: recorded {finals} but the run's metrics {own}")
        seconds = time.perf_counter() - start
        rows.append(
            {
                "variant": name,
                "change": change,
                "per_step": per_step,
                "seeds": seeds,
                "final_returns": finals,
                "seconds": round(seconds, 1),
            }
        )
        print(f"{name}: mean {np.mean(finals):.1f} ({seconds:.0f} s)", flush=True)
    return rows


def main() -> int:
    from benchmarks.experiments.quality_settings_ab import SETTING, table

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--updates", type=int, default=25, help="the study's updates per trial")
    parser.add_argument("--seeds", type=int, nargs="+", default=list(range(100, 120)))
    parser.add_argument("--json", type=Path, default=None, help="write the rows here")
    parser.add_argument(
        "--only",
        type=int,
        nargs="+",
        default=None,
        choices=range(len(VARIANTS)),
        help="run only these variants (indices into VARIANTS, in its order; the first one "
        "given is the base the others are paired with)",
    )
    args = parser.parse_args()
    if args.only is not None and len(set(args.only)) != len(args.only):
        parser.error(f"--only: each variant once, got {args.only}")
    rows = run(args.updates, args.seeds, args.only)
    print("\n".join(table(rows)))
    if args.json is not None:
        record = machine()
        record.update(
            task="hopper",
            env="gymnasium:Hopper-v4",
            updates=args.updates,
            setting=SETTING,
            rows=rows,
        )
        write_text(args.json, json.dumps(record, indent=1))
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
