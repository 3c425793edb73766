"""Upstream's Hopper ordering fences (`T.fence_proxy_async()` before a TMA store of a tile the threads wrote,
`T.warpgroup_fence_operand(C_local, num_regs=...)` after a WGMMA wait), as TileOPs' persistent GEMMs write them:
a compiler fence on MUSA, the kernel compiled for both arches and run in the simulator against torch; bad operands
are errors at their line."""

import pytest
import torch

import tilelang
import tilelang.language as T
from conftest import rand
from tilelang_musa.errors import CompileError

ARCHS = ["mp_31", "mp_22"]
M, N, K = 64, 64, 32


def _gemm_with_fences(fence_operand):
    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((N, K), "float16"), C: T.Tensor((M, N), "float16")):
        with T.Kernel(1, threads=128):
            A_s = T.alloc_shared((M, K), "float16")
            B_s = T.alloc_shared((N, K), "float16")
            C_s = T.alloc_shared((M, N), "float16")
            C_local = T.alloc_fragment((M, N), "float32")
            C_cast = T.alloc_fragment((M, N), "float16")
            T.copy(A, A_s)
            T.copy(B, B_s)
            T.wgmma_gemm(A_s, B_s, C_local, transpose_B=True, clear_accum=True)
            T.wait_wgmma(0)
            fence_operand(C_local)
            T.copy(C_local, C_cast)
            T.copy(C_cast, C_s)
            T.fence_proxy_async()
            T.sync_threads()
            T.copy(C_s, C)

    return main


@pytest.mark.parametrize("arch", ARCHS)
def test_fences_around_an_accumulator_and_a_tile_store(arch):
    kernel = tilelang.compile(_gemm_with_fences(lambda c: T.warpgroup_fence_operand(c, num_regs=32)),
                              target=f"musa -arch={arch}")
    assert kernel.get_kernel_source().count("tl::compiler_fence();") == 2
    a, b, c = rand((M, K), torch.float16), rand((N, K), torch.float16), torch.empty(M, N, dtype=torch.float16)
    kernel(a, b, c)
    torch.testing.assert_close(c.float(), a.float() @ b.float().T, rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("fence_operand, message", [
    (lambda c: T.warpgroup_fence_operand(c[0, 0]), "num_regs must be given when passing an element"),
    (lambda c: T.warpgroup_fence_operand(c, num_regs=-1), "num_regs must be a non-negative integer"),
    (lambda c: T.warpgroup_fence_operand(c, dtype="float16"), "dtype mismatch: provided float16, buffer uses float32"),
    (lambda c: T.warpgroup_fence_operand(3), "the operand must be the accumulator fragment"),
])
def test_bad_fence_operands_are_errors_at_their_line(fence_operand, message):
    with pytest.raises(CompileError, match=message) as err:
        tilelang.compile(_gemm_with_fences(fence_operand), target="musa -arch=mp_31")
    assert "test_fences.py" in str(err.value)
