"""Tuple assignment whose targets store: `a, b = b, a + b` on T.alloc_var scalars and `A[0], A[1] = A[1], A[0]`
on elements read every value first, then assign each target (upstream's two-phase binding). Before, the names
were rebound at trace time: a swap inside an IR loop happened once while tracing, no statement was emitted, and
the kernel silently computed something else (fib(10) came out 1); element targets were a TypeError. Tuple
assignment to plain names keeps Python's unpacking (existing kernels print the same code)."""

import pytest
import torch

import tilelang
import tilelang.language as T

ARCHS = ["mp_31", "mp_22"]


def fibonacci():
    @T.prim_func
    def main(N: T.Tensor((1,), T.int32), Out: T.Tensor((2,), T.int32)):
        with T.Kernel(1, threads=1):
            a = T.alloc_var(T.int32, 0)
            b = T.alloc_var(T.int32, 1)
            for _ in T.serial(N[0]):
                a, b = b, a + b
            Out[0], Out[1] = a, b

    return main


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("n", [0, 1, 10, 17])
def test_unpacking_into_alloc_vars_runs_in_every_iteration(arch, n):
    kernel = tilelang.compile(fibonacci(), target=f"musa -arch={arch}")
    src = kernel.get_kernel_source()
    # both values are read before either store, inside the loop
    assert "const int a_new = b;" in src and "const int b_new = a + b;" in src, src
    assert src.index("b_new = a + b;") < src.index("a = a_new;") < src.index("b = b_new;"), src
    out = torch.full((2,), -12345, dtype=torch.int32)  # poisoned
    kernel(torch.tensor([n], dtype=torch.int32), out)
    fib = [0, 1]
    for _ in range(n):
        fib = [fib[1], fib[0] + fib[1]]
    assert out.tolist() == fib


@pytest.mark.parametrize("arch", ARCHS)
def test_unpacking_swaps_elements(arch):
    @T.prim_func
    def main(A: T.Tensor((64,), T.float32)):
        with T.Kernel(1, threads=32) as _:
            tx = T.get_thread_binding()
            A[2 * tx], A[2 * tx + 1] = A[2 * tx + 1], A[2 * tx]

    kernel = tilelang.compile(main, target=f"musa -arch={arch}")
    src = kernel.get_kernel_source()
    assert "value_new" in src, src  # A[2 * tx + 1] read into a variable before A[2 * tx] is written
    data = torch.randn(64, generator=torch.Generator().manual_seed(3))
    expected = data.view(32, 2).flip(1).reshape(64).clone()
    kernel(data)
    torch.testing.assert_close(data, expected, rtol=0, atol=0)


def test_unpacking_into_plain_names_is_python_unpacking():
    """No target stores: the names are bound to the values as Python does (no new variables are bound)."""
    @T.prim_func
    def main(A: T.Tensor((64,), T.float32), B: T.Tensor((64,), T.float32)):
        with T.Kernel(1, threads=64) as _:
            tx = T.get_thread_binding()
            lo, hi = tx, 63 - tx
            B[lo] = A[hi]

    src = tilelang.compile(main, target="musa -arch=mp_31").get_kernel_source()
    assert "_new =" not in src, src
    assert "B[(int)threadIdx.x] = A[63 - ((int)threadIdx.x)];" in src, src


def test_unpacking_a_wrong_count_into_stores_is_an_error():
    with pytest.raises(ValueError, match="cannot unpack 3 values into 2 targets"):
        @T.prim_func
        def main(A: T.Tensor((4,), T.float32)):
            with T.Kernel(1, threads=1):
                A[0], A[1] = A[1], A[2], A[3]
