"""T.alloc_var(dtype) without an initializer starts at zero, as upstream's docstring says and every upstream printer
(CUDA, HIP, Metal, Moore Threads' MUSA) prints it: `float acc = 0.000000e+00f;`. Real kernels count and accumulate
into such variables without a first store; before, the declaration had no initializer (garbage on hardware, the
sanitizer's poison in the simulator)."""

import pytest
import torch

import tilelang
import tilelang.language as T
from conftest import poison, rand

ARCHS = ["mp_31", "mp_22"]


def _count_and_sum(N):
    @T.prim_func
    def main(A: T.Tensor((N,), T.float32), B: T.Tensor((N,), T.float32), C: T.Tensor((N,), T.int32)):
        with T.Kernel(1, threads=N):
            tx = T.get_thread_binding()
            acc = T.alloc_var(T.float32)
            count = T.alloc_var("int32")
            half_sum = T.alloc_var("float16")
            seeded = T.alloc_var("int32", 5)  # an explicit initializer still wins
            for i in T.serial(4):
                acc += A[tx] * i
                if A[tx] > 0:
                    count += 1
            half_sum += 1
            B[tx] = acc + half_sum
            C[tx] = count + seeded

    return main


@pytest.mark.parametrize("arch", ARCHS)
def test_alloc_var_without_initializer_starts_at_zero(arch):
    N = 128
    kernel = tilelang.compile(_count_and_sum(N), target=f"musa -arch={arch}")
    source = kernel.get_kernel_source()
    assert "float acc = 0.000000e+00f;" in source
    assert "int count = 0;" in source
    assert "half_t half_sum = half_t(0.000000e+00f);" in source
    assert "int seeded = 0;" in source and "seeded = 5;" in source
    a = rand((N,), torch.float32, seed=11)
    b, c = poison((N,), torch.float32), torch.full((N,), -7, dtype=torch.int32)
    kernel(a, b, c)
    torch.testing.assert_close(b, a * 6 + 1)
    torch.testing.assert_close(c, (a > 0).int() * 4 + 5)
