"""Numbers and files every driver reports: final return, IQM, summaries, atomic writes.

Shared below the drivers (`single`, `seeds`, `sweeps`, `population`), which never import
each other; the figures are in `purejaxppo.drivers.plots`.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import yaml

#: Rows of a seeds run's `summary.csv` after the per-seed rows, in order.
AGGREGATES = ("mean", "std", "iqm", "min", "max")


#: Episodes that `final_return` averages: the newest that ended, whole updates at a time.
FINAL_EPISODES = 100


def final_return(
    episode_return: np.ndarray,
    episode_count: np.ndarray | None = None,
    *,
    episodes: int = FINAL_EPISODES,
    last: int = 10,
) -> float:
    """The run's final return (`final_return_of`'s value)."""
    return final_return_of(episode_return, episode_count, episodes=episodes, last=last)[0]


def final_return_of(
    episode_return: np.ndarray,
    episode_count: np.ndarray | None = None,
    *,
    episodes: int = FINAL_EPISODES,
    last: int = 10,
) -> tuple[float, int]:
    """`(mean return, episodes)` of the newest finished training episodes.

    With `episode_count` `[U]` (the episodes that ended in each update; `episode_return`
    `[U]` their mean), the mean over the episodes of the newest updates until at least
    `episodes` of them (or all the run's) are counted: every episode weighs the same, so
    a final update in which one short failure ended does not outweigh one in which many
    finished. Without counts (tables written before `episode_count` existed), the mean
    of the last `last` updates' values and the number of those updates.
    Returns `(nan, 0)` when no episode ended.
    """
    returns = np.asarray(episode_return, np.float64)
    counts = None if episode_count is None else np.asarray(episode_count, np.float64)
    if counts is None or not np.isfinite(counts).any():
        tail = returns[-last:]
        tail = tail[~np.isnan(tail)]
        return (float(tail.mean()), len(tail)) if tail.size else (math.nan, 0)
    total = weight = 0.0
    for value, count in zip(returns[::-1], counts[::-1], strict=True):
        if count > 0 and np.isfinite(value):
            total, weight = total + value * count, weight + count
            if weight >= episodes:
                break
    return (total / weight, int(weight)) if weight else (math.nan, 0)


def iqm(values: np.ndarray) -> float:
    """Interquartile mean: mean of the middle 50% of the sorted values (Agarwal et al.
    2021, "Deep RL at the Edge of the Statistical Precipice"); NaNs are dropped."""
    values = np.sort(np.asarray(values, np.float64))
    values = values[~np.isnan(values)]
    if not values.size:
        return math.nan
    n = len(values)
    middle = values[n // 4 : n - n // 4] if n >= 4 else values
    return float(middle.mean())


def _stats(values: np.ndarray) -> dict[str, float]:
    """mean, std (ddof=0), iqm, min, max of the finite values (NaN for none)."""
    values = np.asarray(values, np.float64)
    finite = values[~np.isnan(values)]

    def stat(fn: Callable[[np.ndarray], Any]) -> float:
        return float(fn(finite)) if finite.size else math.nan

    return {
        "mean": stat(np.mean),
        "std": stat(np.std),
        "iqm": iqm(values),
        "min": stat(np.min),
        "max": stat(np.max),
    }


def summarize_seeds(
    seeds: Sequence[int], final_returns: np.ndarray, diverged: dict[int, int] | None = None
) -> pd.DataFrame:
    """`summary.csv`: a row per seed (`seed`, `final_return`, `diverged`: first non-finite
    update, 0 for none), then the rows `AGGREGATES` over the seeds' finite final returns
    (std with ddof=0, IQM = mean of the middle 50%, as `pjp.sweep`'s summary); their
    `diverged` cell counts the diverged seeds."""
    diverged = diverged or {}
    values = np.asarray(final_returns, np.float64)
    rows = [
        {"seed": str(seed), "final_return": float(value), "diverged": int(diverged.get(seed, 0))}
        for seed, value in zip(seeds, values, strict=True)
    ]
    stats = _stats(values)
    rows += [
        {"seed": name, "final_return": stats[name], "diverged": len(diverged)}
        for name in AGGREGATES
    ]
    return pd.DataFrame(rows)


def column(field: str) -> str:
    """Column name of a swept config field in the sweep's tables: "config/<field>"."""
    return f"config/{field}"


def summarize(runs: pd.DataFrame, swept: Sequence[str]) -> pd.DataFrame:
    """Per-setting statistics of `final_return` over seeds (mean, std, IQM, min, max)."""
    rows = []
    for setting, frame in runs.groupby("setting", sort=True):
        values = frame["final_return"].to_numpy(np.float64)
        row = {"setting": setting, **{column(n): frame[column(n)].iloc[0] for n in swept}}
        row.update(
            num_seeds=len(values),
            num_diverged=int((frame["diverged"] > 0).sum()) if "diverged" in frame else 0,
        )
        row.update({f"final_return_{name}": value for name, value in _stats(values).items()})
        rows.append(row)
    return pd.DataFrame(rows)


def setting_label(row: Mapping[str, Any], swept: Sequence[str]) -> str:
    """'learning_rate=0.0003 ent_coef=0.01' (or 'base config' for no swept fields)."""
    parts = []
    for name in swept:
        value = row[column(name)]
        parts.append(f"{name}={value:g}" if isinstance(value, float) else f"{name}={value}")
    return " ".join(parts) or "base config"


def write_atomic(path: str | Path, write: Callable[[Path], Any]) -> None:
    """`write(temporary path)`, then renames it to `path`: `path` is the whole new file or
    as it was, never half written (readers never see half a file), also when a signal
    (`StopNow`) or a full disk stops the write; the temporary file is removed then. Its
    name keeps the suffix, for writers that infer the format from it (matplotlib)."""
    path = Path(path)
    partial = path.with_name(f".{path.name}.partial{path.suffix}")
    try:
        write(partial)
        os.replace(partial, path)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise


def write_yaml(path: str | Path, data: Any) -> None:
    """Writes `data` as YAML (keys in insertion order), atomically."""
    write_atomic(path, lambda p: p.write_text(yaml.safe_dump(data, sort_keys=False)))


def write_csv(path: str | Path, frame: pd.DataFrame) -> None:
    """Writes `frame` as CSV without its index, atomically."""
    write_atomic(path, lambda p: frame.to_csv(p, index=False))
