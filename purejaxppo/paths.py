"""Output paths checked before anything runs, and operating-system errors as one line.

`check_writable` tries the user's path the way the write will (a probe file in the nearest
existing folder), so `/proc/x.gif`, a path under a file, a read-only mount and a folder
without write permission fail at once with a message naming the user's path, never a
temporary file's. `describe_os_error` turns an `OSError` raised later (also one wrapped by
orbax) into that one line; `is_disk_full` tells a full disk (ENOSPC, EDQUOT) apart: the
command line exits with its own code for it (`cli.values.EXIT_NO_SPACE`).
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import tempfile
from pathlib import Path

#: errno values meaning "the disk (or the user's quota) is full".
DISK_FULL = (errno.ENOSPC, errno.EDQUOT)


def check_writable(path: str | Path, what: str) -> Path:
    """Raises unless a file or folder can be created at `path` (nothing is left behind).

    Args:
      path: the output the command will write (a file, or a folder it will create).
      what: how the user named it, e.g. "--video" or "export --to"; starts the message.

    Raises:
      ValueError: a parent of `path` is a file; or the nearest existing folder above
        `path` does not take a new file (no permission, read-only, /proc, ...), naming
        `path` and the reason.
    """
    path = Path(path)
    parent = path.absolute().parent
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        raise ValueError(f"{what} {path}: {parent} is a file, not a folder")
    try:
        handle, probe = tempfile.mkstemp(prefix=".purejaxppo-probe-", dir=parent)
    except OSError as err:
        raise ValueError(
            f"{what} {path}: cannot write in {parent} ({err.strerror or err})"
        ) from None
    os.close(handle)
    with contextlib.suppress(OSError):
        os.unlink(probe)
    return path


def _os_errors(err: BaseException):
    seen = set()
    while err is not None and id(err) not in seen:
        seen.add(id(err))
        if isinstance(err, OSError):
            yield err
        err = err.__cause__ or err.__context__


def is_disk_full(err: BaseException) -> bool:
    """True when `err`, or an exception it was raised from, is ENOSPC / EDQUOT (orbax
    wraps the `OSError` of its writer threads) or says "No space left on device"."""
    if any(e.errno in DISK_FULL for e in _os_errors(err)):
        return True
    return "No space left on device" in str(err) or "Disk quota exceeded" in str(err)


def describe_os_error(err: BaseException) -> str | None:
    """One line for an `OSError` in `err`'s chain: "<strerror>: <path>", or None when the
    chain holds none."""
    for e in _os_errors(err):
        where = f": {e.filename}" if e.filename else ""
        return f"{e.strerror or type(e).__name__}{where}"
    return None


def check_free_space(directory: str | Path, nbytes: int, what: str) -> None:
    """Raises `OSError(ENOSPC)` before a write of about `nbytes` bytes into `directory`
    (or its nearest existing parent) when the disk has less than twice that free (orbax
    writes a checkpoint into a temporary folder, then renames it; metadata adds a little).
    Checking first means a full disk is reported before orbax's writer threads start, so
    nothing is half-written and no thread traceback is printed."""
    where = Path(directory).absolute()
    while not where.exists():
        where = where.parent
    free = shutil.disk_usage(where).free
    need = 2 * int(nbytes) + 64 * 1024
    if free < need:
        raise OSError(
            errno.ENOSPC,
            f"No space left on device ({what} needs about {need / 2**20:.1f} MiB, "
            f"{free / 2**20:.1f} MiB free)",
            str(directory),
        )
