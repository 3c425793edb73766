"""A (1, N) fragment filled from one global row (`T.copy(A[bx, 0], x)`, a nest over N alone) and reduced along N:
the placement keeps the row on a power of two of threads, as for (rows, N) tiles. With N = 384 on 128 threads
the coalesced 4-wide partition left the row on 96 threads and the reduction was a CompileError ("logical_width
... got 96"); upstream narrows the vector width until 128 threads share the row (shuminghu/tilelang-bench's
per-row softmax / rmsnorm / layernorm probes at 256 x 384)."""

import pytest
import torch

import tilelang
import tilelang.language as T
from conftest import poison, rand


def row_layernorm(rows: int, cols: int):
    @T.prim_func
    def main(A: T.Tensor((rows, cols), "float32"), C: T.Tensor((rows, cols), "float32")):
        with T.Kernel(rows, threads=128) as bx:
            x = T.alloc_fragment((1, cols), "float32")
            sq = T.alloc_fragment((1, cols), "float32")
            mean = T.alloc_fragment((1,), "float32")
            var = T.alloc_fragment((1,), "float32")
            T.copy(A[bx, 0], x)
            T.reduce_sum(x, mean, dim=1)
            for i in T.Parallel(1):
                mean[i] = mean[i] / cols
            for i, j in T.Parallel(1, cols):
                sq[i, j] = (x[i, j] - mean[i]) * (x[i, j] - mean[i])
            T.reduce_sum(sq, var, dim=1)
            for i, j in T.Parallel(1, cols):
                x[i, j] = (x[i, j] - mean[i]) * T.rsqrt(var[i] / cols + 1e-5)
            T.copy(x, C[bx, 0])

    return main


@pytest.mark.parametrize("arch", ["mp_31", "mp_22"])
@pytest.mark.parametrize("cols,pieces", [(384, 3), (1536, 3)])  # 384: 3 floats a thread; 1536: 3 float4s
def test_a_unit_row_reduces_over_a_power_of_two_of_threads(arch, cols, pieces):
    kernel = tilelang.compile(row_layernorm(6, cols), target=f"musa -arch={arch}")
    source = kernel.get_kernel_source()
    assert "tl::AllReduce<tl::SumOp, 128, 1, " in source  # the whole block combines the row
    assert f"it < {pieces}; ++it)" in source  # each thread its share of the row: scalars or 16-byte vectors
    assert ("float4" in source) == (cols == 1536)  # the vector width narrows only where the row needs it
    a, c = rand((6, cols), torch.float32, 5), poison((6, cols), torch.float32)
    kernel(a, c)
    torch.testing.assert_close(c, torch.nn.functional.layer_norm(a, (cols,), eps=1e-5), rtol=1e-4, atol=1e-4)
