"""PBT's results: `PBTResult` (lineage, summary, the best member) and its files."""

from __future__ import annotations

import dataclasses
import math
import shutil
from pathlib import Path
from typing import Any

import jax
import numpy as np
import pandas as pd

from purejaxppo.config import TRACED_FIELDS, PPOConfig
from purejaxppo.drivers.plots import plot_pbt
from purejaxppo.drivers.population.options import PBTOptions
from purejaxppo.drivers.population.search import SearchSpace, get_values
from purejaxppo.drivers.population.static import StaticSpace, static_text
from purejaxppo.drivers.report import final_return
from purejaxppo.train import METRICS
from purejaxppo.types import RunnerState

#: Lineage columns besides the searched fields.
LINEAGE_COLUMNS = (
    "generation",
    "member",
    "parent",
    "replaced",
    "update",
    "env_steps",
    "fitness",
    "episode_return",
    "diverged",
)


@dataclasses.dataclass(frozen=True)
class PBTResult:
    """What `pbt` returns.

    Attributes:
      lineage: one row per (generation, member): `generation`, `member` (slot), `parent`
        (the slot whose state and hyperparameters it copied at the start of the
        generation; itself if it kept its own), `replaced` (it was exploited and explored
        at the start of the generation), `update` and `env_steps` at the generation's end,
        the searched values used during the generation (columns named by field),
        `fitness` (-inf when diverged), `episode_return` (mean over the fitness window)
        and `diverged`.
      summary: one row per member of the final population, best first: `member`,
        `fitness`, `final_return` (mean of its last 10 updates' episode returns),
        `diverged`, `times_replaced`, `root` (the generation-0 member its state descends
        from) and its final searched values.
      curves: per member and update: `member`, `update`, `env_steps`, `episode_return`.
      best_member: slot of the best final member (highest final fitness).
      best_lineage: the best member's ancestry, one row per generation: `generation`,
        `member` (the slot its ancestor trained in), the searched values, `fitness`.
      best_hparams: the best member's final hyperparameters (field -> float).
      best_runner_state: the best member's final `RunnerState` (host arrays).
      best_metrics: per-update metrics along the best member's ancestry (`[U]` each).
      config: the base config; search: the searched fields' specs.
      num_compiles: compiled training programs; num_devices: devices used.
      static: the searched static fields' specs (`{field: ("choice", [values])}`; empty
        for a traced-only search); their values are columns of lineage, summary and
        best_lineage ("64-64" for `hidden_sizes`).
      best_static: the best member's final static values (field -> value).
    """

    lineage: pd.DataFrame
    summary: pd.DataFrame
    curves: pd.DataFrame
    best_member: int
    best_lineage: pd.DataFrame
    best_hparams: dict[str, float]
    best_runner_state: RunnerState
    best_metrics: dict[str, np.ndarray]
    config: PPOConfig
    search: dict[str, tuple]
    options: PBTOptions
    num_compiles: int
    num_devices: int
    static: dict[str, tuple] = dataclasses.field(default_factory=dict)
    best_static: dict[str, Any] = dataclasses.field(default_factory=dict)

    def best_hparams_text(self) -> str:
        """'learning_rate=0.00123 ent_coef=0.004' for the searched fields."""
        traced = [f"{k}={self.best_hparams[k]:.4g}" for k in self.search]
        static = [f"{k}={static_text(v)}" for k, v in self.best_static.items()]
        return " ".join(traced + static) or "(none)"

    @property
    def best_config(self) -> PPOConfig:
        """The base config with the best member's final searched values (static ones
        included)."""
        return self.config.replace(
            **{k: self.best_hparams[k] for k in self.search}, **self.best_static
        )


def _static_columns(records: dict[str, np.ndarray], static: StaticSpace | None, g, m) -> dict:
    """The static values member m used during generation g, as table cells."""
    if static is None or "static" not in records:
        return {}
    return {k: static_text(v) for k, v in static.values(records["static"][g, m]).items()}


def _env_steps(records: dict[str, np.ndarray], batch_size: int) -> np.ndarray:
    """`[G, P]` env steps of every member at the end of every generation (per-member
    batch sizes when the search changes `num_steps`)."""
    steps = records["update_step"].astype(np.int64)
    if "batch_size" not in records:
        return steps * batch_size
    done = np.diff(steps, axis=0, prepend=0)
    return np.cumsum(done * records["batch_size"], axis=0)


