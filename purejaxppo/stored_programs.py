"""A run's programs kept on disk as serialized `jax.export`s, so that the next
`purejaxppo train`, `sweep` or `tune` of the same config skips tracing and lowering them:
a single run's init and segments (`drivers.program.local_program`), and those of `[R]`
runs split over the devices (`--num-seeds`, a sweep's groups, tune's lanes:
`drivers.seeds`, `drivers.sweeps.groups`, `drivers.tune.lanes`, through
`parallel.make_runs_program(..., stored=...)`).

JAX's persistent compile cache (`platform.enable_compile_cache`) skips XLA's compile on
a second launch, but its key is computed from the lowered module, so every launch still
traces and lowers the run's init and its first segment: about half of CartPole's ~3 s
from launch to first update on a 2-core CPU (`docs/benchmarks.md`, "Launch to first
update"). Here a program is exported once (`jax.export.export`: traced and lowered), its
bytes are written under the store's directory, and every launch with the same key loads
them (`jax.export.deserialize`) and calls them (`Exported.call` under `jax.jit`, whose
compile JAX's cache then loads). The launch that exports calls the deserialized bytes
too, so a run computes the same bits whether its program came from disk or not.

The key (SHA-256) is of what the traced program is a function of, as far as a process
can tell before tracing it: the program's name (the init, a segment of N updates), the
config (its `repr`), the arguments' tree and leaves (shapes, dtypes, weak types, PRNG
key implementations, and the mesh and spec of those split over devices), JAX's and
jaxlib's versions, JAX's config values (less its cache settings), `XLA_FLAGS`, and the
device's platform and kind. The Python code that ran
while tracing is checked instead: an entry records every module file loaded when it was
exported (path, size, modification time in ns) and is used only when none of them
changed and every module loaded now is among them (a user module of `--import`, say).
A missing, stale or unreadable entry is exported again and replaced (atomically: a
partial file, then `os.replace`); a store that cannot be written runs the export from
memory.

Not stored (plain `jax.jit`): programs with host calls (EnvPool, gymnasium, a
`jax.pure_callback`: `jax.export` refuses their custom calls), and a config or an
argument tree whose `repr` names an object by its address; a warm start of a single run
(its parameters are constants of the init) and a run over several processes
(`directory_for`). Entries are never removed (a few hundred KB each); deleting the
directory is always safe.

On only inside `store_in(directory)`: the `purejaxppo` command run as a program
(`cli.main` with the process's own arguments) puts it under the compile cache's
directory (`platform.PROGRAMS_SUBDIRECTORY`; off with `--no-compile-cache`). Never by
default from Python: a notebook cell redefined, or a function patched in place
(`monkeypatch`), is in no file an entry records.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import os
import pickle
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import jax

from purejaxppo import compiled

__all__ = ["directory_for", "program", "store_in", "stored_in"]

#: Changes whenever an entry's files change their meaning.
_FORMAT = 1
_store: list[Path | None] = [None]


@contextlib.contextmanager
def store_in(directory: Path | None) -> Iterator[None]:
    """Within the block, `program` keeps its exports under `directory` (None: off)."""
    previous, _store[0] = _store[0], directory
    try:
        yield
    finally:
        _store[0] = previous


def stored_in() -> Path | None:
    """The store's directory now (None: off)."""
    return _store[0]


def directory_for(*, host_calls: bool, warm_start: bool) -> Path | None:
    """The store's directory for a run's programs (`stored_in()`), or None (plain
    `jax.jit`) for an env the program calls on the host (`kinds.EnvKind.host_calls`:
    `jax.export` refuses those calls, after a trace that would be wasted), for a warm
    start (its parameters are constants of the init) and over several processes (each
    would export and write the same entries)."""
    if host_calls or warm_start or jax.process_count() > 1:
        return None
    return stored_in()


