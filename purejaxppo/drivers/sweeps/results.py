"""A sweep's results: `SweepResult`, its tables, and writing / logging them."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import jax
import numpy as np
import pandas as pd

from purejaxppo.config import PPOConfig
from purejaxppo.drivers.plots import plot_sweep
from purejaxppo.drivers.report import column, final_return
from purejaxppo.train import METRICS


@dataclasses.dataclass(frozen=True)
class SweepResult:
    """What `sweep` returns.

    Attributes:
      table: one row per run x logged update (this process's runs in a multi-host sweep):
        columns `run`, `setting`, `seed`, one column `config/<field>` per swept field,
        `update`,
        `env_steps` and every metric of `METRICS`.
      runs: one row per run (all processes): `run`, `setting`, `seed`, `config/<field>`,
        `final_return` (mean episode return over the run's last 10 updates), `diverged`
        (first update with a NaN / Inf loss, 0 if none).
      summary: one row per setting: `config/<field>`, `num_seeds`, `num_diverged`, and the
        mean, std, IQM
        (mean of the middle 50%, Agarwal et al. 2021), min and max of `final_return`
        over seeds.
      curves: episode return per run and update for all runs (all processes): columns
        `run`, `setting`, `update`, `env_steps`, `episode_return` (for `plot_sweep`).
      settings: the swept settings, in setting order (dicts of field -> value).
      num_compiles: compiled training programs (one per static group).
      num_devices: devices the runs were split over (all processes).
    """

    table: pd.DataFrame
    runs: pd.DataFrame
    summary: pd.DataFrame
    curves: pd.DataFrame
    settings: list[dict[str, Any]]
    num_compiles: int
    num_devices: int


def table_rows(local, local_index, runs, settings, swept, log_every):
    num_updates = local["env_steps"].shape[1]
    updates = np.arange(1, num_updates + 1)
    keep = (updates % log_every == 0) | (updates == num_updates)
    frames = []
    for row, index in enumerate(local_index):
        run_id, setting, seed = runs[index]
        frame = pd.DataFrame({name: local[name][row][keep] for name in METRICS})
        frame.insert(0, "update", updates[keep])
        for position, (name, value) in enumerate(
            [("run", run_id), ("setting", setting), ("seed", seed)]
            + [(column(n), cell(settings[setting].get(n))) for n in swept]
        ):
            frame.insert(position, name, value)
        frames.append(frame)
    if not frames:
        columns = ["run", "setting", "seed", *map(column, swept), "update", *METRICS]
        return pd.DataFrame(columns=columns)
    frame = pd.concat(frames, ignore_index=True)
    frame["env_steps"] = frame["env_steps"].astype(np.int64)
    return frame


def curve_rows(returns, first, runs, config):
    num_updates = returns.shape[1]
    updates = np.arange(1, num_updates + 1)
    frames = [
        pd.DataFrame(
            {
                "run": runs[first + row][0],
                "setting": runs[first + row][1],
                "update": updates,
                "env_steps": updates * config.batch_size,
                "episode_return": returns[row],
            }
        )
        for row in range(returns.shape[0])
    ]
    return pd.concat(frames, ignore_index=True)


def cell(value):
    """Table cell for a setting value (tuples/lists as '64x64'-free strings)."""
    if isinstance(value, (list, tuple)):
        return ",".join(str(v) for v in value)
    return value


def runs_frame(curves, settings, seed_list, swept, diverged):
    rows = []
    for run_id, frame in curves.groupby("run", sort=True):
        setting = run_id // len(seed_list)
        row = {"run": run_id, "setting": setting, "seed": seed_list[run_id % len(seed_list)]}
        row.update({column(name): cell(settings[setting].get(name)) for name in swept})
        # (sweep curves keep the returns only: the mean of the last 10 updates' values)
        row["final_return"] = final_return(frame["episode_return"].to_numpy())
        row["diverged"] = int(diverged.get(run_id, 0))
        rows.append(row)
    return pd.DataFrame(rows)


def write_sweep(
    result: SweepResult, out: str | Path, config: PPOConfig, fmt: str = "csv"
) -> list[Path]:
    """Writes a sweep's files into `out` and returns the paths this process wrote.

    Every process writes its own rows of the table: `table.csv` (one process) or
    `table.part-<i>-of-<n>.csv` (process i of n); `fmt="parquet"` writes `.parquet`
    instead. Process 0 also writes `runs.csv`, `summary.csv`, `learning_curves.png`
    (`plot_sweep`) and `sweep.yaml` (base config, settings, seeds, compiles, devices).

    Raises:
      ValueError: for an unknown `fmt`.
    """
    import yaml

    if fmt not in ("csv", "parquet"):
        raise ValueError(f"fmt={fmt!r}: must be 'csv' or 'parquet'")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    count, index = jax.process_count(), jax.process_index()
    name = "table" if count == 1 else f"table.part-{index}-of-{count}"
    table_path = out / f"{name}.{fmt}"
    if fmt == "csv":
        result.table.to_csv(table_path, index=False)
    else:
        result.table.to_parquet(table_path, index=False)
    written = [table_path]
    if index == 0:
        result.runs.to_csv(out / "runs.csv", index=False)
        result.summary.to_csv(out / "summary.csv", index=False)
        plot_sweep(result, out / "learning_curves.png", title=f"PPO on {config.env_name}")
        spec = {
            "config": config.to_dict(),
            "settings": [{k: cell(v) for k, v in s.items()} for s in result.settings],
            "seeds": sorted({int(s) for s in result.runs["seed"]}),
            "num_compiles": result.num_compiles,
            "num_devices": result.num_devices,
            "num_processes": count,
        }
        (out / "sweep.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
        written += [out / n for n in ("runs.csv", "summary.csv", "learning_curves.png")]
        written.append(out / "sweep.yaml")
    return written


def log_sweep(
    result: SweepResult, out: str | Path, config: PPOConfig, loggers: Sequence[str]
) -> list[Path]:
    """Sends a finished sweep to logging sinks: one run per (setting, seed).

    What W&B and TensorBoard users expect of a sweep: each run is its own run in the
    tool, grouped by the sweep. Run k of this process's table goes to
    `out/runs/run_<k>/` (TensorBoard: point it at `out/runs` to see them side by side);
    W&B runs share the group `out`'s name and MLflow runs the tags; every run gets its
    resolved config (the base config with its setting and seed) as hyperparameters, the
    setting and seed as tags, and every per-update metric keyed by env steps.

    Args:
      result, config: the sweep (`sweep(config, ...)`) and its base config.
      out: the sweep's output directory.
      loggers: sink names (`purejaxppo.sinks.LOGGERS`); "csv" is skipped (the tables are
        CSV already).

    Returns:
      The run directories written.

    Raises:
      ValueError / ImportError: as `sinks.make_sinks`, before anything is written.
    """
    from purejaxppo.sinks import check_sinks, make_sinks

    names = [name for name in loggers if name != "csv"]
    if not names:
        return []
    check_sinks(names)
    out = Path(out)
    metric_names = [name for name in METRICS if name in result.table.columns]
    swept = [c for c in result.table.columns if c.startswith("config/")]
    written = []
    for run_id, rows in result.table.groupby("run", sort=True):
        first = rows.iloc[0]
        setting = {column.removeprefix("config/"): first[column] for column in swept}
        setting = {k: v.item() if hasattr(v, "item") else v for k, v in setting.items()}
        seed = int(first["seed"])
        run_config = {**config.to_dict(), **setting, "seed": seed}
        run_dir = out / "runs" / f"run_{int(run_id):04d}"
        tags = {**setting, "seed": seed, "setting": int(first["setting"])}
        with make_sinks(names, run_dir, name=f"{out.name}-run{int(run_id)}", group=out.name,
                        tags=tags) as sinks:  # fmt: skip
            sinks.log_config(run_config)
            for _, row in rows.iterrows():
                metrics = {name: float(row[name]) for name in metric_names}
                sinks.log_metrics(int(row["env_steps"]), metrics)
        written.append(run_dir)
    return written
