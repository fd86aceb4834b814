"""Command line: `purejaxppo train | sweep | pbt | eval | collect | export` (see `--help`).

`parser` builds the parser, `values` parses values and configs, one module per subcommand
runs it, and `main` only dispatches (the `purejaxppo.cli:main` entry point).
"""

from purejaxppo.cli.main import main
from purejaxppo.cli.values import EXIT_DIVERGED, _parse_value, load_config, parse_grid, parse_random

__all__ = ["EXIT_DIVERGED", "_parse_value", "load_config", "main", "parse_grid", "parse_random"]
