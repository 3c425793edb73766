"""Tensor parameter annotations: `T.Tensor((M, K), dtype)` and `T.Tensor[(M, K), dtype]`.

In a `@T.prim_func` signature an annotation makes the parameter a global buffer; in the eager jit style
the statement `A: T.Tensor[(N,), dtype]` in the body does the same for parameter `A`. `T.SharedBuffer`,
`T.FragmentBuffer` and `T.LocalBuffer` annotate the parameters of a `@T.macro` that take on-chip tiles;
a macro checks each tile it is given against its annotation (`check_macro_argument`).
"""

from __future__ import annotations

from typing import Any

import tvm
from tvm.script.ir_builder import IRBuilder
from tvm.tirx.script import builder as Tb

from .builder import DiscoveryDone, KernelTrace, Param, _UNBOUND
from .dtypes import DType, Pointer, canonical_dtype, reject_sub_byte_int
from .tensor_type import TensorType


def _shape(shape: Any) -> tuple:
    if isinstance(shape, (list, tuple)):
        return tuple(shape)
    return (shape,)


class _TensorMeta(type):
    def __getitem__(cls, item: Any) -> TensorType:
        if cls is StridedTensor and isinstance(item, tuple) and len(item) == 3:
            return cls(*item)  # T.StridedTensor[(M, K), (stride_m, 1), dtype]
        # Upstream's rule: a tuple is the constructor's arguments, anything else the shape alone (so
        # `T.Tensor[(N,)]` is a float32 tensor of N elements, `T.Tensor[(M, K), "float16"]` the usual form).
        args = item if isinstance(item, tuple) else (item,)
        if not 1 <= len(args) <= 3:
            raise TypeError("T.Tensor[...] takes a shape, a dtype and strides: T.Tensor[(M, K), 'float16']")
        return cls(*args)


class Tensor(metaclass=_TensorMeta):
    """`T.Tensor(shape, dtype)`: annotation of a global tensor parameter. Inside a kernel, `T.Tensor(shape, dtype,
    buf.data)` (upstream's buffer over another's storage) is `T.view(buf, shape, dtype)`. `scope=` other than
    "global" (upstream's `T.Tensor(..., scope="shared.dyn")`) declares the buffer in that memory: IR for passes to
    inspect, which compiling refuses (ir/param_scopes.py)."""

    def __new__(cls, shape: Any, dtype: Any = "float32", strides: Any = None, data: Any = None,  # type: ignore[misc]
                scope: str | None = None) -> Any:
        if data is None and _storage_of(strides) is not None:
            strides, data = None, strides  # T.Tensor(shape, dtype, buf.data): the third argument is the storage
        if data is not None:
            source = _storage_of(data)
            if source is None:
                raise TypeError(f"T.Tensor(shape, dtype, data): data must be a buffer's `.data`; got {data!r}")
            from .view import view

            return view(source, _shape(shape), dtype)
        return TensorType(_shape(shape), canonical_dtype(dtype), None if strides is None else _shape(strides),
                          _param_scope(scope))


# The storage scopes a tensor annotation may name (upstream's buffer scopes that hold elements).
PARAM_SCOPES = ("global", "shared", "shared.dyn", "local", "local.fragment", "local.var")


def _param_scope(scope: Any) -> str:
    if scope is None:
        return "global"
    if scope not in PARAM_SCOPES:
        raise ValueError(f"T.Tensor(..., scope={scope!r}): scope must be one of {', '.join(PARAM_SCOPES)}")
    return scope


def _storage_of(value: Any) -> Any:
    """The buffer whose storage `value` (`buf.data`) is, else None."""
    if isinstance(value, tvm.ir.Call) and isinstance(value.op, tvm.ir.Op) and str(value.op.name) == "tirx.buffer_data":
        return value.args[0]
    return None


Buffer = Tensor


class StridedTensor(Tensor):
    """`T.StridedTensor(shape, strides, dtype)`: a tensor parameter with explicit strides."""

    def __new__(cls, shape: Any, strides: Any, dtype: Any = "float32",  # type: ignore[misc]
                scope: str | None = None) -> TensorType:
        return TensorType(_shape(shape), canonical_dtype(dtype), _shape(strides), _param_scope(scope))


