"""tilelang.tools.Analyzer (upstream's, as upstream's examples/analyze call it): the FLOPs of every T.gemm and the
global bytes of every T.copy to or from a tensor, times blocks and loop trips, and their time at peak rates."""

import pytest

import tilelang.language as T
from tilelang.carver.arch import CUDA
from tilelang.tools import Analyzer
from tilelang_musa.errors import CompileError
from tilelang_musa.profiler.arch_figures import figures_for


def _gemm(M, N, K, bm, bn, bk):
    @T.prim_func
    def main(A: T.Tensor((M, K), T.float16), B: T.Tensor((N, K), T.float16), C: T.Tensor((M, N), T.float16)):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128) as (bx, by):
            A_s = T.alloc_shared((bm, bk), T.float16)
            B_s = T.alloc_shared((bn, bk), T.float16)
            C_l = T.alloc_fragment((bm, bn), T.float32)
            T.clear(C_l)
            for k in T.Pipelined(T.ceildiv(K, bk), num_stages=2):
                T.copy(A[by * bm, k * bk], A_s)
                T.copy(B[bx * bn, k * bk], B_s)
                T.gemm(A_s, B_s, C_l, transpose_B=True)
            T.copy(C_l, C[by * bm, bx * bn])

    return main


@pytest.mark.parametrize("arch", ["mp_22", "mp_31"])
def test_gemm_flops_bytes_and_time(arch):
    M, N, K, bm, bn, bk = 512, 256, 384, 128, 64, 32
    result = Analyzer.analysis(_gemm(M, N, K, bm, bn, bk), CUDA(f"musa -arch={arch}"))
    assert result.total_flops == 2 * M * N * K
    blocks = (M // bm) * (N // bn)
    per_block = (K // bk) * (bm * bk + bn * bk) * 2 + bm * bn * 2  # A and B tiles read, the C tile written (fp16)
    assert result.total_global_bytes == blocks * per_block
    figures = figures_for(arch)
    expected = max(result.total_flops / figures.peak_tensor_flops, result.total_global_bytes / figures.dram_bytes_per_s)
    assert result.estimated_time == pytest.approx(expected)
    assert result.expected_tflops == pytest.approx(result.total_flops / expected / 1e12)


def test_run_time_trip_counts_are_named():
    n = T.dynamic("n")

    @T.prim_func
    def main(A: T.Tensor((n, 64), T.float32), B: T.Tensor((n, 64), T.float32)):
        with T.Kernel(T.ceildiv(n, 64), threads=128) as bx:
            S = T.alloc_shared((64, 64), T.float32)
            T.copy(A[bx * 64, 0], S)
            T.copy(S, B[bx * 64, 0])

    with pytest.raises(CompileError, match="blockIdx.x"):
        Analyzer.analysis(main, CUDA("musa"))


def test_im2col_tiles_count_as_global_reads():
    N, H, W, C, F, KS, bm, bn, bk = 2, 8, 8, 16, 32, 3, 64, 32, 16
    KK = KS * KS * C

    @T.prim_func
    def conv(data: T.Tensor((N, H, W, C), T.float16), kernel: T.Tensor((KK, F), T.float16),
             out: T.Tensor((N * H * W, F), T.float16)):
        with T.Kernel(T.ceildiv(F, bn), T.ceildiv(N * H * W, bm), threads=128) as (bx, by):
            d_s = T.alloc_shared((bm, bk), T.float16)
            k_s = T.alloc_shared((bk, bn), T.float16)
            acc = T.alloc_fragment((bm, bn), T.float32)
            T.clear(acc)
            for k in T.Pipelined(T.ceildiv(KK, bk), num_stages=2):
                T.im2col(data, d_s, by, k, KS, 1, 1, 1)
                T.copy(kernel[k * bk, bx * bn], k_s)
                T.gemm(d_s, k_s, acc)
            T.copy(acc, out[by * bm, bx * bn])

    result = Analyzer.analysis(conv, CUDA("musa -arch=mp_31"))
    blocks, trips = (F // bn) * (N * H * W // bm), KK // bk
    assert result.total_flops == 2 * (N * H * W) * F * KK
    assert result.total_global_bytes == blocks * (trips * (bm * bk + bk * bn) * 2 + bm * bn * 2)
