"""A shared tile read K-major by one T.gemm and MN-major by another (dO in an attention backward: B of
`V @ dO^T` and of `P @ dO`) cannot take either gemm's SQMMA swizzle: both read it unswizzled on mp_31, and so
does every gemm reading a tile that shares a gemm with it (the rest of linear attention's chunk)."""

import re

import pytest
import torch

import tilelang
import tilelang.language as T
from conftest import poison, rand

M, N, K = 64, 64, 64


def both_ways():
    @T.prim_func
    def f(A: T.Tensor((M, K), "float16"), D: T.Tensor((N, K), "float16"), P: T.Tensor((M, N), "float16"),
          S: T.Tensor((M, N), "float32"), O: T.Tensor((M, K), "float32")):
        with T.Kernel(1, threads=128) as bx:
            a_s = T.alloc_shared((M, K), "float16")
            d_s = T.alloc_shared((N, K), "float16")
            p_s = T.alloc_shared((M, N), "float16")
            s = T.alloc_fragment((M, N), "float32")
            o = T.alloc_fragment((M, K), "float32")
            T.copy(A, a_s)
            T.copy(D, d_s)
            T.copy(P, p_s)
            T.clear(s)
            T.clear(o)
            T.gemm(a_s, d_s, s, transpose_B=True)  # d_s K-major
            T.gemm(p_s, d_s, o)  # d_s MN-major
            T.copy(s, S)
            T.copy(o, O)

    return f


@pytest.mark.parametrize("arch, pattern", [("mp_31", r"tl::gemm_ss_mp31_sqmma<"), ("mp_22", r"tl::gemm_ss_mp22_mma<")])
def test_tile_read_both_ways_is_not_swizzled_and_matches_torch(arch, pattern):
    kernel = tilelang.compile(both_ways(), target=f"musa -arch={arch}")
    src = kernel.get_kernel_source()
    assert len(re.findall(pattern, src)) == 2, src
    assert "sqmma_swizzled" not in src
    a, d, p = rand((M, K), torch.float16, 1), rand((N, K), torch.float16, 2), rand((M, N), torch.float16, 3)
    s, o = poison((M, N), torch.float32), poison((M, K), torch.float32)
    kernel(a, d, p, s, o)
    torch.testing.assert_close(s, a.float() @ d.float().T, rtol=1e-2, atol=1e-2)
    torch.testing.assert_close(o, p.float() @ d.float(), rtol=1e-2, atol=1e-2)


def test_tiles_read_one_way_keep_the_swizzle():
    @T.prim_func
    def f(A: T.Tensor((M, K), "float16"), D: T.Tensor((N, K), "float16"), S: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=128) as bx:
            a_s = T.alloc_shared((M, K), "float16")
            d_s = T.alloc_shared((N, K), "float16")
            s = T.alloc_fragment((M, N), "float32")
            T.copy(A, a_s)
            T.copy(D, d_s)
            T.gemm(a_s, d_s, s, transpose_B=True, clear_accum=True)
            T.gemm(a_s, d_s, s, transpose_B=True)
            T.copy(s, S)

    src = tilelang.compile(f, target="musa -arch=mp_31").get_kernel_source()
    assert len(re.findall(r"tl::gemm_ss_mp31_sqmma_swizzled<", src)) == 2


def linear_attention_chunk():
    """Upstream's linear-attention forward, one chunk: `k` is read K-major by `q @ k^T` and MN-major by `k^T @ v`,
    so `q` (which shares the first gemm with `k`) must stay unswizzled in `q @ h` too."""

    @T.prim_func
    def f(Q: T.Tensor((M, K), "float16"), Kt: T.Tensor((M, K), "float16"), V: T.Tensor((M, K), "float16"),
          H0: T.Tensor((K, K), "float16"), O: T.Tensor((M, K), "float32"), H: T.Tensor((K, K), "float32")):
        with T.Kernel(1, threads=128) as bx:
            q = T.alloc_shared((M, K), "float16")
            k = T.alloc_shared((M, K), "float16")
            v = T.alloc_shared((M, K), "float16")
            h_s = T.alloc_shared((K, K), "float16")
            s_s = T.alloc_shared((M, M), "float16")
            s = T.alloc_fragment((M, M), "float32")
            o = T.alloc_fragment((M, K), "float32")
            h = T.alloc_fragment((K, K), "float32")
            T.copy(Q, q)
            T.copy(Kt, k)
            T.copy(V, v)
            T.copy(H0, h_s)
            T.copy(H0, h)
            T.gemm(q, k, s, clear_accum=True, transpose_B=True)
            for i, j in T.Parallel(M, M):
                s_s[i, j] = T.if_then_else(i >= j, s[i, j], 0)
            T.gemm(s_s, v, o, clear_accum=True)
            T.gemm(k, v, h, transpose_A=True)
            T.gemm(q, h_s, o)
            T.copy(o, O)
            T.copy(h, H)

    return f


@pytest.mark.parametrize("arch, pattern", [("mp_31", r"tl::gemm_ss_mp31_sqmma<"), ("mp_22", r"tl::gemm_ss_mp22_mma<")])
def test_tiles_sharing_a_gemm_with_an_unswizzled_tile_stay_unswizzled(arch, pattern):
    kernel = tilelang.compile(linear_attention_chunk(), target=f"musa -arch={arch}")
    src = kernel.get_kernel_source()
    assert len(re.findall(pattern, src)) == 4, src
    assert "sqmma_swizzled" not in src
    q, k, v, h0 = (rand(shape, torch.float16, seed) for seed, shape in enumerate([(M, K)] * 3 + [(K, K)]))
    o, h = poison((M, K), torch.float32), poison((K, K), torch.float32)
    kernel(q, k, v, h0, o, h)
    s = (q.float() @ k.float().T).tril().half().float()
    torch.testing.assert_close(o, s @ v.float() + q.float() @ h0.float(), rtol=1e-2, atol=1e-2)
    torch.testing.assert_close(h, h0.float() + k.float().T @ v.float(), rtol=1e-2, atol=1e-2)
