"""PlanDynamicSharedMemory: place every `shared.dyn` buffer in the kernel's one dynamic shared memory
arena and record the arena's size.

Each buffer gets a byte offset (annotation `tl.dyn_smem_offset`, read by the device printer) aligned to
`ALIGNMENT`; the function attribute `tl.dynamic_smem_bytes` is the launch's dynamic shared memory size.
Buffers are laid out one after another for now (no liveness-based reuse); the total is checked against
the target's `max_shared_memory_per_block` so an oversized kernel fails at compile time, naming its
buffers.
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


def plan_dynamic_shared_memory(func: tirx.PrimFunc, limit: int | None) -> tirx.PrimFunc:
    placed: list[tuple[str, int, int]] = []
    cursor = 0

    def on_alloc(node, mutator):
        nonlocal cursor
        if scope_of(node.buffer) != "shared.dyn":
            return node
        count = as_int(buffer_size(node.buffer))
        if count is None:
            raise CompileError(f"shared buffer `{node.buffer.name}` must have a constant shape", stage="PlanDynamicSharedMemory")
        nbytes = count * dtype_bytes(node.buffer.ty.dtype.dtype)
        annotations = node.annotations or {}
        align = max(ALIGNMENT, int(annotations["tl.smem_alignment"])) if "tl.smem_alignment" in annotations \
            else ALIGNMENT
        offset = -(-cursor // align) * align
        cursor = offset + nbytes
        placed.append((node.buffer.name, offset, nbytes))
        annotations = dict(node.annotations or {})
        annotations[OFFSET_ANNOTATION] = offset
        return tirx.AllocBuffer(node.buffer, annotations)

    func = tvm_ffi.structural_mutate(func, [(tirx.AllocBuffer, on_alloc)])
    if limit is not None and cursor > limit:
        listing = ", ".join(f"{name} ({nbytes} B)" for name, _, nbytes in placed)
        raise CompileError(
            f"the kernel needs {cursor} bytes of shared memory but the target allows {limit} per block: {listing}",
            stage="PlanDynamicSharedMemory")
    return func.with_attr(SIZE_ATTR, cursor)


def PlanDynamicSharedMemory():  # noqa: N802
    def run(func):
        target = tvm.target.Target.current(allow_none=True)
        limit = None
        if target is not None and "max_shared_memory_per_block" in target.attrs:
            limit = int(target.attrs["max_shared_memory_per_block"])
        return plan_dynamic_shared_memory(func, limit)

    return tl_pass("PlanDynamicSharedMemory", run)
