"""A T.Parallel loop that walks a replicated fragment (a reduction's result over rows, held by every thread of its
column) and adds into global memory: each iteration's read-modify-write store is made once, by replica 0. Every
replica ran the iteration, so `G[i] += t[i]` added t[i] once per replica (Megatron-LM's sparse indexer target came
out 32 times too large: a silent wrong result). So is an atomic update (`T.atomic_add(G[i], t[i])`, any arch). A
plain store (the same value) and stores to fragments still run on every replica."""

import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang_musa.errors import CompileError

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


def atomic_row_sums(dtype):
    @T.prim_func
    def main(A: T.Tensor((64, 128), T.float32), G: T.Tensor((64,), dtype), H: T.Tensor((64,), T.float32)):
        with T.Kernel(1, threads=128):
            a = T.alloc_fragment((64, 128), T.float32)
            s = T.alloc_fragment((64,), T.float32)
            T.copy(A, a)
            T.reduce_sum(a, s, dim=1)
            for i in T.Parallel(64):
                T.atomic_add(G[i], s[i])
                T.atomic_max(H[i], s[i])

    return main


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("dtype", [T.float32, T.float16])
def test_each_iteration_updates_atomically_once(arch, dtype):
    kernel = tilelang.compile(atomic_row_sums(dtype), target=f"musa -arch={arch}")
    source = kernel.get_kernel_source()
    assert "tl::AtomicAdd" in source and "tl::AtomicMax" in source
    g = torch.Generator().manual_seed(13)
    a = torch.randn((64, 128), generator=g)
    torch_dtype = torch.float32 if dtype == T.float32 else torch.float16
    acc = torch.randn((64,), generator=g).to(torch_dtype)
    floor = torch.randn((64,), generator=g)
    want_acc = (acc.float() + a.sum(1)).to(torch_dtype)
    want_max = torch.maximum(floor, a.sum(1))
    kernel(a, acc, floor)
    tol = 1e-5 if dtype == T.float32 else 2e-2
    torch.testing.assert_close(acc, want_acc, rtol=tol, atol=tol)
    torch.testing.assert_close(floor, want_max, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("arch", ARCHS)
def test_a_returning_atomic_over_a_replicated_fragment_is_an_error_at_its_line(arch):
    """Each replica would apply the update to get its own copy of the previous value: refused, never run twice."""
    @T.prim_func
    def main(A: T.Tensor((64, 128), T.float32), G: T.Tensor((64,), T.float32), O: T.Tensor((64,), T.float32)):
        with T.Kernel(1, threads=128):
            a = T.alloc_fragment((64, 128), T.float32)
            s = T.alloc_fragment((64,), T.float32)
            old = T.alloc_fragment((64,), T.float32)
            T.copy(A, a)
            T.reduce_sum(a, s, dim=1)
            for i in T.Parallel(64):
                old[i] = T.atomic_add(G[i], s[i], return_prev=True)
            T.copy(old, O)

    with pytest.raises(CompileError, match=r"return_prev=True.*replicated fragment") as err:
        tilelang.compile(main, target=f"musa -arch={arch}")
    assert "old[i] = T.atomic_add(G[i], s[i], return_prev=True)" in str(err.value)
