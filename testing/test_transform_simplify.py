"""`tilelang.transform.simplify.apply_simplify` (upstream's program simplifier: unused tensor parameters dropped)
and upstream's `JITKernel(program, target=...)` constructor."""

import pytest
import torch

import tilelang
import tilelang.language as T
from conftest import poison, rand
from tilelang import JITKernel
from tilelang.transform.simplify import apply_simplify


def _program():
    @T.prim_func
    def main(A: T.Tensor((64,), "float32"), Bias: T.Tensor((64,), "float32"), C: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=64):
            tx = T.get_thread_binding(0)
            C[tx] = A[tx] * (1 + 1)

    return main


@pytest.mark.parametrize("arch", ["mp_31", "mp_22"])
def test_unused_tensor_parameter_is_dropped(arch):
    program = apply_simplify(_program())
    assert [p.name for p in program.params] == ["A", "C"]
    kernel = JITKernel(program, target=f"musa -arch={arch}")
    source = kernel.get_kernel_source()
    assert "float* __restrict__ A, float* __restrict__ C)" in source and "Bias" not in source
    a, c = rand((64,), torch.float32, 1), poison((64,), torch.float32)
    kernel(a, c)
    torch.testing.assert_close(c, a * 2)


def test_jitkernel_takes_compile_options():
    kernel = JITKernel(_program(), out_idx=[2], target="musa -arch=mp_31")
    a = rand((64,), torch.float32, 2)
    torch.testing.assert_close(kernel(a, torch.zeros(64)), a * 2)
