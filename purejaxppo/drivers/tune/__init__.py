"""Bayesian hyperparameter search with Optuna, a batch of trials per compiled program.

`options` declares what a study is asked to do (`TuneOptions`), `space` turns `search=`
specs into Optuna distributions, `objective` the training metrics into a trial's value,
`lanes` holds the compiled side (a static combination's lanes), `study` the storage,
budget and crash safety, `outputs` trials.csv / best.yaml / figures, `scheduler` the ask /
train / tell loop over the lanes, and `driver` the `tune` function (see its module
docstring for the model).
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["TuneOptions", "TuneResult", "check_tune", "tune"]

# Imported on first use (PEP 562): the command line checks a request (`space`, `study`)
# without importing the driver's JAX programs.
_HOMES = {
    "tune": "driver",
    "check_tune": "driver",
    "TuneResult": "driver",
    "TuneOptions": "options",
}


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_HOMES[name]}"), name)
