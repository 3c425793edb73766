"""InlineUnitLoops: a serial loop that runs once is its body with the loop variable at the start, so that a loop
`T.serial(b, b + 1)` over a run-time start (upstream issue 1728's persistent-kernel form) compiles; loops of other
extents, and annotated or thread-bound loops, are left alone. T.Tensor[(N,)] (no dtype) is a float32 tensor."""

import pytest
import torch
import tvm
from tvm import tirx

import tilelang
import tilelang.language as T
from conftest import poison, rand
from tilelang_musa.transform.inline_unit_loops import inline_unit_loops

Var = tvm.ir.expr.Var


def store(i):
    return tirx.Evaluate(tirx.call_extern("int32", "use", i))


def test_a_loop_of_one_iteration_becomes_its_body_at_the_start():
    b, i = Var("b", "int32"), Var("i", "int32")
    before = tirx.For(i, b, (b + 1) - b, tirx.ForKind.SERIAL, store(i * 2))
    tvm.ir.assert_structural_equal(inline_unit_loops(before), store(b * 2))


def test_longer_and_annotated_loops_are_kept():
    b, i = Var("b", "int32"), Var("i", "int32")
    longer = tirx.For(i, b, 2, tirx.ForKind.SERIAL, store(i))
    annotated = tirx.For(i, b, 1, tirx.ForKind.SERIAL, store(i), annotations={"num_stages": 2})
    parallel = tirx.For(i, b, 1, tirx.ForKind.PARALLEL, store(i))
    for loop in (longer, annotated, parallel):
        tvm.ir.assert_structural_equal(inline_unit_loops(loop), loop)


@pytest.mark.parametrize("arch", ["mp_31", "mp_22"])
def test_a_loop_from_the_block_index_to_the_next_compiles_and_runs(arch):
    N = T.dynamic("N")

    @T.prim_func
    def shift(A: T.Tensor[(N,)], B: T.Tensor[(N,)]):
        with T.Kernel(N, threads=32) as b:
            stop = b + 1
            for i in T.serial(b, stop):
                if T.get_thread_binding() == 0:
                    B[i] = A[i] + 1.0

    kernel = tilelang.compile(shift, target=f"musa -arch={arch}")
    source = kernel.get_kernel_source()
    assert "B[(int)blockIdx.x] = A[(int)blockIdx.x] + 1" in source and "for (" not in source
    a, out = rand((37,), torch.float32, 1), poison((37,), torch.float32)
    kernel(a, out)
    torch.testing.assert_close(out, a + 1.0)
