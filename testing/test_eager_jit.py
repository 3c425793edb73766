"""The eager @tilelang.jit style as upstream's eager-JIT notebook (examples/eager_jit) writes it: `f.compile(A, B,
...)` with tensors or T.Tensor specs setting the sizes, `T.dynamic("M, N, K")`, a kernel left to a @T.macro, and a
transposed tensor through `T.StridedTensor` with run-time strides."""

import pytest
import torch

import tilelang
import tilelang.language as T
from conftest import rand


@tilelang.jit
def gemm(A, B, block_M: int = 64, block_N: int = 64, block_K: int = 32):
    M, N, K = T.const("M, N, K")
    A: T.Tensor[[M, K], T.float16]
    B: T.Tensor[[K, N], T.float16]
    C = T.empty((M, N), T.float32)
    with T.Kernel(T.ceildiv(M, block_M), T.ceildiv(N, block_N), threads=128) as (bx, by):
        A_s = T.alloc_shared((block_M, block_K), A.dtype)
        B_s = T.alloc_shared((block_K, block_N), B.dtype)
        acc = T.alloc_fragment((block_M, block_N), T.float32)
        T.clear(acc)
        for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=2):
            T.copy(A[bx * block_M, k * block_K], A_s)
            T.copy(B[k * block_K, by * block_N], B_s)
            T.gemm(A_s, B_s, acc)
        T.copy(acc, C[bx * block_M, by * block_N])
    return C


@T.macro
def copy_tiles(A, B, M, N):
    with T.Kernel(T.ceildiv(M, 32), T.ceildiv(N, 32), threads=128) as (bx, by):
        T.copy(A[bx * 32:(bx + 1) * 32, by * 32:(by + 1) * 32], B[bx * 32:(bx + 1) * 32, by * 32:(by + 1) * 32])


@tilelang.jit
def as_contiguous(A):
    M, N, dM, dN = T.dynamic("M, N, dM, dN")
    A: T.StridedTensor[[M, N], [dM, dN], T.float32]
    B = T.empty((M, N), A.dtype)  # the annotation's dtype, read before the kernel starts
    copy_tiles(A, B, M, N)  # the kernel is the macro's
    return B


def test_compile_takes_tensors_and_specs_positionally():
    a, b = rand((128, 64), torch.float16, 1), rand((64, 192), torch.float16, 2)
    kernel = gemm.compile(a, b, block_N=64)
    assert kernel is gemm.compile(T.Tensor((128, 64), T.float16), B=T.Tensor((64, 192), T.float16), block_N=64)
    assert kernel is gemm.compile(M=128, N=192, K=64)
    torch.testing.assert_close(kernel(a, b), a.float() @ b.float(), rtol=1e-2, atol=1e-2)
    with pytest.raises(TypeError, match="size `K` is 32 by name but 64"):
        gemm.compile(a, b, K=32)
    with pytest.raises(TypeError, match="`A` is a tensor parameter"):
        gemm.compile([1, 2], b)


@pytest.mark.parametrize("arch", ["mp_31", "mp_22"])
def test_a_transposed_tensor_through_run_time_strides(arch, monkeypatch):
    monkeypatch.setenv("TILELANG_TARGET", f"musa -arch={arch}")
    a = rand((96, 64), torch.float32, 3)
    kernel = as_contiguous.compile(a.T)
    assert "* dM) + " in kernel.get_kernel_source() and "* dN)" in kernel.get_kernel_source()
    torch.testing.assert_close(as_contiguous(a.T), a.T.contiguous())  # strides (1, 96): the simulator's bounds
    torch.testing.assert_close(as_contiguous(a), a)                    # cover every offset either way


def test_dynamic_declares_several_sizes():
    @tilelang.jit
    def names(X):
        M, N = T.dynamic("M N")
        X: T.Tensor[[M, N], T.float32]
        Y = T.empty((M, N), T.float32)
        with T.Kernel(1, threads=32):
            for i, j in T.Parallel(M, N):
                Y[i, j] = X[i, j] * 2
        return Y

    x = rand((4, 8), torch.float32, 4)
    torch.testing.assert_close(names(x), x * 2)
