"""Registering postproc callbacks for the generated source (upstream's `tilelang.engine.callback`).

On MUSA two sources are generated: the device part (`register_musa_postproc`) and the C++ host wrapper
(`register_c_postproc`); jit/postproc.py applies them. CUDA, HIP and Metal code is never generated here, so their
registrations are importable (portable scripts import them) but raise, rather than register a callback that
never runs.
"""

from __future__ import annotations

from typing import Callable

import tvm_ffi

from ..errors import UnsupportedError
from ..jit.postproc import C_HOST_POSTPROC, MUSA_POSTPROC

Callback = Callable[[str, object], str]


def register_musa_postproc(func: Callback, override: bool = True) -> None:
    """Call `func(code, target) -> code` on the device part of every MUSA source generated from now on."""
    tvm_ffi.register_global_func(MUSA_POSTPROC, f=func, override=override)


def register_c_postproc(func: Callback, override: bool = True) -> None:
    """Call `func(code, target) -> code` on the host wrapper of every MUSA source generated from now on."""
    tvm_ffi.register_global_func(C_HOST_POSTPROC, f=func, override=override)


def _not_generated(language: str) -> Callable[..., None]:
    def register(func: Callback = None, override: bool = True) -> None:
        raise UnsupportedError(f"TileLang-MUSA generates no {language} code, so a {language} postproc callback would "
                               "never run; register_musa_postproc_callback (device code) or "
                               "register_c_postproc_callback (host wrapper) are the MUSA ones")

    register.__name__ = f"register_{language.lower()}_postproc"
    return register


register_cuda_postproc = _not_generated("CUDA")
register_hip_postproc = _not_generated("HIP")
register_metal_postproc = _not_generated("Metal")


def _decorator(register: Callable[[Callback, bool], None]) -> Callable:
    """`@deco`, `@deco()` and `@deco(override=False)` over `register`, as upstream."""

    def decorator(func: Callback | bool | None = None, override: bool = True):
        if callable(func):
            register(func, override)
            return func
        if func is None or isinstance(func, bool):
            chosen = func if isinstance(func, bool) else override

            def apply(fn: Callback) -> Callback:
                register(fn, chosen)
                return fn

            return apply
        raise TypeError(f"{register.__name__}_callback: decorate a function, or call with override=")

    decorator.__name__ = f"{register.__name__}_callback"
    return decorator


register_musa_postproc_callback = _decorator(register_musa_postproc)
register_c_postproc_callback = _decorator(register_c_postproc)
register_cuda_postproc_callback = _decorator(register_cuda_postproc)
register_hip_postproc_callback = _decorator(register_hip_postproc)
register_metal_postproc_callback = _decorator(register_metal_postproc)
