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


def _add_inputs(count):
    """`count` inputs summed into the last parameter: programs of different arity for one out_idx list."""

    @T.prim_func
    def main(A: T.Tensor((64,), T.float32), B: T.Tensor((64,), T.float32), C: T.Tensor((64,), T.float32),
             D: T.Tensor((64,), T.float32)):
        with T.Kernel(1, threads=64):
            tx = T.get_thread_binding()
            D[tx] = A[tx] + B[tx] + C[tx]

    @T.prim_func
    def smaller(A: T.Tensor((64,), T.float32), B: T.Tensor((64,), T.float32), C: T.Tensor((64,), T.float32)):
        with T.Kernel(1, threads=64):
            tx = T.get_thread_binding()
            C[tx] = A[tx] + B[tx]

    return main if count == 3 else smaller


@pytest.mark.parametrize("arch", ["mp_31", "mp_22"])
def test_one_out_idx_list_serves_programs_of_different_arity(arch):
    # upstream's _legalize_result_idx rewrote a list out_idx in place, so a factory reusing one list for programs
    # of different arity got the first program's index for the second (SGLang patches the method to copy it)
    out_idx = [-1]
    first = tilelang.compile(_add_inputs(3), out_idx=out_idx, target=f"musa -arch={arch}")
    second = tilelang.compile(_add_inputs(2), out_idx=out_idx, target=f"musa -arch={arch}")
    assert out_idx == [-1]
    assert (first.adapter.result_idx, second.adapter.result_idx) == ([3], [2])
    a, b, c = (rand((64,), torch.float32, seed) for seed in (44, 45, 46))
    torch.testing.assert_close(first(a, b, c), a + b + c)
    torch.testing.assert_close(second(a, b), a + b)


def test_a_patched_legalize_result_idx_takes_effect(monkeypatch):
    # scripts import BaseKernelAdapter and wrap _legalize_result_idx (SGLang's NSA kernels do at import): every
    # compile legalizes out_idx through it
    from tilelang.jit.adapter.base import BaseKernelAdapter

    original = BaseKernelAdapter._legalize_result_idx
    seen = []

    def recording(self, result_idx):
        seen.append((len(self.params), list(result_idx)))
        return original(self, result_idx)

    monkeypatch.setattr(BaseKernelAdapter, "_legalize_result_idx", recording)
    monkeypatch.setenv("TILELANG_DISABLE_CACHE", "1")  # compiled here, not taken from an earlier test's entry
    kernel = tilelang.compile(_add_inputs(2), out_idx=[-1], target="musa -arch=mp_31")
    assert seen == [(3, [-1])]  # once a compile
    assert kernel.adapter.result_idx == [2]
    a, b = rand((64,), torch.float32, 47), rand((64,), torch.float32, 48)
    torch.testing.assert_close(kernel(a, b), a + b)

    # what the patched method returns is what the kernel allocates and returns
    monkeypatch.setattr(BaseKernelAdapter, "_legalize_result_idx", lambda self, result_idx: [2])
    kernel = tilelang.compile(_add_inputs(2), out_idx=7, target="musa -arch=mp_31")
    assert kernel.adapter.result_idx == [2]
    torch.testing.assert_close(kernel(a, b), a + b)


@pytest.mark.parametrize("out_idx", [3, [-4], [0, 5], "2"])
def test_an_out_of_range_out_idx_names_the_kernel(out_idx):
    with pytest.raises(ValueError, match=r"out_idx=.* of `smaller` \(with 3 parameters\): result_idx should be"):
        tilelang.compile(_add_inputs(2), out_idx=out_idx, target="musa -arch=mp_31")
