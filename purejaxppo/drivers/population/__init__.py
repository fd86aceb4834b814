"""Population-based training (Jaderberg et al. 2017, arXiv:1711.09846) as one program.

`search` holds the search space and its operators (selection, mutation), `options` the
static options and the members' keys, `program` the compiled generation program,
`results` `PBTResult` and its files, `storage` the population checkpoints, and `driver`
the `pbt` function (see its module docstring for the algorithm). A search over static
fields (`static`: `hidden_sizes`, `num_minibatches`, `update_epochs`, `num_steps`) runs in
`groups` instead: one program per group of members, generations on the host, with the
weight transfer of `networks.evolve`.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["PBTOptions", "PBTResult", "check_pbt", "pbt", "write_best_run", "write_pbt"]

# Imported on first use (PEP 562), so that `purejaxppo.drivers.population.static` (the CLI's
# checks of a search) can be imported without the driver, which starts JAX's backend:
# `pbt --devices N` sets the CPU device count after those checks.
_HOMES = {
    "pbt": "driver",
    "check_pbt": "driver",
    "PBTOptions": "options",
    "PBTResult": "results",
    "write_best_run": "results",
    "write_pbt": "results",
}


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_HOMES[name]}"), name)
