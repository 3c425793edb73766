"""A region that one thread runs (`if tx == 96:` around a T.copy into shared memory and the reads of it, as Moore
Threads' GDN prefill kernel copies its tiles from single threads) needs no barrier inside: one thread's own
accesses are ordered by program order. Before, RangeBarriers made a one-thread barrier that mp_31 rejected ("a
named barrier counts whole warps") and mp_22 rejected as a barrier over part of a block. A region of several threads
keeps its barrier."""

import pytest
import torch
import tvm
from tvm import tirx
from tvm.tirx.script import builder as Tb

import tilelang
import tilelang.language as T
from conftest import poison, rand
from tilelang_musa.transform.range_barriers import range_barriers

ARCHS = ["mp_31", "mp_22"]


def copy_then_read(threads_in_region):
    @T.prim_func
    def main(A: T.Tensor((64,), "float32"), B: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=128):
            tx = T.get_thread_binding()
            s = T.alloc_shared((64,), "float32")
            if tx >= 96 and tx < 96 + threads_in_region:
                T.copy(A, s)
                for i in T.serial(64 // threads_in_region):
                    k = i * threads_in_region + tx - 96
                    B[k] = s[63 - k] * 2

    return main


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("checked", [False, True])
def test_one_thread_region_has_no_barrier_and_runs(arch, checked, monkeypatch):
    kernel = tilelang.compile(copy_then_read(1), target=f"musa -arch={arch}")
    source = kernel.get_kernel_source()
    if arch == "mp_31":  # the copy is a TME load that its thread waits for (test_one_thread_tme_loads.py), on an
        # async barrier: the only block barrier is the one after its initialisation at the kernel's start
        assert "tl::tma_load<" in source and source.count("tl::barrier_sync(") == 1, source
        assert source.count("__syncthreads") == 1 and "barrier_init(1, 1);\n  }\n  __syncthreads();" in source, source
    else:
        assert "barrier" not in source.lower(), source
    if checked:  # the race detector and the uninitialised-read checks see nothing wrong either
        monkeypatch.setenv("TILELANG_SIM_CHECK", "1")
    a, b = rand((64,), torch.float32), poison((64,), torch.float32)
    kernel(a, b)
    torch.testing.assert_close(b, a.flip(0) * 2)


def test_a_region_of_several_threads_keeps_its_barrier():
    kernel = tilelang.compile(copy_then_read(32), target="musa -arch=mp_31")
    source = kernel.get_kernel_source()
    assert "tl::barrier_sync(1)" in source, source  # an asynchronous barrier over the region's 32 threads
    a, b = rand((64,), torch.float32), poison((64,), torch.float32)
    kernel(a, b)
    torch.testing.assert_close(b, a.flip(0) * 2)


@pytest.mark.parametrize("arch", ARCHS)
def test_range_barriers_drops_a_barrier_that_one_thread_reaches(arch):
    """Before/expected IR: the barrier under `if tx == 96:` is no barrier at all (on mp_22 too, which has no barrier
    over part of a block); the one under `if tx < 128:` still becomes a barrier over its 128 threads on mp_31."""
    tx = tvm.ir.expr.Var("tx", "int32")
    s = Tb.buffer([256], "float32", scope="shared")
    out = Tb.buffer([256], "float32", scope="global")

    def sync(*named):
        return tirx.Evaluate(tirx.call_intrin("int32", "tirx.tvm_storage_sync", "shared", *named))

    def kernel(condition, inner_sync):
        stmts = [tirx.BufferStore(s, tirx.const(1.0, "float32"), [tx]), inner_sync, tirx.BufferStore(out, s[tx], [tx])]
        inner = tirx.SeqStmt([stmt for stmt in stmts if stmt is not None])
        iv = tirx.IterVar(tvm.ir.Range(0, 256), tx, 1, "threadIdx.x")
        func = tirx.PrimFunc([], tirx.AttrStmt(iv, "thread_extent", 256, tirx.IfThenElse(condition, inner, None)))
        return func.with_attr("target", tvm.target.Target({"kind": "musa", "arch": arch}))

    before, expected = kernel(tx == 96, sync()), kernel(tx == 96, None)
    tvm.ir.assert_structural_equal(range_barriers(before).body, expected.body)
    if arch == "mp_31":
        before, expected = kernel(tx < 128, sync()), kernel(tx < 128, sync(1, 128))
        tvm.ir.assert_structural_equal(range_barriers(before).body, expected.body)
