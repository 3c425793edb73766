"""PlanDynamicSharedMemory: place every `shared.dyn` buffer in the kernel's one dynamic shared memory
arena and record the arena's size.

Each buffer gets a byte offset (annotation `tl.dyn_smem_offset`, read by the device printer) aligned to
`ALIGNMENT`; the function attribute `tl.dynamic_smem_bytes` is the launch's dynamic shared memory size.
Buffers are laid out one after another for now (no liveness-based reuse); the total is checked against
the target's `max_shared_memory_per_block` so an oversized kernel fails at compile time, naming its
buffers. A buffer whose shape is symbolic is placed after every constant-size one, at an offset that is an
expression of the sizes; the size attribute is then an expression over the kernel's size variables, which the
host wrapper evaluates at launch.
"""

from __future__ import annotations

import tvm
import tvm_ffi
from tvm import tirx

from ..errors import CompileError
from ..ir.utils import as_int, buffer_size, dtype_bytes, scope_of
from .pass_base import tl_pass

ALIGNMENT = 1024  # every tile 1 KiB aligned; a swizzled tile asks for its swizzle period (tl.smem_alignment)
OFFSET_ANNOTATION = "tl.dyn_smem_offset"
SIZE_ATTR = "tl.dynamic_smem_bytes"


def _alignment(node) -> int:
    annotations = node.annotations or {}
    return max(ALIGNMENT, int(annotations["tl.smem_alignment"])) if "tl.smem_alignment" in annotations else ALIGNMENT


def plan_dynamic_shared_memory(func: tirx.PrimFunc, limit: int | None) -> tirx.PrimFunc:
    allocs = []
    tvm_ffi.structural_walk(func.body, [(tirx.AllocBuffer, lambda node: allocs.append(node)
                                         if scope_of(node.buffer) == "shared.dyn" else None)])
    # Tiles of constant size first, at constant offsets; tiles sized at run time (T.alloc_shared((n,), ...)) after
    # them, at offsets that are expressions of the sizes before them, so no constant offset depends on a run-time size.
    static = [a for a in allocs if as_int(buffer_size(a.buffer)) is not None]
    dynamic = [a for a in allocs if as_int(buffer_size(a.buffer)) is None]
    offsets: dict = {}
    placed: list[tuple[str, int, int]] = []
    cursor = 0
    for node in static:
        nbytes = as_int(buffer_size(node.buffer)) * dtype_bytes(node.buffer.ty.dtype.dtype)
        align = _alignment(node)
        offset = -(-cursor // align) * align
        cursor = offset + nbytes
        offsets[node.buffer] = offset
        placed.append((node.buffer.name, offset, nbytes))
    static_end = cursor
    if limit is not None and static_end > limit:
        listing = ", ".join(f"{name} ({nbytes} B)" for name, _, nbytes in placed)
        raise CompileError(
            f"the kernel needs {static_end} bytes of shared memory but the target allows {limit} per block: {listing}",
            stage="PlanDynamicSharedMemory")
    if dynamic:
        ana = tvm.sym.Analyzer()
        cursor = tirx.const(cursor, "int64")
        for node in dynamic:
            nbytes = tirx.Cast("int64", buffer_size(node.buffer)) * dtype_bytes(node.buffer.ty.dtype.dtype)
            align = _alignment(node)
            offset = ana.simplify(tirx.floordiv(cursor + (align - 1), align) * align)
            cursor = ana.simplify(offset + nbytes)
            offsets[node.buffer] = offset
        # the launch checks the run-time total against the device's limit (musaFuncSetAttribute)

    def on_alloc(node, mutator):
        if node.buffer not in offsets:
            return node
        annotations = dict(node.annotations or {})
        annotations[OFFSET_ANNOTATION] = offsets[node.buffer]
        return tirx.AllocBuffer(node.buffer, annotations)

    func = tvm_ffi.structural_mutate(func, [(tirx.AllocBuffer, on_alloc)])
    return func.with_attr(SIZE_ATTR, cursor)


def PlanDynamicSharedMemory():  # noqa: N802
    def run(func):
        target = tvm.target.Target.current(allow_none=True)
        limit = None
        if target is not None and "max_shared_memory_per_block" in target.attrs:
            limit = int(target.attrs["max_shared_memory_per_block"])
        return plan_dynamic_shared_memory(func, limit)

    return tl_pass("PlanDynamicSharedMemory", run)
