"""FlattenStridedParams: a tensor parameter with explicit strides (T.StridedTensor) becomes a 1-D buffer over the
elements it can reach, its accesses `A[i, j]` the flat offsets `A[i * s0 + j * s1]`.

TVM's FlattenBuffer gives a strided buffer the extent `shape[0] * strides[0]`, which holds only when the first
dimension has the largest stride: a transposed view (`A.T`, strides (1, M)) reaches far past it, and the
simulator's bounds checks, which read the flat extent, would reject its valid accesses. The extent here is the span
of the reachable offsets, 1 + sum((n_k - 1) * s_k), whatever the order of the strides. Runs right before
FlattenBuffer, which then has nothing left to do for these parameters.
"""

from __future__ import annotations

from typing import Any

import tvm_ffi
from tvm import tirx
from tvm.tirx.script import builder as Tb

from ..ir.utils import TensorLoad, Var, is_buffer
from .pass_base import tl_pass


def _flat_buffer(buffer: Var) -> Var:
    ty = buffer.ty
    span = tirx.const(1, ty.strides[0].ty.dtype)
    for extent, stride in zip(ty.shape, ty.strides):
        span = span + (extent - 1) * stride
    return Tb.buffer([span], str(ty.dtype.dtype), scope=str(ty.storage_scope), buffer_name=buffer.name)


def flatten_strided_params(func: tirx.PrimFunc) -> tirx.PrimFunc:
    strided = [p for p in func.params if is_buffer(p) and p.ty.strides and len(p.ty.shape) > 1]
    if not strided:
        return func
    remap = {p: _flat_buffer(p) for p in strided}

    def offset(buffer: Var, indices: Any) -> Any:
        flat = tirx.const(0, buffer.ty.strides[0].ty.dtype)
        for index, stride in zip(indices, buffer.ty.strides):
            flat = flat + index * stride
        return flat

    # (the buffer is looked up before the default mutation, which renames it through on_var)
    def on_load(node: Any, mutator: Any) -> Any:
        source = node.source
        node = mutator.default_mutate(node)
        if source not in remap:
            return node
        return remap[source][(offset(source, node.indices),)]

    def on_store(node: Any, mutator: Any) -> Any:
        buffer = node.buffer
        node = mutator.default_mutate(node)
        if buffer not in remap:
            return node
        return tirx.BufferStore(remap[buffer], node.value, [offset(buffer, node.indices)])

    def on_var(node: Any, mutator: Any) -> Any:
        return remap.get(node, node)

    body = tvm_ffi.structural_mutate(func.body, [(tirx.BufferStore, on_store), (TensorLoad, on_load), (Var, on_var)])
    return tirx.PrimFunc([remap.get(p, p) for p in func.params], body, ret_type=func.ret_type, attrs=func.attrs)


def FlattenStridedParams():  # noqa: N802
    return tl_pass("FlattenStridedParams", flatten_strided_params)
