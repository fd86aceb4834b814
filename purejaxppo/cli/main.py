"""`purejaxppo`'s entry point: parse, then dispatch to the subcommand's module.

Exit codes: 0 done; 2 bad input (config, env kwargs, paths, a checkpoint that does not
match), reported before anything on disk changes; 3 training diverged (NaN / Inf losses
or parameters; the last finite checkpoint is kept).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from purejaxppo.cli.parser import build_parser
from purejaxppo.cli.pbt import pbt_command
from purejaxppo.cli.policy_commands import collect_command, eval_command, export_command
from purejaxppo.cli.sweep import sweep_command
from purejaxppo.cli.train import train_command

COMMANDS = {
    "train": train_command,
    "sweep": sweep_command,
    "pbt": pbt_command,
    "eval": eval_command,
    "collect": collect_command,
    "export": export_command,
}


def main(argv: Sequence[str] | None = None) -> int:
    """Runs `purejaxppo ARGV...`; returns the exit code (see the module docstring)."""
    parser = build_parser()
    args = vars(parser.parse_args(argv))
    command = args.pop("command")
    if not args.pop("no_compile_cache", False):
        from purejaxppo.platform import enable_compile_cache

        enable_compile_cache()
    return COMMANDS[command](parser, args)


if __name__ == "__main__":
    sys.exit(main())
