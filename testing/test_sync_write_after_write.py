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


def in_block(tx, body, threads=128):
    iv = tirx.IterVar(tvm.ir.Range(0, threads), tx, tirx.IterVar.ThreadIndex, "threadIdx.x")
    return tirx.AttrStmt(iv, "thread_extent", threads, body)


def test_one_threads_swap_of_its_own_elements_gets_no_barrier():
    """`s[2 * tx] = b; s[2 * tx + 1] = a` (an odd-even sort's swap): no element is written by two threads, so the
    second write needs no barrier (inside `if v1 < v2:` it would be a barrier under a divergent branch)."""
    s, tx = Tb.buffer([256], "float32", scope="shared"), Var("tx", "int32")
    a, b = tirx.const(1.0, "float32"), tirx.const(2.0, "float32")
    swap = tirx.SeqStmt([tirx.BufferStore(s, b, [tx * 2]), tirx.BufferStore(s, a, [tx * 2 + 1])])
    before = in_block(tx, tirx.IfThenElse(tx < 32, swap, None))
    tvm.ir.assert_structural_equal(run(before), before)


def test_writes_two_threads_share_still_get_a_barrier():
    """`s[tx] = 0; s[127 - tx] = 1`: thread 127 - t rewrites thread t's element; and an index from outside the
    statements (a loop variable `k`) is not proven either."""
    s, tx, k = Tb.buffer([128], "float32", scope="shared"), Var("tx", "int32"), Var("k", "int32")
    zero, one = tirx.const(0.0, "float32"), tirx.const(1.0, "float32")
    for second in (tirx.BufferStore(s, one, [127 - tx]), tirx.BufferStore(s, one, [(tx + k) % 128])):
        first = tirx.BufferStore(s, zero, [tx])
        before = in_block(tx, tirx.SeqStmt([first, second]))
        expected = in_block(tx, tirx.SeqStmt([first, sync(), second]))
        tvm.ir.assert_structural_equal(run(before), expected)


def test_a_loop_that_writes_a_tile_before_reading_it_gets_a_barrier_before_it():
    """`s[tx] = 0; for k: { s[127 - tx] = k; sync; use(s[tx]) }`: the loop reads `s`, but only after its own first
    write, which can land on another thread's zero: the read inside does not order that write (a top-k pool filled,
    then each iteration writes its half and sorts). A statement that reads first keeps needing none."""
    s, tx, k = Tb.buffer([128], "float32", scope="shared"), Var("tx", "int32"), Var("k", "int32")
    out = Tb.buffer([128], "float32", scope="global")
    first = tirx.BufferStore(s, tirx.const(0.0, "float32"), [tx])
    body = tirx.SeqStmt([tirx.BufferStore(s, tirx.Cast("float32", k), [127 - tx]), sync(),
                         tirx.BufferStore(out, s[tx], [tx])])
    loop = tirx.For(k, 0, 4, tirx.ForKind.SERIAL, body)
    before = in_block(tx, tirx.SeqStmt([first, loop]))
    expected = in_block(tx, tirx.SeqStmt([first, sync(), loop]))
    tvm.ir.assert_structural_equal(run(before), expected)

    reads_first = tirx.For(k, 0, 4, tirx.ForKind.SERIAL, tirx.SeqStmt([
        tirx.BufferStore(out, s[tx], [tx]), sync(), tirx.BufferStore(s, tirx.Cast("float32", k), [127 - tx])]))
    unchanged = in_block(tx, tirx.SeqStmt([first, reads_first]))
    tvm.ir.assert_structural_equal(run(unchanged), unchanged)
