"""Calling hand-written device C from a kernel: `T.import_source(src)` adds C source to the kernel's translation
unit, and `T.access_ptr(X[i], "r")` passes the address of an element to a `T.call_extern` callee."""

from __future__ import annotations

from typing import Any

from tvm import tirx

from ..tileop.access_ptr import READ, WRITE
from ..tileop.access_ptr import access_ptr as _marked_address
from ..tileop.region import TensorLoad, TensorRegion, bound_slice, is_buffer
from .builder import current_trace

# Inline assembly cannot cross targets: a source carrying it was written for another GPU's ISA.
_ASM_MARKERS = ("asm volatile", "asm(", "asm (")


def import_source(source: str | None = None) -> None:
    """`T.import_source(src)`: put the C source `src` (device functions, `#include` lines) into the translation unit
    before the kernel, once per distinct text. Source with inline assembly (NVIDIA PTX such as lop3 or prmt) is an
    error: MUSA cannot assemble it; the intrinsic groups of tilelang.quantize return portable equivalents.
    Example: T.import_source(get_lop3_intrin_group("float16")["c_source"])"""
    if source is None:
        return
    trace = current_trace("T.import_source")
    if not isinstance(source, str):
        raise trace.error(f"T.import_source: source must be a string of C code, got {type(source).__name__}")
    if any(marker in source for marker in _ASM_MARKERS):
        raise trace.error("T.import_source: the source contains inline assembly (asm volatile ...), written for "
                          "another GPU's instruction set; MUSA cannot compile it. Write the function in portable "
                          "C (tilelang.quantize's intrinsic groups provide MUSA versions of upstream's decoders)")
    if source not in trace.imported_sources:
        trace.imported_sources.append(source)


_ACCESS = {"r": READ, "w": WRITE, "rw": READ | WRITE, 1: READ, 2: WRITE, 3: READ | WRITE}


def access_ptr(base: Any, access_type: str | int = "r", *extents: Any, offset: Any = 0, extent: Any = None,
               ignore_last_ndim: int = 0) -> Any:
    """`T.access_ptr(X[i, j], "r" | "w" | "rw", offset=0)`: the address of X[i, j] (of X's first element for a
    buffer, of a region's corner for a slice), `offset` elements further along the last dimension, marked with
    what the callee does through it so that the compiler's barrier analysis sees the access (it takes all of X;
    `extents`/`extent` are accepted for upstream compatibility and not needed).
    Example: T.call_extern("decode_i4u_to_f16", T.access_ptr(B_q, "r"), T.access_ptr(B_f, "w"))"""
    trace = current_trace("T.access_ptr")
    if access_type not in _ACCESS:
        raise trace.error(f"T.access_ptr: access_type must be 'r', 'w', 'rw' or 1..3, got {access_type!r}")
    base = bound_slice(base)
    if is_buffer(base):
        source, indices = base, [tirx.const(0, "int32") for _ in base.ty.shape]
    elif isinstance(base, TensorRegion):
        source, indices = base.source, [r.min for r in base.region]
    elif isinstance(base, TensorLoad):
        source, indices = base.source, list(base.indices)
    else:
        raise trace.error(f"T.access_ptr: base must be a buffer, a slice or an element of one, got {base!r}")
    if not (isinstance(offset, int) and offset == 0):
        indices[-1] = indices[-1] + offset
    return _marked_address(tirx.BufferLoad(source, indices), _ACCESS[access_type])


def type_annotation(dtype: Any) -> Any:
    """TVM's `T.type_annotation(dtype)`: a value standing for the type `dtype`, the first operand of
    `T.tvm_access_ptr`."""
    return tirx.type_annotation(str(dtype))


def tvm_access_ptr(ptype: Any, data: Any, offset: Any, extent: Any, rw_mask: Any) -> Any:
    """TVM's raw form of `T.access_ptr`: `T.tvm_access_ptr(T.type_annotation(dtype), X.data, offset, extent,
    rw_mask)` is the address of X's element `offset` (counted over X flattened), accessed as rw_mask says (1 read,
    2 write, 3 both); the same marked address as `T.access_ptr(X[...], rw_mask)`, so the compiler sees the access."""
    trace = current_trace("T.tvm_access_ptr")
    is_data = isinstance(data, tirx.Call) and str(data.op.name) == "tirx.buffer_data"
    if not is_data or not is_buffer(data.args[0]):
        raise trace.error(f"T.tvm_access_ptr: the second operand must be a buffer's `.data`; got {data!r}")
    buffer = data.args[0]
    if not (isinstance(ptype, tirx.Call) and str(ptype.op.name) == "tirx.type_annotation") or \
            str(ptype.ty.dtype) != str(buffer.ty.dtype.dtype):
        raise trace.error(f"T.tvm_access_ptr: the first operand must be T.type_annotation('{buffer.ty.dtype.dtype}'), "
                          f"the element type of `{buffer.name}`; got {ptype!r}")
    if rw_mask not in (1, 2, 3):
        raise trace.error(f"T.tvm_access_ptr: rw_mask must be 1 (read), 2 (write) or 3 (both); got {rw_mask!r}")
    shape = [int(d.value) if isinstance(d, tirx.IntImm) else d for d in buffer.ty.shape]
    indices, stride = [], 1
    for k in reversed(range(len(shape))):  # the flat offset as indices (the first one unbounded, as the offset is)
        index = tirx.floordiv(offset, stride) if stride != 1 else offset
        indices.insert(0, index if k == 0 else tirx.floormod(index, shape[k]))
        stride = stride * shape[k]
    return _marked_address(tirx.BufferLoad(buffer, indices), _ACCESS[rw_mask])

