"""A uniform `if / elif / else` chain lets the tiles of its branches share shared memory (PlanDynamicSharedMemory,
past the target's limit, flattens the chain into guarded `if`s: flatten_uniform_branch_chains.py).

Found with sglang's DeepSeek-V4 decode kernel over two KV caches (dsa `dpsk_v4_fp8_partial_kernel`): each cache's
branch copies Q into a fragment and stages it for its gemm, and the chain, counted as one statement, kept both
staged copies (and their exchange tiles) in use at once: 96 KB on mp_22, whose limit is 72 KB.
"""

import pytest
import torch
import tvm
from tvm import tirx

import tilelang
import tilelang.language as T
from conftest import poison, rand
from tilelang_musa.errors import CompileError
from tilelang_musa.transform.flatten_uniform_branch_chains import flatten_uniform_branch_chains
from tilelang_musa.transform.plan_dynamic_shared_memory import plan_dynamic_shared_memory


def _chain(condition_of):
    """if c0: a() elif c1: b() else: c(), with c_i = condition_of(i)."""
    def call(name):
        return tirx.Evaluate(tirx.call_extern("int32", name))

    return tirx.IfThenElse(condition_of(0), call("a"),
                           tirx.IfThenElse(condition_of(1), call("b"), call("c")))


def test_a_uniform_chain_becomes_guarded_ifs_each_condition_evaluated_once():
    n = tirx.Var("n", "int32")
    before = tirx.SeqStmt([tirx.Evaluate(tirx.call_extern("int32", "first")), _chain(lambda i: n < 4 * (i + 1))])
    taken0, taken1 = tirx.Var("branch_taken", "bool"), tirx.Var("branch_taken", "bool")
    not_taken0 = tirx.Not(taken0)
    expected = tirx.SeqStmt([
        tirx.Evaluate(tirx.call_extern("int32", "first")),
        tirx.Bind(taken0, n < 4),
        tirx.IfThenElse(taken0, tirx.Evaluate(tirx.call_extern("int32", "a")), None),
        tirx.Bind(taken1, tirx.And(not_taken0, n < 8)),  # short-circuit: n < 8 only where the chain evaluated it
        tirx.IfThenElse(taken1, tirx.Evaluate(tirx.call_extern("int32", "b")), None),
        tirx.IfThenElse(tirx.And(not_taken0, tirx.Not(taken1)), tirx.Evaluate(tirx.call_extern("int32", "c")), None),
    ])
    tvm.ir.assert_structural_equal(flatten_uniform_branch_chains(before), expected, map_free_vars=True)


def test_a_chain_on_the_thread_index_stays_a_chain():
    tx = tirx.Var("tx", "int32")
    body = tirx.SeqStmt([tirx.Evaluate(tirx.call_extern("int32", "first")), _chain(lambda i: tx < 64 * (i + 1))])
    func = tirx.PrimFunc([], tirx.AttrStmt(tirx.IterVar(tvm.ir.Range(0, 256), tx, tirx.IterVar.ThreadIndex,
                                                        "threadIdx.x"), "thread_extent", 256, body))
    assert flatten_uniform_branch_chains(func.body).same_as(func.body)


@T.prim_func
def three_branches(A: T.Buffer((256,), "float32"), n: T.int32):
    for bx in T.thread_binding(3, thread="blockIdx.x"):
        for tx in T.thread_binding(256, thread="threadIdx.x"):
            S = T.alloc_buffer((256,), "float32", scope="shared.dyn")
            R = T.alloc_buffer((256,), "float32", scope="shared.dyn")
            Q = T.alloc_buffer((256,), "float32", scope="shared.dyn")
            if bx < n:
                S[tx] = A[tx]
                A[tx] = S[255 - tx]
            elif bx < n + 1:
                R[tx] = A[tx]
                A[tx] = R[255 - tx]
            else:
                Q[tx] = A[tx]
                A[tx] = Q[255 - tx]


def test_the_tiles_of_exclusive_branches_share_bytes_only_past_the_limit():
    """Three 1 KiB tiles, one a branch: 3 KiB as a chain; past a limit of 1 KiB one tile's bytes, the chain flattened.
    A kernel that fits keeps its chain."""
    fits = plan_dynamic_shared_memory(three_branches, 3072)
    assert int(fits.attrs["tl.dynamic_smem_bytes"]) == 3072 and "branch_taken" not in fits.script()
    flat = plan_dynamic_shared_memory(three_branches, 1024)
    assert int(flat.attrs["tl.dynamic_smem_bytes"]) == 1024
    assert flat.script().count(": T.let[T.bool] = ") == 2
    with pytest.raises(CompileError, match="needs 1024 bytes"):
        plan_dynamic_shared_memory(three_branches, 1023)


# Rows of a float32 tile of 128 columns such that one fits the arch's shared memory and two do not.
ROWS_FOR_ONE = {"musa -arch=mp_31": 256, "musa -arch=mp_22": 96}


def _one_tile_a_branch(rows):
    @T.prim_func
    def main(X: T.Tensor((3, rows, 128), T.float32), n: T.int32, Y: T.Tensor((3, rows, 128), T.float32)):
        with T.Kernel(3, threads=128) as bx:
            a = T.alloc_shared((rows, 128), T.float32)
            b = T.alloc_shared((rows, 128), T.float32)
            c = T.alloc_shared((rows, 128), T.float32)
            if bx < n:
                T.copy(X[bx, :, :], a)
                for i, j in T.Parallel(rows, 128):
                    Y[bx, i, j] = a[rows - 1 - i, j] * 2
            elif bx < n + 1:
                T.copy(X[bx, :, :], b)
                for i, j in T.Parallel(rows, 128):
                    Y[bx, i, j] = b[i, 127 - j] + 1
            else:
                T.copy(X[bx, :, :], c)
                for i, j in T.Parallel(rows, 128):
                    Y[bx, i, j] = -c[i, j]

    return main


@pytest.mark.parametrize("target", list(ROWS_FOR_ONE))
def test_a_kernel_whose_branches_each_fill_the_card_compiles_and_runs(target):
    rows = ROWS_FOR_ONE[target]
    kernel = tilelang.compile(_one_tile_a_branch(rows), target=target)
    source = kernel.get_kernel_source()
    for tile in "abc":  # all three at the arena's start
        assert f"float* {tile} = reinterpret_cast<float*>(buf_dyn_shmem);" in source, source
    assert source.count("bool branch_taken") == 2, source
    x = rand((3, rows, 128), torch.float32, seed=11)
    y = poison((3, rows, 128), torch.float32)
    kernel(x, 1, y)
    torch.testing.assert_close(y[0], x[0].flip(0) * 2)
    torch.testing.assert_close(y[1], x[1].flip(1) + 1)
    torch.testing.assert_close(y[2], -x[2])
