"""Warp-level built-ins: `T.get_lane_idx`, `T.get_warp_idx`, `T.get_warp_group_idx`, `T.sync_warp`, and the shuffles `T.shfl_xor`,
`T.shfl_down`, `T.shfl_up`, `T.shfl_sync` (and TVM's spellings `T.tvm_warp_shuffle[_down|_up]`).

The warp is the architecture's: 32 lanes on mp_31/mp_32, 128 on mp_21/mp_22 (`tl::kWarpSize` in common.h, fixed
by the arch being compiled). Lanes count along the block's linear thread id. Shuffles call the CUDA-named MUSA
built-ins with a full 32-bit lane mask; on 128-lane warps their behaviour beyond offset 31 is modelled in the
simulator but unverified on hardware (shared/docs/MUSA_FACTS.md).
"""

from __future__ import annotations

from typing import Any

from tvm import tirx
from tvm.tirx.script import builder as Tb

from .builder import as_expr, expression_trace, kernel_trace, operand_error
from .builder import value as var_value  # a T.alloc_var operand reads as its element

_FULL_MASK = 0xFFFFFFFF


def _warp_template(construct: str, name: str, warp_size: Any) -> Any:
    expression_trace(construct)  # an expression outside a kernel too, as upstream
    if warp_size is None:
        return tirx.call_extern("int32", f"tl::{name}")
    if not isinstance(warp_size, int) or warp_size <= 0:
        raise operand_error(construct, f"{construct}: warp_size={warp_size!r} must be a positive int")
    return tirx.call_extern("int32", f"tl::{name}<{warp_size}>")


def get_lane_idx(warp_size: int | None = None) -> Any:
    """The calling thread's lane in its warp: linear thread id % warp size (the arch's unless given)."""
    return _warp_template("T.get_lane_idx", "get_lane_idx", warp_size)


def get_warp_idx(warp_size: int | None = None) -> Any:
    """The calling thread's warp in the block: linear thread id // warp size (the arch's unless given)."""
    return _warp_template("T.get_warp_idx", "get_warp_idx", warp_size)


def get_warp_idx_sync(warp_size: int | None = None) -> Any:
    """`T.get_warp_idx` (the value is the same in every lane of a warp by construction)."""
    return _warp_template("T.get_warp_idx_sync", "get_warp_idx", warp_size)


def get_warp_group_idx(warp_size: int | None = None, warps_per_group: int | None = None) -> Any:
    """The calling thread's warp group in the block: its warp // `warps_per_group` (4 by default, as upstream: on
    mp_31 a group is 128 threads, one squad)."""
    warps_per_group = 4 if warps_per_group is None else warps_per_group
    if not isinstance(warps_per_group, int) or warps_per_group <= 0:
        raise operand_error("T.get_warp_group_idx",
            f"T.get_warp_group_idx: warps_per_group={warps_per_group!r} must be a positive int")
    return _warp_template("T.get_warp_group_idx", "get_warp_idx", warp_size) // warps_per_group


def sync_warp(mask: int | None = None) -> None:
    """`__syncwarp(mask)`: the lanes of `mask` (all by default) wait for each other."""
    kernel_trace("T.sync_warp")
    args = [] if mask is None else [tirx.const(mask, "uint32")]
    Tb.evaluate(tirx.call_extern("int32", "__syncwarp", *args))


def _shuffle(construct: str, builtin: str, value: Any, lane_arg: Any, width: Any, mask: Any) -> Any:
    expression_trace(construct)
    value = as_expr(var_value(value))
    mask = tirx.const(mask, "uint32") if isinstance(mask, int) else as_expr(var_value(mask))
    args = [mask, value, as_expr(var_value(lane_arg))] + ([] if width is None else [as_expr(var_value(width))])
    return tirx.call_extern(str(value.ty.dtype), builtin, *args)


def shfl_xor(value: Any, offset: Any, width: Any = None, mask: Any = _FULL_MASK) -> Any:
    """`value` of lane `lane ^ offset` (within groups of `width` lanes, the whole warp by default)."""
    return _shuffle("T.shfl_xor", "__shfl_xor_sync", value, offset, width, mask)


def shfl_down(value: Any, offset: Any, width: Any = None, mask: Any = _FULL_MASK) -> Any:
    """`value` of lane `lane + offset`; lanes past the group's end keep their own."""
    return _shuffle("T.shfl_down", "__shfl_down_sync", value, offset, width, mask)


