"""A T.Parallel loop that follows a fragment's layout runs a thread's slots V at a time where the thread holds V
consecutive elements of the innermost dimension and every global / shared access of the body is a V-wide vector
there (LowerParallelLoop): RMS norm's `x[i, j] * rms[i] * W[j]` reads W in 16-byte pieces, not 2-byte ones, and
its store of the fragment to Y is one vector per 8 elements."""

import pytest
import torch

import tilelang
import tilelang.language as T
from conftest import poison, rand

ARCHS = ["mp_31", "mp_22"]


def rms_norm(M, N, block_M=4, threads=128):
    @T.prim_func
    def main(X: T.Tensor((M, N), "float16"), W: T.Tensor((N,), "float16"), Y: T.Tensor((M, N), "float16")):
        with T.Kernel(M // block_M, threads=threads) as bx:
            x_shared = T.alloc_shared((block_M, N), "float16")
            x_local = T.alloc_fragment((block_M, N), "float32")
            x_sq = T.alloc_fragment((block_M, N), "float32")
            rms = T.alloc_fragment((block_M,), "float32")
            T.copy(X[bx * block_M:(bx + 1) * block_M, :], x_shared)
            T.copy(x_shared, x_local)
            for i, j in T.Parallel(block_M, N):
                x_sq[i, j] = x_local[i, j] * x_local[i, j]
            T.reduce_sum(x_sq, rms, dim=1)
            for i in T.Parallel(block_M):
                rms[i] = T.rsqrt(rms[i] / N + 1e-6)
            for i, j in T.Parallel(block_M, N):
                x_local[i, j] = x_local[i, j] * rms[i] * W[j]
            T.copy(x_local, Y[bx * block_M:(bx + 1) * block_M, :])

    return main


def reference(x, w):
    x = x.float()
    return (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w.float()).half()


@pytest.mark.parametrize("arch", ARCHS)
def test_a_loop_over_a_fragment_reads_global_rows_in_vectors(arch):
    M, N = 64, 1024
    kernel = tilelang.compile(rms_norm(M, N), target=f"musa -arch={arch}")
    source = kernel.get_kernel_source()
    assert "tl::vec_cast<float>(*reinterpret_cast<tl::vec<half_t, 8>*>(W + " in source, source
    assert "*reinterpret_cast<tl::vec<half_t, 8>*>(Y + " in source, source
    x, w = rand((M, N), torch.float16, 1), rand((N,), torch.float16, 2)
    y = poison((M, N), torch.float16)
    kernel(x, w, y)
    torch.testing.assert_close(y.float(), reference(x, w).float(), rtol=1e-2, atol=1e-2)
    counters = kernel.get_profiler().counters([x, w, y])
    assert counters.global_load_efficiency == counters.global_store_efficiency == 1.0


@pytest.mark.parametrize("arch", ARCHS)
def test_vectorize_off_keeps_the_loop_scalar(arch):
    kernel = tilelang.compile(rms_norm(16, 256), target=f"musa -arch={arch}",
                              pass_configs={tilelang.PassConfigKey.TL_DISABLE_VECTORIZE: True})
    source = kernel.get_kernel_source()
    assert "tl::vec<half_t, 8>*>(W + " not in source and "tl::vec<half_t, 8>*>(Y + " not in source, source
    x, w = rand((16, 256), torch.float16, 3), rand((256,), torch.float16, 4)
    y = poison((16, 256), torch.float16)
    kernel(x, w, y)
    torch.testing.assert_close(y.float(), reference(x, w).float(), rtol=1e-2, atol=1e-2)
