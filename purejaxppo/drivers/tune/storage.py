"""Where a `tune` study is stored: its storage URL, checked before anything runs, and
recorded without its password.

* `check_storage` refuses in one line, naming the URL, what cannot be used: not a
  database URL, an SQLite file in a directory that does not exist, a database driver that
  is not installed, a server that does not answer. It creates nothing.
* Storage URLs are written to disk (request.yaml) and shown in messages with their
  password hidden (`hidden_url`); a resumed tune gets it back from the URL given again or
  from `PASSWORD_ENV` (`with_password`).
* `journal:PATH` (`journal:///abs/study.log`) is Optuna's `JournalStorage` in a file with
  `JournalFileOpenLock`, which holds on NFS, where SQLite's locks do not: a study shared
  over a cluster's file system. It has no heartbeats (a dead worker's trials are failed
  by `--resume OUT` of that worker, not by the others).
* `default_url` is an output directory's SQLite file, `in_memory` tells a database that
  lives in the process, and `file_lock` is the lock beside an SQLite file under which
  workers create its tables and ask for trials (`study.Budget`).
* `disk_full_as_os_error`: a full disk under the storage (SQLite's "database or disk is
  full", wrapped by SQLAlchemy and Optuna's `StorageInternalError`) is an
  `OSError(ENOSPC)` naming the storage: every finished trial is in it, and the tune
  continues with --resume once there is space.
"""

from __future__ import annotations

import contextlib
import errno
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

#: The environment variable that gives a recorded storage URL its password back.
PASSWORD_ENV = "PUREJAXPPO_STORAGE_PASSWORD"
#: What a hidden password reads as in a recorded URL (SQLAlchemy's rendering).
HIDDEN = "***"


def parse_url(url: str) -> Any:
    """SQLAlchemy's `URL` of `url`, or None when it is not one."""
    try:
        import sqlalchemy

        return sqlalchemy.engine.make_url(url)
    except Exception:
        return None


def hidden_url(url: str) -> str:
    """`url` with its password, if any, replaced by `HIDDEN`, e.g.
    "postgresql://tuner:***@host/db" (what messages show and files record); a URL without
    a password, or a string that is not a URL, as given."""
    parsed = parse_url(url)
    if parsed is None or parsed.password is None:
        return str(url)
    return parsed.render_as_string(hide_password=True)


shown_url = hidden_url  # the name the messages use


def password_hidden(url: str | None) -> bool:
    """Whether `url` is a recorded URL whose password `hidden_url` hid."""
    parsed = None if url is None else parse_url(url)
    return parsed is not None and parsed.password == HIDDEN


def with_password(recorded: str, given: str | None, environ: Mapping[str, str]) -> str:
    """The storage URL of a resumed tune: `recorded` (from request.yaml, password hidden)
    with its password back, from `given` (the URL passed again, which must be the same
    storage) or else from `environ[PASSWORD_ENV]`; `recorded` as is when it hides none.

    Raises:
      ValueError: one line: `given` names another storage, or no password was given
        (saying how to give it).
    """
    if given is not None and hidden_url(given) != hidden_url(recorded):
        raise ValueError(
            f"--storage {hidden_url(given)!r} is not the recorded storage {recorded!r}: "
            "pass the same URL (with its password), or drop --storage"
        )
    if not password_hidden(recorded):
        return recorded
    if given is not None and parse_url(given).password not in (None, HIDDEN):
        return given
    password = environ.get(PASSWORD_ENV)
    if not password:
        raise ValueError(
            f"storage {recorded!r} needs its password, which tune does not record: pass "
            f"--storage with the whole URL again, or set {PASSWORD_ENV}"
        )
    parsed = parse_url(recorded).set(password=password)
    return parsed.render_as_string(hide_password=False)


def default_url(out: str | Path) -> str:
    """The default storage of an output directory: `sqlite:///OUT/study.db`."""
    return f"sqlite:///{Path(out).resolve() / 'study.db'}"


def in_memory(url: str | None) -> bool:
    """Whether `url` is a database that lives in the process (None, `sqlite://`,
    `sqlite:///:memory:`, an SQLite URI with `mode=memory`)."""
    if url is None:
        return True
    parsed = parse_url(url)
    if parsed is None or parsed.get_backend_name() != "sqlite":
        return False
    database = parsed.database or ""
    return database in ("", ":memory:") or "mode=memory" in database + str(parsed.query)


#: The scheme of Optuna's JournalStorage in a file: `journal:PATH`.
JOURNAL = "journal:"


