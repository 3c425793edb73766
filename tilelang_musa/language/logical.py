"""`T.all_of(mask)` / `T.any_of(mask)`: whether all / any elements of a boolean (or numeric) region are nonzero.

Each thread that evaluates one reads the whole region (`tl::all_of(&mask[...], n)` in common.h), so it serves as
a block-uniform condition over a mask in global, shared or thread-private memory: `if T.all_of(Mask[by, bx, k, :]):`.
"""

from __future__ import annotations

from typing import Any

from tvm import tirx

from ..tileop.region import to_region
from .allocate import FRAGMENT_SCOPE
from .builder import current_trace


def all_of(buffer: Any) -> Any:
    """True if every element of `buffer` (a buffer, or a region contiguous in memory) is nonzero."""
    return _reduce_mask("all_of", buffer)


def any_of(buffer: Any) -> Any:
    """True if some element of `buffer` (a buffer, or a region contiguous in memory) is nonzero."""
    return _reduce_mask("any_of", buffer)


def _reduce_mask(name: str, buffer: Any) -> Any:
    construct = f"T.{name}"
    trace = current_trace(construct)
    region, _ = to_region(buffer, construct, "buffer")
    if region.scope == FRAGMENT_SCOPE:
        raise trace.error(f"{construct}: `{region.name}` is a fragment, spread over the threads; copy it to shared "
                          "memory (or use T.reduce_* on it) first")
    if region.buffer in trace.layout_annotations:
        raise trace.error(f"{construct}: `{region.name}` has an annotated layout; its region is not contiguous")
    count = region.contiguous_count()
    if count is None:
        raise trace.error(f"{construct}: the region {region.describe()} must be contiguous in memory (a slice of "
                          "the innermost dimensions, with constant extents)")
    first = region.buffer[tuple(region.mins)]
    # ir.ops.PURE_READING_EXTERNS names it: the barrier passes take a condition on it as block-uniform
    return tirx.call_extern("bool", f"tl::{name}", tirx.address_of(first), tirx.const(count, "int32"))
