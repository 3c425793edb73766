"""SyncWriteAfterWrite: a barrier between two writes of a shared buffer by differently mapped threads.

TVM's ThreadSync (run right after this pass) inserts barriers for read-after-write and write-after-read
hazards on shared memory, but not for write-after-write: `T.clear(S); T.copy(A[...], S)` lowers to two
loops whose thread -> element maps differ (different vector widths), so without a barrier a thread's
zero could land after another thread's copied value. Within one statement sequence, a statement that
writes a shared buffer already written since the last read of it gets a barrier before it. (A read in
between needs no extra barrier: ThreadSync puts one before that read.)
"""

from __future__ import annotations

import tvm_ffi
from tvm import tirx

from .ir_utils import collect_accesses, scope_of
from .pass_base import tl_pass

_SHARED = ("shared", "shared.dyn")


def _sync(scope: str):
    return tirx.Evaluate(tirx.call_intrin("int32", "tirx.tvm_storage_sync", scope))


def _shared_accesses(stmt):
    reads, writes = set(), set()
    for access in collect_accesses(stmt):
        if scope_of(access.buffer) in _SHARED:
            (writes if access.is_store else reads).add(access.buffer)
    return reads, writes


def sync_write_after_write(func: tirx.PrimFunc) -> tirx.PrimFunc:
    def on_seq(node, mutator):
        node = mutator.default_mutate(node)
        out = []
        pending: set = set()  # shared buffers written since their last read
        for stmt in node.seq:
            reads, writes = _shared_accesses(stmt)
            pending -= reads
            clash = [b for b in writes if b in pending]
            if clash:
                out.append(_sync(scope_of(clash[0])))
                pending.clear()
            pending |= writes
            out.append(stmt)
        return tirx.SeqStmt(out) if len(out) != len(node.seq) else node

    return tvm_ffi.structural_mutate(func, [(tirx.SeqStmt, on_seq)])


def SyncWriteAfterWrite():  # noqa: N802
    return tl_pass("SyncWriteAfterWrite", sync_write_after_write)
