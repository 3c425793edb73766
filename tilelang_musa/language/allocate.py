"""Buffers a kernel allocates: shared tiles, register fragments, per-thread arrays and scalars, TVMScript's
scope-generic `T.alloc_buffer`, and the eager style's sizes (`T.const`) and outputs (`T.empty`)."""

from __future__ import annotations

from typing import Any

import tvm
from tvm import tirx
from tvm.script.ir_builder import IRBuilder
from tvm.tirx.script import builder as Tb

from .builder import _TRACES, VAR_SCOPE, Param, current_trace, take_name, value
from .early_alloc import defer, is_before_kernel
from .outside_kernel import add_outside_kernel, ir_trace
from .dtypes import FP4_DTYPE, DType, canonical_dtype, reject_sub_byte_int

SHARED_SCOPE = "shared.dyn"  # shared tiles live in dynamic shared memory (sized at launch, can exceed 48 KiB)
FRAGMENT_SCOPE = "local.fragment"
LOCAL_SCOPE = "local"


def _shape(construct: str, shape: Any) -> list[Any]:
    shape = list(shape) if isinstance(shape, (list, tuple)) else [shape]
    for extent in shape:
        # 0 is allowed: an empty tile (a tail of width 0), whose ops do nothing (transform/remove_empty_tiles.py)
        if isinstance(extent, int) and extent < 0:
            raise current_trace(construct).error(f"{construct}: extent {extent} in shape {shape} must not be negative")
    return shape


def _alloc(construct: str, shape: Any, dtype: Any, scope: str, default_name: str, init: Any = None) -> Any:
    """Allocate a kernel buffer (storing `init` into element 0 if given); written at the top of a function body
    before its kernel, the buffer belongs to the kernel that follows (early_alloc); in a loop or branch of a
    function that has no kernel yet, it is allocated there, IR to inspect (outside_kernel)."""
    early = is_before_kernel(current_trace(construct))
    trace, outside = (current_trace(construct), False) if early else ir_trace(construct)
    dtype = canonical_dtype(dtype)
    if dtype == FP4_DTYPE and scope not in ("shared", "shared.dyn", "local.fragment", "local"):
        from ..errors import UnsupportedError

        raise UnsupportedError(f"{construct}(..., \"{FP4_DTYPE}\"): fp4 is a storage type for kernel tensor "
                               "parameters, shared tiles, fragments and local arrays (no float4 arithmetic on MUSA); allocate float16 or "
                               "float32 and cast the loaded elements (T.cast(x[i], \"float16\"))", trace.loc)
    reject_sub_byte_int(construct, dtype, trace.loc, packed_storage=scope in ("shared", "shared.dyn"))
    if early:
        buf = Tb.buffer(_shape(construct, shape), dtype, scope=scope)
        IRBuilder.name(take_name(default_name), buf)
        defer(trace, construct, buf, init)
        return buf
    if outside:
        buf = Tb.buffer(_shape(construct, shape), dtype, scope=scope)
        add_outside_kernel(trace, construct, tirx.AllocBuffer(buf, {}))
    else:
        buf = Tb.alloc_buffer(_shape(construct, shape), dtype, scope=scope)
    IRBuilder.name(take_name(default_name), buf)
    if init is not None:
        Tb.buffer_store(buf, init, [0])
    return buf


def alloc_shared(shape: Any, dtype: Any, scope: str = SHARED_SCOPE) -> Any:
    """A tile in the block's shared memory."""
    if scope not in ("shared", "shared.dyn"):
        raise current_trace("T.alloc_shared").error(f"T.alloc_shared: scope must be 'shared' or 'shared.dyn'; got {scope!r}")
    return _alloc("T.alloc_shared", shape, dtype, scope, "shared")


def alloc_fragment(shape: Any, dtype: Any, scope: str = FRAGMENT_SCOPE) -> Any:
    """A tile spread over the registers of the block's threads (layout chosen by layout inference)."""
    return _alloc("T.alloc_fragment", shape, dtype, scope, "fragment")


def alloc_local(shape: Any, dtype: Any, scope: str = LOCAL_SCOPE) -> Any:
    """A per-thread array."""
    return _alloc("T.alloc_local", shape, dtype, scope, "local")


def alloc_var(dtype: Any, init: Any = None, scope: str = VAR_SCOPE) -> Any:
    """A per-thread scalar variable; `x = value` in the kernel stores into it, `x` reads it."""
    if init is not None:
        init = value(init)  # another T.alloc_var initialises with its current value
        if not isinstance(init, tvm.ir.Expr):
            init = tirx.const(init, canonical_dtype(dtype))
        elif str(init.ty.dtype) != canonical_dtype(dtype):
            init = tirx.Cast(canonical_dtype(dtype), init)
    return _alloc("T.alloc_var", [1], dtype, scope, "var", init)


# TVMScript's buffer options that an allocation here cannot honour: each must keep its default.
_ALLOC_BUFFER_DEFAULTS = {"data": None, "strides": None, "elem_offset": None, "align": -1, "offset_factor": 0,
                          "buffer_type": "default", "axis_separators": None}


