"""SyncWriteAfterWrite: the barriers TVM's ThreadSync cannot place, for shared memory passed by address to a call
(`tl::any_of(&s[0], n)`, `tl::AtomicAdd(&s[i], v)`), within a statement sequence and across loop iterations."""

import tvm
from tvm import tirx
from tvm.tirx.script import builder as Tb

from tilelang_musa.transform.sync_write_after_write import sync_write_after_write

Var = tvm.ir.expr.Var


def sync():
    return tirx.Evaluate(tirx.call_intrin("int32", "tirx.tvm_storage_sync", "shared"))


def reads_by_address(buf):
    return tirx.Evaluate(tirx.call_extern("bool", "tl::any_of", tirx.address_of(buf[0]), 5))


def run(body):
    return sync_write_after_write(tirx.PrimFunc([], body)).body


def test_a_call_reading_by_address_after_a_write_gets_a_barrier_before_it():
    s, tx = Tb.buffer([5], "bool", scope="shared"), Var("tx", "int32")
    before = tirx.SeqStmt([tirx.BufferStore(s, tirx.const(True, "bool"), [tx]), reads_by_address(s)])
    expected = tirx.SeqStmt([before.seq[0], sync(), before.seq[1]])
    tvm.ir.assert_structural_equal(run(before), expected)


def test_a_loop_whose_next_iteration_rewrites_what_a_call_read_by_address_ends_with_a_barrier():
    """`for k: s[tx] = m[k]; sync; if any_of(&s): ...`: iteration k + 1's store must wait for iteration k's reads."""
    s, tx, k = Tb.buffer([5], "bool", scope="shared"), Var("tx", "int32"), Var("k", "int32")
    body = tirx.SeqStmt([tirx.BufferStore(s, tirx.const(True, "bool"), [tx]), sync(), reads_by_address(s)])
    before = tirx.For(k, 0, 4, tirx.ForKind.SERIAL, body)
    expected = tirx.For(k, 0, 4, tirx.ForKind.SERIAL, tirx.SeqStmt([*body.seq, sync()]))
    tvm.ir.assert_structural_equal(run(before), expected)


def test_a_loop_without_barriers_gets_none():
    """A per-thread loop (a thread's slots, maybe under a thread guard) must not get a block barrier."""
    s, i = Tb.buffer([5], "float32", scope="shared"), Var("i", "int32")
    atomic = tirx.Evaluate(tirx.call_extern("int32", "tl::AtomicAdd", tirx.address_of(s[i]), tirx.const(1.0)))
    before = tirx.For(i, 0, 5, tirx.ForKind.SERIAL, atomic)
    tvm.ir.assert_structural_equal(run(before), before)