def _lineage(
    records: dict[str, np.ndarray],
    space: SearchSpace,
    batch_size: int,
    static: StaticSpace | None = None,
) -> pd.DataFrame:
    """One row per generation x member (`LINEAGE_COLUMNS` and the searched values)."""
    num_gens, population = records["fitness"].shape
    env_steps = _env_steps(records, batch_size)
    lineage_rows = []
    prev_parents = np.arange(population)
    prev_replaced = np.zeros(population, bool)
    for g in range(num_gens):
        for m in range(population):
            row = {
                "generation": g,
                "member": m,
                "parent": int(prev_parents[m]),
                "replaced": bool(prev_replaced[m]),
                "update": int(records["update_step"][g, m]),
                "env_steps": int(env_steps[g, m]),
            }
            row.update({n: float(records["values"][g, m, i]) for i, n in enumerate(space.names)})
            row.update(_static_columns(records, static, g, m))
            row.update(
                fitness=float(records["fitness"][g, m]),
                episode_return=float(records["episode_return"][g, m]),
                diverged=bool(records["diverged"][g, m]),
            )
            lineage_rows.append(row)
        prev_parents, prev_replaced = records["parents"][g], records["replaced"][g]
    return pd.DataFrame(lineage_rows)


def _curves(records: dict[str, np.ndarray], returns: np.ndarray, batch_size: int) -> pd.DataFrame:
    """Per member and update: `member`, `update`, `env_steps`, `episode_return`."""
    population, num_updates = returns.shape
    updates = np.arange(1, num_updates + 1)
    if "batch_size" in records:  # per-member batch sizes, per generation -> per update
        lengths = np.diff(records["update_step"][:, 0], prepend=0)
        per_update = np.repeat(records["batch_size"], lengths, axis=0)  # [U, P]
        env_steps = np.cumsum(per_update, axis=0).T.reshape(-1)
    else:
        env_steps = np.tile(updates * batch_size, population)
    return pd.DataFrame(
        {
            "member": np.repeat(np.arange(population), num_updates),
            "update": np.tile(updates, population),
            "env_steps": env_steps,
            "episode_return": returns.reshape(-1),
        }
    )


def build_result(
    config: PPOConfig,
    space: SearchSpace,
    options: PBTOptions,
    *,
    records: dict[str, np.ndarray],
    metrics: dict[str, np.ndarray],
    final_state: Any,
    num_compiles: int,
    num_devices: int,
    static: StaticSpace | None = None,
) -> PBTResult:
    """The `PBTResult` of a finished run from its records (`[G, P, ...]` per generation
    and member) and metrics (`[P, U]` per member and update), numpy; `final_state` is
    the final `PopulationState` on the host (or holds a list of per-member runners, with
    `static`: the searched static fields, whose choice indices are `records["static"]`
    `[G, P, S]`)."""
    num_gens, population = records["fitness"].shape
    lineage = _lineage(records, space, config.batch_size, static)
    returns = metrics["episode_return"]  # [P, U]
    curves = _curves(records, returns, config.batch_size)

    # Ancestry: slot of each member's ancestor in every generation, and its root.
    ancestors = np.zeros((num_gens, population), int)
    ancestors[-1] = np.arange(population)
    for g in range(num_gens - 1, 0, -1):
        ancestors[g - 1] = records["parents"][g - 1][ancestors[g]]
    final_fitness = records["fitness"][-1]
    best = int(np.argmax(np.where(np.isfinite(final_fitness), final_fitness, -np.inf)))
    final_values = np.asarray(get_values(final_state.hparams, space))
    times_replaced = records["replaced"][:-1].sum(axis=0) if num_gens > 1 else np.zeros(population)
    # times a member's *slot* was replaced (the final population's per-slot count).
    summary_rows = []
    for m in range(population):
        row = {
            "member": m,
            "fitness": float(final_fitness[m]),
            "final_return": final_return(returns[m]),
            "diverged": bool(records["diverged"][-1, m]),
            "times_replaced": int(times_replaced[m]),
            "root": int(ancestors[0, m]),
        }
        row.update({n: float(final_values[m, i]) for i, n in enumerate(space.names)})
        row.update(_static_columns(records, static, -1, m))
        summary_rows.append(row)
    summary = pd.DataFrame(summary_rows).sort_values(
        ["fitness", "member"], ascending=[False, True], kind="stable"
    )

    chain = ancestors[:, best]
    generations = np.arange(num_gens)
    chain_static = [_static_columns(records, static, g, chain[g]) for g in generations]
    best_lineage = pd.DataFrame(
        {
            "generation": generations,
            "member": chain,
            "update": records["update_step"][generations, chain],
            **{n: records["values"][generations, chain, i] for i, n in enumerate(space.names)},
            **{k: [row[k] for row in chain_static] for k in chain_static[0]},
            "fitness": records["fitness"][generations, chain],
        }
    )
    # Per-update metrics along the best member's ancestry.
    ends = records["update_step"][:, 0]
    starts = np.concatenate([[0], ends[:-1]])
    best_metrics = {
        name: np.concatenate(
            [metrics[name][chain[g], starts[g] : ends[g]] for g in range(num_gens)]
        )
        for name in METRICS
    }
    hparams = jax.tree.map(lambda x: np.asarray(x)[best], final_state.hparams)
    best_hparams = {name: float(getattr(hparams, name)) for name in TRACED_FIELDS}
    if isinstance(final_state.runner, list):
        best_runner = final_state.runner[best]
    else:
        best_runner = jax.tree.map(lambda x: x[best], final_state.runner)
    best_static = {} if static is None else static.values(records["static"][-1, best])
    return PBTResult(
        lineage=lineage,
        summary=summary.reset_index(drop=True),
        curves=curves,
        best_member=best,
        best_lineage=best_lineage,
        best_hparams=best_hparams,
        best_runner_state=best_runner,
        best_metrics=best_metrics,
        config=config,
        search=space.spec,
        options=options,
        num_compiles=num_compiles,
        num_devices=num_devices,
        static={} if static is None else static.spec,
        best_static=best_static,
    )


