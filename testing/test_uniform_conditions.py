"""Branch conditions every thread evaluates alike get barriers inside them (TVM's ThreadSync needs them marked
`tvm_thread_invariant`): the marking on small IR, and upstream's block-sparse copy (a fragment element as the
condition of a branch that copies through shared memory) in the simulator; a thread-dependent one stays an error."""

import pytest
import torch
import tvm
import tvm_ffi
from tvm import tirx
from tvm.tirx.script import builder as Tb

import tilelang
import tilelang.language as T
from conftest import poison, rand
from tilelang_musa.transform.uniform_conditions import (THREAD_INVARIANT, mark_uniform_conditions,
                                                         unmark_uniform_conditions)

Var = tvm.ir.expr.Var


def _kernel(body_fn):
    """A PrimFunc over 128 threads whose body is body_fn(tx, mask, out)."""
    mask, out = Tb.buffer((4,), "int32"), Tb.buffer((128,), "int32")
    tx = tirx.IterVar(tvm.ir.Range(0, 128), Var("tx", "int32"), tirx.IterVar.ThreadIndex, "threadIdx.x")
    body = tirx.AttrStmt(tx, "thread_extent", 128, body_fn(tx.var, mask, out))
    return tirx.PrimFunc([mask, out], body)


def _marked_conditions(func):
    marked = []

    def on_if(node):
        c = node.condition
        marked.append(isinstance(c, tvm.ir.Call) and str(c.op.name) == THREAD_INVARIANT)

    tvm_ffi.structural_walk(mark_uniform_conditions(func).body, [(tirx.IfThenElse, on_if)])
    return marked


def _private(name):
    return Tb.buffer((4,), "int32", scope="local")


def test_conditions_on_block_uniform_values_are_marked_and_thread_dependent_ones_are_not():
    def body(tx, mask, out):
        uniform_copy, per_thread = _private("uniform_copy"), _private("per_thread")
        i = Var("i", "int32")
        a, b = Var("a", "int32"), Var("b", "int32")
        return tirx.SeqStmt([
            tirx.AllocBuffer(uniform_copy), tirx.AllocBuffer(per_thread),
            tirx.For(i, 0, 4, tirx.ForKind.SERIAL, tirx.SeqStmt([
                tirx.BufferStore(uniform_copy, mask[i], [i]),  # every thread stores the same values
                tirx.BufferStore(per_thread, mask[i] + tx, [i])])),
            tirx.Bind(a, uniform_copy[2]),
            tirx.Bind(b, per_thread[2]),
            tirx.IfThenElse(a >= 0, tirx.BufferStore(out, 1, [tx]), None),
            tirx.IfThenElse(b >= 0, tirx.BufferStore(out, 2, [tx]), None),
            tirx.IfThenElse(tx < 64, tirx.BufferStore(out, 3, [tx]), None),
            tirx.IfThenElse(mask[tx % 4] > 0, tirx.BufferStore(out, 4, [tx]), None),
        ])

    assert _marked_conditions(_kernel(body)) == [True, False, False, False]


def test_a_store_under_a_thread_dependent_branch_makes_the_array_differ():
    def body(tx, mask, out):
        arr = _private("arr")
        return tirx.SeqStmt([
            tirx.AllocBuffer(arr),
            tirx.BufferStore(arr, mask[0], [0]),
            tirx.IfThenElse(tx < 32, tirx.BufferStore(arr, mask[1], [0]), None),  # only some threads overwrite
            tirx.IfThenElse(arr[0] > 0, tirx.BufferStore(out, 1, [tx]), None),
        ])

    assert _marked_conditions(_kernel(body)) == [False, False]


def test_unmarking_restores_the_conditions():
    def body(tx, mask, out):
        return tirx.IfThenElse(mask[0] > 0, tirx.BufferStore(out, 1, [tx]), None)

    func = _kernel(body)
    tvm.ir.assert_structural_equal(unmark_uniform_conditions(mark_uniform_conditions(func)), func)


def blocksparse_copy(M, N, N_S, block_M, block_N):
    @T.prim_func
    def main(A: T.Tensor((M, N), "float16"), B: T.Tensor((M, N), "float16"),
             BlockMask: T.Tensor((M // block_M, N_S), "int32")):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M)) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_N), "float16")
            mask_f = T.alloc_fragment((N_S,), "int32")
            T.copy(BlockMask[by, :], mask_f)
            for i in T.Pipelined(N_S):
                row = mask_f[i]
                if row >= 0:
                    T.copy(A[row, 0], A_shared)
                    T.copy(A_shared, B[by * block_M:(by + 1) * block_M, i * block_N:(i + 1) * block_N])

    return main


@pytest.mark.parametrize("arch", ["mp_31", "mp_22"])
def test_block_sparse_copy_through_shared_memory_under_a_fragment_condition(arch):
    M, N, N_S, BM, BN = 128, 128, 2, 64, 64
    kernel = tilelang.compile(blocksparse_copy(M, N, N_S, BM, BN), target=f"musa -arch={arch}")
    assert kernel.get_kernel_source().count("__syncthreads()") >= 2
    a = rand((M, N), torch.float16, 95)
    mask = torch.tensor([[0, -1], [64, 32]], dtype=torch.int32)
    b = poison((M, N), torch.float16)
    expected = b.clone()
    for by in range(2):
        for i in range(N_S):
            row = int(mask[by, i])
            if row >= 0:
                expected[by * BM:(by + 1) * BM, i * BN:(i + 1) * BN] = a[row:row + BM, 0:BN]
    kernel(a, b, mask)
    torch.testing.assert_close(b, expected, equal_nan=True)


def test_a_thread_dependent_branch_needing_a_barrier_is_still_an_error():
    """Every other thread takes the branch: no barrier can be placed inside it. (A branch taken by a contiguous
    range of threads, `if tx < 64:`, gets a barrier over that range: test_warp_specialize.py.)"""
    @T.prim_func
    def main(A: T.Tensor((128,), "float16"), B: T.Tensor((128,), "float16")):
        with T.Kernel(1, threads=128):
            tx = T.get_thread_binding()
            A_shared = T.alloc_shared((128,), "float16")
            if tx % 2 == 0:
                A_shared[tx] = A[tx]
                B[tx] = A_shared[(tx + 2) % 128]

    with pytest.raises(tilelang.CompileError, match="condition may differ between the block's threads"):
        tilelang.compile(main, target="musa -arch=mp_31")
