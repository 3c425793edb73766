"""`from __future__ import annotations` makes every annotation text, evaluated later: a kernel written inside a
factory whose annotations name the factory's locals (`dtype`, shapes used only in the signature) must still compile,
as upstream's kernels do, for @T.prim_func, @T.macro and the eager @tilelang.jit style."""

from __future__ import annotations

import pytest
import torch

import tilelang
import tilelang.language as T
from conftest import poison, rand

ARCHS = ["mp_31", "mp_22"]


def scaled_copy(M, N, dtype):
    @T.macro
    def scale(src: T.Buffer((M, N), dtype), dst: T.Buffer((M, N), dtype), factor: float):
        for i, j in T.Parallel(M, N):
            dst[i, j] = src[i, j] * factor

    @T.prim_func
    def main(A: T.Tensor((M, N), dtype), B: T.Tensor((M, N), dtype)):
        with T.Kernel(1, threads=128):
            A_s = T.alloc_shared((M, N), dtype)
            T.copy(A, A_s)
            scale(A_s, B, 3.0)

    return main


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_a_factory_kernel_whose_annotations_name_its_locals(arch, dtype):
    kernel = tilelang.compile(scaled_copy(16, 32, dtype), target=f"musa -arch={arch}")
    assert f"{'float' if dtype == 'float32' else 'half_t'}* __restrict__ A" in kernel.get_kernel_source()
    a = rand((16, 32), getattr(torch, dtype))
    b = poison((16, 32), getattr(torch, dtype))
    kernel(a, b)
    torch.testing.assert_close(b, a * 3)


@pytest.mark.parametrize("arch", ARCHS)
def test_an_eager_jit_kernel_defined_in_a_factory(arch):
    def factory(dtype):
        @tilelang.jit(target=f"musa -arch={arch}")
        def double(A: T.Tensor((64,), dtype), B: T.Tensor((64,), dtype)):
            with T.Kernel(1, threads=64):
                for i in T.Parallel(64):
                    B[i] = A[i] + A[i]

        return double

    a, b = rand((64,), torch.float32), poison((64,), torch.float32)
    factory("float32")(a, b)
    torch.testing.assert_close(b, a * 2)


def test_a_name_visible_nowhere_is_named():
    def factory():
        @T.prim_func
        def main(A: T.Tensor((8,), undefined_dtype)):  # noqa: F821 - the error under test
            with T.Kernel(1, threads=8):
                A[0] = A[0]

        return main

    with pytest.raises(tilelang.CompileError, match="annotation of parameter `A`.*undefined_dtype"):
        factory()
