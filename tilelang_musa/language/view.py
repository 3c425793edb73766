"""`T.reshape(buf, shape)` and `T.view(buf, shape=None, dtype=None)`: the same storage seen with another shape
(row-major, same number of elements) or, for a global tensor, another element type of the same total size.
Global tensors, shared tiles, fragments (a loop over the view follows the fragment's layout) and local buffers.

A same-dtype view is a name: every access to it becomes an access to the buffer it views (LowerBufferViews), so
barriers, bounds guards and memory planning see one buffer. A global tensor viewed as another dtype is a
reinterpreting pointer (a DeclBuffer over the tensor's data).
"""

from __future__ import annotations

from typing import Any

import tvm
from tvm import tirx
from tvm.script.ir_builder import IRBuilder
from tvm.tirx.script import builder as Tb

from .builder import current_trace, is_buffer, take_name
from .dtypes import canonical_dtype


def _size(shape) -> int | None:
    total = 1
    for e in shape:
        if isinstance(e, tirx.IntImm):
            e = int(e.value)
        if not isinstance(e, int):
            return None
        total *= e
    return total


def view(src: Any, shape: Any = None, dtype: Any = None) -> Any:
    """`src` seen with `shape` (default: its own) and `dtype` (default: its own)."""
    trace = current_trace("T.view")
    if not is_buffer(src):
        raise trace.error(f"T.view / T.reshape: {src!r} must be a buffer")
    scope = str(src.ty.storage_scope)
    src_dtype = str(src.ty.dtype.dtype)
    dtype = canonical_dtype(dtype) if dtype is not None else src_dtype
    shape = list(src.ty.shape) if shape is None else list(shape) if isinstance(shape, (list, tuple)) else [shape]
    if scope not in ("global", "shared", "shared.dyn", "local.fragment", "local"):
        raise trace.error(f"T.view / T.reshape: `{src.name}` is {scope}; views are of global tensors, shared tiles, "
                          "fragments and local buffers")
    src_bits, dst_bits = tvm.runtime.DataType(src_dtype).bits, tvm.runtime.DataType(dtype).bits
    n_src, n_dst = _size(src.ty.shape), _size(shape)
    if n_src is None or n_dst is None:
        raise trace.error(f"T.view / T.reshape: `{src.name}` and the view need constant shapes; got "
                          f"{list(src.ty.shape)} -> {shape}")
    if n_src * src_bits != n_dst * dst_bits:
        raise trace.error(f"T.view / T.reshape: `{src.name}` {list(src.ty.shape)} {src_dtype} holds {n_src * src_bits // 8} "
                          f"bytes, the view {shape} {dtype} {n_dst * dst_bits // 8}")
    name = take_name(f"{src.name}_view")
    if dtype == src_dtype:
        buffer = Tb.buffer(shape, dtype, scope=scope)
        IRBuilder.name(name, buffer)
        trace.buffer_views[buffer] = src
        return buffer
    if scope != "global":
        raise trace.error(f"T.view: a {scope} buffer viewed as another dtype ({src_dtype} -> {dtype}) is not "
                          "supported; view a global tensor, or copy")
    buffer = Tb.decl_buffer(shape, dtype, data=tirx.call_intrin("handle", "tirx.buffer_data", src), scope=scope)
    IRBuilder.name(name, buffer)
    return buffer


def reshape(src: Any, shape: Any) -> Any:
    """`src` with `shape` (the same number of elements, row-major)."""
    return view(src, shape)
