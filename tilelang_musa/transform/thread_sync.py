"""ThreadSync: TVM's barrier insertion (`s_tir.ThreadSync`) for one shared scope, with its refusal made a CompileError.

It also sees what templates do to shared tiles through pointers: an address marked `tl.access_ptr(&S[i], rw)`
(tileop/access_ptr.py: a gemm's operands are read, an LDLMS copy's destination written) is handed to TVM's analysis
as `tvm_access_ptr(..., rw)` and marked again afterwards, so a gemm gets a barrier only where its tiles were written
since the last one, and the tiles' next writers only where a gemm read them.

TVM places no barrier inside an `if` whose condition may differ between the block's threads (threads that skip
the branch would never reach it), and fails with an InternalError ("Cannot insert syncs inside condition") when a
branch needs one: e.g. a T.copy into a shared tile and a read of that tile under `if a >= 0`, with `a` a per-thread
value such as a fragment element. We name the branch, the shared buffer and the loop around it instead. Branches
whose condition every thread evaluates alike (uniform_conditions.py) are marked so, and get their barriers.
A shared tile viewed as another dtype (`v = T.view(s, shape, "int8")`, ir/tile_views.py) is one storage under two
names whose indices count different elements: for the analysis every access through a view is shown as an access
of the tile's elements its bytes are in (`v[j]` of int8 over float16 `s` as `s[j // 2 : j // 2 + 2]`), so a write
through one name orders a read through the other; the accesses are put back afterwards (_ViewAccesses).
So are branches whose condition admits a contiguous range of thread ids known at compile time (a T.ws region,
`if tx < 128:`): every thread of the range takes them, and RangeBarriers (range_barriers.py) makes their barriers
barriers over that range.
A divergent branch that TVM's analysis would want a barrier in, but whose threads reach disjoint elements of the
scope (branch_disjointness.py: `if tx % 2 == 0: a = s[tx]; s[tx ^ 1] = a`), needs none: only where the analysis
fails, or puts a barrier inside a branch a range of threads takes (TVM takes two vector accesses `s[Ramp(tx * 4, 1,
4)]` to conflict whatever their lanes: a T.Parallel(8) vectorized onto threads 0..1 would get a barrier over two
threads, part of a warp), its accesses are shown to it as one index per thread (no conflict among them, a conflict
with every access outside the branch), and put back afterwards. A barrier an earlier pass put inside such a branch
(SyncWriteAfterWrite's, in a one-thread branch that RangeBarriers then drops) stays; only one the analysis adds
counts as "a barrier inside".
"""

from __future__ import annotations

import linecache
from dataclasses import dataclass, field
from typing import Any, Callable

import tvm
from tvm import tirx

import tvm_ffi

from ..errors import CompileError, SourceLoc
from ..ir.source_lines import user_line
from ..ir.tile_views import shared_tile_views
from ..ir.utils import (TensorLoad, Var, as_int, by_identity, collect_accesses, dtype_bytes, is_buffer,
                        loc_from_text, loc_of, scope_of, thread_info)
from ..tileop.access_ptr import access_ptr, as_access
from .branch_disjointness import constant_thread_extents, disjoint_branches
from .partition_parallel_loop import thread_analyzer
from .thread_guard import reaching_threads, thread_conditions
from .uniform_conditions import marked_invariant, uniform_conditions, without_invariant_mark


def _span_loc(span: Any) -> SourceLoc | None:
    line = user_line(span)
    return SourceLoc(line[0], line[1]) if line is not None else None


def _shared_in_both(stmt: Any, scope: str) -> list[str]:
    """The names of the `scope` buffers that `stmt` both writes and reads."""
    written = {a.buffer.name for a in collect_accesses(stmt) if a.is_store and scope_of(a.buffer) == scope}
    read = {a.buffer.name for a in collect_accesses(stmt) if not a.is_store and scope_of(a.buffer) == scope}
    return sorted(written & read)