def alloc_buffer(shape: Any, dtype: Any = "float32", data: Any = None, strides: Any = None, elem_offset: Any = None,
                 scope: str = "global", align: int = -1, offset_factor: int = 0, buffer_type: str = "default",
                 axis_separators: Any = None) -> Any:
    """TVMScript's allocation, scope given by name: "global" (the default) is a scratch tensor of the call, written
    before `with T.Kernel(...)` (T.alloc_global); "shared"/"shared.dyn", "local.fragment", "local" and "local.var"
    are T.alloc_shared, T.alloc_fragment, T.alloc_local and T.alloc_var inside a kernel.
    Example: Partial = T.alloc_buffer((split, M, N), T.float32)  # before the kernels that fill and reduce it"""
    given = {"data": data, "strides": strides, "elem_offset": elem_offset, "align": align,
             "offset_factor": offset_factor, "buffer_type": buffer_type, "axis_separators": axis_separators}
    for option, default in _ALLOC_BUFFER_DEFAULTS.items():
        changed = given[option] is not None if default is None else given[option] != default
        if changed:
            raise current_trace("T.alloc_buffer").error(
                f"T.alloc_buffer: `{option}={given[option]!r}` is not supported (buffers are allocated dense and "
                "row-major); leave it at its default")
    if scope == "global":
        from .pointer import alloc_global

        if current_trace("T.alloc_buffer").kernel is not None:
            raise current_trace("T.alloc_buffer").error(
                "T.alloc_buffer(..., scope=\"global\") inside `with T.Kernel(...)`: a kernel cannot allocate global "
                "memory; allocate it before the kernel (a scratch tensor of the call), or pass scope=\"shared\", "
                "\"local.fragment\" or \"local\"")
        return alloc_global(shape, dtype)
    if scope in ("shared", "shared.dyn"):
        return alloc_shared(shape, dtype, scope)
    if scope == FRAGMENT_SCOPE:
        return alloc_fragment(shape, dtype)
    if scope == LOCAL_SCOPE:
        return alloc_local(shape, dtype)
    if scope == VAR_SCOPE:
        if any(not (isinstance(e, int) and e == 1) for e in _shape("T.alloc_buffer", shape)):
            raise current_trace("T.alloc_buffer").error(
                f"T.alloc_buffer: a \"{VAR_SCOPE}\" buffer is one scalar; got shape {shape}")
        return alloc_var(dtype)
    raise current_trace("T.alloc_buffer").error(
        f"T.alloc_buffer: scope {scope!r} is not one of \"global\", \"shared\", \"shared.dyn\", \"local.fragment\", "
        "\"local\", \"local.var\"")


def const(names: str, dtype: str = "int32") -> Any:
    """Eager style: `N = T.const("N")` or `M, N, K = T.const("M N K")` declares compile-time sizes, bound by
    `f.compile(N=...)` or taken from the tensors `f(a, b)` is called with."""
    trace = current_trace("T.const")
    if trace.mode == "prim_func":
        raise trace.error("T.const declares sizes of the @tilelang.jit eager style; it cannot be used in a @T.prim_func")
    split = names.replace(",", " ").split()
    if not split:
        raise trace.error("T.const needs at least one name")
    values = []
    for name in split:
        trace.declared_consts.add(name)
        if name not in trace.consts:
            if trace.mode == "discover":
                trace.consts[name] = tirx.Var(name, dtype)
            else:
                raise trace.error(
                    f"T.const('{name}') has no value: pass {name}=... to compile(), or call the kernel with tensors "
                    "whose shapes determine it"
                )
        values.append(trace.consts[name])
    return values[0] if len(values) == 1 else tuple(values)


def empty(shape: Any, *more: Any, dtype: Any = None) -> Any:
    """An output tensor the kernel allocates and returns (`C = T.empty((M, N), dtype)` ... `return C`), in the
    eager @tilelang.jit style or in a @T.prim_func. The dims may also be given one by one, as upstream allows:
    `T.empty(M, N, dtype=A.dtype)` (or `T.empty(M, N, "float16")`)."""
    if more and isinstance(more[-1], (str, DType)) and dtype is None:  # T.empty(shape, dtype) / T.empty(M, N, dtype)
        more, dtype = more[:-1], more[-1]
    if more:
        shape = (shape, *more)
    dtype = "float32" if dtype is None else dtype
    trace = current_trace("T.empty")
    if trace.kernel is not None:
        raise trace.error("T.empty must be used before `with T.Kernel(...)`: it declares an output of the kernel")
    reject_sub_byte_int("T.empty", canonical_dtype(dtype), trace.loc)
    name = take_name(f"out{len(trace.params)}")
    buf = Tb.arg(name, Tb.buffer(_shape("T.empty", shape), canonical_dtype(dtype)))
    IRBuilder.name(name, buf)
    trace.params.append(Param(name, buf, is_output=True))
    return buf


def dynamic(names: str, dtype: str = "int32") -> Any:
    """A size known only at run time (`M = T.dynamic("m")`, or `M, N, K = T.dynamic("M, N, K")`): use it in
    tensor shapes and expressions; the compiled kernel takes its value from the shapes of the tensors it is called
    with."""
    split = names.replace(",", " ").split()
    if not split:
        raise current_trace("T.dynamic").error("T.dynamic needs at least one name")
    # the first call of a name whose size a parameter annotation already used returns that size (prim_func's
    # _body_sizes); every other call is a new size, as upstream's (test_dynamic_same_name.py)
    declared = _TRACES[-1].body_sizes if _TRACES else {}
    sizes = [declared.pop(name) if name in declared else tirx.Var(name, canonical_dtype(dtype)) for name in split]
    return sizes[0] if len(sizes) == 1 else tuple(sizes)


symbolic = dynamic
