"""A T.Parallel loop that walks a replicated fragment (a reduction's result over rows, held by every thread of its
column) and adds into global memory: each iteration's read-modify-write store is made once, by replica 0. Every
replica ran the iteration, so `G[i] += t[i]` added t[i] once per replica (Megatron-LM's sparse indexer target came
out 32 times too large: a silent wrong result). A plain store (the same value) and stores to fragments still run on
every replica."""

import pytest
import torch

import tilelang
import tilelang.language as T

ARCHS = ["mp_31", "mp_22"]


def accumulate_column_sums():
    @T.prim_func
    def main(P: T.Tensor((32, 64), T.float32), G: T.Tensor((64,), T.float32), S: T.Tensor((64,), T.float32)):
        with T.Kernel(1, threads=256):
            p = T.alloc_fragment((32, 64), T.float32)
            t = T.alloc_fragment((64,), T.float32)
            doubled = T.alloc_fragment((64,), T.float32)
            tile = T.alloc_shared((64,), T.float32)
            T.copy(P, p)
            T.reduce_sum(p, t, dim=0, clear=True)
            for i in T.Parallel(64):
                G[i] += t[i]
                tile[i] = t[i] * 3.0
                doubled[i] = t[i] * 2.0
            for i in T.Parallel(64):
                S[i] = tile[i] + doubled[i]

    return main


@pytest.mark.parametrize("arch", ARCHS)
def test_each_iteration_stores_once(arch):
    kernel = tilelang.compile(accumulate_column_sums(), target=f"musa -arch={arch}")
    g = torch.Generator().manual_seed(12)
    p, acc = torch.randn((32, 64), generator=g), torch.randn((64,), generator=g)
    want = acc + p.sum(0)
    s = torch.full((64,), float("nan"))
    kernel(p, acc, s)
    torch.testing.assert_close(acc, want, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(s, p.sum(0) * 5.0, rtol=1e-5, atol=1e-4)
