"""SyncGlobalAccesses: a block barrier between two statements that reach one global tensor through different
threads (a store vectorized four to a thread, then a store one to a thread), and none where each thread touches
the same elements, or where only some threads run the statements."""

import pytest
import torch
import tvm
from tvm import tirx
from tvm.tirx.script import builder as Tb

import tilelang
import tilelang.language as T
from conftest import poison, rand
from tilelang_musa.transform.sync_global_accesses import sync_global_accesses

ARCHS = ["mp_31", "mp_22"]
Var = tvm.ir.expr.Var


def sync():
    return tirx.Evaluate(tirx.call_intrin("int32", "tirx.tvm_storage_sync", "shared"))


def run(body):
    return sync_global_accesses(tirx.PrimFunc([], body)).body


def test_a_store_of_other_elements_after_a_store_gets_a_barrier():
    B, tx = Tb.buffer([512], "float32"), Var("tx", "int32")
    first = tirx.BufferStore(B, tirx.const(0.0, "float32"), [tx * 2])
    second = tirx.BufferStore(B, tirx.const(1.0, "float32"), [tx])
    before = tirx.SeqStmt([first, second])
    tvm.ir.assert_structural_equal(run(before), tirx.SeqStmt([first, sync(), second]))


def test_a_read_of_other_elements_after_a_store_gets_a_barrier_and_a_store_after_a_read_too():
    A, B, tx = Tb.buffer([512], "float32"), Tb.buffer([512], "float32"), Var("tx", "int32")
    write = tirx.BufferStore(B, tirx.const(0.0, "float32"), [tx])
    read = tirx.BufferStore(A, B[tx + 1], [tx])
    overwrite = tirx.BufferStore(B, tirx.const(2.0, "float32"), [tx + 3])
    before = tirx.SeqStmt([write, read, overwrite])
    expected = tirx.SeqStmt([write, sync(), read, sync(), overwrite])
    tvm.ir.assert_structural_equal(run(before), expected)


def test_the_same_elements_per_thread_in_loops_of_other_names_need_no_barrier():
    B, tx, i, j = Tb.buffer([512], "float32"), Var("tx", "int32"), Var("i", "int32"), Var("j", "int32")
    zero = tirx.For(i, 0, 2, tirx.ForKind.SERIAL, tirx.BufferStore(B, tirx.const(0.0, "float32"), [i * 256 + tx]))
    add = tirx.For(j, 0, 2, tirx.ForKind.SERIAL,
                   tirx.BufferStore(B, B[j * 256 + tx] + tirx.const(1.0, "float32"), [j * 256 + tx]))
    before = tirx.SeqStmt([zero, add])
    tvm.ir.assert_structural_equal(run(before), before)


def test_statements_under_a_condition_on_the_thread_get_no_barrier():
    B = Tb.buffer([512], "float32")
    tx = Var("tx", "int32")
    body = tirx.SeqStmt([tirx.BufferStore(B, tirx.const(0.0, "float32"), [tx * 2]),
                         tirx.BufferStore(B, tirx.const(1.0, "float32"), [tx])])
    guarded = tirx.IfThenElse(tx < 64, body, None)
    iv = tirx.IterVar(tvm.ir.Range(0, 128), tx, tirx.IterVar.ThreadIndex, "threadIdx.x")
    before = tirx.AttrStmt(iv, "thread_extent", 128, guarded)
    tvm.ir.assert_structural_equal(run(before), before)


