"""A loop inside a T.Parallel body (`for l in T.vectorized(L)`) runs whole within one iteration of the nest, on the
iteration's thread, so a fragment may be indexed by its variable too: `S[i, t * L + l] = P[i, l * 8 + t]` in
`T.Parallel(M, 8)` (a permuted store of a gemm result). The nest follows the fragment when the thread that holds
`P[i, t]` holds `P[i, l * 8 + t]` for every l (MUSA's SQMMA accumulator: the thread depends on the column mod 8);
where it does not (mp_22's MMA accumulator), the fragment is exchanged through a shared tile into a layout whose
thread holds `P[i, l * 8 + t]` for every l, with a warning."""

import warnings

import pytest
import torch

import tilelang
import tilelang.language as T
from conftest import poison, rand
from tilelang_musa import diagnostics

M, N, K = 64, 64, 32
L = N // 8


def permuted_store():
    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((N, K), "float16"), Out: T.Tensor((M, N), "float16")):
        with T.Kernel(1, threads=128):
            A_s = T.alloc_shared((M, K), "float16")
            B_s = T.alloc_shared((N, K), "float16")
            S = T.alloc_shared((M, N), "float16")
            acc = T.alloc_fragment((M, N), "float32")
            acc_cast = T.alloc_fragment((M, N), "float16")
            T.copy(A, A_s)
            T.copy(B, B_s)
            T.gemm(A_s, B_s, acc, transpose_B=True, clear_accum=True)
            T.copy(acc, acc_cast)
            for i, t in T.Parallel(M, 8):
                for l in T.vectorized(L):
                    S[i, t * L + l] = acc_cast[i, l * 8 + t]
            T.copy(S, Out)

    return main


def reference(a, b):
    p = (a.float() @ b.float().T).half()
    # Out[i, t * L + l] = p[i, l * 8 + t]
    return p.view(M, L, 8).transpose(1, 2).reshape(M, N)


def run(kernel):
    a, b = rand((M, K), torch.float16, 1), rand((N, K), torch.float16, 2)
    out = poison((M, N), torch.float16)
    kernel(a, b, out)
    torch.testing.assert_close(out, reference(a, b), rtol=1e-2, atol=1e-2)


def test_nest_follows_the_accumulator_when_each_thread_holds_every_inner_element():
    """mp_31 SQMMA: column n = lane % 8 + 8 * v0 + 16 * v1, so `acc_cast[i, l * 8 + t]` is on the thread of
    `acc_cast[i, t]` for every l, in consecutive slots: the loop runs where acc_cast lives, no exchange."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        kernel = tilelang.compile(permuted_store(), target="musa -arch=mp_31")
    assert not [w for w in caught if "exchange" in str(w.message)], [str(w.message) for w in caught]
    source = kernel.get_kernel_source()
    assert "tl::gemm_ss_mp31_sqmma" in source and "acc_cast_exchange" not in source, source
    # the l loop reads the thread's consecutive slots: one 16-byte vector of acc_cast
    assert "*reinterpret_cast<tl::vec<half_t, 8>*>(acc_cast" in source, source
    run(kernel)


def test_nest_reads_a_fragment_whose_inner_elements_are_elsewhere_through_shared_memory(monkeypatch):
    """mp_22 MMA: column bit 3 picks the thread, so no plan of the nest holds `acc_cast[i, l * 8 + t]` for every
    l in acc_cast's own layout: acc_cast is exchanged through a shared tile, before the nest, into one where the
    nest's thread holds every l (right, with a warning)."""
    monkeypatch.setattr(diagnostics, "_WARNED", set())
    with pytest.warns(Warning, match=r"fragment `acc_cast` is exchanged through a 8192-byte shared-memory tile before this T.Parallel"):
        kernel = tilelang.compile(permuted_store(), target="musa -arch=mp_22")
    source = kernel.get_kernel_source()
    assert "tl::gemm_ss_mp22_mma" in source and "acc_cast_exchange" in source, source
    run(kernel)


def test_inner_loop_variable_outside_the_fragment_is_an_error():
    @T.prim_func
    def main(A: T.Tensor((M, N), "float32"), Out: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=128):
            f = T.alloc_fragment((M, N), "float32")
            T.copy(A, f)
            for i, t in T.Parallel(M, 8):
                for l in T.serial(L + 1):  # l * 8 + t reaches column 64
                    Out[i, (t * L + l) % N] = f[i, l * 8 + t]

    with pytest.raises(tilelang.CompileError, match=r"f\[i, l \* 8 \+ t\].*constant-bound loops inside"):
        tilelang.compile(main, target="musa -arch=mp_31")
