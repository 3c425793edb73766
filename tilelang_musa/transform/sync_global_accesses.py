"""SyncGlobalAccesses: a block barrier between two statements that touch one global tensor through different
threads.

A kernel's statements run in program order for the block as a whole, but each loop is spread over the threads by
its own plan: `for i in T.Parallel(512): B[i] = 0` stores four elements per thread (vectorized), a following
`for i in T.Parallel(n): B[i] = A[i] - 1` one per thread, so element 256 is zeroed by thread 64 and then written
by thread 0. Without a barrier between the two loops, thread 64's zero may land last. ThreadSync orders shared
memory only; this pass does the same for global tensors within the block (`__syncthreads()` orders global memory
between the block's threads too).

In a statement sequence that every thread of the block runs (not under a condition on the thread index), a
statement that reads or writes a global tensor which an earlier statement wrote since the last barrier gets a
barrier before it, unless both reach the tensor through the same elements per thread: the same index expressions
once each statement's loop variables are renamed by position (`C[tx] = 0` then `C[tx] += x`), or through elements
that can never meet: in some dimension the index values of the two, over all threads and iterations, lie in ranges
that do not overlap (`Out[tx] = a` then `Out[tx + 256] = b` with 256 threads: the rows of warp-shuffle results,
which needed no barrier). Atomics are not plain accesses and order themselves.
"""

from __future__ import annotations

from typing import Any

import tvm
import tvm_ffi
from tvm import tirx

from ..ir.utils import collect_accesses, scope_of, substitute
from .pass_base import tl_pass
from .sync_write_after_write import _is_barrier, _sync


_POSITIONAL: dict = {}  # (position, dtype) -> the one variable every statement's loop at that position becomes


def _canonical_loops(stmt: Any) -> Any:
    """`stmt` with its loop variables renamed by their position in a depth-first walk (l0, l1, ...)."""
    loops = []
    tvm_ffi.structural_walk(stmt, [(tirx.For, lambda n: loops.append(n.loop_var))], order="pre")
    renamed = {}
    for k, v in enumerate(loops):
        key = (k, str(v.ty.dtype))
        renamed[v] = _POSITIONAL.setdefault(key, tirx.Var(f"l{k}", v.ty.dtype))
    return substitute(stmt, renamed)


class _Indices(tuple):
    """An access's index tuple, with the range of values each index takes over the block's threads and the
    statement's iterations (`bounds`: (lowest, highest) per dimension)."""
    bounds: tuple = ()


def _global_accesses(stmt: Any, thread_ranges: dict) -> tuple[dict, dict]:
    """Per global tensor, the index tuples `stmt` reads and writes (loop variables renamed by position)."""
    canonical = _canonical_loops(stmt)
    loop_ranges: dict = {}
    tvm_ffi.structural_walk(canonical, [(tirx.For, lambda n: loop_ranges.setdefault(n.loop_var, []).append(n))])
    analyzer = tvm.sym.Analyzer()
    for var, extent in thread_ranges.items():
        analyzer.bind(var, tvm.ir.Range(0, extent))
    for var, loops in loop_ranges.items():
        if len(loops) == 1:  # one loop at this position: its range; several: left unbounded
            analyzer.bind(var, tvm.ir.Range.from_min_extent(loops[0].min, loops[0].extent))
    reads: dict = {}
    writes: dict = {}
    for access in collect_accesses(canonical):
        if scope_of(access.buffer) == "global":
            indices = _Indices(access.indices)
            indices.bounds = tuple((b.min_value, b.max_value) for b in map(analyzer.const_int_bound, access.indices))
            (writes if access.is_store else reads).setdefault(access.buffer, []).append(indices)
    return reads, writes


def _same_elements(first: list, second: list) -> bool:
    """Whether `first` and `second` name the same elements in each thread: the same index expressions."""
    return all(any(len(a) == len(b) and all(tvm_ffi.structural_equal(x, y) for x, y in zip(a, b)) for b in second)
               for a in first) and all(any(len(a) == len(b) and all(tvm_ffi.structural_equal(x, y) for x, y in zip(a, b)) for b in first)
               for a in second)


