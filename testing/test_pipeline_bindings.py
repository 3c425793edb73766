"""A scalar binding inside a `T.Pipelined` loop (`keep = ...` in a `T.Parallel` nest) that reads the loop variable:
InjectSoftwarePipeline emits the unit once per pipeline iteration it runs in (the steady loop and each epilogue
iteration), and each copy must bind a variable of its own. With one Var bound to two different values, TVM's
analyzer stopped FlattenBuffer ("Trying to update var 'keep' with a different value"; upstream's
block_causal_attention varlen example)."""

import pytest
import torch
import tvm
import tvm_ffi
from tvm import tirx

import tilelang
import tilelang.language as T
from conftest import poison, rand
from test_software_pipeline import _flat, _issued, with_target
from tilelang_musa.ir.utils import with_fresh_bindings
from tilelang_musa.transform.inject_software_pipeline import inject_software_pipeline
from tilelang_musa.transform.pipeline_planning import pipeline_planning

ARCHS = ["mp_22", "mp_31"]


def masked_sum(n_tiles=4, num_stages=2):
    """acc[i, j] = the sum over tiles k of A's tile k where `k * 8 + i >= j` (a mask bound to `keep`, read once)."""
    rows = 32 * n_tiles

    @T.prim_func
    def main(A: T.Tensor((rows, 32), "float16"), Out: T.Tensor((32, 32), "float32")):
        with T.Kernel(1, threads=128):
            A_s = T.alloc_shared((32, 32), "float16")
            acc = T.alloc_fragment((32, 32), "float32")
            T.clear(acc)
            for k in T.Pipelined(n_tiles, num_stages=num_stages):
                T.copy(A[k * 32, 0], A_s)
                for i, j in T.Parallel(32, 32):
                    keep = T.if_then_else(k * 8 + i >= j, 1, 0)
                    acc[i, j] += T.if_then_else(keep > 0, T.Cast("float32", A_s[i, j]), T.float32(0))
            T.copy(acc, Out)

    return main


def masked_sum_reference(a, n_tiles=4):
    i = torch.arange(32).view(32, 1)
    j = torch.arange(32).view(1, 32)
    tiles = a.float().view(n_tiles, 32, 32)
    return sum(torch.where(k * 8 + i >= j, tiles[k], 0.0) for k in range(n_tiles))


def _bindings(func):
    found = []
    tvm_ffi.structural_walk(func.body, [(tirx.Bind, lambda b: found.append(b.var))], order="pre")
    return found


def test_each_emitted_copy_of_a_unit_binds_its_own_variable():
    """num_stages=2 over 4 tiles: the masked sum runs in the steady loop (tiles 0..2) and in the epilogue (tile 3),
    each copy with its own `keep`."""
    got = inject_software_pipeline(pipeline_planning(with_target(masked_sum(), "mp_22")), {})
    keeps = [var for var in _bindings(got) if var.name == "keep"]
    assert len(keeps) == 2 and not keeps[0].same_as(keeps[1])

    @T.prim_func
    def expected(A: T.Tensor((128, 32), "float16"), Out: T.Tensor((32, 32), "float32")):
        with T.Kernel(1, threads=128):
            A_s = T.alloc_shared((2, 32, 32), "float16")
            acc = T.alloc_fragment((32, 32), "float32")
            T.clear(acc)
            T.copy(A[0, 0], A_s[0, 0:32, 0:32])
            T.ptx_commit_group()
            for k in T.serial(3):
                T.copy(A[(k + 1) * 32, 0], A_s[(k + 1) % 2, 0:32, 0:32])
                T.ptx_commit_group()
                T.ptx_wait_group(1)  # and the block barrier after it
                for i, j in T.Parallel(32, 32):
                    keep = T.if_then_else(k * 8 + i >= j, 1, 0)
                    acc[i, j] += T.if_then_else(keep > 0, T.Cast("float32", A_s[k % 2, i, j]), T.float32(0))
            T.ptx_commit_group()
            T.ptx_wait_group(1)
            for i, j in T.Parallel(32, 32):
                keep = T.if_then_else(24 + i >= j, 1, 0)
                acc[i, j] += T.if_then_else(keep > 0, T.Cast("float32", A_s[1, i, j]), T.float32(0))
            T.evaluate(T.call_extern("int32", "tl::cp_async_wait<0>"))
            T.copy(acc, Out)

    # (_flat simplifies the result: TVM's analyzer binds every `keep` it meets, which failed on a shared Var)
    tvm.ir.assert_structural_equal(_flat(got), _flat(with_target(_issued(expected), "mp_22")))


def test_fresh_bindings_renames_statement_and_expression_bindings_and_keeps_free_variables():
    n = tvm.ir.expr.Var("n", "int32")
    x = tvm.ir.expr.Var("x", "int32")
    y = tvm.ir.expr.Var("y", "int32")
    stmt = tirx.SeqStmt([tirx.Bind(x, n + 1), tirx.Evaluate(tirx.Let(y, x * 2, y + n))])
    renewed = with_fresh_bindings(stmt)
    bound, let = renewed.seq[0], renewed.seq[1].value
    assert not bound.var.same_as(x) and not let.var.same_as(y)
    assert bound.var.name == "x" and let.var.name == "y"
    tvm.ir.assert_structural_equal(renewed, stmt)  # the same program up to the bound names
    assert let.body.a.same_as(let.var) and let.body.b.same_as(n) and let.value.a.same_as(bound.var)


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("num_stages", [2, 3])
def test_pipelined_binding_reading_the_loop_variable_matches_torch(arch, num_stages):
    kernel = tilelang.compile(masked_sum(num_stages=num_stages), target=f"musa -arch={arch}")
    source = kernel.get_kernel_source()
    # the steady loop's `keep` and the epilogue's (mp_22's LDLMS pipeline; mp_31 splits the loop into a TME producer
    # squad and a consumer, whose loop runs once and keeps one binding)
    assert ("keep_1" in source) == (arch == "mp_22"), source
    a = rand((128, 32), torch.float16, 21)
    out = poison((32, 32), torch.float32)
    kernel(a, out)
    torch.testing.assert_close(out, masked_sum_reference(a), rtol=1e-3, atol=1e-3)
