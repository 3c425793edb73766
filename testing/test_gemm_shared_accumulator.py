"""T.gemm ops that accumulate into one fragment choose their instruction and warp partition together, so they
leave it in one layout (an MLA decode's scores: Q @ KV^T over the latent part, then += Q_pe @ K_pe^T)."""

import re

import pytest
import torch

import tilelang
import tilelang.language as T
from conftest import poison, rand

M, N, K1, K2 = 32, 64, 256, 32


def two_parts():
    """S = A @ D^T + Ap @ E^T and O = P @ D. D is read both K-major and MN-major (no SQMMA swizzle) and its rows
    are 512 B (too wide for an unswizzled SQMMA descriptor): alone, the first gemm takes WMMA on mp_31 and the
    second swizzled SQMMA. The two also name different warp policies."""

    @T.prim_func
    def f(A: T.Tensor((M, K1), "float16"), D: T.Tensor((N, K1), "float16"), Ap: T.Tensor((M, K2), "float16"),
          E: T.Tensor((N, K2), "float16"), P: T.Tensor((M, N), "float16"), S: T.Tensor((M, N), "float32"),
          O: T.Tensor((M, K1), "float32")):
        with T.Kernel(1, threads=128) as bx:
            a_s = T.alloc_shared((M, K1), "float16")
            d_s = T.alloc_shared((N, K1), "float16")
            ap_s = T.alloc_shared((M, K2), "float16")
            e_s = T.alloc_shared((N, K2), "float16")
            p_s = T.alloc_shared((M, N), "float16")
            s = T.alloc_fragment((M, N), "float32")
            o = T.alloc_fragment((M, K1), "float32")
            T.copy(A, a_s)
            T.copy(D, d_s)
            T.copy(Ap, ap_s)
            T.copy(E, e_s)
            T.copy(P, p_s)
            T.gemm(a_s, d_s, s, transpose_B=True, policy=T.GemmWarpPolicy.FullCol, clear_accum=True)
            T.gemm(ap_s, e_s, s, transpose_B=True, policy=T.GemmWarpPolicy.Square)
            for i, j in T.Parallel(M, N):
                s[i, j] = s[i, j] * 0.5
            T.copy(s, S)
            T.gemm(p_s, d_s, o, clear_accum=True)
            T.copy(o, O)

    return f


@pytest.mark.parametrize("arch, path", [("mp_31", "mp31_wmma"), ("mp_22", "mp22_mma")])
def test_gemms_into_one_accumulator_share_its_instruction_and_match_torch(arch, path):
    kernel = tilelang.compile(two_parts(), target=f"musa -arch={arch}")
    src = kernel.get_kernel_source()
    calls = re.findall(r"tl::gemm_ss_(\w+?)<(\d+), (\d+), (\d+), (\d+), (\d+)", src)
    assert [c[0] for c in calls] == [path] * 3, src
    # both gemms into s partition it alike (FullCol, the first one's policy): same groups along M and N
    assert calls[0][4:] == calls[1][4:], calls
    a, d, p = rand((M, K1), torch.float16, 1), rand((N, K1), torch.float16, 2), rand((M, N), torch.float16, 3)
    ap, e = rand((M, K2), torch.float16, 4), rand((N, K2), torch.float16, 5)
    s, o = poison((M, N), torch.float32), poison((M, K1), torch.float32)
    kernel(a, d, ap, e, p, s, o)
    expected = (a.float() @ d.float().T + ap.float() @ e.float().T) * 0.5
    torch.testing.assert_close(s, expected, rtol=1e-2, atol=1e-2)
    torch.testing.assert_close(o, p.float() @ d.float(), rtol=1e-2, atol=1e-2)


def test_gemm_no_matrix_path_takes_follows_the_other_ones_layout():
    """With float32 operands only FMA takes the first gemm; it computes into the layout the second one's
    matrix instruction gives the shared accumulator (FMA placing it first would conflict)."""

    @T.prim_func
    def f(A: T.Tensor((M, K2), "float32"), B: T.Tensor((N, K2), "float32"), C: T.Tensor((M, K2), "float16"),
          D: T.Tensor((N, K2), "float16"), S: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=128) as bx:
            a_s = T.alloc_shared((M, K2), "float32")
            b_s = T.alloc_shared((N, K2), "float32")
            c_s = T.alloc_shared((M, K2), "float16")
            d_s = T.alloc_shared((N, K2), "float16")
            s = T.alloc_fragment((M, N), "float32")
            T.copy(A, a_s)
            T.copy(B, b_s)
            T.copy(C, c_s)
            T.copy(D, d_s)
            T.gemm(a_s, b_s, s, transpose_B=True, clear_accum=True)
            T.gemm(c_s, d_s, s, transpose_B=True)
            T.copy(s, S)

    a, b = rand((M, K2), torch.float32, 1), rand((N, K2), torch.float32, 2)
    c, d = rand((M, K2), torch.float16, 3), rand((N, K2), torch.float16, 4)
    for arch, path in (("mp_31", "tl::gemm_ss_mp31_sqmma_swizzled<"), ("mp_22", "tl::gemm_ss_mp22_mma<")):
        kernel = tilelang.compile(f, target=f"musa -arch={arch}")
        assert kernel.get_kernel_source().count(path) == 1
        s = poison((M, N), torch.float32)
        kernel(a, b, c, d, s)
        torch.testing.assert_close(s, a @ b.T + c.float() @ d.float().T, rtol=1e-2, atol=1e-2)

