"""Tensor parameter annotations: `T.Tensor((M, K), dtype)` and `T.Tensor[(M, K), dtype]`.

In a `@T.prim_func` signature an annotation makes the parameter a global buffer; in the eager jit style
the statement `A: T.Tensor[(N,), dtype]` in the body does the same for parameter `A`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import tvm
from tvm.script.ir_builder import IRBuilder
from tvm.tirx.script import builder as Tb

from .builder import DiscoveryDone, KernelTrace, Param, _UNBOUND
from .dtypes import DType, canonical_dtype


@dataclass(frozen=True)
class TensorType:
    """The type of a tensor parameter: shape (ints or size expressions), dtype, optional strides."""

    shape: tuple
    dtype: str
    strides: tuple | None = None
    scope: str = "global"

    def __repr__(self) -> str:
        return f"T.Tensor({self.shape}, {self.dtype!r})"


def _shape(shape: Any) -> tuple:
    if isinstance(shape, (list, tuple)):
        return tuple(shape)
    return (shape,)


class _TensorMeta(type):
    def __getitem__(cls, item: Any) -> TensorType:
        if not isinstance(item, tuple) or len(item) != 2:
            raise TypeError("T.Tensor[...] takes a shape and a dtype: T.Tensor[(M, K), 'float16']")
        shape, dtype = item
        return cls(shape, dtype)


class Tensor(metaclass=_TensorMeta):
    """`T.Tensor(shape, dtype)`: annotation of a global tensor parameter."""

    def __new__(cls, shape: Any, dtype: Any = "float32", strides: Any = None) -> TensorType:  # type: ignore[misc]
        return TensorType(_shape(shape), canonical_dtype(dtype), None if strides is None else _shape(strides))


Buffer = Tensor


class StridedTensor(Tensor):
    """`T.StridedTensor(shape, strides, dtype)`: a tensor parameter with explicit strides."""

    def __new__(cls, shape: Any, strides: Any, dtype: Any = "float32") -> TensorType:  # type: ignore[misc]
        return TensorType(_shape(shape), canonical_dtype(dtype), _shape(strides))


def make_param(trace: KernelTrace, name: str, annotation: Any) -> Any:
    """Declare kernel parameter `name` from its annotation; returns the buffer or scalar Var."""
    if isinstance(annotation, TensorType):
        if annotation.strides is not None:
            raise trace.error(f"parameter `{name}`: strided tensors are not supported yet; pass a contiguous tensor")
        var = Tb.arg(name, Tb.buffer(list(annotation.shape), annotation.dtype))
    elif isinstance(annotation, (DType, str)):
        var = Tb.arg(name, tvm.tirx.Var(name, canonical_dtype(annotation)))
    elif isinstance(annotation, tvm.ir.PrimType):
        var = Tb.arg(name, tvm.tirx.Var(name, str(annotation.dtype)))
    else:
        raise trace.error(
            f"parameter `{name}` has annotation {annotation!r}; a kernel parameter is annotated with "
            "T.Tensor(shape, dtype) or a scalar dtype such as T.int32"
        )
    IRBuilder.name(name, var)
    trace.params.append(Param(name, var))
    return var


def declare_param(trace: KernelTrace, name: str, annotation: Any, current: Any) -> Any:
    """The eager style's `A: T.Tensor[(N,), dtype]` statement."""
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
    if not isinstance(annotation, TensorType):
        raise trace.error(f"`{name}` must be annotated with T.Tensor[shape, dtype]; got {annotation!r}")
    if trace.mode == "discover":
        trace.discovered_shapes[name] = annotation.shape
        trace.pending_tensors.pop(name)
        return current if current is not _UNBOUND else None
    trace.pending_tensors.pop(name)
    return make_param(trace, name, annotation)


def stop_discovery_here(trace: KernelTrace) -> None:
    """Called by constructs that start building the kernel proper (T.Kernel, T.empty)."""
    if trace.mode == "discover":
        raise DiscoveryDone()