def joined_history(history: dict[str, list[np.ndarray]]) -> dict[str, np.ndarray]:
    """Concatenates the per-segment pieces: records along generations, metrics along
    updates."""
    out = {}
    for key, pieces in history.items():
        axis = 0 if key.startswith("record/") else 1
        out[key] = np.concatenate(pieces, axis=axis)
    return out


def json_ready(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): json_ready(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_ready(v) for v in value]
    if isinstance(value, float) and math.isinf(value):
        return str(value)
    return value


def write_best_run(result: PBTResult, run_dir: str | Path) -> Path:
    """Writes the best member as a run directory (`config.yaml` with its final searched
    values, `metrics.csv` along its ancestry, `learning_curve.png`, and an orbax checkpoint
    under `checkpoints/last`) that `Policy.load`, `evaluate`, `purejaxppo eval` and
    `purejaxppo export` accept."""
    import yaml

    from purejaxppo.checkpoint import save_checkpoint
    from purejaxppo.drivers.plots import plot_learning_curve

    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    config = result.best_config
    (run_dir / "config.yaml").write_text(yaml.safe_dump(config.to_dict(), sort_keys=False))
    frame = pd.DataFrame(result.best_metrics)[list(METRICS)]
    frame.insert(0, "update", np.arange(1, len(frame) + 1))
    frame.to_csv(run_dir / "metrics.csv", index=False)
    save_checkpoint(run_dir, result.best_runner_state, result.best_metrics, config)
    plot_learning_curve(frame, run_dir / "learning_curve.png", title=config.env_name)
    return run_dir


def write_pbt(result: PBTResult, out: str | Path) -> list[Path]:
    """Writes `lineage.csv`, `summary.csv`, `pbt.png` (`plot_pbt`), `pbt.yaml` (config,
    options, search, best member and its hyperparameters, compiles, devices) and the best
    member's run directory `best/` (`write_best_run`) into `out`; returns the paths."""
    import yaml

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    if jax.process_index() != 0:
        return []
    result.lineage.to_csv(out / "lineage.csv", index=False)
    result.summary.to_csv(out / "summary.csv", index=False)
    plot_pbt(result, out / "pbt.png", title=f"PBT on {result.config.env_name}")
    best = result.summary.iloc[0]
    spec = json_ready(
        {
            "config": result.config.to_dict(),
            "options": result.options.to_dict(),
            "search": result.search,
            **({"static_search": result.static} if result.static else {}),
            "best_member": result.best_member,
            "best_fitness": float(best["fitness"]),
            "best_final_return": float(best["final_return"]),
            "best_hparams": result.best_hparams,
            **({"best_static": result.best_static} if result.best_static else {}),
            "num_compiles": result.num_compiles,
            "num_devices": result.num_devices,
        }
    )
    (out / "pbt.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    # Written aside, then swapped in: a resumed run that had written `best/` before it
    # was killed replaces it whole (it is derived from the population checkpoint).
    partial = out / "best.partial"
    if partial.exists():
        shutil.rmtree(partial)
    write_best_run(result, partial)
    best_dir = out / "best"
    if best_dir.exists():
        shutil.rmtree(best_dir)
    partial.rename(best_dir)
    return [out / n for n in ("lineage.csv", "summary.csv", "pbt.png", "pbt.yaml")] + [best_dir]