def _divergent_branch_error(body: Any, scope: str) -> CompileError:
    found: list = []
    loops: list = []
    bound: dict = {}  # a condition bound before its `if` (_hoisted_condition_reads) -> the condition as written
    last: list = [None]  # the source line last met in program order (a loop's, a tile op's or user barrier's)

    def note_calls(node: Any) -> None:
        def on_call(call: Any) -> None:
            if call.attrs is not None and "tl.loc" in call.attrs:
                last[0] = loc_from_text(str(call.attrs["tl.loc"]))
        tvm_ffi.structural_walk(node, [(tvm.ir.Call, on_call)])

    def visit(node: Any) -> None:
        if found:
            return
        if isinstance(node, tirx.For):
            last[0] = loc_of(node) or last[0]
            loops.append(node)
            visit(node.body)
            loops.pop()
            return
        if isinstance(node, tirx.Bind):
            bound[node.var] = node.value
        if isinstance(node, tirx.IfThenElse):
            for case in (node.then_case, node.else_case):
                if case is not None:
                    both = _shared_in_both(case, scope)
                    if both:
                        visit(case)  # the innermost such branch
                        if not found:  # the branch's own line (a T.Parallel's guard carries the loop's), else
                            # the innermost located loop's, else the last line met before it
                            own = _span_loc(node.span)
                            around = next((loc_of(loop) for loop in reversed(loops) if loc_of(loop) is not None),
                                          None)
                            loop_loc = own or around
                            found.append((node, both[0], loop_loc or last[0], loop_loc is None,
                                          around if own is not None and around != own else None))
                        return
        if isinstance(node, tirx.IfThenElse):  # no case of it needs a barrier: seen for its lines only
            children = [c for c in (node.then_case, node.else_case) if c is not None]
        else:
            children = _children(node)
            if not children:
                note_calls(node)
        for child in children:
            visit(child)

    visit(body)
    if not found:
        return CompileError(f"a branch whose condition may differ between the block's threads needs a barrier for "
                            f"{scope} memory inside it; make the condition the same in every thread",
                            stage="ThreadSync")
    branch, buffer, loc, after_loc, loop = found[0]
    condition = bound.get(branch.condition, branch.condition)
    where = " (in the code after the line shown, the last one known at this stage)" if loc and after_loc else ""
    inside = ""
    if loop is not None:  # the branch's own line is shown: name the loop it runs in too
        text = linecache.getline(loop.filename, loop.lineno).strip()
        inside = f". The branch runs inside `{text}` at {loop}" if text else f". The branch runs inside the loop at " \
            f"{loop}"
    return CompileError(
        f"`if {condition}:`{where} writes and reads {scope} buffer `{buffer}`, which needs a barrier between "
        "them inside the branch, but its condition may differ between the block's threads (threads that skip the "
        "branch would never reach the barrier). Compute the condition from values every thread agrees on (block "
        f"indices, loop counters, global or shared memory), or take the shared-memory work out of the branch{inside}",
        loc, stage="ThreadSync")


def _children(node: Any) -> list:
    if isinstance(node, tirx.SeqStmt):
        return list(node.seq)
    body = getattr(node, "body", None)
    return [body] if isinstance(body, tirx.Stmt) else []


def _thread_range_test(func: tirx.PrimFunc) -> Callable[[Any], bool]:
    """Whether a condition reads thread indices and constants only and admits a contiguous range of thread ids."""
    threads = thread_info(func)
    thread_vars = {v for tag, v in threads.vars.items() if tag.startswith("threadIdx.")}
    analyzer = thread_analyzer(threads)

    def is_range(cond) -> bool:
        others = []
        tvm_ffi.structural_walk(cond, [(Var, lambda v: others.append(v) if v not in thread_vars else None),
                                       (tvm.ir.Call, others.append)])
        if others or not thread_conditions(cond, threads):
            return False
        try:
            reaching_threads([cond], threads, analyzer(), None, "ThreadSync")
        except CompileError:
            return False
        return True

    return is_range


def mark_thread_ranges(func: tirx.PrimFunc) -> tirx.PrimFunc:
    """Mark as thread-invariant every `if` whose condition reads thread indices and constants only and admits a
    contiguous range of thread ids: the range's threads all take the branch, so a barrier over them may go inside."""
    is_range = _thread_range_test(func)

    def on_if(node, mutator):
        node = mutator.default_mutate(node)
        return marked_invariant(node) if is_range(node.condition) else node

    return func.with_body(tvm_ffi.structural_mutate(func.body, [(tirx.IfThenElse, on_if)]))


