"""Every figure purejaxppo draws: the only module that imports matplotlib.

Each function writes one PNG (the format follows the path's suffix) with the non-interactive
Agg backend, selected once, here. The inputs are plain tables (`pandas.DataFrame`) or a
driver's result object; nothing here imports a driver.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from purejaxppo.drivers.report import setting_label


def _pyplot() -> Any:
    """matplotlib.pyplot, on the Agg backend unless the user already imported pyplot (a
    notebook's inline backend stays, so its figures still display); imported on first use."""
    import sys

    import matplotlib

    if "matplotlib.pyplot" not in sys.modules:
        matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _steps_axis(ax: Any, label: str = "env steps") -> None:
    """Labels an env-steps x axis with at most 6 ticks in engineering notation (200k,
    1.5M): full integers such as 1000000 overlap on a panel of a 2x2 figure."""
    from matplotlib.ticker import EngFormatter, MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(nbins=6))
    ax.xaxis.set_major_formatter(EngFormatter(sep=""))
    ax.set_xlabel(label)


def plot_learning_curve(table: pd.DataFrame, path: str | Path, title: str = "") -> None:
    """Writes a 2x2 PNG: episode return, value loss, entropy, approx KL vs env steps."""
    plt = _pyplot()
    fig, axes = plt.subplots(2, 2, figsize=(10, 7), sharex=True)
    panels = [
        ("episode_return", "episode return"),
        ("v_loss", "value loss"),
        ("entropy", "policy entropy (nats)"),
        ("approx_kl", "approx KL"),
    ]
    steps = table["env_steps"].to_numpy()
    for ax, (column, label) in zip(axes.flat, panels, strict=True):
        values = table[column].to_numpy(dtype=float)
        keep = ~np.isnan(values)
        ax.plot(steps[keep], values[keep], lw=1.2)
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
    for ax in axes[1]:
        _steps_axis(ax)
    fig.suptitle(f"PPO on {title}" if title else "PPO")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


#: Panels of `plot_seeds`: (metric, axis label); the first is the large one.
PLOT_PANELS = (
    ("episode_return", "episode return"),
    ("v_loss", "value loss"),
    ("entropy", "policy entropy (nats)"),
    ("approx_kl", "approx KL"),
)


