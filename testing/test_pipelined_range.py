"""`T.Pipelined(start, stop, num_stages=)` (upstream's form): the loop runs from `start`, which may depend on the
block (a causal backward starts at the block's own diagonal), and is still pipelined."""

import pytest
import torch

import tilelang
import tilelang.language as T
from conftest import poison, rand

ROWS, BLOCK, COLS = 256, 32, 64


def suffix_sums():
    """Block b sums the row blocks b .. end of X (a block-dependent start)."""
    blocks = ROWS // BLOCK

    @T.prim_func
    def f(X: T.Tensor((ROWS, COLS), "float32"), Y: T.Tensor((blocks, BLOCK, COLS), "float32")):
        with T.Kernel(blocks, threads=128) as bx:
            tile = T.alloc_shared((BLOCK, COLS), "float32")
            acc = T.alloc_fragment((BLOCK, COLS), "float32")
            T.clear(acc)
            for k in T.Pipelined(bx, blocks, num_stages=2):
                T.copy(X[k * BLOCK, 0], tile)
                for i, j in T.Parallel(BLOCK, COLS):
                    acc[i, j] += tile[i, j]
            T.copy(acc, Y[bx, 0, 0])

    return f


@pytest.mark.parametrize("arch", ["mp_31", "mp_22"])
def test_pipelined_from_a_block_dependent_start(arch):
    kernel = tilelang.compile(suffix_sums(), target=f"musa -arch={arch}")
    src = kernel.get_kernel_source()
    assert "blockIdx.x" in src and "tile[" in src
    x = rand((ROWS, COLS), torch.float32, 1)
    y = poison((ROWS // BLOCK, BLOCK, COLS), torch.float32)
    kernel(x, y)
    blocks = x.view(ROWS // BLOCK, BLOCK, COLS)
    ref = torch.stack([blocks[b:].sum(0) for b in range(ROWS // BLOCK)])
    torch.testing.assert_close(y, ref, rtol=1e-4, atol=1e-4)


def test_pipelined_start_stop_matches_range_and_keeps_num_stages():
    from tilelang_musa.ir.attrs import PIPELINE_STAGES

    @T.prim_func
    def f(X: T.Tensor((16,), "float32")):
        with T.Kernel(1, threads=1) as bx:
            for k in T.Pipelined(3, 11, num_stages=2):
                X[k] = 1.0

    loop = f.body
    while not hasattr(loop, "loop_var") or str(loop.loop_var) != "k":
        loop = loop.body
    assert int(loop.min) == 3 and int(loop.extent) == 8
    assert int(loop.annotations[PIPELINE_STAGES]) == 2


def test_pipelined_sync_is_ignored_with_a_warning():
    with pytest.warns(Warning, match="sync"):
        @T.prim_func
        def f(X: T.Tensor((16,), "float32")):
            with T.Kernel(1, threads=1) as bx:
                for k in T.Pipelined(4, num_stages=1, sync=[[0, 1]]):
                    X[k] = 1.0
