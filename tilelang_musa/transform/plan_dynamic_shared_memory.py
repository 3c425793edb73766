"""PlanDynamicSharedMemory: place every `shared.dyn` buffer in the kernel's one dynamic shared memory
arena and record the arena's size.

Each buffer gets a byte offset (annotation `tl.dyn_smem_offset`, read by the device printer) aligned to
`ALIGNMENT`; the function attribute `tl.dynamic_smem_bytes` is the launch's dynamic shared memory size.
Tiles whose uses do not overlap share bytes (shared_memory_lifetimes.py: in use from the first to the last
statement of the kernel's block that references them; where that would not fit and every use sits in one `if` all
threads of the block take alike, `if bx < n:` around the body, the branch's statements; where that would not fit
either, the compiler's temporaries statement by statement inside the loops and branches every thread runs alike;
then also the user's tiles each iteration of a loop writes whole before reading, per iteration; from the first of
these on, a uniform if/else chain is flattened into guarded `if`s, so the tiles of its branches share bytes:
flatten_uniform_branch_chains.py);
where a tile takes bytes another used before, a block barrier separates the two uses (one is added before the later
use's first statement if none is there; in a loop both are used in, also before the earlier one, for the next
iteration). A kernel that fits keeps the coarser plan, unless TL_ENABLE_AGGRESSIVE_SHARED_MEMORY_MERGE asks for the
temporaries' plan (the user's rewritten tiles still only where that does not fit). Under
TL_DISABLE_SHARED_MEMORY_REUSE no two tiles share bytes. The arena's size is checked
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
from .flatten_uniform_branch_chains import flatten_uniform_branch_chains
from .shared_memory_lifetimes import Barrier, Lifetimes, Use, block_barrier, tile_lifetimes, with_opened_body

# Finer counts of the tiles' uses, tried in turn while the arena is past the target's limit (shared_memory_lifetimes.py).
_FINER = ({"within_uniform_branch": True}, {"within_uniform_branch": True, "temporaries_per_statement": True},
          {"within_uniform_branch": True, "temporaries_per_statement": True, "rewritten_per_iteration": True})
_FINEST_ASKED = 1  # the level TL_ENABLE_AGGRESSIVE_SHARED_MEMORY_MERGE starts at (the last only where it must)
ALIGNMENT = 1024  # every tile 1 KiB aligned; a swizzled tile asks for its swizzle period (tl.smem_alignment)


class SharedMemoryOverLimit(CompileError):
    """The planned arena is larger than the target allows (`needed` > `limit` bytes per block): a lowering with
    fewer pipeline stages may fit (fit_pipeline_stages.py)."""

    def __init__(self, message: str, needed: int, limit: int):
        super().__init__(message, stage="PlanDynamicSharedMemory")
        self.needed = needed
        self.limit = limit


def _alignment(node) -> int:
    annotations = node.annotations or {}
    return max(ALIGNMENT, int(annotations["tl.smem_alignment"])) if "tl.smem_alignment" in annotations else ALIGNMENT


def plan_dynamic_shared_memory(func: tirx.PrimFunc, limit: int | None, reuse: bool = True,
                               finest: bool = False) -> tirx.PrimFunc:
    allocs = []
    tvm_ffi.structural_walk(func.body, [(tirx.AllocBuffer, lambda node: allocs.append(node)
                                         if scope_of(node.buffer) == "shared.dyn" else None)])
    # Tiles of constant size first, at constant offsets; tiles sized at run time (T.alloc_shared((n,), ...)) after
    # them, at offsets that are expressions of the sizes before them, so no constant offset depends on a run-time size.
    static = [a for a in allocs if as_int(buffer_size(a.buffer)) is not None]
    dynamic = [a for a in allocs if as_int(buffer_size(a.buffer)) is None]
    # Without lifetimes every placed tile counts as in use: each gets bytes of its own (TL_DISABLE_SHARED_MEMORY_REUSE).
    lifetimes = tile_lifetimes(func.body, static, **(_FINER[_FINEST_ASKED] if finest else {})) \
        if static and reuse else None
    offsets, placed, cursor = _place(static, lifetimes)
    for finer in _FINER[_FINEST_ASKED + 1 if finest else 0:] if lifetimes is not None and limit is not None else ():
        if cursor <= limit:
            break
        if not func.body.same_as(flattened := flatten_uniform_branch_chains(func.body)):
            # the branches of a uniform if/else chain, statements of their own, let their tiles share bytes
            func = func.with_body(flattened)
        # Over the limit: count the statements of the block-uniform branch around every use (`if bx < n_tiles:`),
        # then, inside the loops every thread runs alike, the compiler's temporaries statement by statement, then
        # also the user's tiles each iteration of a loop writes whole before reading (MarkRewrittenTiles).
        lifetimes = tile_lifetimes(func.body, static, **finer)
        offsets, placed, cursor = _place(static, lifetimes)
    barrier_before = _barriers_for_shared_bytes(offsets, lifetimes) if lifetimes is not None else set()
    offsets = {buffer: offset for buffer, (offset, _) in offsets.items()}
    static_end = cursor
    if limit is not None and static_end > limit:
        listing = _listing(placed)
        raise SharedMemoryOverLimit(
            f"the kernel needs {static_end} bytes of shared memory but the target allows {limit} per block: {listing}",
            static_end, limit)
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
        return _with_barriers(node, barrier_before) if is_tiles_block and barrier_before else node

    func = tvm_ffi.structural_mutate(func, [(tirx.AllocBuffer, on_alloc), (tirx.SeqStmt, on_seq)])
    return func.with_attr(SIZE_ATTR, cursor)


def _listing(placed: list[tuple[str, int, int]]) -> str:
    """The placed tiles for the over-limit error, each name once in placement order, with the bytes its tiles
    take: a loop body the software pipeline copies (prologue, body, epilogue) allocates a reduction's workspace
    once per copy, distinct buffers of one name; they are one entry, `name (2 copies, B)`, the bytes of the
    ranges they cover together (copies placed at one offset count once)."""
    ranges: dict[str, list[tuple[int, int]]] = {}
    for name, offset, nbytes in placed:
        ranges.setdefault(name, []).append((offset, offset + nbytes))
    entries = []
    for name, spans in ranges.items():
        covered, end = 0, None
        for lo, hi in sorted(spans):
            start = lo if end is None else max(lo, end)
            covered += max(0, hi - start)
            end = hi if end is None else max(end, hi)
        copies = f"{len(spans)} copies, " if len(spans) > 1 else ""
        entries.append(f"{name} ({copies}{covered} B)")
    return ", ".join(entries)


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


def _lowest_free_offset(buffer, nbytes: int, align: int, placed: dict, lifetimes: Lifetimes | None) -> int:
    """The lowest `align`-aligned offset where `nbytes` overlap no placed tile in use at the same time (every placed
    tile is, without lifetimes)."""
    busy = sorted((offset, offset + size) for other, (offset, size) in placed.items()
                  if lifetimes is None or lifetimes.overlap(other, buffer))
    offset = 0
    for start, end in busy:
        if offset + nbytes <= start:
            break
        offset = max(offset, -(-end // align) * align)
    return offset


def _barriers_for_shared_bytes(placed: dict, lifetimes: Lifetimes) -> set[tuple[int, ...]]:
    """Where to put a block barrier (the path of the statement it goes before, see Use): before the first statement
    of a use of a tile whose bytes an earlier use of another tile had, when no barrier stands between the two; in a
    loop both are used in, also before the earlier one when no barrier stands between the later one and the
    earlier one's next iteration."""
    needed: dict = {}

    def separate(use: Use, before_it) -> None:
        if not any(before_it(b) for b in (*lifetimes.barriers, *needed.values())):
            needed[(*use.path, use.index)] = Barrier(use.first - 0.5, lifetimes.opened_around(use.path))

    for later, (offset, size) in placed.items():
        for earlier, (other_offset, other_size) in placed.items():
            shares_bytes = offset < other_offset + other_size and other_offset < offset + size
            if later.same_as(earlier) or not shares_bytes:
                continue
            for before in lifetimes.uses[earlier]:
                for after in lifetimes.uses[later]:
                    if before.last >= after.first:
                        continue
                    separate(after, lambda b: b.orders(before.last, after.first))
                    loop = lifetimes.innermost_loop_around(before, after)
                    if loop is not None:  # the next iteration's `before` follows `after`
                        separate(before, lambda b: b.orders_around(loop, after.last, before.first))
    return set(needed)


def _with_barriers(seq: tirx.SeqStmt, before: set[tuple[int, ...]]) -> tirx.SeqStmt:
    """`seq` with a block barrier before each statement a path of `before` leads to (through opened statements)."""
    stmts = []
    for index, stmt in enumerate(seq.seq):
        inside = {path[1:] for path in before if len(path) > 1 and path[0] == index}
        if inside:
            body = stmt.body if isinstance(stmt, tirx.For) else stmt.then_case
            stmt = with_opened_body(stmt, _with_barriers(body, inside))
        if (index,) in before:
            stmts.append(block_barrier())
        stmts.append(stmt)
    return tirx.SeqStmt(stmts)


def PlanDynamicSharedMemory(configs: CompileOptions | dict | None = None):  # noqa: N802
    options = CompileOptions.of(configs or {})

    def run(func):
        target = tvm.target.Target.current(allow_none=True)
        limit = None
        if target is not None and "max_shared_memory_per_block" in target.attrs:
            limit = int(target.attrs["max_shared_memory_per_block"])
        return plan_dynamic_shared_memory(func, limit, reuse=not options.disable_shared_memory_reuse,
                                          finest=options.enable_aggressive_shared_memory_merge)

    return tl_pass("PlanDynamicSharedMemory", run)
