"""Imports that gymnax and distrax make at their top level but use only inside functions,
deferred to their first use.

* gymnax 1.0.1 imports `matplotlib.pyplot`, `matplotlib.colors` and `seaborn` (which
  imports `scipy.stats`) at the top of its environment modules (`misc/pong.py`,
  `bsuite/catch.py`, ...), for their `render` methods only. That was most of `import
  gymnax`: 1.13 s against 0.26 s without them on the 2-core CPU.
* distrax 0.1.9 imports tfp-nightly's JAX substrate, whose static-shape helpers
  (`prefer_static`) import tfp's numpy backend, which imports `scipy.special` and
  `scipy.linalg` for its numpy maths, called inside functions only (never on JAX arrays).

Every process that builds an env and a network pays these (`purejaxppo train`, each test
subprocess) before its first update.

`install()` (called by `purejaxppo/__init__.py`) puts a one-shot finder on `sys.meta_path`
for each package of `DEFERRED`. While the package runs, its deferred modules are stand-ins
in `sys.modules`: modules that import the real one at their first attribute access (a
`render` call). Then the stand-ins leave `sys.modules`, so every other import of them,
before or after, is the real module. A library imported before the package keeps its real
module, and a package imported before purejaxppo is left as it is.

`importlib.util.LazyLoader` cannot do this on Python 3.11: the import statement reads the
module's `__spec__`, which loads it at once.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.abc
import sys
import types
from collections.abc import Iterator

#: Per package: the modules it imports at its top level but uses only inside functions.
#: A parent comes before its submodules, which are set as its attributes (`import a.b as
#: c` and `from a import b` read `b` from `a`).
DEFERRED: dict[str, tuple[str, ...]] = {
    "gymnax": ("seaborn", "matplotlib", "matplotlib.pyplot", "matplotlib.colors"),
    "distrax": ("scipy.special", "scipy.linalg"),
}


class _StandIn(types.ModuleType):
    """A module that imports the real one (by its name) at its first attribute access."""

    def __getattr__(self, attr: str):
        if attr == "__path__":  # `from a import b`: then `b` is read as an attribute
            raise AttributeError(attr)
        if sys.modules.get(self.__name__) is self:  # read while its package runs
            del sys.modules[self.__name__]
        return getattr(importlib.import_module(self.__name__), attr)


@contextlib.contextmanager
def _stand_ins(names: tuple[str, ...]) -> Iterator[None]:
    """`names` not imported yet as stand-ins in `sys.modules`, removed on exit (the
    modules that imported them keep them)."""
    placed = [name for name in names if name not in sys.modules]
    for name in placed:
        sys.modules[name] = module = _StandIn(name)
        parent, _, child = name.rpartition(".")
        if isinstance(sys.modules.get(parent), _StandIn):
            setattr(sys.modules[parent], child, module)
    try:
        yield
    finally:
        for name in placed:
            if isinstance(sys.modules.get(name), _StandIn):
                del sys.modules[name]


class _Loader(importlib.abc.Loader):
    """A package's own loader, with `_stand_ins` around the package's execution."""

    def __init__(self, loader: importlib.abc.Loader, deferred: tuple[str, ...]) -> None:
        self._loader, self._deferred = loader, deferred

    def __getattr__(self, attr: str):
        if attr in ("_loader", "_deferred"):  # not set yet: no recursion
            raise AttributeError(attr)
        return getattr(self._loader, attr)

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module: types.ModuleType) -> None:
        # The module keeps its own loader (importlib.resources and friends read it).
        module.__loader__ = module.__spec__.loader = self._loader
        with _stand_ins(self._deferred):
            self._loader.exec_module(module)


class _Finder(importlib.abc.MetaPathFinder):
    """Finds `package` with the finders after it and wraps its loader in `_Loader`; then
    leaves `sys.meta_path`."""

    def __init__(self, package: str) -> None:
        self.package = package

    def find_spec(self, name, path, target=None):
        if name != self.package:
            return None
        with contextlib.suppress(ValueError):
            sys.meta_path.remove(self)
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None)
            spec = find(name, path, target) if find is not None else None
            if spec is not None:
                if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                    spec.loader = _Loader(spec.loader, DEFERRED[name])
                return spec
        return None


def install() -> None:
    """Defers `DEFERRED`'s imports (module docstring) for each package not imported yet."""
    for package in DEFERRED:
        placed = any(isinstance(f, _Finder) and f.package == package for f in sys.meta_path)
        if package not in sys.modules and not placed:
            sys.meta_path.insert(0, _Finder(package))
