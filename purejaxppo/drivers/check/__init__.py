"""`purejaxppo check` / `pjp.check`: is this PPO right?

A battery of probe environments (Andy Jones, "Debugging RL, Without the Agonizing Pain"),
each isolating one part of PPO, trained with the user's config, then a short run on the
config's own env read against invariants. Each row says what it isolates, the expected
and measured values over K vmapped seeds, and on a failure the part of PPO it points to.
"""

from purejaxppo.drivers.check.battery import check, probe_config, row_names
from purejaxppo.drivers.check.report import CheckReport, CheckRow

__all__ = ["CheckReport", "CheckRow", "check", "probe_config", "row_names"]