_SCOPE_NAMES = {"shared": "T.SharedBuffer", "local.fragment": "T.FragmentBuffer", "local": "T.LocalBuffer"}


def _on_chip(scope: str, doc: str):
    class OnChipBuffer(Tensor):
        __doc__ = doc

        def __new__(cls, shape: Any, dtype: Any = "float32") -> TensorType:  # type: ignore[misc]
            return TensorType(_shape(shape), canonical_dtype(dtype), None, scope, _SCOPE_NAMES[scope])

    return OnChipBuffer


SharedBuffer = _on_chip("shared", "`T.SharedBuffer(shape, dtype)`: a @T.macro parameter that is a shared-memory tile.")
FragmentBuffer = _on_chip("local.fragment", "`T.FragmentBuffer(shape, dtype)`: a @T.macro parameter that is a fragment.")
LocalBuffer = _on_chip("local", "`T.LocalBuffer(shape, dtype)`: a @T.macro parameter that is a thread's local array.")


def check_macro_argument(trace: KernelTrace, macro: str, name: str, annotation: Any, value: Any) -> None:
    """A tile passed to a @T.macro parameter annotated with a buffer type that differs from it in dtype, shape or
    (for the on-chip annotations) memory scope gets a warning. Not an error: upstream ignores these annotations,
    and its own scripts carry stale ones (`V_shared: T.SharedBuffer([block_M, dim])` given a [block_N, dim]
    tile); the macro works on the tile it is given."""
    if not isinstance(annotation, TensorType) or not (isinstance(value, tvm.ir.expr.Var)
                                                       and isinstance(value.ty, tvm.tirx.BufferType)):
        return
    scope, dtype = str(value.ty.storage_scope), str(value.ty.dtype.dtype)
    shape = [int(e) if isinstance(e, tvm.tirx.IntImm) else e for e in value.ty.shape]
    wanted = [int(e) if isinstance(e, tvm.tirx.IntImm) else e for e in annotation.shape]
    problems = []
    if annotation.scope != "global" and scope.split(".dyn")[0] != annotation.scope.split(".dyn")[0]:
        wanted_scope = f"a {annotation.proxy}" if annotation.proxy != "T.Tensor" else f"a {annotation.scope} one"
        problems.append(f"it is a {scope} buffer, not {wanted_scope}")
    if dtype != annotation.dtype:
        problems.append(f"its dtype is {dtype}, not {annotation.dtype}")
    if len(shape) != len(wanted) or any(isinstance(a, int) and isinstance(b, int) and a != b
                                        for a, b in zip(shape, wanted)):
        problems.append(f"its shape is {tuple(shape)}, not {tuple(wanted)}")
    if problems:
        from ..diagnostics import warn_once

        warn_once(f"macro annotation {trace.loc} {macro}.{name}",
                  f"{trace.loc}: @T.macro `{macro}`: argument `{name}` ({value.name}) does not match its annotation: "
                  + "; ".join(problems) + " (the annotation is not used)")