def _apart(a: _Indices, b: _Indices) -> bool:
    """Whether index tuples `a` and `b` can never name one element, whichever threads and iterations: in some
    dimension the values each takes lie in ranges that do not meet (`Out[tx]` and `Out[tx + 256]` with 256
    threads, the rows of warp-shuffle results)."""
    return len(a) == len(b) and any(x_hi < y_lo or y_hi < x_lo for (x_lo, x_hi), (y_lo, y_hi) in zip(a.bounds, b.bounds))


def _depends(buffer: Any, earlier: list, later: list) -> bool:
    """Whether `later` may reach an element of `buffer` that another thread reached through `earlier`. A tensor
    with explicit strides may alias its own elements, so its accesses are apart only when they are the same."""
    if _same_elements(earlier, later):
        return False
    if buffer.ty.strides and len(buffer.ty.shape) > 1:
        return True
    return not all(_apart(a, b) for a in earlier for b in later)


def _may_clash(seq: Any) -> bool:
    """Whether some statement of `seq` touches a global tensor that an earlier one wrote (or writes one an earlier
    one read) since the last barrier: the tensors alone, before any index is compared. Where none does, on_seq
    would place no barrier (a barrier it places only clears what follows), so the index analysis is skipped."""
    written: set = set()
    read: set = set()
    for stmt in seq:
        if _is_barrier(stmt):
            written.clear(), read.clear()
            continue
        reads, writes = set(), set()
        for access in collect_accesses(stmt):
            if scope_of(access.buffer) == "global":
                (writes if access.is_store else reads).add(access.buffer)
        if (reads | writes) & written or writes & read:
            return True
        written |= writes
        read |= reads
    return False


def sync_global_accesses(func: tirx.PrimFunc) -> tirx.PrimFunc:
    thread_vars: set = set()
    thread_ranges: dict = {}  # threadIdx variable -> its extent

    def on_attr(node, mutator):
        if node.attr_key == "thread_extent" and str(node.node.thread_tag).startswith("threadIdx"):
            thread_vars.add(node.node.var)
            thread_ranges[node.node.var] = node.value
        return mutator.default_mutate(node)

    def depends_on_thread(expr) -> bool:
        found = []
        tvm_ffi.structural_walk(expr, [(tirx.Var, lambda v: found.append(v) if v in thread_vars else None)])
        return bool(found)

    def on_if(node, mutator):
        if depends_on_thread(node.condition):  # some threads only: a block barrier inside would never complete
            return node
        return mutator.default_mutate(node)

    def on_while(node, mutator):
        if depends_on_thread(node.condition):
            return node
        return mutator.default_mutate(node)

    def on_for(node, mutator):
        if depends_on_thread(node.min) or depends_on_thread(node.extent):  # as many iterations as a thread has
            return node
        return mutator.default_mutate(node)

    def on_seq(node, mutator):
        node = mutator.default_mutate(node)
        if not _may_clash(node.seq):
            return node
        out = []
        written: dict = {}  # global tensor -> index tuples written since the last barrier
        read: dict = {}  # ... and read
        for stmt in node.seq:
            if _is_barrier(stmt):
                written.clear(), read.clear()
                out.append(stmt)
                continue
            reads, writes = _global_accesses(stmt, thread_ranges)
            after_write = [b for b, indices in {**reads, **writes}.items()
                           if b in written and _depends(b, written[b], indices)]
            after_read = [b for b, indices in writes.items() if b in read and _depends(b, read[b], indices)]
            if after_write or after_read:
                out.append(_sync("shared"))
                written.clear(), read.clear()
            for table, accesses in ((written, writes), (read, reads)):
                for b, indices in accesses.items():
                    table.setdefault(b, []).extend(indices)
            out.append(stmt)
        return tirx.SeqStmt(out) if len(out) != len(node.seq) else node

    return tvm_ffi.structural_mutate(func, [(tirx.AttrStmt, on_attr), (tirx.IfThenElse, on_if), (tirx.For, on_for),
                                            (tirx.While, on_while), (tirx.SeqStmt, on_seq)])


def SyncGlobalAccesses():  # noqa: N802
    return tl_pass("SyncGlobalAccesses", sync_global_accesses)
