"""Sweeps: every (seed x setting) combination of a grid / random search as one program.

`settings` expands grids and random draws; `program` holds the compiled side (chunks and
their files); `results` the tables, files and logging; `driver` the `sweep` function.
"""

from purejaxppo.drivers.settings import (
    DISTRIBUTIONS,
    UNSWEEPABLE,
    check_field,
    expand_grid,
    make_settings,
    sample_random,
)
from purejaxppo.drivers.sweeps.driver import sweep
from purejaxppo.drivers.sweeps.results import SweepResult, log_sweep, write_sweep

__all__ = [
    "DISTRIBUTIONS",
    "UNSWEEPABLE",
    "SweepResult",
    "check_field",
    "expand_grid",
    "log_sweep",
    "make_settings",
    "sample_random",
    "sweep",
    "write_sweep",
]
