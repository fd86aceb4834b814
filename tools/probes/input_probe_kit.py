"""The toolkit of the CLI probes (`tools/probes/input_probes.py`): `Probe`, the folder
preparations (`Setup`: `write`, `mkdir`, `both`, `remove`, ...) and `table`, which adds one
probe per row to `PROBES` (`input_probe_cases.py`, `input_probe_outputs.py` and
`input_probe_values.py` hold the rows, added in that order)."""

from __future__ import annotations

import dataclasses
import shlex
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path


@dataclasses.dataclass
class Probe:
    """One misuse. `argv` may hold `{d}` (the probe's folder) and `{run}` (a copy of the
    base run at `{d}/run`, made when an argument names it). `expect`: "error" (refused),
    "ok" (the input is fine: a success) or "either" (either answer is right, if clean).
    `names`: the error line must name one of these (`-` and `_` alike). `intact`: with a
    success, the entries of `{d}` that must stay byte-identical."""

    group: str
    name: str
    argv: list[str]
    setup: Setup | None = None
    expect: str = "error"
    names: tuple[str, ...] = ()
    intact: tuple[str, ...] = ()


PROBES: list[Probe] = []


def probe(group: str, name: str, *argv: str, **kwargs) -> None:
    PROBES.append(Probe(group, name, list(argv), **kwargs))


# ----------------------------------------------------------------- setups
@dataclasses.dataclass(frozen=True)
class Setup:
    """A preparation of a probe's folder, with a stable repr (what it does) for --list."""

    what: str
    make: Callable[[Path], None] = dataclasses.field(compare=False)

    def __call__(self, d: Path) -> None:
        self.make(d)

    def __repr__(self) -> str:
        return self.what


def write(name: str, content: str | bytes, mode: int | None = None) -> Setup:
    def setup(d: Path) -> None:
        path = d / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)
        if mode is not None:
            path.chmod(mode)

    return Setup(f"write({name!r}, {content!r}, mode={mode!r})", setup)


def mkdir(name: str) -> Setup:
    return Setup(f"mkdir({name!r})", lambda d: (d / name).mkdir(parents=True, exist_ok=True))


def both(*setups: Setup) -> Setup:
    def setup(d: Path) -> None:
        for one in setups:
            one(d)

    return Setup(f"both({', '.join(map(repr, setups))})", setup)


def symlink_loop(name: str) -> Setup:
    return Setup(f"symlink_loop({name!r})", lambda d: (d / name).symlink_to(name))


def remove(name: str) -> Setup:
    def setup(d: Path) -> None:
        path = d / name
        shutil.rmtree(path) if path.is_dir() else path.unlink()

    return Setup(f"remove({name!r})", setup)


def run_config(content: str) -> Setup:
    return write("run/config.yaml", content)


def c_yaml(content: str | bytes, mode: int | None = None) -> Setup:
    return write("c.yaml", content, mode)


AFILE = write("afile", "not a folder\n")
EMPTY = mkdir("empty")
FOREIGN = both(write("mine/notes.txt", "my notes\n"), write("mine/data.csv", "a,b\n1,2\n"))
DAMAGED = run_config("num_envs: [4\nbad")
NO_CHECKPOINTS = remove("run/checkpoints")


# ----------------------------------------------------------------- tables
def table(group: str, prefix: Sequence[str], *rows: tuple, suffix: Sequence[str] = ()) -> None:
    """One probe per row `(name, args, names[, setup[, expect[, intact]]])`, its argv
    `prefix + args + suffix`: `args` a shell-quoted string (or a list of words), `names`
    one string or a tuple of them."""

    def one(name, args, names, setup=None, expect="error", intact=()) -> None:
        words = shlex.split(args) if isinstance(args, str) else list(args)
        names = (names,) if isinstance(names, str) else tuple(names)
        argv = [*prefix, *words, *suffix]
        probe(group, name, *argv, setup=setup, expect=expect, names=names, intact=intact)

    for row in rows:
        one(*row)
