"""What `purejaxppo check` reports: one `CheckRow` per probe or invariant, in a
`CheckReport` that prints as a table and serialises to JSON."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any, NamedTuple

__all__ = ["CheckReport", "CheckRow"]


class CheckRow(NamedTuple):
    """One row of a check.

    Attributes:
      row: the row's name (`"value"`, `"discount"`, `"invariant: approx_kl"`, ...).
      isolates: what the row tests, in a few words.
      expected: the passing range, as text (e.g. `"1.00 +- 0.10"`).
      measured: the median over the row's seeds (NaN when it did not run).
      spread: `(min, max)` over the seeds (NaN, NaN when it did not run).
      passed: True / False; None when the row was skipped.
      points_to: the part of PPO a failure points to.
      note: why a row was skipped, or how the probe was adapted to the config.
      values: the per-seed values, in seed order (empty when it did not run).
      informational: measured and shown, but never fails the check (`passed` is None).
    """

    row: str
    isolates: str
    expected: str
    measured: float
    spread: tuple[float, float]
    passed: bool | None
    points_to: str
    note: str = ""
    values: tuple[float, ...] = ()
    informational: bool = False

    @property
    def status(self) -> str:
        """`"pass"`, `"FAIL"`, `"info"` (measured, not deciding) or `"skip"`."""
        if self.passed is None and self.informational and self.values:
            return "info"
        return {True: "pass", False: "FAIL", None: "skip"}[self.passed]

    def as_dict(self) -> dict[str, Any]:
        """The row as JSON-ready values (NaN as None)."""

        def plain(x: float) -> float | None:
            return None if x is None or math.isnan(x) else round(float(x), 6)

        return {
            "row": self.row,
            "isolates": self.isolates,
            "expected": self.expected,
            "measured": plain(self.measured),
            "min": plain(self.spread[0]),
            "max": plain(self.spread[1]),
            "passed": self.passed,
            "status": self.status,
            "points_to": self.points_to,
            "note": self.note,
            "values": [plain(v) for v in self.values],
        }


class CheckReport(NamedTuple):
    """The rows of one check of a config.

    Attributes:
      env_name: the config's env id.
      seeds: K, the seeds each probe trained (vmapped in one program).
      seed: the base PRNG seed.
      rows: the probe rows, then the invariant rows of the short run on the config's env.
      seconds: wall-clock seconds of the whole check (compiles included).
    """

    env_name: str
    seeds: int
    seed: int
    rows: Sequence[CheckRow]
    seconds: float

    @property
    def passed(self) -> bool:
        """True when no row failed (skipped rows do not fail)."""
        return all(row.passed is not False for row in self.rows)

    @property
    def failed(self) -> list[CheckRow]:
        """The rows that failed, in order."""
        return [row for row in self.rows if row.passed is False]

    def table(self) -> Any:
        """The rows as a `pandas.DataFrame` (one row per check row)."""
        import pandas as pd

        return pd.DataFrame([row.as_dict() for row in self.rows])

    def to_json(self) -> str:
        """The report as JSON: `{"env_name", "seeds", "seed", "passed", "seconds",
        "rows": [CheckRow.as_dict(), ...]}`."""
        return json.dumps(
            {
                "env_name": self.env_name,
                "seeds": self.seeds,
                "seed": self.seed,
                "passed": self.passed,
                "seconds": round(self.seconds, 1),
                "rows": [row.as_dict() for row in self.rows],
            },
            indent=2,
        )

    def __str__(self) -> str:
        """A plain-text table, then one line per failure naming the part of PPO."""
        head = ("row", "status", "measured [min, max]", "expected", "isolates")
        lines = [head]
        for row in self.rows:
            if not row.values:
                measured = "-"
            else:
                lo, hi = row.spread
                measured = f"{row.measured:.3g} [{lo:.3g}, {hi:.3g}]"
            lines.append((row.row, row.status, measured, row.expected, row.isolates))
        widths = [max(len(str(line[i])) for line in lines) for i in range(len(head))]
        text = [
            "  ".join(
                str(cell).ljust(width) for cell, width in zip(line, widths, strict=True)
            ).rstrip()
            for line in lines
        ]
        text.insert(1, "  ".join("-" * width for width in widths))
        for row in self.rows:
            if row.note:
                text.append(f"note: {row.row}: {row.note}")
        verdict = (
            f"{self.env_name}: every row passed ({len(self.rows)} rows, {self.seeds} seeds, "
            f"{self.seconds:.0f} s)"
            if self.passed
            else f"{self.env_name}: {len(self.failed)} of {len(self.rows)} rows FAILED"
        )
        text.append(verdict)
        for row in self.failed:
            text.append(f"  {row.row}: points to {row.points_to}")
        return "\n".join(text)