def _exposed(node: Any, scope: str) -> Any:
    """A `tl.access_ptr(&X[i], rw)` of a `scope` buffer as `tvm_access_ptr(X's dtype, X.data, i, rest, rw)`, the form
    TVM's analysis reads (X from i on: the analysis treats any range as a conflict anyway); any other call as it is."""
    access = as_access(node)
    if access is None or scope_of(access.element.source) != scope:
        return node
    buffer = access.element.source
    if len(access.element.indices) != 1:  # ThreadSync runs after FlattenBuffer
        raise CompileError(f"ThreadSync: `{buffer.name}` is not flat", stage="ThreadSync")
    (index,) = access.element.indices
    return tirx.call_intrin("handle", "tirx.tvm_access_ptr", tirx.type_annotation(buffer.ty.dtype), buffer.data,
                            index, buffer.ty.shape[0] - index, tirx.const(access.rw, "int32"))


def _hidden(node: Any) -> Any:
    """_exposed's inverse: one of our `tvm_access_ptr` calls as the marker again; any other call as it is."""
    if not (isinstance(node.op, tvm.ir.Op) and str(node.op.name) == "tirx.tvm_access_ptr"):
        return node
    _, data, index, _, rw = node.args
    if not (isinstance(data, tvm.ir.Call) and str(data.op.name) == "tirx.buffer_data"):
        return node  # not one of ours (ours take `X.data`, which is buffer_data(X))
    return access_ptr(data.args[0][index], int(rw.value))


def expose_marked_accesses(func: tirx.PrimFunc, scope: str) -> tirx.PrimFunc:
    """Each `tl.access_ptr(&X[i], rw)` of a `scope` buffer in the form TVM's analysis reads (_exposed)."""
    def on_call(node, mutator):
        return _exposed(mutator.default_mutate(node), scope)

    return func.with_body(tvm_ffi.structural_mutate(func.body, [(tvm.ir.Call, on_call)]))


def hide_marked_accesses(func: tirx.PrimFunc) -> tirx.PrimFunc:
    """The inverse of expose_marked_accesses: the markers again, as the later passes and the printer expect."""
    def on_call(node, mutator):
        return _hidden(mutator.default_mutate(node))

    return func.with_body(tvm_ffi.structural_mutate(func.body, [(tvm.ir.Call, on_call)]))


def _hoisted_condition_reads(body: Any, scope: str) -> Any:
    """`if s[i] > 0:` with `s` a `scope` buffer becomes `cond = s[i] > 0; if cond:`. The stock analysis (TVM 0.27)
    visits an `if`'s condition outside any statement and fails on a load of the scope it syncs ("allow_append_");
    in a statement of its own, the read is seen, and ordered after the writes before it. The whole condition is
    bound, so `i < n and s[i] > 0` still short-circuits."""

    def reads_scope(expr: Any) -> bool:
        found = []
        tvm_ffi.structural_walk(expr, [(TensorLoad, lambda n: found.append(n) if scope_of(n.source) == scope
                                        else None)])
        return bool(found)

    def on_if(node, mutator):
        node = mutator.default_mutate(node)
        if not reads_scope(node.condition):
            return node
        cond = Var("cond", "bool")
        return tirx.SeqStmt([tirx.Bind(cond, node.condition),
                             tirx.IfThenElse(cond, node.then_case, node.else_case)])

    return tvm_ffi.structural_mutate(body, [(tirx.IfThenElse, on_if)])


def hoist_condition_reads(func: tirx.PrimFunc, scope: str) -> tirx.PrimFunc:
    """The function with its branch conditions' `scope` reads bound first (_hoisted_condition_reads)."""
    return func.with_body(_hoisted_condition_reads(func.body, scope))


@dataclass
class _Buffers:
    """The buffers a function allocates (by scope), the scopes of its views (DeclBuffer) other than those of a tile
    as another dtype, those (view -> tile), and the scopes of its parameters."""
    allocated: dict = field(default_factory=dict)
    views: set = field(default_factory=set)
    tile_views: dict = field(default_factory=dict)
    params: set = field(default_factory=set)

    @classmethod
    def of(cls, func: tirx.PrimFunc) -> _Buffers:
        found = cls(params={scope_of(p) for p in func.params if is_buffer(p)},
                    tile_views=shared_tile_views(func.body))
        tvm_ffi.structural_walk(func.body, [
            (tirx.AllocBuffer, lambda n: found.allocated.setdefault(scope_of(n.buffer), []).append(n.buffer)),
            (tirx.DeclBuffer, lambda n: None if n.buffer in found.tile_views else found.views.add(
                scope_of(n.buffer)))])
        return found

    def has(self, scope: str) -> bool:
        return scope in self.allocated or scope in self.views or scope in self.params