def program(
    name: str,
    fn: Callable,
    config: Any,
    directory: Path | None,
    *,
    once: bool = False,
    placement: Any = None,
) -> Callable:
    """`jax.jit(fn)` (`compiled.jit_once(fn)` when `once`: compiled for one call), whose
    programs are exported to and loaded from the store in `directory` (None: plain
    `jax.jit`; see the module docstring).

    Args:
      name: the program's name in the key (e.g. "init", "segment/8"): two programs of one
        config must have different names.
      fn: a traceable function whose arguments are pytrees of JAX arrays (typed PRNG keys
        allowed), and the whole of whose traced program is decided by `config`, the
        arguments' shapes and dtypes, and the code in the files of loaded modules.
      config: the run's config (`PPOConfig`): its `repr` is part of the key.
      directory: the store's directory (`stored_in()` for the one now), created when
        the first program is stored.
      once: compile the program with `compiled.ONCE_COMPILER_OPTIONS` (a run's init).
      placement: for a program over several devices (a `shard_map`, which an export
        keeps for that many devices), the arguments' shardings (a pytree prefix of
        them, e.g. the `NamedSharding`s of `shard_map`'s `in_specs`): the stored
        program's arguments are placed so (`jax.device_put`) before it is called or
        lowered, as `jax.jit(fn)` would lay them out itself.

    Returns:
      `fn`'s jitted program: called, it has `fn`'s signature and outputs (bitwise
      `jax.jit(fn)`'s: `tests/test_stored_programs.py`); `lower(*args)` (when not `once`) is
      `jax.jit`'s, for a compile ahead of the call. Under a transformation (an
      enclosing `jit`, `eval_shape`) it is `jax.jit(fn)`.

    Raises:
      What `jax.jit(fn)` raises when it traces or compiles (a program `jax.export`
      refuses is traced again as `jax.jit(fn)`); never an error of the store itself (an
      entry that cannot be read is exported again, one that cannot be written is not
      kept).
    """
    if directory is None or " at 0x" in repr(config):
        return compiled.jit_once(fn) if once else jax.jit(fn)
    return _Stored(name, fn, config, directory, once, placement)


class _Stored:
    """`program`'s result with the store on: one program per argument signature."""

    def __init__(
        self, name: str, fn: Callable, config: Any, directory: Path, once: bool, placement: Any
    ):
        self.name, self.fn, self.config = name, fn, config
        self.directory, self.once, self.placement = directory, once, placement
        self.jitted = jax.jit(fn)  # under a transformation
        self.programs: dict[Any, Callable] = {}

    def _program(self, args: tuple) -> tuple[Callable, tuple]:
        """The program for `args`, and `args` placed as it takes them."""
        leaves, tree = jax.tree.flatten(args)
        if any(isinstance(x, jax.core.Tracer) for x in leaves):
            return self.jitted, args
        if self.placement is not None:
            args = jax.device_put(args, self.placement)
            leaves = jax.tree.leaves(args)
        signature = (tree, *(compiled.signature(x) for x in leaves))
        if signature not in self.programs:
            if " at 0x" in repr(tree):  # an object by its address: no key across processes
                self.programs[signature] = compiled.jit_once(self.fn) if self.once else self.jitted
            else:
                entry = _Entry(self.directory, self.name, self.config, tree, leaves)
                self.programs[signature] = _through(entry, self.fn, args, self.once)
        return self.programs[signature], args

    def __call__(self, *args: Any) -> Any:
        program, args = self._program(args)
        return program(*args)

    def lower(self, *args: Any) -> Any:
        """`jax.jit(fn).lower(*args)`'s counterpart: the stored program, lowered."""
        program, args = self._program(args)
        return program.lower(*args)


def _through(entry: _Entry, fn: Callable, args: tuple, once: bool) -> Callable:
    """`fn` as the call of its export: loaded from `entry`, or exported and stored."""
    loaded = entry.load()
    if loaded is None:
        try:
            loaded = entry.export(fn, args)
        except Exception:  # refused by `jax.export` (a host callback, a custom call with
            # no compatibility guarantee): traced as `jax.jit`, which raises the program's
            # own errors, if any, as it would have
            return compiled.jit_once(fn) if once else jax.jit(fn)
    exported, out_tree, out_impls = loaded
    in_impls = entry.impls

    def wrapped(*args: Any) -> Any:
        outs = exported.call(*_raw(jax.tree.leaves(args), in_impls))
        return jax.tree.unflatten(out_tree, _typed(list(outs), out_impls))

    return compiled.jit_once(wrapped) if once else jax.jit(wrapped)


def _impl(x: Any) -> str | None:
    """A leaf's PRNG key implementation ("threefry2x32"), None for another array."""
    if jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key):
        return str(jax.random.key_impl(x))
    return None


def _placement(x: Any) -> str:
    """How a leaf is laid out, as far as the program depends on it: a `NamedSharding`'s
    mesh axes and spec (a program of `[R]` runs split over D devices is exported for D),
    "" on one device."""
    sharding = getattr(x, "sharding", None)
    if isinstance(sharding, jax.sharding.NamedSharding):
        return f"{dict(sharding.mesh.shape)} {sharding.spec}"
    return "" if sharding is None or len(sharding.device_set) == 1 else repr(sharding)


def _raw(leaves: list, impls: list[str | None]) -> list:
    """The leaves with each PRNG key as its key data (uint32 `[..., 2]` for threefry)."""
    return [x if i is None else jax.random.key_data(x) for x, i in zip(leaves, impls, strict=True)]


def _typed(leaves: list, impls: list[str | None]) -> list:
    """`_raw`'s inverse: each key's data wrapped as a typed key of its implementation."""
    return [
        x if i is None else jax.random.wrap_key_data(x, impl=i)
        for x, i in zip(leaves, impls, strict=True)
    ]