def zero_then_overwrite_prefix(max_len=512, threads=256):
    """Upstream's parallel test: zero the whole output (4 elements a thread), then overwrite a run-time prefix (1 a
    thread): element 256 is zeroed by thread 64 and overwritten by thread 0."""

    @T.prim_func
    def main(A: T.Tensor((max_len,), "float32"), B: T.Tensor((max_len,), "float32"), valid_len: T.int32):
        with T.Kernel(1, threads=threads):
            for i in T.Parallel(max_len):
                B[i] = 0.0
            span = T.min(valid_len, max_len)
            for i in T.Parallel(span):
                B[i] = A[i] - 1.0

    return main


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("valid_len", [13, 300, 600])
def test_zeroing_then_overwriting_a_prefix_keeps_program_order(arch, valid_len):
    kernel = tilelang.compile(zero_then_overwrite_prefix(), target=f"musa -arch={arch}")
    source = kernel.get_kernel_source()
    zero, barrier, prefix = (source.index(s) for s in ("tl::broadcast<float, 4>(0.000000e+00f)", "__syncthreads();",
                                                        "- 1.000000e+00f"))
    assert zero < barrier < prefix, source
    a, b = rand((512,), torch.float32), poison((512,), torch.float32)
    kernel(a, b, valid_len)
    expected = torch.zeros(512)
    expected[:valid_len] = a[:valid_len] - 1.0
    torch.testing.assert_close(b, expected)


@pytest.mark.parametrize("arch", ARCHS)
def test_an_accumulation_into_the_elements_each_thread_wrote_has_no_barrier(arch):
    @T.prim_func
    def main(A: T.Tensor((256,), "float32"), B: T.Tensor((256,), "float32")):
        with T.Kernel(1, threads=64):
            for i in T.Parallel(256):
                B[i] = 1.0
            for i in T.Parallel(256):
                B[i] = B[i] + A[i]

    kernel = tilelang.compile(main, target=f"musa -arch={arch}")
    assert "__syncthreads" not in kernel.get_kernel_source(), kernel.get_kernel_source()
    a, b = rand((256,), torch.float32), poison((256,), torch.float32)
    kernel(a, b)
    torch.testing.assert_close(b, a + 1.0)


def test_stores_to_rows_of_other_constants_need_no_barrier():
    # each thread writes its own column of a row per shuffle result: rows 0 and 1 never share an element
    Out, tx = Tb.buffer([2, 256], "float32"), Var("tx", "int32")
    before = tirx.SeqStmt([tirx.BufferStore(Out, tirx.const(0.0, "float32"), [tirx.const(0, "int32"), tx]),
                           tirx.BufferStore(Out, tirx.const(1.0, "float32"), [tirx.const(1, "int32"), tx])])
    tvm.ir.assert_structural_equal(run(before), before)


def test_a_row_picked_at_run_time_after_a_constant_row_still_gets_a_barrier():
    Out, tx, r = Tb.buffer([2, 256], "float32"), Var("tx", "int32"), Var("r", "int32")
    first = tirx.BufferStore(Out, tirx.const(0.0, "float32"), [tirx.const(0, "int32"), tx])
    second = tirx.BufferStore(Out, tirx.const(1.0, "float32"), [r, tx])
    tvm.ir.assert_structural_equal(run(tirx.SeqStmt([first, second])), tirx.SeqStmt([first, sync(), second]))


def test_a_sequence_whose_statements_share_no_written_tensor_is_kept_as_it_is():
    # the tensor-level precheck: no statement reaches a tensor an earlier one wrote, so no index is compared and
    # the sequence comes back as the same object
    A, B, C, tx = Tb.buffer([512], "float32"), Tb.buffer([512], "float32"), Tb.buffer([512], "float32"), Var("tx",
                                                                                                         "int32")
    before = tirx.SeqStmt([tirx.BufferStore(B, A[tx * 2], [tx * 2]), tirx.BufferStore(C, A[tx], [tx])])
    assert run(before).same_as(before)


def test_a_write_after_a_read_past_a_barrier_needs_none_but_one_before_it_gets_one():
    # the precheck follows the barriers: tensors read before one are forgotten after it
    A, B, tx = Tb.buffer([512], "float32"), Tb.buffer([512], "float32"), Var("tx", "int32")
    read = tirx.BufferStore(B, A[tx + 1], [tx])
    write = tirx.BufferStore(A, tirx.const(0.0, "float32"), [tx])
    apart = tirx.SeqStmt([read, sync(), write])
    assert run(apart).same_as(apart)
    tvm.ir.assert_structural_equal(run(tirx.SeqStmt([read, write])), tirx.SeqStmt([read, sync(), write]))
