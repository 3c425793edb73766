"""ChooseSharedSwizzle: a shared tile that only T.Parallel nests touch (the copies of fragments into it and out of it
included) is stored in a bank swizzle where that makes the warps' accesses meet fewer bank conflicts.

`T.copy(C_local, C_shared)` from a matrix accumulator writes, per warp instruction, 8 consecutive columns of 4 rows:
in a row-major tile whose rows are a multiple of 128 bytes those rows start in the same bank, so the 4 rows take 4
wavefronts where 1 would do. Upstream users write `T.annotate_layout({C_shared: make_swizzled_layout(C_shared)})`;
here the compiler counts, for the row-major tile and for each of upstream's bank swizzles (128-, 64-, 32-byte:
16-byte chunks xor-ed with the row), the wavefronts every nest's accesses would take (each warp's request: its
lanes' words at one slot, or one vector of slots, bank by bank: docs/PERF_FACTS.md's 32 banks of 4 bytes), and keeps
the layout with the fewest, row-major on a tie. The swizzles move whole 16-byte chunks, so 128-bit accesses stay
contiguous.

The accesses are read off the code once every tile op is lowered and before LowerSharedLayout applies the layouts:
each access's index is evaluated at every thread and every value of the loops around it that it reads (a request:
the lanes of a warp at one value of those loops, a vectorized loop's lanes together); a T.Parallel nest still to be
partitioned is run as PartitionParallelLoop will run it (the coalesced free plan and its vector width, or the
nest's loop_layout), its threads counted as the block's. Only tiles whose every use is such an element access
qualify: tiles a gemm, TME, LDLMS or any call takes by address, tiles with an annotated layout or one an op required,
tiles a view of another dtype also names (ir/tile_views.py: the view reads the bytes in the tile's row-major order)
and tiles indexed through memory or a let-bound variable keep theirs. Conditions around an access are not evaluated
(the estimate counts it as run) and block indices and scalar parameters count as 0: the choice only weighs costs,
any layout is correct.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import tvm
import tvm_ffi
from tvm import tirx

from ..ir.attrs import LAYOUTS_ATTR, PARALLEL
from ..ir.tile_views import viewed_tiles
from ..ir.utils import Access, TensorLoad, as_int, collect_accesses, dtype_bytes, scope_of, thread_info
from ..layout import Layout, LayoutError
from ..layout._expr import evaluate
from ..layout.swizzle import (make_full_bank_swizzled_layout, make_half_bank_swizzled_layout,
                              make_quarter_bank_swizzled_layout)
from ..target import warp_size
from ..tileop.loop_plan import LoopPlan, fragment_plan, free_plan, vector_width
from .inject_software_pipeline import BufferUses
from .lower_shared_layout import shared_layouts
from .partition_parallel_loop import coalesced_width, collect_nest, thread_analyzer, user_layout
from .pass_base import tl_pass

BANKS = 32  # banks of 4 bytes (docs/PERF_FACTS.md, inferred)
BANK_BYTES = 4
SWIZZLES = (make_full_bank_swizzled_layout, make_half_bank_swizzled_layout, make_quarter_bank_swizzled_layout)
MAX_ENTRIES = 1 << 21  # (thread, loop values) pairs evaluated per access; a larger access leaves the tile alone


class _Access:
    """One access of a tile: the element each (thread, loop values) entry touches, and the warp request it is in."""

    def __init__(self, coords: list[np.ndarray], request: np.ndarray):
        self.coords = coords
        self.request = request

    def wavefronts(self, layout: Layout | None, shape: list[int], element_bytes: int) -> int:
        """The wavefronts of all its requests with the tile stored by `layout` (None: row-major)."""
        if layout is None:
            flat = np.ravel_multi_index(self.coords, shape, mode="wrap")
        else:
            out = layout.evaluate(*[np.mod(c, n) for c, n in zip(self.coords, shape)])
            flat = out[0] if len(out) == 1 else np.ravel_multi_index(out, [as_int(e) for e in layout.output_shape])
        word = (flat * element_bytes) // BANK_BYTES
        request, word = np.unique(np.stack([self.request, word]), axis=1)  # each request's distinct words
        (request, _), per_bank = np.unique(np.stack([request, word % BANKS]), axis=1, return_counts=True)
        worst = np.zeros(int(request.max()) + 1, dtype=np.int64)
        np.maximum.at(worst, request, per_bank)
        return int(worst.sum())


class _Collector:
    """Walks the per-thread code, evaluating the accesses of the candidate tiles."""

    def __init__(self, func: tirx.PrimFunc, tiles: set, warp: int):
        info = thread_info(func)
        self.analyzer = thread_analyzer(info)
        self.threads = {info.vars[t]: as_int(info.extents[t]) for t in info.vars if t.startswith("threadIdx")}
        # taken as 0: they are the same for all of a block's threads (block indices, scalar parameters)
        self.uniform = {info.vars[t] for t in info.vars if t.startswith("blockIdx")} | \
            {p for p in func.params if not isinstance(p.ty, tirx.BufferType)}
        self.num_threads = info.num_threads
        self.tiles, self.warp = tiles, warp
        self.accesses: dict = {t: [] for t in tiles}
        self.failed: set = set()
        self.loops: list = []  # enclosing (loop var, extent, vectorized), outermost first

    def visit(self, node: Any) -> None:
        if isinstance(node, tirx.For) and node.annotations is not None and PARALLEL in node.annotations:
            self.parallel_nest(node)
            return
        if isinstance(node, tirx.For):
            extent, start = as_int(node.extent), as_int(node.min)
            self.loops.append((node.loop_var, extent if start == 0 else None, node.kind == tirx.ForKind.VECTORIZED))
            self.visit(node.body)
            self.loops.pop()
            return
        if isinstance(node, (tirx.BufferStore, tirx.Evaluate, tirx.Bind, tirx.IfThenElse, tirx.While)):
            tvm_ffi.structural_walk(node if not isinstance(node, (tirx.IfThenElse, tirx.While)) else node.condition,
                                    [(TensorLoad, lambda n: self.access(n.source, n.indices))])
        if isinstance(node, tirx.BufferStore):
            self.access(node.buffer, node.indices)
        for child in _children(node):
            self.visit(child)

    def parallel_nest(self, loop: tirx.For) -> None:
        """A T.Parallel nest PartitionParallelLoop has yet to split: its accesses as its plan will run them."""
        nest, body = collect_nest(loop)
        mine = [a for a in collect_accesses(body) if a.buffer in self.tiles]
        if not mine:
            return
        extents = [as_int(level.extent) if as_int(level.min) == 0 else None for level in nest]
        if None in extents or int(np.prod(extents)) > MAX_ENTRIES:
            self.failed.update(a.buffer for a in mine)
            return
        plan = self._plan(loop, nest, body, extents)
        thread, slot = plan.fragment.evaluate_all()  # extents + [replicas]
        replicas = thread.shape[-1]
        env = {level.loop_var: np.repeat(axis.reshape(-1), replicas)
               for level, axis in zip(nest, np.meshgrid(*[np.arange(n) for n in extents], indexing="ij"))}
        thread, slot = thread.reshape(-1), slot.reshape(-1)
        request = np.unique(np.stack([thread // self.warp, slot // plan.vector_width]), axis=1,
                            return_inverse=True)[1].reshape(-1)
        self.evaluate(mine, env, thread, request)

    def _plan(self, loop: tirx.For, nest: list, body: Any, extents: list[int]) -> LoopPlan:
        fragment = user_layout(loop)
        if fragment is not None:
            return fragment_plan(fragment, extents)
        width = vector_width(extents, nest[-1].loop_var, body, self.analyzer, False, coalesced_width(loop))
        return free_plan(extents, self.num_threads, width)

    def evaluate(self, accesses: list, env: dict, thread: np.ndarray, request: np.ndarray) -> None:
        """Record `accesses` at the entries of `env` (loop variables; the threads' indices follow from `thread`).
        A tile with an index that reads memory or a variable bound elsewhere (a let of the thread index, say) is
        left alone."""
        env = dict(env)
        stride = 1
        for var, extent in self.threads.items():
            env[var] = (thread // stride) % extent
            stride *= extent
        for access in accesses:
            tile = access.buffer
            if tile in self.failed:
                continue
            used = set()
            for index in access.indices:
                tvm_ffi.structural_walk(index, [(tvm.ir.expr.Var, lambda v: used.add(v))])
            if _loads(access.indices) or any(v not in env and v not in self.uniform for v in used):
                self.failed.add(tile)
                continue
            scope = {v: env.get(v, 0) for v in used}
            try:
                coords = [np.broadcast_to(evaluate(i, scope), thread.shape) for i in access.indices]
            except (KeyError, TypeError):
                self.failed.add(tile)
                continue
            self.accesses[tile].append(_Access(coords, request))

    def access(self, tile: Any, indices: Any) -> None:
        """An access in the per-thread code: every thread, at every value of the loops around it that it reads."""
        if tile not in self.tiles or tile in self.failed:
            return
        used = set()
        for index in indices:
            tvm_ffi.structural_walk(index, [(tvm.ir.expr.Var, lambda v: used.add(v))])
        loops = [(v, e, vec) for v, e, vec in self.loops if v in used]
        extents = [self.num_threads] + [e for _, e, _ in loops]
        if any(e is None for e in extents) or int(np.prod(extents)) > MAX_ENTRIES:
            self.failed.add(tile)  # a run-time loop bound, or too many entries to weigh
            return
        axes = [a.reshape(-1) for a in np.meshgrid(*[np.arange(n, dtype=np.int64) for n in extents], indexing="ij")]
        env = {var: axis for (var, _, _), axis in zip(loops, axes[1:])}
        # a request: one warp at one value of the non-vectorized loops
        key = [axes[0] // self.warp] + [env[v] for v, _, vec in loops if not vec]
        request = np.unique(np.stack(key), axis=1, return_inverse=True)[1].reshape(-1)
        self.evaluate([Access(tile, tuple(indices), False)], env, axes[0], request)


def _children(node: Any) -> list:
    if isinstance(node, tirx.SeqStmt):
        return list(node.seq)
    if isinstance(node, tirx.IfThenElse):
        return [node.then_case] + ([node.else_case] if node.else_case is not None else [])
    body = getattr(node, "body", None)
    return [body] if isinstance(body, tirx.Stmt) else []


def _loads(exprs: Any) -> list:
    found = []
    for e in exprs:
        tvm_ffi.structural_walk(e, [(TensorLoad, lambda n: found.append(n))])
    return found


def _element_accesses(node: Any, tile: Any) -> int:
    """How often `node` loads or stores an element of `tile`, not counting `&tile[i]` (an address handed to a
    call, e.g. a gemm's operand, which reads the tile in its own layout)."""
    count = [0]

    def on_load(n):
        count[0] += n.source.same_as(tile)

    def on_store(n):
        count[0] += n.buffer.same_as(tile)

    def on_call(n):
        if isinstance(n.op, tvm.ir.Op) and str(n.op.name) == "tirx.address_of":
            count[0] -= _element_accesses(n.args[0], tile)

    tvm_ffi.structural_walk(node, [(TensorLoad, on_load), (tirx.BufferStore, on_store), (tvm.ir.Call, on_call)],
                            order="pre")
    return count[0]


def choose_shared_swizzle(func: tirx.PrimFunc) -> tirx.PrimFunc:
    target = func.attrs["target"] if func.attrs is not None and "target" in func.attrs else None
    if target is None:
        return func
    laid_out = set(shared_layouts(func)) | viewed_tiles(func.body)
    allocs = []
    tvm_ffi.structural_walk(func.body, [(tirx.AllocBuffer, lambda a: allocs.append(a.buffer))], order="pre")
    uses = BufferUses(func.body)
    tiles = {b for b in allocs
             if scope_of(b) in ("shared", "shared.dyn") and b not in laid_out and len(b.ty.shape) >= 2
             and all(as_int(e) is not None for e in b.ty.shape)
             and uses.total.get(b, 0) == _element_accesses(func.body, b) > 0}  # every mention an element access
    if not tiles:
        return func
    collector = _Collector(func, tiles, warp_size(target))
    collector.visit(func.body)
    chosen = {}
    for tile in tiles - collector.failed:
        layout = _fewest_wavefronts(tile, collector.accesses[tile])
        if layout is not None:
            chosen[tile] = layout
    if not chosen:
        return func
    layouts = dict(func.attrs[LAYOUTS_ATTR]) if LAYOUTS_ATTR in func.attrs else {}
    layouts.update(chosen)
    return func.with_attr(LAYOUTS_ATTR, layouts)


def _fewest_wavefronts(tile: Any, accesses: list[_Access]) -> Layout | None:
    """The swizzle whose requests take fewer wavefronts than the row-major tile's, the fewest; None if none does."""
    if not accesses:
        return None
    shape = [as_int(e) for e in tile.ty.shape]
    element_bytes = dtype_bytes(tile.ty.dtype.dtype)
    best, best_cost = None, sum(a.wavefronts(None, shape, element_bytes) for a in accesses)
    for make in SWIZZLES:
        try:
            layout = make(tile)
        except LayoutError:
            continue
        cost = sum(a.wavefronts(layout, shape, element_bytes) for a in accesses)
        if cost < best_cost:
            best, best_cost = layout, cost
    return best


def ChooseSharedSwizzle():  # noqa: N802
    return tl_pass("ChooseSharedSwizzle", choose_shared_swizzle)
