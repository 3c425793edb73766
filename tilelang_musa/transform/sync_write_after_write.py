"""SyncWriteAfterWrite: a barrier between two writes of a shared buffer by differently mapped threads.

TVM's ThreadSync (run right after this pass) inserts barriers for read-after-write and write-after-read
hazards on shared memory, but not for write-after-write: `T.clear(S); T.copy(A[...], S)` lowers to two
loops whose thread -> element maps differ (different vector widths), so without a barrier a thread's
zero could land after another thread's copied value. Within one statement sequence, a statement that
writes a shared buffer already written since the last read of it gets a barrier before it, unless no element of it is
written by two threads over those statements (branch_disjointness: one thread's swap `s[2 * tx] = b; s[2 * tx + 1] = a`
in an odd-even sort), among the threads the conditions around the sequence admit, in each iteration of the loops
around it (an FFT's butterfly `if tx < half: s[j] = u + t; s[j + m] = u - t`, j and m functions of tx and the
stage). (A read in between needs no extra barrier: ThreadSync puts one before that read.)

An address marked with what its callee does (tileop/access_ptr.py: a gemm's operand tiles are read, an LDLMS copy's
destination written) counts as that read or write. Two marked writes never clash: they are asynchronous copies,
whose completion order no barrier between their issues would fix, or the same copy's pieces.

It also orders the shared-memory accesses ThreadSync cannot see: an element passed by address to a call
(`tl::AtomicAdd(&s[0], v)`, any `T.address_of(s[...])`, unmarked) may be read and written by it, but ThreadSync
skips the operand of `address_of`. Such a statement gets a barrier before it if the buffer was accessed since the
last barrier, and the next statement that accesses the buffer gets one before it. In a loop the next statement
may be in the next iteration (`if T.any_of(s): ...` then, next iteration, `T.copy(..., s)`): a loop body that
has barriers (so all threads run it) then ends with one.

A view of a tile as another dtype (ir/tile_views.py) is the tile's bytes: its accesses count as the tile's.
"""

from __future__ import annotations

import tvm
import tvm_ffi
from tvm import tirx

from ..ir.ops import SYNC_GRID_OP
from ..ir.tile_views import shared_tile_views
from ..ir.utils import TensorLoad, collect_accesses, scope_of, thread_info
from ..tileop.access_ptr import READ, WRITE, as_access
from .branch_disjointness import Context, constant_thread_extents, contexts_of_sequences, thread_disjoint_writes
from .pass_base import tl_pass

_SHARED = ("shared", "shared.dyn")


def _sync(scope: str):
    return tirx.Evaluate(tirx.call_intrin("int32", "tirx.tvm_storage_sync", scope))


def _is_barrier(stmt) -> bool:
    """A block barrier, or a grid barrier (T.sync_grid), which is one too: grid.sync() starts and ends with one."""
    return (isinstance(stmt, tirx.Evaluate) and isinstance(stmt.value, tvm.ir.Call)
            and isinstance(stmt.value.op, tvm.ir.Op)
            and str(stmt.value.op.name) in ("tirx.tvm_storage_sync", SYNC_GRID_OP))


def _shared_accesses(stmt, tiles: dict):
    """(read, written, written through a marked address, by unmarked address) shared buffers of `stmt`, a view of
    a tile in `tiles` (view -> tile) counted as its tile; an element whose address is taken unmarked counts as
    read, written and by address."""
    found = _named_accesses(stmt)
    return tuple({tiles.get(b, b) for b in names} for names in found) if tiles else found


def _named_accesses(stmt):
    reads, writes, marked_writes, opaque = set(), set(), set(), set()
    # The element inside a marker is an address, not a load: what the callee does with it is the marker's rw.
    unmarked = tvm_ffi.structural_mutate(stmt, [(tvm.ir.Call, lambda call, mutator: tirx.const(0, "int32")
                                                 if as_access(call) is not None else mutator.default_mutate(call))])
    for access in collect_accesses(unmarked):
        if scope_of(access.buffer) in _SHARED:
            (writes if access.is_store else reads).add(access.buffer)
    marked, addresses = [], []

    def on_call(call):
        access = as_access(call)
        if access is not None:
            marked.append(call.args[0])
            if scope_of(access.element.source) in _SHARED:
                if access.rw & READ:
                    reads.add(access.element.source)
                if access.rw & WRITE:
                    marked_writes.add(access.element.source)
        elif isinstance(call.op, tvm.ir.Op) and str(call.op.name) == "tirx.address_of":
            addresses.append(call)

    tvm_ffi.structural_walk(stmt, [(tvm.ir.Call, on_call)])
    for call in addresses:
        load = call.args[0]
        if hasattr(load, "source") and scope_of(load.source) in _SHARED and not any(call.same_as(m) for m in marked):
            opaque.add(load.source)
    return reads | opaque, writes | opaque, marked_writes, opaque


def _written_first(stmt, tiles: dict) -> set:
    """The shared buffers whose first access in `stmt`, in program order, is a store (a post-order walk: a store's
    value is read before it is stored, a loop's bounds before its body, a condition before its branches)."""
    first: dict = {}

    def note(buffer, is_store):
        if scope_of(buffer) in _SHARED:
            first.setdefault(tiles.get(buffer, buffer), is_store)

    tvm_ffi.structural_walk(stmt, [(TensorLoad, lambda load: note(load.source, False)),
                                   (tirx.BufferStore, lambda store: note(store.buffer, True))], order="post")
    return {buffer for buffer, is_store in first.items() if is_store}


