"""T.atomic_add(dst, shared_tile, use_tma=True): upstream's TMA reduce-add of a shared tile into global memory.
MUSA's TME has no reduce-add store, so the tile is added by element atomics (same result) with a one-time warning;
operands upstream's form does not take (a fragment value, a shared destination) are named errors."""

import pytest
import torch

import tilelang
import tilelang.language as T
from conftest import rand
from tilelang_musa import diagnostics
from tilelang_musa.diagnostics import TileLangWarning
from tilelang_musa.errors import CompileError


def _repeated_adds(times):
    @T.prim_func
    def main(X: T.Tensor((16, 16), T.float32), out: T.Tensor((16, 16), T.float32)):
        with T.Kernel(2, threads=128):
            out_shared = T.alloc_shared((16, 16), T.float32)
            T.copy(X, out_shared)
            for _ in range(times):
                T.atomic_add(out, out_shared, use_tma=True)

    return main


@pytest.mark.parametrize("arch", ["mp_31", "mp_22"])
def test_use_tma_adds_the_tile(arch):
    diagnostics._WARNED.discard("atomic_add.use_tma")  # one-time per process: seen by each parametrized case
    with pytest.warns(TileLangWarning, match="no reduce-add store"):
        program = _repeated_adds(4)
    kernel = tilelang.compile(program, target=f"musa -arch={arch}")
    assert "AtomicAdd" in kernel.get_kernel_source()
    x, out = rand((16, 16), torch.float32, 31), rand((16, 16), torch.float32, 32)
    expected = out + 8 * x  # two blocks, four adds each
    kernel(x, out)
    torch.testing.assert_close(out, expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("body,message", [("fragment", "value must be a shared buffer|shared tile"),
                                          ("shared_dst", "adds a shared tile into global memory")])
def test_use_tma_operands_are_checked(body, message):
    with pytest.raises(CompileError, match=message):
        @T.prim_func
        def main(out: T.Tensor((16, 16), T.float32)):
            with T.Kernel(1, threads=128):
                tile = T.alloc_shared((16, 16), T.float32)
                frag = T.alloc_fragment((16, 16), T.float32)
                T.fill(frag, 1)
                T.fill(tile, 1)
                if body == "fragment":
                    T.atomic_add(out, frag, use_tma=True)
                else:
                    T.atomic_add(tile, frag, use_tma=True)
