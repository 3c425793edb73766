"""The jit object's `signature` and `out_idx`, as upstream's has them: TileOPs keeps only the config knobs a kernel
factory takes (`kernel.signature.parameters`) before calling it; the kept knobs build and run the kernel."""

import inspect

import torch

import tilelang
import tilelang.language as T
from conftest import rand


@tilelang.jit(out_idx=[-1])
def row_scale(M, N, block_m: int = 4, threads: int = 128):
    @T.prim_func
    def main(A: T.Tensor((M, N), "float32"), B: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(M, block_m), threads=threads) as bx:
            for i, j in T.Parallel(block_m, N):
                B[bx * block_m + i, j] = A[bx * block_m + i, j] * 2.0

    return main


def test_signature_and_out_idx_filter_a_config():
    assert list(row_scale.signature.parameters) == ["M", "N", "block_m", "threads"]
    assert row_scale.signature.parameters["block_m"].default == 4
    assert isinstance(row_scale.signature, inspect.Signature) and row_scale.out_idx == [-1]
    config = {"block_m": 8, "threads": 64, "num_stages": 2}  # a knob this factory does not take is dropped
    knobs = {k: v for k, v in config.items() if k in row_scale.signature.parameters}
    assert knobs == {"block_m": 8, "threads": 64}
    a = rand((16, 32), torch.float32)
    torch.testing.assert_close(row_scale(16, 32, **knobs)(a), a * 2)
