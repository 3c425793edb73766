"""`T.reshape(buf, shape)` and `T.view(buf, shape=None, dtype=None)`: the same storage seen with another shape
(row-major, same number of elements) or, for a global tensor, a shared tile or a local buffer, another element type
of the same total size. Global tensors (symbolic sizes allowed, `T.reshape(w, (num_tokens * num_topk,))`), shared tiles,
fragments (a loop over the view follows the fragment's layout) and local buffers (constant shapes).

A same-dtype view is a name: every access to it becomes an access to the buffer it views (LowerBufferViews), so
barriers, bounds guards and memory planning see one buffer. A global tensor viewed as another dtype is a
reinterpreting pointer (a DeclBuffer over the tensor's data); so is a thread's local buffer (`T.alloc_local`)
viewed as another dtype: `bf16 x[64]` seen as `fp16 [64]` or `fp8 [128]` is the same bytes, each element of the view
the bits stored there (a register bitcast, as MUSA's own kernels use to reinterpret loaded words). A shared tile
viewed as another dtype is a DeclBuffer over the tile's storage in the tile's scope (ir/tile_views.py): the passes
that reason about shared memory (barriers, lifetimes, pipelining, swizzles) treat it as the tile's bytes. A
fragment's elements are spread over threads by its layout, and have no bytes to reinterpret.
"""

from __future__ import annotations

from typing import Any

import tvm
from tvm import tirx
from tvm.script.ir_builder import IRBuilder
from tvm.tirx.script import builder as Tb

from ..errors import CompileError, ViewSizeError
from ..ir.trace import OPEN_TRACES
from .builder import current_trace, is_buffer, take_name
from .dtypes import canonical_dtype
from .tensor_type import TensorType


def _size(shape) -> Any:
    """The number of elements: an int when the shape is constant, else a size expression."""
    total = 1
    for e in shape:
        total = total * (int(e.value) if isinstance(e, tirx.IntImm) else e)
    return total


def _check_bits(src_name, src_shape, src_dtype, shape, dtype, error) -> None:
    """The view covers the viewed storage exactly: the same number of bits (symbolic sizes: provably)."""
    src_bits, dst_bits = (tvm.runtime.DataType(d).bits * tvm.runtime.DataType(d).lanes for d in (src_dtype, dtype))
    n_src, n_dst = _size(src_shape), _size(shape)
    if isinstance(n_src, int) and isinstance(n_dst, int):
        if n_src * src_bits == n_dst * dst_bits:
            return
        detail = f"holds {n_src * src_bits // 8} bytes, the view {list(shape)} {dtype} {n_dst * dst_bits // 8}"
    else:
        if tvm.sym.Analyzer().can_prove(n_src * src_bits == n_dst * dst_bits):
            return
        detail = f"and the view {list(shape)} {dtype} are not provably the same size"
    raise error(f"T.view / T.reshape: `{src_name}` {list(src_shape)} {src_dtype} {detail}")


def _outside_kernel(src: Any, shape: Any, dtype: Any) -> Any:
    """T.view of a tensor annotation or a declared buffer outside any kernel: the checked view's type / buffer."""
    if isinstance(src, TensorType):
        src_shape, src_dtype, name = list(src.shape), canonical_dtype(src.dtype), "tensor"
    elif is_buffer(src):
        src_shape, src_dtype, name = list(src.ty.shape), str(src.ty.dtype.dtype), src.name
    else:
        raise CompileError(f"T.view / T.reshape: {src!r} must be a buffer or a T.Tensor")
    dtype = canonical_dtype(dtype) if dtype is not None else src_dtype
    shape = src_shape if shape is None else list(shape) if isinstance(shape, (list, tuple)) else [shape]
    _check_bits(name, src_shape, src_dtype, shape, dtype, ViewSizeError)
    if isinstance(src, TensorType):
        return TensorType(tuple(shape), dtype, scope=src.scope)
    return tirx.decl_buffer(shape, dtype, name=f"{name}_view", data=src.data, scope=str(src.ty.storage_scope))


def view(src: Any, shape: Any = None, dtype: Any = None) -> Any:
    """`src` seen with `shape` (default: its own) and `dtype` (default: its own)."""
    if not OPEN_TRACES:
        return _outside_kernel(src, shape, dtype)
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
    # A global tensor's view may have symbolic sizes (`(num_tokens * num_topk,)`): its accesses become the
    # tensor's through index arithmetic. On-chip buffers are laid out at compile time: constant shapes only.
    if scope != "global" and not all(isinstance(e, (int, tirx.IntImm)) for e in [*src.ty.shape, *shape]):
        raise trace.error(f"T.view / T.reshape: `{src.name}` ({scope}) and the view need constant shapes; got "
                          f"{list(src.ty.shape)} -> {shape}")
    _check_bits(src.name, list(src.ty.shape), src_dtype, shape, dtype,
                lambda message: ViewSizeError(message, trace.loc))
    name = take_name(f"{src.name}_view")
    if dtype == src_dtype:
        buffer = Tb.buffer(shape, dtype, scope=scope)
        IRBuilder.name(name, buffer)
        trace.buffer_views[buffer] = src
        return buffer
    if scope == "local.fragment":
        raise trace.error(f"T.view: a {scope} buffer viewed as another dtype ({src_dtype} -> {dtype}) is not "
                          "supported (its elements are spread over the threads by its layout); view a global "
                          "tensor, a shared tile or a local buffer, or copy")
    # (`src.data`: the view is declared in the tile's scope, so the passes know it for shared memory)
    buffer = Tb.decl_buffer(shape, dtype, data=src.data, scope=scope)
    IRBuilder.name(name, buffer)
    if scope in ("shared", "shared.dyn") and trace.loc is not None:
        trace.dtype_views[buffer] = str(trace.loc)
    return buffer


def reshape(src: Any, shape: Any) -> Any:
    """`src` with `shape` (the same number of elements, row-major)."""
    return view(src, shape)
