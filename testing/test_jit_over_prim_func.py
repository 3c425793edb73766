"""`@tilelang.jit(out_idx=...)` written directly over a `@T.prim_func`: TileLang 0.1.2-0.1.4 compiled the
PrimFunc at once and returned the kernel, which LLM-written KernelBench solutions (`class ModelNew`) still do
inside their forward. It was an AttributeError (`'PrimFunc' object has no attribute '__closure__'`)."""

import pytest
import torch

import tilelang
import tilelang.language as T
from conftest import rand


def row_normalize(rows: int, cols: int):
    """One thread a row: the row's absolute sum in a local scalar, then each value divided by it."""

    @tilelang.jit(out_idx=-1)
    @T.prim_func
    def normalize(X: T.Tensor((rows, cols), "float32"), Y: T.Tensor((rows, cols), "float32")):
        with T.Kernel(rows, 1, threads=1) as (bx, _):
            total = T.alloc_local((1,), "float32")
            total[0] = 0.0
            for j in range(cols):
                total[0] += T.abs(X[bx, j])
            for j in range(cols):
                Y[bx, j] = X[bx, j] / total[0]

    return normalize


@pytest.mark.parametrize("arch", ["mp_31", "mp_22"])
def test_decorated_prim_func_is_a_compiled_kernel(arch, monkeypatch):
    monkeypatch.setenv("TILELANG_TARGET", f"musa -arch={arch}")
    kernel = row_normalize(6, 40)
    assert isinstance(kernel, tilelang.JITKernel)
    source = kernel.get_kernel_source()
    assert "__global__" in source and "normalize_kernel" in source
    assert "for (int j = 0; j < 40; ++j)" in source  # the serial loops, one thread a row
    x = rand((6, 40), torch.float32, 7)
    torch.testing.assert_close(kernel(x), x / x.abs().sum(1, keepdim=True))


def test_called_form_takes_compile_options():
    @T.prim_func
    def scale(X: T.Tensor((256,), "float16"), Y: T.Tensor((256,), "float16")):
        with T.Kernel(2, threads=128) as bx:
            for i in T.Parallel(128):
                Y[bx * 128 + i] = X[bx * 128 + i] * T.float16(3)

    kernel = tilelang.jit(scale, out_idx=[1], target="musa -arch=mp_22")
    assert "mp_22" in str(kernel.target)
    x = rand((256,), torch.float16, 8)
    torch.testing.assert_close(kernel(x), x * 3)
