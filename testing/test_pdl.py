"""Programmatic dependent launch, upstream's T.pdl_trigger() / T.pdl_sync(): a MUSA stream runs its kernels one
after the other, so T.pdl_sync() (wait for the previous kernel's writes) already holds and is silent, and
T.pdl_trigger() (let the next kernel start early) cannot apply: a no-op with a one-time warning. Neither changes
the printed kernels; a program of two kernels, the second reading what the first wrote, matches torch."""

import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang_musa import diagnostics
from conftest import poison, rand


def two_kernels(N, block, with_pdl):
    @T.prim_func
    def main(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32"), C: T.Tensor((N,), "float32")):
        with T.Kernel(T.ceildiv(N, block), threads=block) as bx:
            for i in T.Parallel(block):
                if bx * block + i < N:
                    B[bx * block + i] = A[bx * block + i] + 1.0
            if with_pdl:
                T.pdl_trigger()
        with T.Kernel(T.ceildiv(N, block), threads=block) as bx2:
            if with_pdl:
                T.pdl_sync()
            for i in T.Parallel(block):
                if bx2 * block + i < N:
                    C[bx2 * block + i] = B[(N - 1) - (bx2 * block + i)] * 2.0  # another block's write

    return main


@pytest.mark.parametrize("arch", ["mp_31", "mp_22"])
def test_pdl_calls_emit_nothing_and_the_second_kernel_reads_the_first_ones_writes(arch, monkeypatch):
    monkeypatch.setattr(diagnostics, "_WARNED", set())
    target = f"musa -arch={arch}"
    with pytest.warns(tilelang.TileLangWarning) as caught:
        kernel = tilelang.compile(two_kernels(300, 128, True), target=target)
    plain = tilelang.compile(two_kernels(300, 128, False), target=target)
    (warning,) = [w for w in caught if "pdl" in str(w.message)]
    assert "T.pdl_trigger: MUSA has no programmatic dependent launch" in str(warning.message)
    assert "test_pdl.py:" in str(warning.message)
    assert kernel.get_kernel_source() == plain.get_kernel_source()
    assert kernel.get_kernel_source().count("__global__") == 2
    a, b, c = rand((300,), torch.float32, 5), poison((300,), torch.float32), poison((300,), torch.float32)
    kernel(a, b, c)
    torch.testing.assert_close(b, a + 1)
    torch.testing.assert_close(c, (a + 1).flip(0) * 2)


@pytest.mark.parametrize("construct", ["pdl_trigger", "pdl_sync"])
def test_a_pdl_call_outside_a_kernel_is_an_error(construct):
    with pytest.raises(tilelang.CompileError, match=f"T.{construct}.*inside `with T.Kernel"):
        @T.prim_func
        def main(A: T.Tensor((4,), "float32")):
            getattr(T, construct)()