def shfl_up(value: Any, offset: Any, width: Any = None, mask: Any = _FULL_MASK) -> Any:
    """`value` of lane `lane - offset`; lanes below `offset` keep their own."""
    return _shuffle("T.shfl_up", "__shfl_up_sync", value, offset, width, mask)


def shfl_sync(value: Any, src_lane: Any, width: Any = None, mask: Any = _FULL_MASK) -> Any:
    """`value` of lane `src_lane` (of the caller's group of `width` lanes). CUDA's argument order,
    `T.shfl_sync(mask, value, src_lane[, width])`, is accepted too (as upstream does): a Python int first and an
    expression second read as a mask and the value."""
    if isinstance(value, int) and not isinstance(value, bool) and not isinstance(src_lane, (int, float)):
        value, src_lane, width, mask = src_lane, width, None if mask is _FULL_MASK else mask, value
    return _shuffle("T.shfl_sync", "__shfl_sync", value, src_lane, width, mask)


def tvm_warp_shuffle(mask: Any, value: Any, src_lane: Any, width: Any, warp_size: Any) -> Any:
    """TVM's spelling of T.shfl_sync (upstream's Hadamard transform uses it): `value` of lane `src_lane` of the
    caller's group of `width` lanes. `warp_size` is the warp the lanes are counted in: the arch's."""
    return _shuffle("T.tvm_warp_shuffle", "__shfl_sync", value, src_lane, width, mask)


def tvm_warp_shuffle_down(mask: Any, value: Any, offset: Any, width: Any, warp_size: Any) -> Any:
    """TVM's spelling of T.shfl_down."""
    return _shuffle("T.tvm_warp_shuffle_down", "__shfl_down_sync", value, offset, width, mask)


def tvm_warp_shuffle_up(mask: Any, value: Any, offset: Any, width: Any, warp_size: Any) -> Any:
    """TVM's spelling of T.shfl_up."""
    return _shuffle("T.tvm_warp_shuffle_up", "__shfl_up_sync", value, offset, width, mask)


def _warp_reduce(construct: str, op: str, value: Any) -> Any:
    expression_trace(construct)
    value = as_expr(var_value(value))  # a T.alloc_var scalar reduces its value, not its address
    return tirx.call_extern(str(value.ty.dtype), f"tl::WarpReduce<tl::{op}>", value)


def warp_reduce_sum(value: Any) -> Any:
    """The sum of `value` over the 32 lanes of the caller's 32-thread group, returned to each lane (32 lanes on
    both archs, as upstream's CUDA warps: a quarter of an mp_22 warp)."""
    return _warp_reduce("T.warp_reduce_sum", "SumOp", value)


def warp_reduce_max(value: Any) -> Any:
    """The maximum of `value` over the caller's 32-lane group (see T.warp_reduce_sum)."""
    return _warp_reduce("T.warp_reduce_max", "MaxOp", value)


def warp_reduce_min(value: Any) -> Any:
    """The minimum of `value` over the caller's 32-lane group (see T.warp_reduce_sum)."""
    return _warp_reduce("T.warp_reduce_min", "MinOp", value)


def warp_reduce_bitand(value: Any) -> Any:
    """`value & ...` over the caller's 32-lane group (see T.warp_reduce_sum)."""
    return _warp_reduce("T.warp_reduce_bitand", "BitAndOp", value)


def warp_reduce_bitor(value: Any) -> Any:
    """`value | ...` over the caller's 32-lane group (see T.warp_reduce_sum)."""
    return _warp_reduce("T.warp_reduce_bitor", "BitOrOp", value)


def shuffle_elect(thread_extent: int = 0) -> Any:
    """True in exactly one thread of each group of `thread_extent` consecutive threads (its first); 0 means one
    thread of the whole block. For work a single thread does on behalf of its group."""
    trace = kernel_trace("T.shuffle_elect")
    if not isinstance(thread_extent, int) or thread_extent < 0:
        raise trace.error(f"T.shuffle_elect: thread_extent={thread_extent!r} must be a non-negative int")
    if thread_extent and trace.kernel.num_threads % thread_extent:
        raise trace.error(f"T.shuffle_elect({thread_extent}): the block's {trace.kernel.num_threads} threads are not "
                          "whole groups of that size")
    kernel = trace.kernel
    tid, stride = kernel.thread_vars[0], kernel.threads[0]
    for var, extent in zip(kernel.thread_vars[1:], kernel.threads[1:]):
        tid, stride = tid + var * stride, stride * extent
    if thread_extent in (0, trace.kernel.num_threads):
        return tid == 0
    return tirx.floormod(tid, thread_extent) == 0
