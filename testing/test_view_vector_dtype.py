"""`T.view(pairs, (4,), T.bfloat16)` of a local array of `T.bfloat16x2` (DeepSeek TileKernels' swiglu per-channel
cast keeps its running absolute maxima as packed pairs and reads them one by one): a view's size counts every lane
of a vector dtype (it counted one, "holds 4 bytes, the view 8")."""

import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang_musa.errors import ViewSizeError

ARCHS = ["mp_31", "mp_22"]


@pytest.mark.parametrize("arch", ARCHS)
def test_a_local_of_pairs_viewed_as_its_elements(arch):
    @T.prim_func
    def main(A: T.Tensor((64, 4), T.bfloat16), B: T.Tensor((64, 4), T.bfloat16)):
        with T.Kernel(1, threads=64):
            tx = T.get_thread_binding()
            pairs = T.alloc_local((2,), T.bfloat16x2)
            elems = T.view(pairs, (4,), T.bfloat16)
            for j in T.unroll(2):
                pairs[j] = T.abs2(T.bfloat16x2(A[tx, j * 2], A[tx, j * 2 + 1]))
            for j in T.unroll(4):
                B[tx, j] = elems[j]

    kernel = tilelang.compile(main, target=f"musa -arch={arch}")
    a = torch.randn((64, 4), generator=torch.Generator().manual_seed(4)).to(torch.bfloat16)
    b = torch.full((64, 4), float("nan"), dtype=torch.bfloat16)
    kernel(a, b)
    torch.testing.assert_close(b, a.abs(), rtol=0, atol=0)


def test_a_view_of_another_size_is_still_an_error():
    def main(B: T.Tensor((64,), T.bfloat16)):
        with T.Kernel(1, threads=64):
            pairs = T.alloc_local((2,), T.bfloat16x2)
            elems = T.view(pairs, (8,), T.bfloat16)
            B[0] = elems[0]

    with pytest.raises(ViewSizeError, match=r"`pairs` \[2\] bfloat16x2 holds 8 bytes, the view \[8\] bfloat16 16"):
        T.prim_func(main)