def journal_file(url: str | None) -> Path | None:
    """The file of a `journal:PATH` URL (`journal:///abs/study.log`, `journal:rel.log`),
    absolute; None for another storage."""
    if url is None or not str(url).startswith(JOURNAL):
        return None
    rest = str(url)[len(JOURNAL) :]
    rest = rest[2:] if rest.startswith("//") else rest
    return Path(rest).expanduser().resolve() if rest.strip() else Path()


def sqlite_file(url: str) -> Path | None:
    """The database file of an SQLite URL (None: another database, or in memory)."""
    parsed = parse_url(url)
    if parsed is None or parsed.get_backend_name() != "sqlite" or in_memory(url):
        return None
    return Path(parsed.database).expanduser().resolve()


def file_lock(url: str | None) -> Any:
    """The lock beside an SQLite file (`FILE.lock`) or a journal (`FILE.tune-lock`); a null
    context for other storages."""
    import filelock

    journal = journal_file(url)
    if journal is not None:  # `FILE.lock` is the journal's own lock (JournalFileOpenLock)
        return filelock.FileLock(f"{journal}.tune-lock")
    path = None if url is None else sqlite_file(url)
    return filelock.FileLock(f"{path}.lock") if path else contextlib.nullcontext()


def check_storage(url: str) -> None:
    """Raises a one-line `ValueError` naming `url` when the storage cannot be used: not a
    database URL, an SQLite file in a directory that does not exist, a database driver
    that is not installed, a server that does not answer. Creates nothing."""
    import sqlalchemy

    shown = shown_url(url)
    journal = journal_file(url)
    if journal is not None:
        if journal == Path() or journal.is_dir():
            raise ValueError(f"storage {shown!r}: name a file, e.g. journal:///shared/study.log")
        if not journal.parent.is_dir():
            raise ValueError(f"storage {shown!r}: no directory {journal.parent} for its journal")
        return
    try:
        parsed = sqlalchemy.engine.make_url(url)
    except Exception as err:
        raise ValueError(f"storage {shown!r}: not a database URL ({err})") from None
    if parsed.get_backend_name() == "sqlite":
        path = sqlite_file(url)
        if path is not None and not path.parent.is_dir():
            raise ValueError(f"storage {shown!r}: no directory {path.parent} for its SQLite file")
        return
    engine = None
    try:
        engine = sqlalchemy.create_engine(url)
        with engine.connect():
            pass
    except Exception as err:
        first = (str(err).strip().splitlines() or [type(err).__name__])[0][:300]
        raise ValueError(f"storage {shown!r}: cannot connect ({first})") from None
    finally:
        if engine is not None:
            engine.dispose()


#: What the databases say when the disk under them is full (SQLite's SQLITE_FULL,
#: PostgreSQL's disk_full 53100), besides an `OSError(ENOSPC)` in the chain.
DISK_FULL_WORDS = ("database or disk is full", "No space left on device", "could not extend file")


def disk_full(err: BaseException) -> bool:
    """Whether `err` or an exception in its chain (causes, contexts, SQLAlchemy's `orig`)
    is ENOSPC / EDQUOT or a database's "disk is full"."""
    seen: set[int] = set()
    stack = [err]
    while stack:
        e = stack.pop()
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        if isinstance(e, OSError) and e.errno in (errno.ENOSPC, errno.EDQUOT):
            return True
        if any(words in str(e) for words in DISK_FULL_WORDS):
            return True
        stack += [e.__cause__, e.__context__, getattr(e, "orig", None)]
    return False


@contextlib.contextmanager
def disk_full_as_os_error(url: str | None) -> Iterator[None]:
    """Re-raises a full disk (`disk_full`) as one `OSError(ENOSPC)` naming the study's
    storage (`url`, its password hidden) and the first line of the original error."""
    try:
        yield
    except Exception as err:
        if not disk_full(err) or (isinstance(err, OSError) and err.errno == errno.ENOSPC):
            raise
        where = "the study's storage" if url is None else f"the study's storage {hidden_url(url)}"
        first = next((str(e).strip() for e in chain(err) if str(e).strip()), type(err).__name__)
        message = f"No space left on device ({where}: {first.splitlines()[0][:200]})"
        raise OSError(errno.ENOSPC, message) from None


def chain(err: BaseException) -> Iterator[BaseException]:
    """`err` and its causes, innermost (the database's own words) first."""
    chain = []
    while err is not None and err not in chain:
        chain.append(err)
        err = getattr(err, "orig", None) or err.__cause__ or err.__context__
    return reversed(chain)
