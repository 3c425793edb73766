"""PlanDynamicSharedMemory: place every `shared.dyn` buffer in the kernel's one dynamic shared memory
arena and record the arena's size.

Each buffer gets a byte offset (annotation `tl.dyn_smem_offset`, read by the device printer) aligned to
`ALIGNMENT`; the function attribute `tl.dynamic_smem_bytes` is the launch's dynamic shared memory size.
Tiles whose uses do not overlap share bytes (shared_memory_lifetimes.py: in use from the first to the last
statement of the kernel's block that references them; where that would not fit and every use sits in one `if` all
threads of the block take alike, `if bx < n:` around the body, the branch's statements); where a tile takes bytes
another used before, a block barrier separates the two uses (one is added before the later tile's first statement
if none is there). Under TL_DISABLE_SHARED_MEMORY_REUSE no two tiles share bytes. The arena's size is checked
against the target's `max_shared_memory_per_block` so an oversized kernel fails at compile time, naming its
buffers. A buffer whose shape is symbolic is placed after every constant-size one, at an offset that is an
expression of the sizes; the size attribute is then an expression over the kernel's size variables, which the
host wrapper evaluates at launch.
"""

from __future__ import annotations

import tvm
import tvm_ffi
from tvm import tirx

from ..errors import CompileError
from ..ir.attrs import OFFSET_ANNOTATION, SIZE_ATTR
from ..ir.options import CompileOptions
from ..ir.utils import as_int, buffer_size, dtype_bytes, scope_of
from .pass_base import tl_pass
from .shared_memory_lifetimes import UNUSED, Lifetimes, block_barrier, tile_lifetimes

ALIGNMENT = 1024  # every tile 1 KiB aligned; a swizzled tile asks for its swizzle period (tl.smem_alignment)


def _alignment(node) -> int:
    annotations = node.annotations or {}
    return max(ALIGNMENT, int(annotations["tl.smem_alignment"])) if "tl.smem_alignment" in annotations else ALIGNMENT


def plan_dynamic_shared_memory(func: tirx.PrimFunc, limit: int | None, reuse: bool = True) -> tirx.PrimFunc:
    allocs = []
    tvm_ffi.structural_walk(func.body, [(tirx.AllocBuffer, lambda node: allocs.append(node)
                                         if scope_of(node.buffer) == "shared.dyn" else None)])
    # Tiles of constant size first, at constant offsets; tiles sized at run time (T.alloc_shared((n,), ...)) after
    # them, at offsets that are expressions of the sizes before them, so no constant offset depends on a run-time size.
    static = [a for a in allocs if as_int(buffer_size(a.buffer)) is not None]
    dynamic = [a for a in allocs if as_int(buffer_size(a.buffer)) is None]
    # Without lifetimes every placed tile counts as in use: each gets bytes of its own (TL_DISABLE_SHARED_MEMORY_REUSE).
    lifetimes = tile_lifetimes(func.body, static) if static and reuse else None
    offsets, placed, cursor = _place(static, lifetimes)
    if limit is not None and cursor > limit and lifetimes is not None:
        # Over the limit with the tiles' block counted a statement at a time: where all their uses sit in one branch
        # every thread takes alike (`if bx < n_tiles:` around the kernel's body), count the branch's statements.
        finer = tile_lifetimes(func.body, static, within_uniform_branch=True)
        if not finer.seq.same_as(lifetimes.seq):
            lifetimes = finer
            offsets, placed, cursor = _place(static, lifetimes)
    barrier_before = _barriers_for_shared_bytes(offsets, lifetimes) if lifetimes is not None else set()
    offsets = {buffer: offset for buffer, (offset, _) in offsets.items()}
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

    def on_seq(node, mutator):
        is_tiles_block = lifetimes is not None and node.same_as(lifetimes.seq)
        node = mutator.default_mutate(node)  # the AllocBuffers inside take their offsets
        if not is_tiles_block or not barrier_before:
            return node
        stmts = []
        for index, stmt in enumerate(node.seq):
            if index in barrier_before:
                stmts.append(block_barrier())
            stmts.append(stmt)
        return tirx.SeqStmt(stmts)

    func = tvm_ffi.structural_mutate(func, [(tirx.AllocBuffer, on_alloc), (tirx.SeqStmt, on_seq)])
    return func.with_attr(SIZE_ATTR, cursor)


def _place(static: list, lifetimes: Lifetimes | None) -> tuple[dict, list, int]:
    """Each constant-size tile's (offset, bytes), the placements as (name, offset, bytes), and the arena's end."""
    offsets: dict = {}
    placed: list[tuple[str, int, int]] = []
    cursor = 0
    for node in _placement_order(static, lifetimes):
        nbytes = as_int(buffer_size(node.buffer)) * dtype_bytes(node.buffer.ty.dtype.dtype)
        offset = _lowest_free_offset(node.buffer, nbytes, _alignment(node), offsets, lifetimes)
        cursor = max(cursor, offset + nbytes)
        offsets[node.buffer] = (offset, nbytes)
        placed.append((node.buffer.name, offset, nbytes))
    return offsets, placed, cursor


def _placement_order(allocs: list, lifetimes: Lifetimes | None) -> list:
    """Tiles in order of first use, the larger first among equals (without lifetimes: as allocated)."""
    if lifetimes is None:
        return allocs
    return sorted(allocs, key=lambda a: (lifetimes.spans[a.buffer][0], -as_int(buffer_size(a.buffer))))


def _overlap(a: tuple[int, int], b: tuple[int, int]) -> bool:
    return a[0] <= b[1] and b[0] <= a[1]


def _lowest_free_offset(buffer, nbytes: int, align: int, placed: dict, lifetimes: Lifetimes | None) -> int:
    """The lowest `align`-aligned offset where `nbytes` overlap no placed tile in use at the same time (every placed
    tile is, without lifetimes)."""
    busy = sorted((offset, offset + size) for other, (offset, size) in placed.items()
                  if lifetimes is None or _overlap(lifetimes.spans[other], lifetimes.spans[buffer]))
    offset = 0
    for start, end in busy:
        if offset + nbytes <= start:
            break
        offset = max(offset, -(-end // align) * align)
    return offset


def _barriers_for_shared_bytes(placed: dict, lifetimes: Lifetimes) -> set[int]:
    """Indices of statements to put a block barrier before: the first use of a tile whose bytes an earlier tile
    used, when no barrier stands between the earlier tile's last use and it."""
    needed: set[int] = set()
    used = {tile: span for tile, span in lifetimes.spans.items() if span != UNUSED}
    for later, (offset, size) in placed.items():
        if later not in used:
            continue
        first = used[later][0]
        for earlier, (other_offset, other_size) in placed.items():
            if earlier not in used:
                continue
            last = used[earlier][1]
            shares_bytes = offset < other_offset + other_size and other_offset < offset + size
            if later.same_as(earlier) or not shares_bytes or last >= first:
                continue
            if not any(last < b < first for b in (*lifetimes.barriers, *needed)):
                needed.add(first)
    return needed


def PlanDynamicSharedMemory(configs: CompileOptions | dict | None = None):  # noqa: N802
    options = CompileOptions.of(configs or {})

    def run(func):
        target = tvm.target.Target.current(allow_none=True)
        limit = None
        if target is not None and "max_shared_memory_per_block" in target.attrs:
            limit = int(target.attrs["max_shared_memory_per_block"])
        return plan_dynamic_shared_memory(func, limit, reuse=not options.disable_shared_memory_reuse)

    return tl_pass("PlanDynamicSharedMemory", run)
