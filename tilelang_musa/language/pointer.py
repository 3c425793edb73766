"""Global memory reached other than through a T.Tensor parameter: `T.make_tensor` (a tensor view over a raw pointer:
a `T.ptr` parameter, or an address loaded from a pointer table `T.Tensor([G], T.ptr)`) and `T.alloc_global` (a
scratch tensor the launcher allocates for each call and passes as a hidden parameter).

In this TIR a buffer's storage is a pointer Var: a view over a loaded address first binds the address to a pointer
variable (`half* Src = reinterpret_cast<half*>(src_ptrs[bx]);` in the MUSA C), then declares the buffer over it.
A view is an ordinary global tensor to every pass: copies, gemms, element accesses and the bounds guards of
SafeMemoryAccess (against the view's declared shape: nothing checks that shape against the memory behind it).
"""

from __future__ import annotations

from typing import Any

import tvm
from tvm import tirx
from tvm.script.ir_builder import IRBuilder
from tvm.tirx.script import builder as Tb

from .builder import Param, as_expr, current_trace, take_name, value
from .dtypes import FP4_DTYPE, Pointer, canonical_dtype, reject_sub_byte_int


def _shape(shape: Any) -> list[Any]:
    return [as_expr(e) for e in (shape if isinstance(shape, (list, tuple)) else [shape])]


def _pointer_var(construct: str, ptr: Any, dtype: str) -> Any:
    """`ptr` as a pointer Var: a T.ptr parameter (or other pointer Var) as it is; a 64-bit integer address (a
    pointer table's element) bound to a new pointer variable."""
    trace = current_trace(construct)
    ptr = as_expr(value(ptr))
    ty = getattr(ptr, "ty", None)
    if isinstance(ptr, tvm.ir.expr.Var) and isinstance(ty, tvm.ir.PointerType):
        return ptr
    if isinstance(ty, tvm.ir.PrimType) and str(ty.dtype) in ("int64", "uint64"):
        if trace.kernel is None and not isinstance(ptr, tvm.ir.expr.Var):
            raise trace.error(f"{construct}: an address loaded from memory ({ptr}) is read inside "
                              "`with T.Kernel(...)`; make the tensor there")
        pointer_type = tvm.ir.PointerType(tvm.ir.PrimType(dtype), "global")
        return Tb.Bind(tvm.ir.Call(tvm.ir.Op.get("tirx.reinterpret"), [ptr], ret_ty=pointer_type))
    if isinstance(ty, tvm.ir.PrimType):
        found = f"a {ty.dtype} value `{ptr}`"
    elif isinstance(ptr, tvm.ir.expr.Var) and isinstance(ty, tirx.BufferType):
        found = f"the tensor `{ptr.name}` (index it, or use it directly)"
    else:
        found = f"{type(ptr).__name__} {ptr!r}"
    raise trace.error(f"{construct} takes a pointer: a T.ptr parameter or a 64-bit address loaded from a pointer "
                      f"table (T.Tensor([G], T.ptr)); got {found}")


def make_tensor(ptr: Any, shape: Any, dtype: Any = "float32", strides: Any = None) -> Any:
    """A global tensor of `shape` and `dtype` (row-major, or with `strides` in elements) over the memory `ptr`
    points to: a `T.ptr` parameter, or an address loaded from a pointer table. Shapes may use scalar parameters.
    Example: A = T.make_tensor(a_ptr, (m, k), T.float16);  Src = T.make_tensor(src_ptrs[bx], (N,), T.float16)"""
    trace = current_trace("T.make_tensor")
    dtype = canonical_dtype(dtype)
    if dtype == FP4_DTYPE:
        raise trace.error(f"T.make_tensor: {FP4_DTYPE} views are not supported; view the bytes as uint8")
    reject_sub_byte_int("T.make_tensor", dtype, trace.loc)
    shape = _shape(shape)
    if strides is not None:
        strides = _shape(strides)
        if len(strides) != len(shape):
            raise trace.error(f"T.make_tensor: {len(strides)} strides for a {len(shape)}-d tensor")
    name = take_name("tensor")
    data = _pointer_var("T.make_tensor", ptr, dtype)
    if not isinstance(ptr, tvm.ir.expr.Var):
        IRBuilder.name(f"{name}_ptr", data)
    buffer = Tb.decl_buffer(shape, dtype, data=data, strides=strides, scope="global")
    IRBuilder.name(name, buffer)
    return buffer


def alloc_global(shape: Any, dtype: Any, scope: str = "global") -> Any:
    """A global scratch tensor, written before `with T.Kernel(...)`: the launcher allocates it for each call and
    passes it as a hidden parameter; it is never returned and its contents at entry are undefined (the simulator
    fills it with 0xFF bytes, NaN for floats, so a read before a write shows). Example: W = T.alloc_global((N,), T.float32)"""
    trace = current_trace("T.alloc_global")
    if trace.kernel is not None:
        raise trace.error("T.alloc_global must be used before `with T.Kernel(...)`: the launcher allocates the "
                          "workspace for the whole call (a kernel cannot allocate global memory)")
    if scope != "global":
        raise trace.error(f"T.alloc_global: scope must be 'global'; got {scope!r}")
    dtype = canonical_dtype(dtype)
    reject_sub_byte_int("T.alloc_global", dtype, trace.loc)
    name = take_name(f"workspace{len(trace.params)}")
    buf = Tb.arg(name, Tb.buffer(_shape(shape), dtype))
    IRBuilder.name(name, buf)
    trace.params.append(Param(name, buf, is_workspace=True))
    return buf


def make_pointer_param(trace: Any, name: str, annotation: Pointer) -> Any:
    """A `T.ptr` parameter: a raw device pointer (the launcher takes a tensor's data pointer or an int address)."""
    var = Tb.arg(name, Tb.handle(annotation.dtype, annotation.storage_scope))
    IRBuilder.name(name, var)
    trace.params.append(Param(name, var))
    return var