def plot_seeds(metrics: pd.DataFrame, path: str | Path, title: str = "") -> None:
    """Writes a PNG of the seeds' learning curves against env steps: the mean episode
    return over the seeds with a band of ±1 std (ddof=0) and a lighter min-max band, and
    below it the same for the value loss, the policy entropy and the approx KL.
    NaN-aware: an update where no episode of a seed ended leaves that seed out.

    Args:
      metrics: the long table of `train_seeds` (columns seed, update, env_steps and the
        metrics of `PLOT_PANELS`).
      path: the PNG to write (the format follows its suffix).
      title: the figure's title.
    """
    plt = _pyplot()
    steps = metrics.groupby("update")["env_steps"].first()
    num_seeds = metrics["seed"].nunique()
    fig = plt.figure(figsize=(10, 8))
    grid = fig.add_gridspec(2, 3, height_ratios=(1.6, 1))
    axes = [fig.add_subplot(grid[0, :])] + [fig.add_subplot(grid[1, i]) for i in range(3)]
    for ax, (column, label) in zip(axes, PLOT_PANELS, strict=True):
        wide = metrics.pivot(index="update", columns="seed", values=column)
        x = steps.loc[wide.index].to_numpy()
        values = wide.to_numpy(np.float64)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN updates
            mean, std = np.nanmean(values, axis=1), np.nanstd(values, axis=1)
            low, high = np.nanmin(values, axis=1), np.nanmax(values, axis=1)
        keep = ~np.isnan(mean)
        (line,) = ax.plot(x[keep], mean[keep], lw=1.5, label=f"mean over {num_seeds} seeds")
        color = line.get_color()
        bands = {"±1 std": (mean - std, mean + std, 0.3), "min-max": (low, high, 0.12)}
        for band, (below, above, alpha) in bands.items():
            ax.fill_between(
                x[keep], below[keep], above[keep], color=color, alpha=alpha, lw=0, label=band
            )
        ax.set_ylabel(label)
        _steps_axis(ax)
        ax.grid(alpha=0.3)
    axes[0].legend(loc="best", fontsize=9)
    fig.suptitle(title or "PPO")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def plot_sweep(result: Any, path: str | Path, title: str = "") -> None:
    """Writes a PNG of learning curves: per setting, the mean episode return over seeds
    against env steps, with a band of one standard deviation (NaN-aware)."""
    plt = _pyplot()
    swept = list(dict.fromkeys(name for setting in result.settings for name in setting))
    fig, ax = plt.subplots(figsize=(9, 5.5))
    curves = result.curves
    for _, row in result.summary.iterrows():
        frame = curves[curves["setting"] == row["setting"]]
        wide = frame.pivot(index="update", columns="run", values="episode_return")
        steps = frame.groupby("update")["env_steps"].first().loc[wide.index].to_numpy()
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            mean = np.nanmean(wide.to_numpy(), axis=1)
            std = np.nanstd(wide.to_numpy(), axis=1)
        keep = ~np.isnan(mean)
        label = f"{setting_label(row, swept)} (IQM {row['final_return_iqm']:.1f})"
        (line,) = ax.plot(steps[keep], mean[keep], lw=1.4, label=label)
        ax.fill_between(
            steps[keep], (mean - std)[keep], (mean + std)[keep], color=line.get_color(), alpha=0.2
        )
    seeds = int(result.summary["num_seeds"].max()) if len(result.summary) else 0
    _steps_axis(ax)
    ax.set_ylabel(f"episode return (mean ± std over {seeds} seeds)")
    ax.set_title(title or "PPO sweep")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="best")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def plot_pbt(result: Any, path: str | Path, title: str = "") -> None:
    """Writes a PNG: fitness over env steps per member (the final best member's ancestry
    drawn thick, diverged generations as crosses), and one panel per searched field with
    its schedule along the best member's ancestry."""
    plt = _pyplot()
    names = list(result.search)
    fig, axes = plt.subplots(1, 1 + len(names), figsize=(6 + 4 * len(names), 4.5), squeeze=False)
    ax = axes[0, 0]
    lineage = result.lineage
    for _, frame in lineage.groupby("member"):
        fitness = frame["fitness"].to_numpy(float)
        ok = np.isfinite(fitness)
        ax.plot(frame["env_steps"][ok], fitness[ok], lw=0.8, alpha=0.6)
        if (~ok).any():
            ax.plot(frame["env_steps"][~ok], np.zeros((~ok).sum()), "x", color="red")
    best = result.best_lineage
    steps = best["update"].to_numpy() * result.config.batch_size
    ax.plot(steps, best["fitness"], color="black", lw=2.2, label="best member's ancestry")
    _steps_axis(ax, "env steps (per member)")
    ax.set_ylabel("fitness")
    ax.set_title(title or f"PBT, {len(lineage['member'].unique())} members")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="best")
    for ax, name in zip(axes[0, 1:], names, strict=True):
        values = best[name].to_numpy(float)
        starts = np.concatenate([[0], steps[:-1]])
        ax.step(starts, values, where="post", color="black", lw=1.8)
        ax.plot([starts[-1], steps[-1]], [values[-1], values[-1]], color="black", lw=1.8)
        kind, low, high = result.search[name]
        if kind == "log_uniform":
            ax.set_yscale("log")
        if kind == "log_uniform":
            ax.set_ylim(low / 1.1, high * 1.1)
        else:
            ax.set_ylim(low - 0.02 * (high - low), high + 0.02 * (high - low))
        _steps_axis(ax)
        ax.set_ylabel(name)
        ax.set_title(f"{name} of the best member's ancestry")
        ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def plot_checkpoint_series(table: pd.DataFrame, path: str | Path, title: str = "") -> None:
    """Writes a PNG of the evaluation return of every kept checkpoint against env steps
    (`purejaxppo eval RUN --all-steps`): the mean with a +-1 std band, and the IQM."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 4.5))
    steps = table["env_steps"].to_numpy(dtype=float)
    mean, std = table["mean"].to_numpy(dtype=float), table["std"].to_numpy(dtype=float)
    ax.plot(steps, mean, marker="o", lw=1.5, label="mean")
    ax.fill_between(steps, mean - std, mean + std, alpha=0.2, label="mean ± std")
    ax.plot(steps, table["iqm"].to_numpy(dtype=float), ls="--", lw=1.0, label="IQM")
    _steps_axis(ax)
    ax.set_ylabel("evaluation episode return")
    ax.grid(alpha=0.3)
    ax.legend()
    ax.set_title(f"checkpoints of {title}" if title else "checkpoints")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
