"""Post-processing callbacks for the generated source, under upstream TileLang's global function names.

A callback registered (tvm_ffi.register_global_func, or tilelang.engine.register_musa_postproc) under
`tilelang_callback_musa_postproc` is called as `f(code, target) -> code` on the device part of each newly generated
MUSA source (the template includes and the kernels: what `get_kernel_source()` shows); one under
`tilelang_callback_c_host_postproc` on the host wrapper. What they return is what is built, stored and shown. As
upstream, a callback is not part of the cache key: it runs when a kernel is generated, not on a cache hit.
"""

from __future__ import annotations

from typing import Any

import tvm_ffi

MUSA_POSTPROC = "tilelang_callback_musa_postproc"
C_HOST_POSTPROC = "tilelang_callback_c_host_postproc"


def _callback(name: str) -> Any:
    return tvm_ffi.get_global_func(name, allow_missing=True)


def _apply(name: str, code: str, target: Any) -> str:
    func = _callback(name)
    if func is None:
        return code
    out = func(code, target)
    if not isinstance(out, str):
        out = str(out) if out is not None else None
    if out is None:
        raise TypeError(f"the {name} callback returned None; it must return the (processed) source")
    return out


def has_postproc() -> bool:
    return _callback(MUSA_POSTPROC) is not None or _callback(C_HOST_POSTPROC) is not None


def postprocess(unit: str, host_at: int, target: Any) -> tuple[str, int]:
    """`unit` (a translation unit whose host wrapper starts at `host_at`) after the registered callbacks, and where
    its host wrapper starts now."""
    device = _apply(MUSA_POSTPROC, unit[:host_at], target)
    host = _apply(C_HOST_POSTPROC, unit[host_at:], target)
    return device + host, len(device)
