"""`import tilelang` is TileLang-MUSA: this alias package maps `tilelang` and its submodules
(`tilelang.language`, `tilelang.jit`, ...) onto `tilelang_musa`, so upstream-style scripts run unchanged."""

import importlib
import importlib.abc
import importlib.util
import sys

import tilelang_musa as _impl

_PREFIX = "tilelang."


class _AliasFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Resolves `tilelang.X` to the already-importable `tilelang_musa.X` (one module object for both names)."""

    def find_spec(self, fullname, path=None, target=None):
        if not fullname.startswith(_PREFIX):
            return None
        real = "tilelang_musa." + fullname[len(_PREFIX):]
        if importlib.util.find_spec(real) is None:
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec):
        module = importlib.import_module("tilelang_musa." + spec.name[len(_PREFIX):])
        spec.loader_state = module.__spec__  # the import system is about to replace it with this alias spec
        return module

    # `python -m tilelang.X` (runpy) asks the loader for the code and whether it is a package: the real module's.
    def get_code(self, fullname):
        real = importlib.util.find_spec("tilelang_musa." + fullname[len(_PREFIX):])
        return real.loader.get_code(real.name)

    def is_package(self, fullname):
        real = importlib.util.find_spec("tilelang_musa." + fullname[len(_PREFIX):])
        return real.submodule_search_locations is not None

    def exec_module(self, module):
        # Put the module's own spec back, or its relative imports would see `__package__ != __spec__.parent` (an
        # ImportWarning, an error under `warnings.simplefilter("error")`).
        module.__spec__ = module.__spec__.loader_state


if not any(isinstance(f, _AliasFinder) for f in sys.meta_path):
    sys.meta_path.insert(0, _AliasFinder())

# Make `tilelang` itself the implementation package's namespace.
_SHARED_DUNDERS = ("__version__", "__getattr__")  # __getattr__: the lazily imported names (tilelang.autotune)
globals().update({k: v for k, v in vars(_impl).items() if not k.startswith("__") or k in _SHARED_DUNDERS})
__all__ = list(getattr(_impl, "__all__", []))
__path__ = []  # a package, so that `import tilelang.language` consults the finder

# Where a name of the package is not its submodule (`tilelang.jit`, the decorator, beside the module `tilelang.jit`),
# register the submodule's alias now: importing `tilelang.jit` later by name then finds it and leaves the package's
# attribute alone, as upstream's `from .jit import jit` does.
for _name, _value in vars(_impl).items():
    _module = sys.modules.get(f"{_impl.__name__}.{_name}")
    if _module is not None and _value is not _module:
        sys.modules.setdefault(_PREFIX + _name, _module)
