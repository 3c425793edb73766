"""Register-allocation hints of NVIDIA warp-specialized kernels, in upstream's spelling.

On NVIDIA Hopper, warp-specialized kernels move registers from producer to consumer warp groups
(`setmaxnreg`): T.set_max_nreg / T.inc_max_nreg / T.dec_max_nreg ask for it, T.annotate_producer_reg_dealloc /
T.annotate_consumer_reg_alloc set the amounts the compiler's own warp specialization uses, and
T.no_set_max_nreg / T.disable_warp_group_reg_alloc opt out. They change register allocation only, never results.
MUSA has no instruction that moves registers between warp groups (the compiler assigns one budget per kernel), so
every one of them is accepted and emits nothing; the requests that ask for a reallocation say so once per process
(a one-time warning), the opt-outs are silent because what they ask for is how every MUSA kernel runs.
"""

from __future__ import annotations

from typing import Any

from ..diagnostics import warn_once
from .builder import kernel_trace


def _ignored_request(construct: str, reg_count: Any) -> None:
    trace = kernel_trace(construct)
    if not isinstance(reg_count, int) or isinstance(reg_count, bool) or reg_count <= 0:
        raise trace.error(f"{construct}: reg_count must be a positive Python int (registers per thread); "
                          f"got {reg_count!r}")
    where = f"at {trace.loc}: " if trace.loc is not None else ""
    warn_once(f"register-reallocation-{construct}",
              f"{where}{construct}: MUSA has no register reallocation between warp groups (the compiler assigns one "
              "register budget per kernel); the hint is ignored and results are unchanged")


def set_max_nreg(reg_count: int, is_inc: int) -> None:
    """Ask to raise (is_inc=1) or lower (is_inc=0) this warp group's register budget to `reg_count` (Hopper's
    setmaxnreg). A no-op on MUSA, with a one-time warning: registers never move between warp groups there.
    Example: T.set_max_nreg(240, 1)  # in the consumer branch of a hand warp-specialized kernel"""
    if is_inc not in (0, 1):
        raise kernel_trace("T.set_max_nreg").error(f"T.set_max_nreg: is_inc must be 0 or 1; got {is_inc!r}")
    _ignored_request("T.set_max_nreg", reg_count)


def inc_max_nreg(reg_count: int) -> None:
    """T.set_max_nreg(reg_count, 1): a no-op on MUSA (one-time warning).
    Example: T.inc_max_nreg(240)"""
    _ignored_request("T.inc_max_nreg", reg_count)


def dec_max_nreg(reg_count: int) -> None:
    """T.set_max_nreg(reg_count, 0): a no-op on MUSA (one-time warning).
    Example: T.dec_max_nreg(24)"""
    _ignored_request("T.dec_max_nreg", reg_count)


def annotate_producer_reg_dealloc(reg_count: int = 24) -> None:
    """The producer warp group's register budget for the compiler's warp specialization. A no-op on MUSA
    (one-time warning).
    Example: T.annotate_producer_reg_dealloc(40)"""
    _ignored_request("T.annotate_producer_reg_dealloc", reg_count)


def annotate_consumer_reg_alloc(reg_count: int = 240) -> None:
    """The consumer warp groups' register budget for the compiler's warp specialization. A no-op on MUSA
    (one-time warning).
    Example: T.annotate_consumer_reg_alloc(232)"""
    _ignored_request("T.annotate_consumer_reg_alloc", reg_count)


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
