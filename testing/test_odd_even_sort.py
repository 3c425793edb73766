"""A shared-memory odd-even transposition sort (TileOPs' NSA top-k writes one): each thread swaps its own pair of
elements under a data-dependent `if`, so no barrier belongs between the two stores of the swap (one there would be
a barrier under a divergent branch, over 31 threads: no arch has one). Compiled for both arches, its MUSA C checked,
run in the simulator against torch's sort."""

import re

import pytest
import torch

import tilelang
import tilelang.language as T
from conftest import rand

ARCHS = ["mp_31", "mp_22"]
SIZE = 64


def _odd_even_sort():
    @T.prim_func
    def main(V: T.Tensor((SIZE,), "float32"), O: T.Tensor((SIZE,), "float32")):
        with T.Kernel(1, threads=128):
            s = T.alloc_shared((SIZE,), "float32")
            T.copy(V, s)
            for _ in T.serial(SIZE):
                for i in T.Parallel(SIZE // 2):
                    v1 = s[i * 2]
                    v2 = s[i * 2 + 1]
                    if v1 < v2:
                        s[i * 2], s[i * 2 + 1] = v2, v1
                T.sync_threads()
                for i in T.Parallel((SIZE - 1) // 2):
                    v1 = s[i * 2 + 1]
                    v2 = s[i * 2 + 2]
                    if v1 < v2:
                        s[i * 2 + 1], s[i * 2 + 2] = v2, v1
                T.sync_threads()
            T.copy(s, O)

    return main


@pytest.mark.parametrize("arch", ARCHS)
def test_odd_even_sort_swaps_without_a_barrier_in_the_branch(arch):
    kernel = tilelang.compile(_odd_even_sort(), target=f"musa -arch={arch}")
    swaps = re.findall(r"if \(v1\w* < v2\w*\) \{([^}]*)\}", kernel.get_kernel_source())
    assert len(swaps) == 2 and not any("sync" in swap for swap in swaps)
    v, o = rand((SIZE,), torch.float32), torch.empty(SIZE)
    kernel(v, o)
    assert torch.equal(o, v.sort(descending=True).values)
