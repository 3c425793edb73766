"""A T.Pipelined loop whose trip count is bound before it (`n = T.ceildiv(lens[b], bn)`, as TileOPs' MHA decode
splits do): on mp_31 the warp-specialized pipeline's producer squad needs the count too. Read from a global tensor,
the binding is copied into the producer's region; read from a shared tile the consumers fill, the loop stays in one
squad (the producer's copy would read the tile before it is written). Both run in the simulator against torch, on
both arches; the printed squads and the count's definition are checked."""

import re

import pytest
import torch

import tilelang
import tilelang.language as T
from conftest import rand

ARCHS = ["mp_31", "mp_22"]
ROWS, N, B = 4, 256, 32


def _prefix_sums(from_shared: bool):
    @T.prim_func
    def main(A: T.Tensor((ROWS, N), "float32"), L: T.Tensor((ROWS,), "int32"), O: T.Tensor((ROWS, B), "float32")):
        with T.Kernel(ROWS, threads=128) as bz:
            Ls = T.alloc_shared([ROWS], "int32")
            T.copy(L, Ls, disable_tma=True)
            As = T.alloc_shared([B], "float32")
            acc = T.alloc_fragment([B], "float32")
            T.fill(acc, 0)
            trips = T.ceildiv(Ls[bz], B) if from_shared else T.ceildiv(L[bz], B)
            for k in T.Pipelined(trips, num_stages=2):
                T.copy(A[bz, k * B:(k + 1) * B], As)
                for i in T.Parallel(B):
                    acc[i] += As[i]
            T.copy(acc, O[bz, :])

    return main


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("from_shared", [False, True], ids=["global", "shared"])
def test_a_bound_trip_count_reaches_both_squads(arch, from_shared):
    kernel = tilelang.compile(_prefix_sums(from_shared), target=f"musa -arch={arch}")
    source = kernel.get_kernel_source()
    squads = "(128 <= ((int)threadIdx.x))" in source
    assert squads == (arch == "mp_31" and not from_shared)
    # (the printer refuses a variable used but not defined: the producer's copy of the count had none)
    assert len(re.findall(r"const int trips\w* = ", source)) == 1
    a, lens = rand((ROWS, N), torch.float32), torch.tensor([256, 64, 96, 0], dtype=torch.int32)
    o = torch.empty(ROWS, B)
    kernel(a, lens, o)
    expected = torch.stack([a[r, :int(lens[r])].reshape(-1, B).sum(0) if lens[r] else torch.zeros(B)
                            for r in range(ROWS)])
    torch.testing.assert_close(o, expected, rtol=1e-5, atol=1e-4)
