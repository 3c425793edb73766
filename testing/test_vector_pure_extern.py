"""A pure extern call of vector type names a scalar C function: it is printed lane by lane (tl::lanewise), each
operand evaluated once. T.rsqrt of a vector value lowers to one (LowerIntrin's `rsqrtf`); before, the bare
`rsqrtf(vector)` did not compile."""

import pytest
import torch

import tilelang
import tilelang.language as T
from conftest import poison, rand


def rsqrt_program(dtype, lanes):
    @T.prim_func
    def main(A: T.Tensor((4, lanes), dtype), B: T.Tensor((4, lanes), dtype)):
        with T.Kernel(4, threads=32) as bx:
            b = A[bx, 0:lanes]
            B[bx, 0:lanes] = T.rsqrt(b)

    return main


@pytest.mark.parametrize("arch", ["mp_31", "mp_22"])
@pytest.mark.parametrize("dtype, lanes, call", [
    ("float32", 4, "tl::lanewise<float, 4>([](auto... x) { return rsqrtf(x...); }, tl::vec_of(b))"),
    ("float16", 8, "tl::lanewise<float, 8>([](auto... x) { return rsqrtf(x...); }, tl::vec_cast<float>(b))"),
    ("float64", 2, "tl::lanewise<double, 2>([](auto... x) { return rsqrt(x...); }, tl::vec_of(b))"),
])
def test_vector_rsqrt_runs_lane_by_lane(arch, dtype, lanes, call):
    kernel = tilelang.compile(rsqrt_program(dtype, lanes), target=f"musa -arch={arch}")
    assert call in kernel.get_kernel_source()
    a = rand((4, lanes), getattr(torch, dtype)).abs() + 0.1
    out = poison((4, lanes), getattr(torch, dtype))
    kernel(a, out)
    torch.testing.assert_close(out, torch.rsqrt(a), rtol=2e-3, atol=2e-3)


def pow_program():
    @T.prim_func
    def main(A: T.Tensor((4, 4), "float32"), B: T.Tensor((4, 4), "float32")):
        with T.Kernel(4, threads=32) as bx:
            b = A[bx, 0:4]
            B[bx, 0:4] = T.call_pure_extern("float32x4", "powf", b, T.float32(3.0))  # a scalar operand

    return main


@pytest.mark.parametrize("arch", ["mp_31", "mp_22"])
def test_vector_pure_extern_with_a_scalar_operand(arch):
    kernel = tilelang.compile(pow_program(), target=f"musa -arch={arch}")
    assert "tl::lanewise<float, 4>([](auto... x) { return powf(x...); }, tl::vec_of(b), 3.000000e+00f)" in \
        kernel.get_kernel_source()
    a = rand((4, 4), torch.float32)
    out = poison((4, 4), torch.float32)
    kernel(a, out)
    torch.testing.assert_close(out, a ** 3)


@pytest.mark.parametrize("arch", ["mp_31", "mp_22"])
def test_scalar_pure_extern_in_a_parallel_loop(arch):
    """`T.call_pure_extern` as upstream scripts call it: a device math function by name, element by element."""

    @T.prim_func
    def main(A: T.Tensor((64, 64), "float32"), B: T.Tensor((64, 64), "float32")):
        with T.Kernel(2, threads=128) as bx:
            for i, j in T.Parallel(32, 64):
                B[bx * 32 + i, j] = T.call_pure_extern("float32", "expf", A[bx * 32 + i, j])

    kernel = tilelang.compile(main, target=f"musa -arch={arch}")
    assert "expf(" in kernel.get_kernel_source()
    a = rand((64, 64), torch.float32)
    out = poison((64, 64), torch.float32)
    kernel(a, out)
    torch.testing.assert_close(out, torch.exp(a))
