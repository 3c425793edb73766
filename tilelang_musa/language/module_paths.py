"""Upstream's submodule paths through `T` (`T.builtin.sync_threads()`, `T.allocate.alloc_shared(...)`).

Upstream's `tilelang.language` is a package whose imported submodules are attributes of it, so scripts reach
functions through them. Our `T` keeps the language's names only (no implementation modules, see __init__), so each
upstream submodule name is a small namespace that resolves to the same flat function: `T.builtin.sync_threads is
T.sync_threads`. A name upstream's module has and ours lacks is an AttributeError naming the whole path."""

# Upstream's submodules of tilelang.language (and of its CUDA dialect, which `T` re-exports) that scripts reach
# through `T.`; names that are also functions of `T` (copy, fill, gemm, reduce, print, ...) stay functions.
UPSTREAM_SUBMODULES = (
    "allocate", "annotations", "atomic", "builtin", "copy_op", "customize", "fastmath", "fill_op", "fp8", "gemm_op",
    "intrinsics", "kernel", "logical", "loop", "math_intrinsics", "pdl", "random", "reduce_op", "scan_op",
    "symbolics", "tile_schedule", "tir", "utils", "warpgroup",
)


class UpstreamModulePath:
    """`T.<submodule>`: attribute lookups resolve to `T`'s flat names."""

    def __init__(self, language, name: str):
        self._language = language
        self._name = name

    def __getattr__(self, attr: str):
        if attr.startswith("__"):
            raise AttributeError(attr)
        try:
            return getattr(self._language, attr)
        except AttributeError:
            raise AttributeError(
                f"T.{self._name}.{attr}: TileLang-MUSA has no `{attr}` (upstream's path "
                f"tilelang.language.{self._name}.{attr}; `T.{self._name}.X` resolves to `T.X`)") from None

    def __dir__(self):
        return list(getattr(self._language, "__all__", ()))

    def __repr__(self):
        return f"<T.{self._name}: upstream's tilelang.language.{self._name}, resolving to T's names>"


def install(language_namespace: dict, language) -> None:
    for name in UPSTREAM_SUBMODULES:
        if name not in language_namespace:
            language_namespace[name] = UpstreamModulePath(language, name)
