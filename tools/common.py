"""What the benchmarks and the tools share: the repository's folders, atomic writes,
results-file stamps, Markdown tables and a child process's environment.

`benchmarks.harness` hands these on to the benchmarks; `tools.learning_gate` and
`tools.probes` import them from here. Standard library only (a peer's own virtualenv
imports it through `benchmarks.harness`).
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"


# --- files -------------------------------------------------------------------------------


def atomic_write(path: Path, write: Callable[[str], object]) -> None:
    """Calls `write(tmp)` on a temporary file in `path`'s folder, then renames it into
    place: a reader sees the old file or the new one, never half of one. The file gets
    the mode a plain `open` would give (0666 less the umask)."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=path.suffix)
    os.close(fd)
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o666 & ~umask)  # mkstemp's 0600 would hide results from other users
    try:
        write(tmp)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def write_text(path: Path, text: str) -> None:
    """`atomic_write` of a text file."""
    atomic_write(path, lambda p: Path(p).write_text(text))


def stamp() -> str:
    """The time stamp in results file names: `20261124-024842`."""
    return time.strftime("%Y%m%d-%H%M%S")


# --- Markdown ----------------------------------------------------------------------------


def markdown_table(rows: list[dict], cols: list[str], float_format: str = ".4g") -> list[str]:
    """The lines of a Markdown table of `rows` (dicts) over `cols`; floats as `float_format`."""

    def cell(value) -> str:
        return format(value, float_format) if isinstance(value, float) else str(value)

    return markdown_lines([cols, *([cell(r[c]) for c in cols] for r in rows)])


def markdown_lines(cells: Sequence[Sequence[str]], align: Sequence[str] | None = None) -> list[str]:
    """The lines of a Markdown table whose first row of `cells` is the header. `align`:
    one separator per column (`"---"`, `"--:"`, ...; default `---`)."""
    header, *body = cells
    sep = align or ["---"] * len(header)
    return [
        "| " + " | ".join(map(str, header)) + " |",
        "|" + "|".join(sep) + "|",
        *("| " + " | ".join(map(str, row)) + " |" for row in body),
    ]


# --- child processes ---------------------------------------------------------------------


def env_with_pythonpath(pythonpath: str | None, xla_flags: str = "") -> dict:
    """This process's environment with `pythonpath` prepended to PYTHONPATH and
    `xla_flags` appended to XLA_FLAGS (for a cell's or a peer's own process)."""
    env = dict(os.environ)
    if pythonpath:
        env["PYTHONPATH"] = os.pathsep.join(p for p in (pythonpath, env.get("PYTHONPATH")) if p)
    if xla_flags:
        env["XLA_FLAGS"] = (env.get("XLA_FLAGS", "") + " " + xla_flags).strip()
    return env
