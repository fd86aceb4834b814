"""`purejaxppo check`: the probe battery and the invariants, run with a config."""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path
from typing import Any

from purejaxppo.cli.options import CONFIG, NO_PROGRESS, _flag, option, pop_options
from purejaxppo.cli.values import load_config

#: Exit code of a check with a failed row (0: every row passed; 2: a refused input).
EXIT_FAILED_ROW = 1


@dataclasses.dataclass
class CheckOptions:
    """`purejaxppo check`."""

    config: Path | None = option(type=Path, help=CONFIG)
    seeds: int = option(8, type=int, metavar="K", help="seeds per probe, vmapped (default 8)")
    json: bool = _flag("print the report as JSON on stdout (the table goes nowhere)")
    row: list[str] = option(
        action="append",
        metavar="NAME",
        help="run only this row (repeatable; names as in the report, e.g. 'discount')",
    )
    no_invariants: bool = _flag("skip the short run on the config's own env")
    no_progress: bool = _flag(NO_PROGRESS)


def check_command(parser: argparse.ArgumentParser, args: dict[str, Any]) -> int:
    """`purejaxppo check`: exit 0 when every row passes, 1 when one fails, 2 on bad input."""
    o = pop_options(CheckOptions, args)
    try:
        config = load_config(o.config, args)
        if isinstance(o.seeds, bool) or o.seeds < 1:
            raise ValueError(f"--seeds must be >= 1, got {o.seeds}")
        from purejaxppo.drivers.check import check

        report = check(
            config,
            seeds=o.seeds,
            seed=config.seed,
            invariants=not o.no_invariants,
            rows=o.row or None,
            progress=not (o.no_progress or o.json),
        )
    except (ValueError, ImportError) as err:
        message = str(err).removeprefix("check: ")
        parser.exit(2, f"purejaxppo: error: check: {message}\n")
    except KeyboardInterrupt:  # nothing is written: stop at once, in one line
        parser.exit(130, "purejaxppo: check: stopped (Ctrl-C); nothing written\n")
    print(report.to_json() if o.json else report)
    sys.stdout.flush()
    return 0 if report.passed else EXIT_FAILED_ROW