def make_param(trace: KernelTrace, name: str, annotation: Any) -> Any:
    """Declare kernel parameter `name` from its annotation; returns the buffer or scalar Var."""
    from .tir import _Handle

    if isinstance(annotation, Pointer):  # a raw pointer, viewed with T.make_tensor
        from .pointer import make_pointer_param

        return make_pointer_param(trace, name, annotation)
    if isinstance(annotation, _Handle):  # bound to a tensor by T.match_buffer in the body
        var = Tb.arg(name, Tb.handle())
        IRBuilder.name(name, var)
        trace.params.append(Param(name, var))
        return var
    if isinstance(annotation, TensorType) and annotation.proxy != "T.Tensor":
        raise trace.error(f"parameter `{name}`: {annotation.proxy} annotates a @T.macro parameter; a "
                          "kernel's parameters are global tensors (T.Tensor)")
    if isinstance(annotation, (TensorType, DType, str)):
        reject_sub_byte_int(f"parameter `{name}`", canonical_dtype(annotation.dtype if isinstance(annotation, TensorType)
                                                                    else annotation), trace.loc,
                            packed_storage=isinstance(annotation, TensorType))
    if isinstance(annotation, TensorType):
        strides = None if annotation.strides is None else list(annotation.strides)
        if strides is not None and len(strides) != len(annotation.shape):
            raise trace.error(f"parameter `{name}`: {len(strides)} strides for a {len(annotation.shape)}-d tensor")
        var = Tb.arg(name, Tb.buffer(list(annotation.shape), annotation.dtype, strides=strides,
                                     scope=annotation.scope))
        if annotation.scope != "global":
            trace.scoped_params[name] = "" if trace.loc is None else str(trace.loc)
    elif isinstance(annotation, (DType, str)):
        var = Tb.arg(name, tvm.tirx.Var(name, canonical_dtype(annotation)))
    elif isinstance(annotation, tvm.ir.PrimType):
        var = Tb.arg(name, tvm.tirx.Var(name, str(annotation.dtype)))
    else:
        raise trace.error(
            f"parameter `{name}` has annotation {annotation!r}; a kernel parameter is annotated with "
            "T.Tensor(shape, dtype), T.ptr or a scalar dtype such as T.int32"
        )
    IRBuilder.name(name, var)
    trace.params.append(Param(name, var))
    return var


def declare_param(trace: KernelTrace, name: str, annotation: Any, current: Any) -> Any:
    """The eager style's `A: T.Tensor[(N,), dtype]` statement."""
    if trace.mode == "prim_func" and any(p.name == name for p in trace.params) and isinstance(annotation, TensorType):
        return current  # upstream's lazy form: the parameter was declared from this annotation before the body
    if trace.mode == "prim_func":
        raise trace.error(
            f"`{name}: {annotation!r}` declares a tensor parameter, which only the @tilelang.jit eager style "
            "does; in a @T.prim_func annotate the parameter in the signature"
        )
    if name not in trace.pending_tensors:
        raise trace.error(
            f"`{name}: {annotation!r}` annotates `{name}`, which is not a tensor parameter of the function "
            f"(parameters awaiting a tensor annotation: {sorted(trace.pending_tensors) or 'none'})"
        )
    if isinstance(annotation, Pointer):  # `a_ptr: T.ptr` in the signature: a raw pointer
        trace.pending_tensors.pop(name)
        if trace.mode == "discover":  # a stand-in whose T.match_buffer tells the tensor's shape
            return tvm.tirx.Var(name, tvm.ir.PointerType(tvm.ir.PrimType(annotation.dtype or "void")))
        return make_param(trace, name, annotation)
    if isinstance(annotation, (DType, tvm.ir.PrimType)):  # `M: T.int32`: a run-time scalar argument
        trace.pending_tensors.pop(name)
        if trace.mode == "discover":
            return tvm.tirx.Var(name, canonical_dtype(annotation if isinstance(annotation, DType)
                                                      else str(annotation.dtype)))
        return make_param(trace, name, annotation)
    if not isinstance(annotation, TensorType):
        raise trace.error(f"`{name}` must be annotated with T.Tensor[shape, dtype] or a scalar dtype; got "
                          f"{annotation!r}")
    if trace.mode == "discover":
        trace.discovered_shapes[name] = annotation.shape
        trace.discovered_dtypes[name] = str(annotation.dtype)
        if annotation.strides is not None:
            trace.discovered_strides[name] = annotation.strides
        trace.pending_tensors.pop(name)
        return annotation  # until discovery stops, `A.dtype` / `A.shape` read the annotation
    trace.pending_tensors.pop(name)
    return make_param(trace, name, annotation)


def stop_discovery_here(trace: KernelTrace) -> None:
    """Called by constructs that start building the kernel proper (T.Kernel, T.empty)."""
    if trace.mode == "discover":
        raise DiscoveryDone()
