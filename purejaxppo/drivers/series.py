"""A run's checkpoint series: every kept checkpoint evaluated (`purejaxppo eval RUN
--all-steps`), as a table and a plot of return against env steps.

After DTI's `load_all_agents_from_checkpoints`: keep the series with
`keep_checkpoints: all` (and `save_freq` > 0), list it with `list_checkpoints(run_dir)`,
load one with `Policy.load(run_dir, step=N)`.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd

from purejaxppo.acting.evaluation import make_episode_runner
from purejaxppo.checkpoint import list_checkpoints, load_checkpoint
from purejaxppo.drivers.plots import plot_checkpoint_series
from purejaxppo.drivers.report import iqm, write_atomic, write_csv
from purejaxppo.envs import make_env
from purejaxppo.envs.spaces import episode_limit
from purejaxppo.policy import Policy, observation_shapes
from purejaxppo.signals import run_responsively

#: Files `write_series` writes into the run directory.
SERIES_FILES = ("eval_steps.csv", "eval_steps.png")
#: Columns of the table, one row per kept checkpoint.
SERIES_COLUMNS = ("update", "env_steps", "mean", "std", "iqm", "mean_length")


def evaluate_series(
    run_dir: str | Path,
    num_episodes: int = 100,
    key: jax.Array | None = None,
    greedy: bool = False,
    env_id: str | None = None,
    *,
    max_steps: int | None = None,
    after_step: Callable[[dict], bool] | None = None,
) -> pd.DataFrame:
    """Evaluates every kept checkpoint of `run_dir` (`list_checkpoints`, oldest first) on
    the same `num_episodes` episodes (same `key` for each; one compiled episode runner).

    `max_steps` ends each episode (default: the env's time limit). `after_step` is
    called with each finished row (a dict of `SERIES_COLUMNS`); once it
    returns True the table of the checkpoints evaluated so far is returned. Each
    evaluation runs responsively (`run_responsively`: a second Ctrl-C stops at once).

    Returns:
      A DataFrame with `SERIES_COLUMNS`, one row per evaluated checkpoint: `update`
      (int), `env_steps` (update * num_envs * num_steps), and the mean, std and IQM of
      the episode returns and the mean episode length (float). `attrs["total_steps"]`:
      the checkpoints listed (more than the rows after a stop).

    Raises:
      ValueError: no checkpoint in `run_dir`; `num_episodes < 1`; an `env_id` whose
        observations do not fit the policy.
    """
    if num_episodes < 1:
        raise ValueError(f"num_episodes={num_episodes!r}: must be >= 1")
    steps = list_checkpoints(run_dir)
    if not steps:
        raise ValueError(f"no complete checkpoint under {Path(run_dir) / 'checkpoints/last'}")
    policy = Policy.load(run_dir, step=steps[0])
    config = policy.config
    env, env_params = _series_env(policy, env_id)
    if max_steps is None:
        max_steps = episode_limit(env, env_params)
    run = make_episode_runner(policy, env, env_params, num_episodes, max_steps)
    key = jax.random.key(0) if key is None else key
    temperature = jnp.float32(0.0 if greedy else 1.0)
    rows = []
    for step in steps:
        params = load_checkpoint(run_dir, step=step).runner_state.train_state.params
        returns, lengths = run_responsively(
            lambda params=params: [np.asarray(x) for x in run(params, key, temperature)]
        )
        row = _series_row(step, step * config.batch_size, returns, lengths)
        rows.append(row)
        if after_step is not None and after_step(row):
            break
    table = pd.DataFrame(rows, columns=list(SERIES_COLUMNS))
    table.attrs["total_steps"] = len(steps)
    return table


def _series_env(policy: Policy, env_id: str | None) -> tuple[Any, Any]:
    """`(env, env_params)` of `evaluate_series`: the policy's own (configured) env, or
    `make_env(env_id)` when its observations fit the policy.

    Raises:
      ValueError: `env_id`'s observations do not match the policy's.
    """
    if env_id is None or env_id == policy.config.env_name:
        return policy.env, policy.env_params
    env, env_params = make_env(env_id)
    shapes = observation_shapes(env.observation_space(env_params))
    if shapes != policy.obs_shape:
        raise ValueError(
            f"eval: {env_id} observations {shapes} do not match the policy's {policy.obs_shape}"
        )
    return env, env_params


def _series_row(step: int, env_steps: int, returns: np.ndarray, lengths: np.ndarray) -> dict:
    """One row of `evaluate_series` (`SERIES_COLUMNS`) for the checkpoint of `step`."""
    return {
        "update": step,
        "env_steps": env_steps,
        "mean": float(returns.mean()),
        "std": float(returns.std()),
        "iqm": iqm(returns),
        "mean_length": float(lengths.mean()),
    }


def check_series_output(run_dir: str | Path, overwrite: bool) -> None:
    """Raises a ValueError when `write_series` would replace files without `overwrite`."""
    existing = [name for name in SERIES_FILES if (Path(run_dir) / name).exists()]
    if existing and not overwrite:
        raise ValueError(
            f"{Path(run_dir) / existing[0]} exists; pass --overwrite to replace "
            f"{' and '.join(existing)}"
        )


def write_series(run_dir: str | Path, table: pd.DataFrame, title: str = "") -> list[Path]:
    """Writes `table` as `run_dir/eval_steps.csv` and its plot as `eval_steps.png`
    (atomic writes); returns both paths."""
    csv_path, png_path = (Path(run_dir) / name for name in SERIES_FILES)
    write_csv(csv_path, table)
    write_atomic(png_path, lambda path: plot_checkpoint_series(table, path, title))
    return [csv_path, png_path]
