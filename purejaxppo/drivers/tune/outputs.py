"""What `tune` writes in its output directory: trials.csv, best.yaml and the figures.

* `trials.csv`: `study.trials_dataframe()`, one row per trial (number, value, state,
  params_*, user_attrs_seed, user_attrs_worker, ...).
* `best.yaml`: the base config with the best completed trial's parameters and `seed`, so
  that `purejaxppo train --config OUT/best.yaml` trains that trial again.
* `optimization_history.png`, `parallel_coordinate.png` and, with two or more searched
  fields and at least `MIN_IMPORTANCE_TRIALS` completed trials, `param_importances.png`
  (`optuna.visualization.matplotlib`).
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

from purejaxppo.config import PPOConfig
from purejaxppo.drivers.report import write_atomic
from purejaxppo.drivers.tune.space import SearchSpace, import_optuna

#: Completed trials needed before the parameter importances are drawn.
MIN_IMPORTANCE_TRIALS = 4


def _complete(study: Any) -> list[Any]:
    states = import_optuna().trial.TrialState
    return study.get_trials(deepcopy=False, states=(states.COMPLETE,))


def best_config(study: Any, config: PPOConfig, space: SearchSpace) -> PPOConfig | None:
    """The base `config` with the best completed trial's parameters and its `seed`
    (None while no trial completed)."""
    if not _complete(study):
        return None
    best = study.best_trial
    return space.config(config, best.params).replace(seed=best.user_attrs["seed"])


def write_outputs(study: Any, config: PPOConfig, space: SearchSpace, out: str | Path) -> list[Path]:
    """Writes trials.csv, best.yaml (once a trial completed) and the figures into `out`
    (atomically); returns the paths written."""
    import yaml

    out = Path(out)
    written = [out / "trials.csv"]
    frame = study.trials_dataframe()
    write_atomic(written[0], lambda p: frame.to_csv(p, index=False))
    best = best_config(study, config, space)
    if best is not None:
        trial = study.best_trial
        header = (
            f"# purejaxppo tune: trial {trial.number} of study {study.study_name!r}, "
            f"value {trial.value!r}\n"
            f"# rerun it: purejaxppo train --config {out / 'best.yaml'}\n"
        )
        text = header + yaml.safe_dump(best.to_dict(), sort_keys=False)
        write_atomic(out / "best.yaml", lambda p: p.write_text(text))
        written.append(out / "best.yaml")
    return written + _figures(study, space, out)


def _figures(study: Any, space: SearchSpace, out: Path) -> list[Path]:
    """The PNGs of `optuna.visualization.matplotlib` that the study has data for."""
    complete = _complete(study)
    if not complete:
        return []
    from purejaxppo.drivers.plots import _pyplot

    plt = _pyplot()  # the Agg backend, selected where every figure is drawn
    import optuna.visualization.matplotlib as figures

    draw = {
        "optimization_history.png": figures.plot_optimization_history,
        "parallel_coordinate.png": figures.plot_parallel_coordinate,
    }
    if len(space.names) >= 2 and len(complete) >= MIN_IMPORTANCE_TRIALS:
        draw["param_importances.png"] = lambda s: figures.plot_param_importances(
            s, evaluator=_importance_evaluator()
        )
    written = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", import_optuna().exceptions.ExperimentalWarning)
        for name, plot in draw.items():
            axes = plot(study)
            figure = getattr(axes, "figure", None) or axes.flat[0].figure
            figure.set_size_inches(8, 5)
            figure.tight_layout()
            write_atomic(out / name, lambda p: figure.savefig(p, dpi=100))  # noqa: B023
            plt.close(figure)
            written.append(out / name)
    return written


def _importance_evaluator() -> Any:
    """fANOVA (Optuna's default) where scikit-learn is installed, else PED-ANOVA."""
    import importlib.util

    importance = import_optuna().importance
    if importlib.util.find_spec("sklearn") is not None:
        return importance.FanovaImportanceEvaluator(seed=0)
    return importance.PedAnovaImportanceEvaluator()
