"""`T.cumsum` / `T.cummax` over a box of a shared tile (`A_shared[r0:r1, :]`, `A_shared[r0:r1, c0:c1]`), as upstream
0.1.13 scans them (its issue 2536: a box at a row offset must scan its own rows, not the tile's first ones):
compiled for both arches, the MUSA C checked for the box's first element and pitch, and run against torch."""

import pytest
import torch

import tilelang
import tilelang.language as T
from conftest import rand

ARCHS = ["mp_31", "mp_22"]


def _torch_scan(x, op, dim, reverse):
    if reverse:
        x = x.flip(dims=[dim])
    y = x.cumsum(dim) if op == "cumsum" else x.cummax(dim).values
    return y.flip(dims=[dim]) if reverse else y


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("op,dim,reverse", [("cumsum", 0, False), ("cummax", 1, True), ("cumsum", 1, False),
                                            ("cummax", 0, True)])
def test_scan_of_a_row_box_in_place(arch, op, dim, reverse):
    H, W, r0, r1 = 128, 8, 64, 128

    @T.prim_func
    def main(A: T.Tensor((H, W), "float32"), B: T.Tensor((H, W), "float32")):
        with T.Kernel(1, threads=128):
            A_shared = T.alloc_shared((H, W), "float32")
            T.copy(A, A_shared)
            (T.cumsum if op == "cumsum" else T.cummax)(src=A_shared[r0:r1, :], dim=dim, reverse=reverse)
            T.copy(A_shared, B)

    kernel = tilelang.compile(main, out_idx=-1, target=f"musa -arch={arch}")
    assert f"::run(&A_shared[{r0 * W}], &A_shared[{r0 * W}], {r1 - r0}, {W});" in kernel.get_kernel_source()
    a = rand((H, W), torch.float32, 11)
    expected = a.clone()
    expected[r0:r1] = _torch_scan(a[r0:r1], op, dim, reverse)
    torch.testing.assert_close(kernel(a), expected, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("dim", [0, 1])
def test_scan_of_a_column_box_into_another_tile(arch, dim):
    """Part of each row: the template steps by each tile's own row pitch (40 and 24 here)."""

    @T.prim_func
    def main(A: T.Tensor((16, 40), "float32"), B: T.Tensor((16, 24), "float32")):
        with T.Kernel(1, threads=64):
            S = T.alloc_shared((16, 40), "float32")
            D = T.alloc_shared((16, 24), "float32")
            T.copy(A, S)
            for i, j in T.Parallel(16, 24):
                D[i, j] = -1.0
            T.cumsum(S[2:10, 5:21], D[4:12, 3:19], dim=dim)
            T.copy(D, B)

    kernel = tilelang.compile(main, out_idx=-1, target=f"musa -arch={arch}")
    assert f"::run_pitched(&S[85], 40, &D[99], 24, 8, 16);" in kernel.get_kernel_source()
    a = rand((16, 40), torch.float32, 12)
    expected = torch.full((16, 24), -1.0)
    expected[4:12, 3:19] = a[2:10, 5:21].cumsum(dim)
    torch.testing.assert_close(kernel(a), expected, atol=1e-4, rtol=1e-4)


def test_scan_between_two_boxes_of_one_tile_is_rejected():
    with pytest.raises(tilelang.CompileError, match=r"T.cumsum: src and dst are different boxes of `S`"):
        @T.prim_func
        def main(A: T.Tensor((16, 8), "float32")):
            with T.Kernel(1, threads=64):
                S = T.alloc_shared((16, 8), "float32")
                T.copy(A, S)
                T.cumsum(S[0:8, :], S[8:16, :], dim=0)
                T.copy(S, A)
