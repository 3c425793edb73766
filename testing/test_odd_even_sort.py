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


def _top_k_pool(chunks: int):
    """The NSA top-k pool: a 64-slot pool filled with -inf, then per chunk its 32 scores written into the upper half
    and the pool sorted (values with their indices) so that the best 32 so far stay in the lower half."""
    @T.prim_func
    def main(V: T.Tensor((chunks, 32), "float32"), O: T.Tensor((32,), "int32")):
        with T.Kernel(1, threads=128):
            s = T.alloc_shared((SIZE,), "float32")
            ix = T.alloc_shared((SIZE,), "int32")
            for p in T.Parallel(SIZE):
                s[p] = -T.infinity("float32")
                ix[p] = 0
            for it in T.serial(chunks):
                for c in T.Parallel(32):
                    s[32 + c] = V[it, c]
                    ix[32 + c] = it * 32 + c
                T.sync_threads()
                for _ in T.serial(SIZE):
                    for i in T.Parallel(SIZE // 2):
                        v1 = s[i * 2]
                        v2 = s[i * 2 + 1]
                        i1 = ix[i * 2]
                        i2 = ix[i * 2 + 1]
                        if v1 < v2:
                            s[i * 2], s[i * 2 + 1] = v2, v1
                            ix[i * 2], ix[i * 2 + 1] = i2, i1
                    T.sync_threads()
                    for i in T.Parallel(SIZE // 2 - 1):
                        v1 = s[i * 2 + 1]
                        v2 = s[i * 2 + 2]
                        i1 = ix[i * 2 + 1]
                        i2 = ix[i * 2 + 2]
                        if v1 < v2:
                            s[i * 2 + 1], s[i * 2 + 2] = v2, v1
                            ix[i * 2 + 1], ix[i * 2 + 2] = i2, i1
                    T.sync_threads()
            for c in T.Parallel(32):
                O[c] = ix[c]

    return main


@pytest.mark.parametrize("arch", ARCHS)
def test_a_pool_filled_then_rewritten_in_a_loop_keeps_the_barrier_between(arch):
    """The loop's first statement rewrites the upper half another thread filled (64 slots on 16 threads, then 32 on
    8): the loop also reads the pool, but only after that write, so the write needs its own barrier (it had none:
    the simulator's checked mode reported the race and the top-k came out wrong)."""
    kernel = tilelang.compile(_top_k_pool(4), target=f"musa -arch={arch}")
    source = kernel.get_kernel_source()
    assert re.search(r"tl::broadcast<int, 4>\(0\);\s*\}\s*__syncthreads\(\);\s*for \(int it = 0;", source)
    v, o = rand((4, 32), torch.float32), torch.empty(32, dtype=torch.int32)
    kernel(v, o)
    assert torch.equal(o.long(), v.flatten().topk(32).indices)
