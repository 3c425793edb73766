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
once each statement's loop variables are renamed by position (`C[tx] = 0` then `C[tx] += x`). Atomics are not
plain accesses and order themselves.
"""

from __future__ import annotations

from typing import Any

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


def _global_accesses(stmt: Any) -> tuple[dict, dict]:
    """Per global tensor, the index tuples `stmt` reads and writes (loop variables renamed by position)."""
    reads: dict = {}
    writes: dict = {}
    for access in collect_accesses(_canonical_loops(stmt)):
        if scope_of(access.buffer) == "global":
            (writes if access.is_store else reads).setdefault(access.buffer, []).append(tuple(access.indices))
    return reads, writes


def _same_elements(first: list, second: list) -> bool:
    """Whether `first` and `second` name the same elements in each thread: the same index expressions."""
    return all(any(len(a) == len(b) and all(tvm_ffi.structural_equal(x, y) for x, y in zip(a, b)) for b in second)
               for a in first) and all(any(len(a) == len(b) and all(tvm_ffi.structural_equal(x, y) for x, y in zip(a, b)) for b in first)
               for a in second)


def sync_global_accesses(func: tirx.PrimFunc) -> tirx.PrimFunc:
    thread_vars: set = set()

    def on_attr(node, mutator):
        if node.attr_key == "thread_extent" and str(node.node.thread_tag).startswith("threadIdx"):
            thread_vars.add(node.node.var)
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
        out = []
        written: dict = {}  # global tensor -> index tuples written since the last barrier
        read: dict = {}  # ... and read
        for stmt in node.seq:
            if _is_barrier(stmt):
                written.clear(), read.clear()
                out.append(stmt)
                continue
            reads, writes = _global_accesses(stmt)
            after_write = [b for b, indices in {**reads, **writes}.items()
                           if b in written and not _same_elements(written[b], indices)]
            after_read = [b for b, indices in writes.items() if b in read and not _same_elements(read[b], indices)]
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