def _loaded_files() -> dict[str, list[int]]:
    """Every loaded module's file -> [size, mtime_ns] (files that are not on disk left
    out: `<stdin>`, a zip's)."""
    files = {}
    for module in list(sys.modules.values()):
        path = getattr(module, "__file__", None)
        if isinstance(path, str):
            with contextlib.suppress(OSError):
                stat = os.stat(path)
                files[path] = [stat.st_size, stat.st_mtime_ns]
    return files


def _unchanged(recorded: dict[str, list[int]]) -> bool:
    """Whether the files `recorded` are as they were, and hold every module loaded now."""
    now = _loaded_files()
    if any(recorded.get(path) != stat for path, stat in now.items()):
        return False
    for path, stat in recorded.items():
        if path not in now:
            try:
                seen = os.stat(path)
            except OSError:
                return False
            if [seen.st_size, seen.st_mtime_ns] != stat:
                return False
    return True


class _Entry:
    """One program's place in the store: `<key>.jaxexport` (the serialized export) and
    `<key>.json` (its output's tree, key implementations, files and checksum)."""

    def __init__(self, directory: Path, name: str, config: Any, tree: Any, leaves: list) -> None:
        self.impls = [_impl(x) for x in leaves]
        raw = jax.eval_shape(lambda xs: _raw(xs, self.impls), leaves)
        self.avals = [jax.ShapeDtypeStruct(x.shape, x.dtype, weak_type=x.weak_type) for x in raw]
        device = jax.devices()[0]
        described = {
            "format": _FORMAT,
            "name": name,
            "config": repr(config),
            "tree": repr(tree),
            "leaves": [[list(a.shape), str(a.dtype), a.weak_type] for a in self.avals],
            "placements": [_placement(x) for x in leaves],
            "impls": self.impls,
            "jax": [jax.__version__, getattr(jax.lib, "__version__", "")],  # jaxlib's
            "jax_config": {
                k: repr(v) for k, v in sorted(jax.config.values.items()) if "cache" not in k
            },
            "xla_flags": os.environ.get("XLA_FLAGS", ""),
            "device": [device.platform, device.device_kind, device.client.platform_version],
        }
        key = hashlib.sha256(json.dumps(described, sort_keys=True).encode()).hexdigest()
        self.blob = directory / f"{key}.jaxexport"
        self.meta = directory / f"{key}.json"

    def load(self) -> tuple[Any, Any, list] | None:
        """The stored export, None when missing, stale or unreadable."""
        try:
            meta = json.loads(self.meta.read_text())
            if meta["format"] != _FORMAT or not _unchanged(meta["files"]):
                return None
            data = self.blob.read_bytes()
            if hashlib.sha256(data).hexdigest() != meta["sha256"]:
                return None
            out_tree = pickle.loads(base64.b64decode(meta["out_tree"]))
            return jax.export.deserialize(bytearray(data)), out_tree, meta["out_impls"]
        except Exception:  # a partial or foreign entry is exported again
            return None

    def export(self, fn: Callable, args: tuple) -> tuple[Any, Any, list]:
        """Exports `fn` at `args`' leaves and stores it (when the store can be written);
        returns the deserialized export, its output's tree and key implementations."""
        tree = jax.tree.structure(args)
        found: dict[str, Any] = {}

        def flat(*raw: Any) -> list:
            args = jax.tree.unflatten(tree, _typed(list(raw), self.impls))
            out_leaves, found["tree"] = jax.tree.flatten(fn(*args))
            found["impls"] = [_impl(x) for x in out_leaves]
            return _raw(out_leaves, found["impls"])

        data = jax.export.export(jax.jit(flat))(*self.avals).serialize()
        meta = {
            "format": _FORMAT,
            "sha256": hashlib.sha256(data).hexdigest(),
            "out_impls": found["impls"],
            "files": _loaded_files(),
        }
        with contextlib.suppress(OSError, pickle.PicklingError, TypeError, AttributeError):
            meta["out_tree"] = base64.b64encode(pickle.dumps(found["tree"])).decode()
            self.blob.parent.mkdir(parents=True, exist_ok=True)
            _write(self.blob, bytes(data))  # the export, then the entry that points at it
            _write(self.meta, json.dumps(meta).encode())
        return jax.export.deserialize(bytearray(data)), found["tree"], found["impls"]


def _write(path: Path, data: bytes) -> None:
    """`data` to `path` atomically (a partial file beside it, then `os.replace`)."""
    partial = path.with_name(f".{path.name}.{os.getpid()}.partial")
    try:
        partial.write_bytes(data)
        os.replace(partial, path)
    finally:
        partial.unlink(missing_ok=True)
