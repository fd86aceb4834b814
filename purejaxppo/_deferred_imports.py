"""gymnax's plotting imports, deferred to their first use.

gymnax 1.0.1 imports `matplotlib.pyplot` and `seaborn` (which imports `scipy.stats`) at the
top of its environment modules (`misc/pong.py`, `bsuite/catch.py`, ...), for their `render`
methods only. That is most of `import gymnax`: 1.13 s against 0.26 s without them on the
2-core CPU, paid by every process that builds an env (`purejaxppo train`, each test
subprocess) before its first update.

`install()` (called by `purejaxppo/__init__.py`) puts a one-shot finder on `sys.meta_path`
for the `gymnax` package. While gymnax's package runs, `seaborn` and `matplotlib.pyplot`
are stand-ins in `sys.modules`: modules that import the real one at their first attribute
access (a `render` call). Then the stand-ins leave `sys.modules`, so every other import of
them, before or after, is the real module. A library imported before gymnax keeps its real
module, and gymnax imported before purejaxppo is left as it is.

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

#: The modules gymnax imports at its top level for rendering only.
DEFERRED = ("seaborn", "matplotlib.pyplot")


class _StandIn(types.ModuleType):
    """A module that imports the real one (by its name) at its first attribute access."""

    def __getattr__(self, attr: str):
        return getattr(importlib.import_module(self.__name__), attr)


@contextlib.contextmanager
def _stand_ins() -> Iterator[None]:
    """`DEFERRED`'s modules that are not imported yet as stand-ins in `sys.modules`, removed
    on exit (the modules that imported them keep them)."""
    placed = [name for name in DEFERRED if name not in sys.modules]
    for name in placed:
        sys.modules[name] = _StandIn(name)
    try:
        yield
    finally:
        for name in placed:
            if isinstance(sys.modules.get(name), _StandIn):
                del sys.modules[name]


class _Loader(importlib.abc.Loader):
    """gymnax's own loader, with `_stand_ins` around the package's execution."""

    def __init__(self, loader: importlib.abc.Loader) -> None:
        self._loader = loader

    def __getattr__(self, attr: str):
        if attr == "_loader":  # not set yet: no recursion
            raise AttributeError(attr)
        return getattr(self._loader, attr)

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module: types.ModuleType) -> None:
        # The module keeps gymnax's own loader (importlib.resources and friends read it).
        module.__loader__ = module.__spec__.loader = self._loader
        with _stand_ins():
            self._loader.exec_module(module)


class _GymnaxFinder(importlib.abc.MetaPathFinder):
    """Finds `gymnax` with the finders after it and wraps its loader in `_Loader`; then
    leaves `sys.meta_path`."""

    def find_spec(self, name, path, target=None):
        if name != "gymnax":
            return None
        with contextlib.suppress(ValueError):
            sys.meta_path.remove(self)
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None)
            spec = find(name, path, target) if find is not None else None
            if spec is not None:
                if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                    spec.loader = _Loader(spec.loader)
                return spec
        return None


def install() -> None:
    """Defers gymnax's plotting imports (module docstring), unless gymnax is imported."""
    if "gymnax" in sys.modules or any(isinstance(f, _GymnaxFinder) for f in sys.meta_path):
        return
    sys.meta_path.insert(0, _GymnaxFinder())
