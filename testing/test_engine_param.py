"""Upstream's names that tutorial harnesses import (TileLang's puzzles, qwen-in-tilelang's tests):
`tilelang.jit.JITImpl` (what @tilelang.jit returns) and `tilelang.engine.param.KernelParam`; the harnesses build
random inputs from a compiled kernel's `params` (each one's `shape` and `dtype`) and call the kernel."""

import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.engine.param import KernelParam
from tilelang.jit import JITImpl, JITKernel


@tilelang.jit
def axpy(X, Y, alpha: float = 2.0, block: int = 64):
    N = T.const("N")
    X: T.Tensor((N,), T.float16)
    Y: T.Tensor((N,), T.float16)
    Z = T.empty((N,), T.float16)
    with T.Kernel(T.ceildiv(N, block), threads=block) as bx:
        for i in T.Parallel(block):
            Z[bx * block + i] = X[bx * block + i] * T.float16(alpha) + Y[bx * block + i]
    return Z


def run_with_random_inputs(kernel_tl: JITImpl, sizes: dict) -> tuple:
    """A harness's way: compile, then one random tensor per non-output parameter from its shape and dtype."""
    kernel: JITKernel = kernel_tl.compile(**sizes)
    inputs = [torch.randn(*p.shape, dtype=KernelParam(p.dtype, list(p.shape)).torch_dtype())
              for p in kernel.params if not p.is_output]
    return inputs, kernel(*inputs)


@pytest.mark.parametrize("arch", ["mp_31", "mp_22"])
def test_harness_materializes_inputs_from_params(arch, monkeypatch):
    monkeypatch.setenv("TILELANG_TARGET", f"musa -arch={arch}")
    assert isinstance(axpy, JITImpl)
    (x, y), z = run_with_random_inputs(axpy, {"N": 256, "alpha": 3.0})
    assert x.dtype == torch.float16 and x.shape == (256,)
    kernel = axpy.compile(N=256, alpha=3.0)
    assert arch in str(kernel.target) and "axpy_kernel" in kernel.get_kernel_source()
    torch.testing.assert_close(z, x * 3 + y, rtol=1e-3, atol=1e-2)


def test_kernel_param_from_buffer_and_var():
    @T.prim_func
    def k(A: T.Tensor((T.dynamic("M"), 16), "uint8"), n: T.int32):
        with T.Kernel(1, threads=32):
            A[0, 0] = T.uint8(n)

    a_param = KernelParam.from_buffer(k.buffer_map[k.params[0]])
    assert a_param.shape[1] == 16 and str(a_param.shape[0]) == "M"
    assert a_param.is_unsigned() and not a_param.is_scalar() and a_param.torch_dtype() == torch.uint8
    n_param = KernelParam.from_var(k.params[1])
    assert n_param.is_scalar() and str(n_param.dtype) == "int32" and not n_param.is_float8()
