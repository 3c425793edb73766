"""tl.config_index_bitwidth = 64 (ConfigIndexBitwidth): loop and let variables are int64 and indices are computed
from int64 leaves (a thread or block index, or a scalar parameter, is cast before it takes part), so an offset past
2^31 elements does not wrap; a value leaving for a place of fixed type (a call argument, an int store) is cast back."""

import pytest
import torch
import tvm
from tvm import tirx
from tvm.tirx.script import builder as Tb

import tilelang
import tilelang.language as T
from test_gemm_batched import batched_gemm, run as run_batched
from tilelang_musa.transform.config_index_bitwidth import widen_indices

Var = tvm.ir.expr.Var
I64 = "int64"


def i64(value):
    return tirx.IntImm(I64, value)


def wide(expr):
    return tirx.Cast(I64, expr)


def test_loop_variables_become_int64_and_indices_are_formed_from_int64_leaves():
    A, B = Tb.buffer([1 << 20], "float16"), Tb.buffer([4], "float16")
    idx = Tb.buffer([4], "int32")
    bx, n, i = Var("bx", "int32"), Var("n", "int32"), Var("i", "int32")
    use = lambda x: tirx.Evaluate(tirx.call_extern("int32", "use", x))  # noqa: E731
    before = tirx.For(i, 0, 4, tirx.ForKind.SERIAL, tirx.SeqStmt([
        tirx.BufferStore(A, B[i], [bx * 8192 + i * n]),
        tirx.BufferStore(idx, i + 1, [i]),
        use(i),
    ]))
    j = Var("i", I64)
    expected = tirx.For(j, i64(0), i64(4), tirx.ForKind.SERIAL, tirx.SeqStmt([
        tirx.BufferStore(A, tirx.BufferLoad(B, [j]), [wide(bx) * i64(8192) + j * wide(n)]),
        tirx.BufferStore(idx, tirx.Cast("int32", j + i64(1)), [j]),  # the int32 buffer keeps int32 values
        use(tirx.Cast("int32", j)),  # a call argument keeps its type
    ]))
    tvm.ir.assert_structural_equal(widen_indices(before), expected)


def test_a_let_bound_index_and_a_guard_are_int64():
    A = Tb.buffer([1 << 20], "float16")
    bx, k = Var("bx", "int32"), Var("k", "int32")
    before = tirx.SeqStmt([
        tirx.Bind(k, bx * 4096),
        tirx.IfThenElse(k < 100000, tirx.BufferStore(A, tirx.const(0, "float16"), [k + 1]), None),
    ])
    k64 = Var("k", I64)
    expected = tirx.SeqStmt([
        tirx.Bind(k64, wide(bx) * i64(4096)),
        tirx.IfThenElse(k64 < i64(100000), tirx.BufferStore(A, tirx.const(0, "float16"), [k64 + i64(1)]), None),
    ])
    tvm.ir.assert_structural_equal(widen_indices(before), expected)


def test_other_widths_are_an_error():
    with pytest.raises(tilelang.CompileError, match="tl.config_index_bitwidth must be 32 or 64, got 16"):
        tilelang.compile(tail_rows(64, 64, 4, 32), target="musa -arch=mp_31",
                         pass_configs={"tl.config_index_bitwidth": 16})


def tail_rows(R, C, rows, cols):
    """Copies the last `rows` x `cols` corner of A (R x C int8) to B: with R * C > 2^31 its offsets need 64 bits."""
    @T.prim_func
    def main(A: T.Tensor((R, C), "int8"), B: T.Tensor((rows, cols), "int8")):
        with T.Kernel(cols // 128, rows, threads=128) as (bx, by):
            for j in T.Parallel(128):
                B[by, bx * 128 + j] = A[R - rows + by, C - cols + bx * 128 + j]

    return main


@pytest.mark.parametrize("arch", ["mp_31", "mp_22"])
def test_a_tensor_past_two_to_the_31_elements_is_indexed_in_int64(arch):
    R, C, rows, cols = (1 << 16) + 8, 1 << 15, 4, 256  # 2^31 + 2^18 elements: the last rows start past 2^31
    kernel = tilelang.compile(tail_rows(R, C, rows, cols), target=f"musa -arch={arch}",
                              pass_configs={"tl.config_index_bitwidth": 64})
    source = kernel.get_kernel_source()
    assert "((int64_t)((int)blockIdx.y)) * 32768LL" in source, source
    small = tilelang.compile(tail_rows(64, 512, rows, cols), target=f"musa -arch={arch}").get_kernel_source()
    assert "int64_t" not in small  # without the key, indices keep the program's int32
    a = torch.zeros((R, C), dtype=torch.int8)  # pages never written are never allocated
    a[-rows:, -cols:] = torch.randint(8, 128, (rows, cols), generator=torch.Generator().manual_seed(0),
                                      dtype=torch.int8)
    b = torch.full((rows, cols), 7, dtype=torch.int8)  # poisoned: no int8 NaN; 7 is absent from A's corner
    kernel(a, b)
    torch.testing.assert_close(b, a[-rows:, -cols:])


def test_a_tensor_past_two_to_the_31_elements_without_the_key_is_promoted_to_int64_indices():
    """Upstream's index type promotion: the kernel is indexed as with tl.config_index_bitwidth=64."""
    program = tail_rows((1 << 16) + 8, 1 << 15, 4, 256)
    promoted = tilelang.compile(program, target="musa -arch=mp_31").get_kernel_source()
    assert "((int64_t)((int)blockIdx.y)) * 32768LL" in promoted, promoted


@pytest.mark.parametrize("configs, why", [({"tl.disable_index_type_promotion": True}, "PROMOTION is set"),
                                          ({"tl.config_index_bitwidth": 32}, "bitwidth is 32")])
def test_a_tensor_past_two_to_the_31_elements_without_promotion_is_an_error(configs, why):
    """Its int32 offsets would wrap: the error names the tensor and the key, instead of a miscompile."""
    with pytest.raises(tilelang.CompileError, match=rf"buffer `A` has 2147745792 elements.*{why}.*"
                                                    r"'tl.config_index_bitwidth': 64"):
        tilelang.compile(tail_rows((1 << 16) + 8, 1 << 15, 4, 256), target="musa -arch=mp_31", pass_configs=configs)


@pytest.mark.parametrize("arch,template", [("mp_31", "tl::gemm_ss_mp31_sqmma_swizzled"), ("mp_22", "tl::gemm_ss_mp22_mma")])
def test_a_pipelined_gemm_with_int64_indices_matches_torch(arch, template):
    """TME / LDLMS copies, multi-buffered tiles and the gemm templates take the int64 offsets."""
    batch, M, N, K = 2, 64, 128, 96
    kernel = tilelang.compile(batched_gemm(batch, M, N, K, 64, 64, 32, False, True, stages=2),
                              target=f"musa -arch={arch}", pass_configs={"tl.config_index_bitwidth": 64})
    source = kernel.get_kernel_source()
    assert template in source and "for (int64_t" in source
    c, ref = run_batched(kernel, batch, M, N, K, False, True, "float32")
    torch.testing.assert_close(c, ref, rtol=1e-2, atol=1e-2)
