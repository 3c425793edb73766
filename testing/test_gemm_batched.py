"""T.gemm on one slice of a 3-D shared tile (`A_s[b, :, :]`): the slice is a 2-D operand at the slice's offset,
and a swizzled 3-D tile is the 2-D swizzle repeated over the leading dim."""

import inspect
import re

import numpy as np
import pytest
import torch
import tvm

import tilelang
import tilelang.language as T
from conftest import poison, rand
from tilelang_musa.layout import make_sqmma_swizzled_layout

TORCH = {"float16": torch.float16, "float32": torch.float32}


def batched_gemm(batch, M, N, K, bm, bn, bk, trans_A, trans_B, accum="float32", stages=0):
    """C[b] = op(A[b]) @ op(B[b]); every batch's tiles stay resident in one 3-D shared tile per operand."""
    a_tile = (batch, bk, bm) if trans_A else (batch, bm, bk)
    b_tile = (batch, bn, bk) if trans_B else (batch, bk, bn)

    @T.prim_func
    def main(A: T.Tensor((batch, K, M) if trans_A else (batch, M, K), "float16"),
             B: T.Tensor((batch, N, K) if trans_B else (batch, K, N), "float16"),
             C: T.Tensor((batch, M, N), accum)):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128) as (bx, by):
            A_s = T.alloc_shared(a_tile, "float16")
            B_s = T.alloc_shared(b_tile, "float16")
            C_f = T.alloc_fragment((bm, bn), accum)
            for b in T.serial(batch):
                T.clear(C_f)
                for k in T.Pipelined(T.ceildiv(K, bk), num_stages=stages):
                    if trans_A:
                        T.copy(A[b, k * bk, by * bm], A_s[b, :, :])
                    else:
                        T.copy(A[b, by * bm, k * bk], A_s[b, :, :])
                    if trans_B:
                        T.copy(B[b, bx * bn, k * bk], B_s[b, :, :])
                    else:
                        T.copy(B[b, k * bk, bx * bn], B_s[b, :, :])
                    T.gemm(A_s[b, :, :], B_s[b, :, :], C_f, trans_A, trans_B)
                T.copy(C_f, C[b, by * bm, bx * bn])

    return main


def run(kernel, batch, M, N, K, trans_A, trans_B, accum):
    a = rand((batch, K, M) if trans_A else (batch, M, K), torch.float16, 1)
    b = rand((batch, N, K) if trans_B else (batch, K, N), torch.float16, 2)
    c = poison((batch, M, N), TORCH[accum])
    kernel(a, b, c)
    ref = (a.transpose(-1, -2) if trans_A else a).float() @ (b.transpose(-1, -2) if trans_B else b).float()
    return c, ref


@pytest.mark.parametrize("arch,configs,template", [
    ("mp_31", {}, "tl::gemm_ss_mp31_sqmma_swizzled<64, 64, 32,"),
    ("mp_31", {"tl.disable_sqmma": True}, "tl::gemm_ss_mp31_wmma<64, 64, 32,"),
    ("mp_22", {}, "tl::gemm_ss_mp22_mma<64, 64, 32,"),
])
@pytest.mark.parametrize("trans_A,trans_B,stages", [(False, False, 0), (True, True, 2), (False, True, 2)])
def test_batched_gemm_reads_the_slice_of_each_batch(arch, configs, template, trans_A, trans_B, stages):
    """Each batch's operand starts `b` whole 64 x 32 slices (2048 elements) into its tile."""
    batch, M, N, K = 3, 64, 128, 96
    kernel = tilelang.compile(batched_gemm(batch, M, N, K, 64, 64, 32, trans_A, trans_B, stages=stages),
                              target=f"musa -arch={arch}", pass_configs=configs)
    source = kernel.get_kernel_source()
    call = next(line for line in source.splitlines() if template in line)
    # the swizzle at a slice's origin is the identity: folded away, not printed as `(0 ^ 0)`
    assert all(re.search(rf"&{t}\[[^\]]*\bb \* 2048\b", call) for t in ("A_s", "B_s")), call
    assert "^" not in call, call
    c, ref = run(kernel, batch, M, N, K, trans_A, trans_B, "float32")
    torch.testing.assert_close(c, ref, rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("arch", ["mp_31", "mp_22"])
def test_batched_gemm_with_a_float16_accumulator_runs_on_fma(arch):
    """No matrix instruction accumulates in float16: the FMA path indexes the slice element by element."""
    batch, M, N, K = 2, 64, 64, 32
    kernel = tilelang.compile(batched_gemm(batch, M, N, K, 64, 64, 32, False, False, accum="float16"),
                              target=f"musa -arch={arch}")
    source = kernel.get_kernel_source()
    assert "tl::gemm_" not in source and re.search(r"A_s\[\(*b \* 2048\)", source)
    c, ref = run(kernel, batch, M, N, K, False, False, "float16")
    torch.testing.assert_close(c.float(), ref, rtol=1e-2, atol=2e-2)


@pytest.mark.parametrize("k_major", [True, False])
def test_a_3d_swizzled_tile_repeats_the_2d_swizzle_per_slice(k_major):
    """Slice b of a (3, 64, 32) tile is the (64, 32) swizzle shifted by b * 2048 elements, so each slice is a tile
    an SQMMA descriptor or a TME box can start at."""
    slice_layout = make_sqmma_swizzled_layout(((64, 32), "float16"), k_major=k_major)
    tile_layout = make_sqmma_swizzled_layout(((3, 64, 32), "float16"), k_major=k_major)
    rows, cols = np.meshgrid(np.arange(64), np.arange(32), indexing="ij")
    (within,) = slice_layout.evaluate(rows, cols)
    for b in range(3):
        (offset,) = tile_layout.evaluate(np.full_like(rows, b), rows, cols)
        np.testing.assert_array_equal(offset, b * 2048 + within)
    b = tvm.tirx.Var("b", "int32")
    zero = tvm.tirx.const(0, "int32")
    tvm.ir.assert_structural_equal(tile_layout.map([b, zero, zero]), [b * 2048])  # no `0 ^ 0` left standing


def test_a_slice_that_is_not_the_trailing_two_dims_is_an_error():
    """A_s[:, 0, :] is 2-D in extents but not a trailing 2-D slice: T.gemm says so at the user's line."""
    with pytest.raises(tilelang.CompileError, match=r"T\.gemm: A .* must be a 2-D tile") as info:
        @T.prim_func
        def main(A: T.Tensor((64, 32), "float16"), C: T.Tensor((64, 64), "float32")):
            with T.Kernel(1, threads=128):
                A_s = T.alloc_shared((64, 2, 32), "float16")
                B_s = T.alloc_shared((64, 32), "float16")
                C_f = T.alloc_fragment((64, 64), "float32")
                T.clear(C_f)
                T.gemm(A_s[:, 0, :], B_s, C_f, transpose_B=True)
                T.copy(C_f, C)

    lines, first = inspect.getsourcelines(test_a_slice_that_is_not_the_trailing_two_dims_is_an_error)
    line = first + next(i for i, text in enumerate(lines) if "T.gemm(A_s[:, 0, :]" in text)
    assert f"test_gemm_batched.py:{line}:" in str(info.value)
