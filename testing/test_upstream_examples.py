"""Upstream-TileLang-style scripts compile unchanged with target="musa": the upstream README's matmul with a
ReLU epilogue (lazy jit style), a GEMM with a bias epilogue read from global memory, and a row softmax."""

import pytest
import torch

import tilelang
import tilelang.language as T
from conftest import rand


@tilelang.jit(out_idx=[-1], target="musa")
def matmul_relu(M, N, K, block_M, block_N, block_K, dtype="float16", accum_dtype="float"):
    @T.prim_func
    def gemm(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), dtype)
            B_shared = T.alloc_shared((block_K, block_N), dtype)
            C_local = T.alloc_fragment((block_M, block_N), accum_dtype)
            T.clear(C_local)
            for ko in T.Pipelined(T.ceildiv(K, block_K), num_stages=3):
                T.copy(A[by * block_M, ko * block_K], A_shared)
                for k, j in T.Parallel(block_K, block_N):
                    B_shared[k, j] = B[ko * block_K + k, bx * block_N + j]
                T.gemm(A_shared, B_shared, C_local)
            for i, j in T.Parallel(block_M, block_N):
                C_local[i, j] = T.max(C_local[i, j], 0)
            T.copy(C_local, C[by * block_M, bx * block_N])

    return gemm


def test_upstream_readme_matmul_relu():
    kernel = matmul_relu(256, 128, 96, 64, 64, 32)
    a, b = rand((256, 96), torch.float16, 1), rand((96, 128), torch.float16, 2)
    c = kernel(a, b)
    torch.testing.assert_close(c.float(), torch.relu(a.float() @ b.float()), rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("arch", ["mp_31", "mp_22"])
def test_gemm_with_bias_epilogue(arch):
    M, N, K, bm, bn, bk = 128, 128, 64, 64, 64, 32

    @T.prim_func
    def linear(A: T.Tensor((M, K), "bfloat16"), W: T.Tensor((N, K), "bfloat16"), bias: T.Tensor((N,), "float32"),
               Y: T.Tensor((M, N), "float32")):
        with T.Kernel(N // bn, M // bm, threads=128) as (bx, by):
            A_s = T.alloc_shared((bm, bk), "bfloat16")
            W_s = T.alloc_shared((bn, bk), "bfloat16")
            acc = T.alloc_fragment((bm, bn), "float32")
            T.clear(acc)
            for k in T.Pipelined(K // bk, num_stages=2):
                T.copy(A[by * bm, k * bk], A_s)
                T.copy(W[bx * bn, k * bk], W_s)
                T.gemm(A_s, W_s, acc, transpose_B=True)
            for i, j in T.Parallel(bm, bn):
                acc[i, j] = acc[i, j] + bias[bx * bn + j]
            T.copy(acc, Y[by * bm, bx * bn])

    kernel = tilelang.compile(linear, out_idx=[-1], target=f"musa -arch={arch}")
    a, w = rand((M, K), torch.bfloat16, 3), rand((N, K), torch.bfloat16, 4)
    bias = rand((N,), torch.float32, 5)
    torch.testing.assert_close(kernel(a, w, bias), a.float() @ w.float().T + bias, rtol=1e-2, atol=1e-2)


def test_row_softmax():
    M, N, block_M = 256, 64, 32

    @T.prim_func
    def softmax(X: T.Tensor((M, N), "float16"), Y: T.Tensor((M, N), "float16")):
        with T.Kernel(M // block_M, threads=128) as bx:
            x = T.alloc_fragment((block_M, N), "float32")
            row_max = T.alloc_fragment((block_M,), "float32")
            row_sum = T.alloc_fragment((block_M,), "float32")
            T.copy(X[bx * block_M, 0], x)
            T.reduce_max(x, row_max, dim=1)
            for i, j in T.Parallel(block_M, N):
                x[i, j] = T.exp2((x[i, j] - row_max[i]) * 1.4426950408889634)
            T.reduce_sum(x, row_sum, dim=1)
            for i, j in T.Parallel(block_M, N):
                x[i, j] = x[i, j] / row_sum[i]
            T.copy(x, Y[bx * block_M, 0])

    kernel = tilelang.compile(softmax, out_idx=[-1])
    x = rand((M, N), torch.float16, 6)
    torch.testing.assert_close(kernel(x).float(), torch.softmax(x.float(), 1), rtol=1e-2, atol=1e-3)
