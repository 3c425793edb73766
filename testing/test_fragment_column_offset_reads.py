"""A fragment written in a T.Parallel loop that reads an annotated fragment at a column offset (`post[i, j] =
f(mixes[i, j + 4])`, DeepSeek TileKernels' mHC pre split): the loop runs by the source's layout, slot `j + 4`; the
new fragment takes the same threads with its own slots from 0 (it had slots 4..7 of 8, holes in its registers, and
copying it out could not invert its layout: "128 inputs cannot cover the 256 points")."""

import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang_musa.transform.layout_implied import slots_from_zero

ARCHS = ["mp_31", "mp_22"]
BLOCK, M = 32, 4
WIDE = 2 * M + M * M


def split_mixes():
    @T.prim_func
    def main(X: T.Tensor((64, WIDE), T.float32), Pre: T.Tensor((64, M), T.float32),
             Post: T.Tensor((64, M), T.float32), Comb: T.Tensor((64, M * M), T.float32)):
        with T.Kernel(2) as pid:
            mixes = T.alloc_fragment((BLOCK, WIDE), T.float32)
            pre = T.alloc_fragment((BLOCK, M), T.float32)
            post = T.alloc_fragment((BLOCK, M), T.float32)
            comb = T.alloc_fragment((BLOCK, M * M), T.float32)
            T.annotate_layout({mixes: T.Fragment((BLOCK, WIDE), lambda i, j: (i % 32, i // 32 * WIDE + j))})
            T.copy(X[pid * BLOCK, 0], mixes)
            for i, j in T.Parallel(BLOCK, M):
                pre[i, j] = mixes[i, j] + 1.0
            for i, j in T.Parallel(BLOCK, M):
                post[i, j] = T.sigmoid(mixes[i, j + M]) * 2.0
            for i, j in T.Parallel(BLOCK, M * M):
                comb[i, j] = mixes[i, j + 2 * M] - 1.0
            T.copy(pre, Pre[pid * BLOCK, 0])
            T.copy(post, Post[pid * BLOCK, 0])
            T.copy(comb, Comb[pid * BLOCK, 0])

    return main


@pytest.mark.parametrize("arch", ARCHS)
def test_a_fragment_filled_from_a_column_offset_has_its_own_slots(arch):
    kernel = tilelang.compile(split_mixes(), target=f"musa -arch={arch}")
    source = kernel.get_kernel_source()
    assert "float post[4];" in source and "float comb[16];" in source, source
    x = torch.randn((64, WIDE), generator=torch.Generator().manual_seed(9))
    pre, post, comb = (torch.full((64, n), float("nan")) for n in (M, M, M * M))
    kernel(x, pre, post, comb)
    torch.testing.assert_close(pre, x[:, :M] + 1)
    torch.testing.assert_close(post, torch.sigmoid(x[:, M:2 * M]) * 2)
    torch.testing.assert_close(comb, x[:, 2 * M:] - 1)


def test_slots_from_zero_shifts_only_an_offset_slot_map():
    offset = T.Fragment((32, 4), forward_fn=lambda i, j: (i, j + 4))
    shifted = slots_from_zero(offset)
    assert shifted.output_shape == [4] and str(shifted.forward_index[0]) == str(offset.forward_vars[1])
    compact = T.Fragment((32, 4), forward_fn=lambda i, j: (i, j))
    assert slots_from_zero(compact).same_as(compact)
