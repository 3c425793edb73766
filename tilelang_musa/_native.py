"""Loads the C++ library once, after tvm: static initialisers register the `musa` TargetKind and the
`tilelang_musa.*` global functions (device printer) with the tvm-ffi registry."""

from __future__ import annotations

import ctypes
from functools import cache

import tvm  # noqa: F401  (libtvm_compiler must be loaded first: the library links against it)
import tvm_ffi

from ._paths import native_library


@cache
def load() -> ctypes.CDLL:
    return ctypes.CDLL(str(native_library()), mode=ctypes.RTLD_GLOBAL)


def get_global_func(name: str):
    load()
    func = tvm_ffi.get_global_func(name, allow_missing=True)
    if func is None:
        raise RuntimeError(f"tilelang_musa: the native library does not define `{name}`; rebuild the package")
    return func