SHOWN = "__tl_shown_as_tile"  # the extern call that wraps a shown access, with the index of what it shows


class _ViewAccesses:
    """The accesses through views of another dtype of the tiles of one scope, shown to the analysis as accesses of
    their tiles, in the tile's elements (see the file comment), and put back afterwards. The tile's own accesses
    stay as they are (their barriers are placed as in a kernel without views). A view of the tile's width is
    exact (`v[i]` is `s[i]`); a wider one covers whole elements (`v[i]` of 4 bytes over 2-byte `s`: `s[2i:2i+2]`); a
    narrower one is shown as the element its bytes are in and the next (never one index, which the analysis would
    take for the element itself: byte `tx` of thread tx is in half tx // 2, another thread's), unless its bytes are
    whole elements (`v[2i:2i+2]` is `s[i]`).
    Each shown load or marked address is wrapped in a pure extern call `SHOWN(shown, k)`, a shown store's value is
    `SHOWN(value, k)`: k is the index of the original among `originals` (the stock pass rebuilds the nodes around
    the barriers it inserts, so they are found by content, not identity)."""

    def __init__(self, tile_views: dict, scope: str, retagged: dict | None):
        self.tiles = {v: t for v, t in tile_views.items() if scope_of(t) == scope}
        self.shown_tile = {t: (retagged or {}).get(t, t) for t in self.tiles.values()}
        self.originals: list = []
        self._analyzer = tvm.sym.Analyzer()

    def __bool__(self) -> bool:
        return bool(self.tiles)

    def _shown_index(self, view: Any, index: Any) -> Any:
        """`index` of `view` (flat) as the indices of its tile's elements its bytes are in; an index of another
        form (a gather) as a fresh variable, which every other index differs from."""
        tile = self.tiles[view]
        view_width, tile_width = dtype_bytes(view.ty.dtype.dtype), dtype_bytes(tile.ty.dtype.dtype)
        if isinstance(index, tirx.Ramp) and as_int(index.stride) == 1 and as_int(index.lanes) is not None:
            base, lanes = index.base, as_int(index.lanes)
        elif not isinstance(index, tirx.Ramp) and index.ty.dtype.lanes == 1:
            base, lanes = index, 1
        else:
            return Var("gathered", "int32")
        if view_width % tile_width == 0:
            ratio = view_width // tile_width
            start, count = base * ratio if ratio > 1 else base, lanes * ratio
        elif tile_width % view_width == 0:
            ratio = tile_width // view_width
            if lanes % ratio == 0 and self._analyzer.can_prove_equal(tirx.floormod(base, ratio), 0):
                start, count = tirx.floordiv(base, ratio), lanes // ratio  # whole elements: exact
            else:
                start, count = tirx.floordiv(base, ratio), -(-lanes // ratio) + 1
        else:
            return Var("gathered", "int32")
        start = self._analyzer.simplify(start)
        return start if count == 1 else tirx.Ramp(start, 1, count)

    def _wrapped(self, original: Any, shown: Any, dtype: Any) -> Any:
        self.originals.append(original)
        return tirx.call_pure_extern(dtype, SHOWN, shown, tirx.const(len(self.originals) - 1, "int32"))

    def _tile_dtype(self, view: Any, index: Any) -> str:
        lanes = index.ty.dtype.lanes
        element = str(self.tiles[view].ty.dtype.dtype)
        return element if lanes == 1 else f"{element}x{lanes}"

    def handlers(self, other_call: Callable[[Any, Any], Any]) -> list:
        """structural_mutate handlers that show the views' accesses; other calls go to `other_call`."""

        def on_load(node, mutator):
            original, node = node, mutator.default_mutate(node)
            if original.source not in self.tiles or len(node.indices) != 1:
                return node
            tile = self.shown_tile[self.tiles[original.source]]
            return self._wrapped(original, tile[self._shown_index(original.source, node.indices[0])],
                                 str(original.ty.dtype))

        def on_store(node, mutator):
            original, node = node, mutator.default_mutate(node)
            if original.buffer not in self.tiles or len(node.indices) != 1:
                return node
            index = self._shown_index(original.buffer, node.indices[0])
            # the stored value's reads stay visible, as the argument of a call of the shown elements' type
            value = self._wrapped(original, node.value, self._tile_dtype(original.buffer, index))
            return tirx.BufferStore(self.shown_tile[self.tiles[original.buffer]], value, [index])

        def on_call(node, mutator):
            access = as_access(node)
            if access is None or access.element.source not in self.tiles:
                return other_call(node, mutator)
            view = access.element.source
            if len(access.element.indices) != 1:
                raise CompileError(f"ThreadSync: `{view.name}` is not flat", stage="ThreadSync")
            tile = self.tiles[view]
            (index,) = access.element.indices
            start = tirx.floordiv(index * dtype_bytes(view.ty.dtype.dtype), dtype_bytes(tile.ty.dtype.dtype))
            shown = self.shown_tile[tile]
            return self._wrapped(node, tirx.call_intrin(
                "handle", "tirx.tvm_access_ptr", tirx.type_annotation(shown.ty.dtype), shown.data, start,
                shown.ty.shape[0] - start, tirx.const(access.rw, "int32")), "handle")

        return [(TensorLoad, on_load), (tirx.BufferStore, on_store), (tvm.ir.Call, on_call)]

    def _original(self, node: Any) -> Any:
        """The original a `SHOWN(shown, k)` call wraps, else None."""
        if not (isinstance(node, tvm.ir.Call) and isinstance(node.op, tvm.ir.Op)
                and str(node.op.name) == "tirx.call_pure_extern"
                and isinstance(node.args[0], tvm.ir.expr.StringImm) and node.args[0].value == SHOWN):
            return None
        return self.originals[int(node.args[2].value)]

    def restored(self, body: Any) -> Any:
        """`body` with every shown access put back (a store keeps the value it holds now)."""

        def on_call(node, mutator):  # a load or a marked address
            original = self._original(node)
            return mutator.default_mutate(node) if original is None else original

        def on_store(node, mutator):
            original = self._original(node.value)
            if not isinstance(original, tirx.BufferStore):
                return mutator.default_mutate(node)
            (value,) = tvm_ffi.structural_mutate([node.value.args[1]], [(tvm.ir.Call, on_call)])
            return tirx.BufferStore(original.buffer, value, list(original.indices))

        body = tvm_ffi.structural_mutate(body, [(tvm.ir.Call, on_call), (tirx.BufferStore, on_store)])
        left = []
        tvm_ffi.structural_walk(body, [(tvm.ir.Call, lambda c: left.append(c) if self._original(c) is not None
                                        else None)])
        if left:
            raise CompileError("ThreadSync: an access through a view of a shared tile was not put back (an internal "
                               "check of the compiler: please report it)", stage="ThreadSync")
        return body


def _distinct_dynamic_tiles(buffers: _Buffers) -> dict | None:
    """Each "shared.dyn" tile -> the same tile retagged "shared"; None where a tile is also declared under another
    name (a view), whose accesses only the conservative rule would relate.

    TVM's analysis takes every two "shared.dyn" accesses to overlap (the tiles of one dynamic arena may share bytes),
    so a loop that reads one tile and writes another (`for it: B[...] = A[...]`, every T.Parallel copy between
    tiles) got a barrier in each iteration. Here tiles have bytes of their own until PlanDynamicSharedMemory, which
    places a barrier wherever it lets two of them share bytes: to the analysis they are distinct "shared" tiles."""
    tiles = buffers.allocated.get("shared.dyn")
    if "shared.dyn" in buffers.views or not tiles:  # (views of a tile as another dtype are not among them)
        return None
    return {buf: tirx.decl_buffer(list(buf.ty.shape), str(buf.ty.dtype), str(buf.name), scope="shared")
            for buf in tiles}


def _as_dynamic_barrier(node: Any) -> Any:
    """A barrier of the retagged analysis named for the scope it orders ("shared.dyn"); any other call as it is."""
    if isinstance(node.op, tvm.ir.Op) and str(node.op.name) == "tirx.tvm_storage_sync" and \
            isinstance(node.args[0], tvm.ir.StringImm) and node.args[0].value == "shared":
        # (the attributes stay: a user's named barrier keeps its mark, so its id stays the user's)
        return tvm.ir.Call(node.op, [tvm.ir.expr.StringImm("shared.dyn"), *node.args[1:]], attrs=node.attrs,
                           ret_ty="int32")
    return node


def _synced(func: tirx.PrimFunc, body: Any, buffers: _Buffers, scope: str) -> tirx.PrimFunc:
    """The stock analysis over `body` (conditions hoisted), marked for it in one rewrite and unmarked in
    another: uniform and thread-range conditions, exposed accesses, dynamic tiles retagged (and back)."""
    retagged = _distinct_dynamic_tiles(buffers) if scope == "shared.dyn" else None
    as_scope = "shared" if retagged is not None else scope
    # Decided on each condition as written: neither the retagging nor the exposed accesses change the answer.
    is_uniform, is_range = uniform_conditions(body), _thread_range_test(func)

    def mark_if(node, mutator):
        marked = is_uniform(node.condition) or is_range(node.condition)
        node = mutator.default_mutate(node)
        return marked_invariant(node) if marked else node

    def expose(node, mutator):
        return _exposed(mutator.default_mutate(node), as_scope)

    through_views = _ViewAccesses(buffers.tile_views, scope, retagged)
    marking = [(tirx.IfThenElse, mark_if),
               *(through_views.handlers(expose) if through_views else [(tvm.ir.Call, expose)])]
    if retagged is not None:
        marking.append((Var, by_identity(retagged)))
    stock = tvm.s_tir.transform.ThreadSync(as_scope)
    (result,) = stock(tvm.IRModule({"main": func.with_body(tvm_ffi.structural_mutate(body, marking))}))\
        .functions.values()
    if through_views:
        result = result.with_body(through_views.restored(result.body))

    back = {new: old for old, new in retagged.items()} if retagged is not None else None
    # With static "shared" tiles too, a barrier's scope is ambiguous and stays "shared" (both __syncthreads).
    rename_barriers = back is not None and "shared" not in buffers.allocated

    def unmark_call(node, mutator):
        node = mutator.default_mutate(node)  # (each rule below matches calls of its own op)
        return without_invariant_mark(_hidden(_as_dynamic_barrier(node) if rename_barriers else node))

    unmarking = [(tvm.ir.Call, unmark_call)]
    if back is not None:
        unmarking.append((Var, by_identity(back)))
    return result.with_body(tvm_ffi.structural_mutate(result.body, unmarking))


def _synced_around_disjoint(func: tirx.PrimFunc, body: Any, buffers: _Buffers, scope: str) -> tirx.PrimFunc | None:
    """The stock analysis with the `scope` accesses of each disjoint divergent branch shown as `s[tx + k]` (one
    index per thread, k a fresh variable: the same index for all of them, unequal to every index outside), the
    branches restored afterwards; None if no branch is disjoint or the analysis placed a barrier inside one."""
    extents = constant_thread_extents(thread_info(func))
    if not extents:
        return None
    branches = disjoint_branches(body, scope, extents)
    if not branches:
        return None
    per_thread = sum(extents, tirx.const(0, "int32"))
    originals = {}

    def shown(index: Any, k: Any) -> Any:
        value = per_thread + k
        dtype = index.base.ty.dtype if isinstance(index, tirx.Ramp) else index.ty.dtype
        return value.astype(dtype) if dtype != value.ty.dtype else value

    def hide(branch: Any) -> Any:
        k = Var(f"disjoint{len(originals)}", "int32")
        originals[k] = branch

        # A vector access `s[Ramp(b, 1, n)]` is shown as the scalar `s[tx + k]` too (the analysis takes two vector
        # accesses to conflict whatever their lanes): a load broadcast to its lanes, a store as its value's reads
        # then a scalar store. Only the analysis sees this; the branch is restored whole afterwards.
        def on_load(node, mutator):
            node = mutator.default_mutate(node)
            if scope_of(node.source) != scope:
                return node
            load = node.source[shown(node.indices[0], k)]
            return tirx.Broadcast(load, node.indices[0].lanes) if isinstance(node.indices[0], tirx.Ramp) else load

        def on_store(node, mutator):
            node = mutator.default_mutate(node)
            if scope_of(node.buffer) != scope:
                return node
            if not isinstance(node.indices[0], tirx.Ramp):
                return tirx.BufferStore(node.buffer, node.value, [shown(node.indices[0], k)])
            scalar = tirx.BufferStore(node.buffer, tirx.const(0, str(node.buffer.ty.dtype)), [shown(node.indices[0], k)])
            return tirx.SeqStmt([tirx.Evaluate(node.value), scalar])

        then_case = tvm_ffi.structural_mutate(branch.then_case, [(TensorLoad, on_load), (tirx.BufferStore, on_store)])
        return tirx.IfThenElse(branch.condition, then_case, None)

    # (the branches are found on `body`; rewrite them before anything inside changes their identity)
    hidden = tvm_ffi.structural_mutate(body, [(tirx.IfThenElse, lambda node, m: hide(node) if any(
        node.same_as(b) for b in branches) else m.default_mutate(node))])
    result = _synced(func, hidden, buffers, scope)
    restored_all = []

    barrier_inside = []  # a flag, not an exception: one raised in a mutator reaches us as TVM's RuntimeError

    def restore(node, mutator):
        # top down: the hidden branch is the outermost `if` of its condition around its accesses (the `if`s inside
        # it mention its variable too, and are restored with it)
        mine = [k for k in originals if _mentions(node.then_case, k) and not _mentions(node.condition, k)
                and tvm.ir.structural_equal(node.condition, originals[k].condition)]
        if len(mine) != 1:
            return mutator.default_mutate(node)
        (k,) = mine
        if _barrier_count(node.then_case) > _barrier_count(originals[k].then_case):  # (one placed before stays)
            barrier_inside.append(k)
            return node
        restored_all.append(k)
        return tirx.IfThenElse(node.condition, originals[k].then_case, node.else_case)

    restored = tvm_ffi.structural_mutate(result.body, [(tirx.IfThenElse, restore)])
    if barrier_inside or len(restored_all) != len(originals):
        return None
    return result.with_body(restored)


def _barrier_in_range_branch(func: tirx.PrimFunc, body: Any) -> bool:
    """Whether a barrier sits inside a branch taken by a range of the block's threads (`if tx < 2:`)."""
    is_range = _thread_range_test(func)
    found = []

    def on_if(node: Any) -> None:
        if not found and is_range(node.condition) and _has_barrier(node.then_case):
            found.append(node)

    tvm_ffi.structural_walk(body, [(tirx.IfThenElse, on_if)])
    return bool(found)


def _synced_around_disjoint_or_none(func: tirx.PrimFunc, body: Any, buffers: _Buffers,
                                    scope: str) -> tirx.PrimFunc | None:
    try:
        return _synced_around_disjoint(func, body, buffers, scope)
    except tvm.error.InternalError as err:
        if "Cannot insert syncs inside condition" not in str(err):
            raise
        return None


def _mentions(node: Any, var: Any) -> bool:
    found = []
    tvm_ffi.structural_walk(node, [(Var, lambda v: found.append(v) if v.same_as(var) else None)])
    return bool(found)


def _barrier_count(node: Any) -> int:
    found = []
    tvm_ffi.structural_walk(node, [(tvm.ir.Call, lambda c: found.append(c) if isinstance(c.op, tvm.ir.Op) and str(
        c.op.name) == "tirx.tvm_storage_sync" else None)])
    return len(found)


def _has_barrier(node: Any) -> bool:
    return _barrier_count(node) > 0


def ThreadSync(scope: str):  # noqa: N802 - a pass, named as TVM names passes
    """`s_tir.ThreadSync(scope)`, seeing the accesses of marked addresses (tileop/access_ptr.py), whose refusal
    to place a barrier under a divergent branch is a CompileError."""
    def run(func: tirx.PrimFunc, mod: Any, ctx: Any) -> tirx.PrimFunc:
        buffers = _Buffers.of(func)
        if not buffers.has(scope):
            return func  # no buffer of the scope: no access for a barrier to order
        body = _hoisted_condition_reads(func.body, scope)
        try:
            result = _synced(func, body, buffers, scope)
            if not _barrier_in_range_branch(func, result.body):
                return result
            # a barrier among some of the block's threads (a partial barrier, or none to be had on mp_22): not
            # needed where those threads reach disjoint elements
            return _synced_around_disjoint_or_none(func, body, buffers, scope) or result
        except tvm.error.InternalError as err:
            if "Cannot insert syncs inside condition" not in str(err):
                raise
        try:
            result = _synced_around_disjoint(func, body, buffers, scope)
        except tvm.error.InternalError as err:
            if "Cannot insert syncs inside condition" not in str(err):
                raise
            result = None
        if result is None:
            raise _divergent_branch_error(body, scope) from None
        return result

    return tirx.transform.prim_func_pass(run, opt_level=0, name=f"tl.ThreadSync.{scope}")
