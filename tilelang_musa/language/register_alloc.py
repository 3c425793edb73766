"""Requests to leave the register split between warp groups alone, in upstream's spelling.

On NVIDIA Hopper, warp-specialized kernels move registers from producer to consumer warp groups
(`setmaxnreg`), and these two calls opt a kernel out of that. MUSA never reallocates registers between warp
groups, so the request is already satisfied: both calls are accepted and emit nothing. The calls that *ask* for
a reallocation (T.set_max_nreg, T.inc_max_nreg, T.dec_max_nreg, ...) stay errors (unsupported.py).
"""

from __future__ import annotations

from .builder import kernel_trace


def no_set_max_nreg() -> None:
    """Keep every warp group's register budget as the compiler assigned it. A no-op on MUSA, which never
    reallocates registers between warp groups. Must be used inside `with T.Kernel(...)`.
    Example: T.no_set_max_nreg()"""
    kernel_trace("T.no_set_max_nreg")


def disable_warp_group_reg_alloc() -> None:
    """Same request as `T.no_set_max_nreg()`: no register reallocation between warp groups. A no-op on MUSA,
    where that request is already how every kernel runs. Must be used inside `with T.Kernel(...)`.
    Example: T.disable_warp_group_reg_alloc()"""
    kernel_trace("T.disable_warp_group_reg_alloc")
