"""Population-based training (Jaderberg et al. 2017, arXiv:1711.09846) as one program.

`search` holds the search space and its operators (selection, mutation), `options` the
static options and the members' keys, `program` the compiled generation program,
`results` `PBTResult` and its files, `storage` the population checkpoints, and `driver`
the `pbt` function (see its module docstring for the algorithm). A search over static
fields (`static`: `hidden_sizes`, `num_minibatches`, `update_epochs`, `num_steps`) runs in
`groups` instead: one program per group of members, generations on the host, with the
weight transfer of `networks.evolve`.
"""

from purejaxppo.drivers.population.driver import pbt
from purejaxppo.drivers.population.options import PBTOptions
from purejaxppo.drivers.population.results import PBTResult, write_best_run, write_pbt

__all__ = ["PBTOptions", "PBTResult", "pbt", "write_best_run", "write_pbt"]