def _barrier_across_iterations(node: tirx.For, tiles: dict) -> tirx.For:
    """A loop whose head (before its first barrier) and tail (after its last) pass a shared buffer by address that
    the other touches: the next iteration's head runs right after this one's tail, so the body ends in a barrier."""
    stmts = list(node.body.seq) if isinstance(node.body, tirx.SeqStmt) else [node.body]
    barriers = [k for k, stmt in enumerate(stmts) if _is_barrier(stmt)]
    if not barriers:  # a loop without barriers may run in some threads only (a thread's slots, a guard)
        return node
    head = stmts[:barriers[0]]  # runs right after the previous iteration's tail
    tail = stmts[barriers[-1] + 1:]
    head_touched, tail_touched, head_opaque, tail_opaque = set(), set(), set(), set()
    for stmts_, touched, opaque in ((head, head_touched, head_opaque), (tail, tail_touched, tail_opaque)):
        for stmt in stmts_:
            reads, writes, marked_writes, by_address = _shared_accesses(stmt, tiles)
            touched |= reads | writes | marked_writes
            opaque |= by_address
    clash = (tail_opaque & head_touched) | (head_opaque & tail_touched)
    if not clash:
        return node
    body = tirx.SeqStmt([*stmts, _sync(scope_of(next(iter(clash))))])
    return tirx.For(node.loop_var, node.min, node.extent, node.kind, body, node.thread_binding, node.annotations,
                    node.step)


def sync_write_after_write(func: tirx.PrimFunc) -> tirx.PrimFunc:
    tiles = shared_tile_views(func.body)

    threads = constant_thread_extents(thread_info(func))
    contexts: list = []  # the loops, conditions and bindings around each sequence: walked at the first clash only

    def context_of(handle) -> Context | None:
        if not contexts:
            contexts.append(contexts_of_sequences(func.body))
        return contexts[0].get(handle)

    def same_thread_writes(buffers: list, writers: dict, stmt, sequence) -> bool:
        """Each of `buffers` written since its last read by `writers[b]` and now by `stmt`, no element by two
        threads: the writes need no barrier between them. Only for writes of the tile itself: a view's elements
        (another dtype) are other units, which the element count cannot compare."""
        def through_views(b, statements) -> bool:
            return any(tiles.get(w, w).same_as(b) and not w.same_as(b)
                       for s in statements for w in _named_accesses(s)[1])

        return bool(threads) and all(not through_views(b, [*writers[b], stmt]) and
                                     thread_disjoint_writes([*writers[b], stmt], b, threads, context_of(sequence))
                                     for b in buffers)

    def on_seq(node, mutator):
        sequence = node.__chandle__()  # the sequence as in func.body, where its context was taken
        node = mutator.default_mutate(node)
        out = []
        pending: set = set()  # shared buffers written since their last read
        writers: dict = {}  # pending buffer -> the statements that wrote it since its last read
        pending_marked: set = set()  # shared buffers written through a marked address since their last read
        touched: set = set()  # shared buffers accessed since the last barrier
        by_address: set = set()  # shared buffers passed by (unmarked) address since the last barrier
        for stmt in node.seq:
            if _is_barrier(stmt):
                pending.clear(), pending_marked.clear(), touched.clear(), by_address.clear()
                writers = {}
                out.append(stmt)
                continue
            reads, writes, marked_writes, opaque = _shared_accesses(stmt, tiles)
            # a read orders the writes before it (ThreadSync puts a barrier there), unless the statement writes the
            # buffer first: a loop whose body copies into a tile and then reads it
            ordered = reads - _written_first(stmt, tiles) if writes else reads
            pending -= ordered
            pending_marked -= ordered
            clash = [b for b in writes if b in pending | pending_marked] + \
                [b for b in marked_writes if b in pending] + [b for b in opaque if b in touched] + \
                [b for b in reads | writes | marked_writes if b in by_address]
            if clash and (set(clash) & (pending_marked | marked_writes | opaque | by_address)
                          or not same_thread_writes(clash, writers, stmt, sequence)):
                out.append(_sync(scope_of(clash[0])))
                pending.clear(), pending_marked.clear(), touched.clear(), by_address.clear()
            writers = {b: writers.get(b, []) + ([stmt] if b in writes else []) for b in pending | (writes - opaque)}
            pending |= writes - opaque
            pending_marked |= marked_writes
            touched |= reads | writes | marked_writes
            by_address |= opaque
            out.append(stmt)
        return tirx.SeqStmt(out) if len(out) != len(node.seq) else node

    def on_for(node, mutator):
        return _barrier_across_iterations(mutator.default_mutate(node), tiles)

    return tvm_ffi.structural_mutate(func, [(tirx.SeqStmt, on_seq), (tirx.For, on_for)])


def SyncWriteAfterWrite():  # noqa: N802
    return tl_pass("SyncWriteAfterWrite", sync_write_after_write)
