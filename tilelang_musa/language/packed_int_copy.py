"""`T.copy` of int4 / uint4 tiles: a copy of their bytes.

An int4 / uint4 tensor parameter or shared tile is packed storage, two elements a byte (element 2k in the low nibble
of byte k). A copy that moves whole bytes (along the innermost dimension of both sides: an even number of elements
starting at an even index, in rows of an even length) is the same copy of uint8 views of the two buffers, half as
many elements along that dimension: it vectorizes, pipelines and goes asynchronous (or through the TME) as any byte
copy does, and no two threads share a byte. int4 and uint4 hold the same 4-bit codes, so a copy between them is
also one of bytes (upstream's cast wraps the same way). Any other copy would move nibbles across bytes (a shift per
element, and two threads writing one byte): an UnsupportedError naming the copy's line.
"""

from __future__ import annotations

from typing import Any

import tvm
from tvm import tirx

from ..errors import UnsupportedError
from ..tileop.copy import resolve_extents
from ..tileop.region import Region, is_unit, to_region
from .dtypes import PACKED_INT_DTYPES, is_sub_byte_int


def is_packed_int_copy(src: Any, dst: Any, construct: str) -> bool:
    """Whether either operand of a copy is an int4 / uint4 buffer (or a slice or element of one)."""
    return any(is_sub_byte_int(to_region(side, construct, what)[0].dtype)
               for side, what in ((src, "src"), (dst, "dst")))


def packed_int_byte_operands(construct: str, trace: Any, src: Any, dst: Any) -> tuple[Any, Any]:
    """The (src, dst) slices of uint8 views that move the same bytes as the int4 / uint4 copy `src` -> `dst`."""
    src_region, src_origin = to_region(src, construct, "src")
    dst_region, dst_origin = to_region(dst, construct, "dst")
    kinds = {src_region.dtype, dst_region.dtype}
    if not kinds <= set(PACKED_INT_DTYPES):
        raise UnsupportedError(
            f"{construct}: `{src_region.name}` ({src_region.dtype}) -> `{dst_region.name}` ({dst_region.dtype}): a "
            "copy that converts int4 / uint4 elements is not supported (MUSA C has no 4-bit integer type, and a "
            "packed store shares its byte with the neighbouring element); copy int4 / uint4 to int4 / uint4 (their "
            "bytes), then read the elements (`T.cast(S[i], \"int32\")`) or decode them with tilelang.quantize",
            trace.loc)
    if src_origin and dst_origin:
        raise UnsupportedError(f"{construct}: one int4 / uint4 element is half a byte; store it with "
                               f"`{dst_region.name}[...] = {src_region.name}[...]` (a read-modify-write of its byte)",
                               trace.loc)
    src_region, dst_region = resolve_extents(src_region, src_origin, dst_region, dst_origin, trace.error)
    return (_byte_slice(construct, trace, src_region, "src"), _byte_slice(construct, trace, dst_region, "dst"))


def _byte_slice(construct: str, trace: Any, region: Region, what: str) -> Any:
    """`region` of a packed int buffer as the slice of its uint8 view covering the same bytes."""
    from .view import view

    shape = list(region.buffer.ty.shape)
    last_min, last_extent = region.mins[-1], region.extents[-1]
    ana = tvm.sym.Analyzer()
    for value, meaning in ((shape[-1], "its rows are"), (last_min, "the copy starts at element"),
                           (last_extent, "the copy moves")):
        if is_unit(value) or not ana.can_prove(tirx.floormod(value, 2) == 0):
            raise UnsupportedError(
                f"{construct}: {what} `{region.name}` is {region.dtype}, two elements a byte, and {meaning} "
                f"{value} along its last dimension, which is not provably even: the copy would move nibbles "
                "between bytes (a shift per element), which is not supported. Copy an even number of elements "
                "starting at an even index along the last dimension of both sides, in rows of an even length",
                trace.loc)
    halved = [*shape[:-1], ana.simplify(tirx.floordiv(shape[-1], 2))]
    byte_view = view(region.buffer, halved, "uint8")
    mins = [*region.mins[:-1], ana.simplify(tirx.floordiv(last_min, 2))]
    extents = [*region.extents[:-1], ana.simplify(tirx.floordiv(last_extent, 2))]
    return Region(byte_view, tuple(mins), tuple(extents)).to_ir()
