"""`JITKernel.adapter` (upstream's kernel.adapter): parameters with their shapes (size names for T.dynamic sizes,
as upstream's cache tests read them), outputs, program, library, source, and calling it runs the kernel."""

import os

import pytest
import torch

import tilelang
import tilelang.language as T
from conftest import poison, rand


def _scale(block):
    M = T.dynamic("M")

    @T.prim_func
    def main(A: T.Tensor((M, block), T.float32), B: T.Tensor((M, block), T.float32)):
        with T.Kernel(T.ceildiv(M, 4), threads=128) as bx:
            for i, j in T.Parallel(4, block):
                if bx * 4 + i < M:
                    B[bx * 4 + i, j] = A[bx * 4 + i, j] * 3.0

    return main


@pytest.mark.parametrize("arch", ["mp_31", "mp_22"])
def test_adapter_describes_and_runs_the_kernel(arch):
    program = _scale(128)
    kernel = tilelang.compile(program, out_idx=[1], target=f"musa -arch={arch}")
    adapter = kernel.adapter
    assert [tuple(map(str, p.shape)) for p in adapter.params] == [("M", "128"), ("M", "128")]
    assert [str(p.dtype) for p in adapter.params] == ["float32", "float32"]
    assert adapter.result_idx == [1]
    assert adapter.prim_func is program
    assert os.path.isfile(adapter.libpath)
    assert adapter.get_kernel_source() == kernel.get_kernel_source()
    assert "extern \"C\"" in adapter.get_host_source()
    a = rand((10, 128), torch.float32, 41)
    torch.testing.assert_close(adapter(a), a * 3.0)
    torch.testing.assert_close(adapter.func(a), a * 3.0)


def test_adapter_references_can_be_released():
    # Moore Threads' TME tests release a kernel by hand before gc.collect(): adapter.func = None,
    # kernel.torch_function = None, kernel.adapter = None. The kernel itself keeps running.
    kernel = tilelang.compile(_scale(128), out_idx=[1], target="musa -arch=mp_31")
    adapter = kernel.adapter
    assert kernel.adapter is adapter  # one adapter per kernel, so an assignment to it sticks
    adapter.func = None
    assert adapter.func is None
    with pytest.raises(RuntimeError, match="func was set to None"):
        adapter(rand((4, 128), torch.float32, 42))
    kernel.torch_function = None
    kernel.adapter = None
    assert kernel.adapter is None
    a = rand((6, 128), torch.float32, 43)
    torch.testing.assert_close(kernel(a), a * 3.0)
