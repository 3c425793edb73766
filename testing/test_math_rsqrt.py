"""T.rsqrt prints as MUSA's reciprocal square root (rsqrtf / rsqrt), not TVM's default `1 / sqrt(x)`, with and
without fast math; half operands compute in float."""

import pytest
import torch

import tilelang
import tilelang.language as T
from conftest import poison, rand


def rsqrt_program(dtype, M=64, N=64):
    @T.prim_func
    def main(A: T.Tensor((M, N), dtype), B: T.Tensor((M, N), dtype)):
        with T.Kernel(1, threads=128):
            for i, j in T.Parallel(M, N):
                B[i, j] = T.rsqrt(A[i, j])

    return main


@pytest.mark.parametrize("arch", ["mp_31", "mp_22"])
@pytest.mark.parametrize("dtype, call", [("float32", "rsqrtf("), ("float16", "rsqrtf(tl::cast<float>("),
                                         ("float64", "rsqrt(")])
@pytest.mark.parametrize("fast_math", [False, True])
def test_rsqrt_is_an_rsqrt(arch, dtype, call, fast_math):
    kernel = tilelang.compile(rsqrt_program(dtype), target=f"musa -arch={arch}",
                              pass_configs={"tl.enable_fast_math": fast_math})
    source = kernel.get_kernel_source()
    assert call in source and "sqrtf(" not in source.replace("rsqrtf(", "")
    a = rand((64, 64), getattr(torch, dtype)).abs() + 0.1
    b = poison((64, 64), getattr(torch, dtype))
    kernel(a, b)
    torch.testing.assert_close(b, torch.rsqrt(a), rtol=2e-3, atol=2e-3)
