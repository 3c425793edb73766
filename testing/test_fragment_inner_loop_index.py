"""A fragment indexed in T.Parallel through a loop inside the nest (`acc[i, l * 8 + t]` with `l` from a
T.vectorized / T.serial loop in the body, as Moore Threads' FlashAttention forward writes P back permuted): the nest
follows the fragment at the inner loop's first iteration, and every other iteration is checked to live on the same
thread; where one does not, the fragment reaches the nest through shared memory."""

import pytest
import torch

import tilelang
import tilelang.language as T
from conftest import rand

M, N, K = 64, 64, 32
L = N // 8


def strided(l, t):  # the column an mp_31 accumulator thread holds for every l (FlashAttention's P permutation)
    return l * 8 + t


def contiguous(l, t):  # columns spread over several threads on both archs
    return t * L + l


def permuted_store(inner_loop, column=strided):
    @T.prim_func
    def f(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float16")):
        with T.Kernel(1, threads=128) as bx:
            A_s = T.alloc_shared([M, K], "float16")
            B_s = T.alloc_shared([K, N], "float16")
            P_s = T.alloc_shared([M, N], "float16")
            acc = T.alloc_fragment([M, N], "float32")
            acc_cast = T.alloc_fragment([M, N], "float16")
            T.copy(A, A_s)
            T.copy(B, B_s)
            T.clear(acc)
            T.gemm(A_s, B_s, acc)
            T.copy(acc, acc_cast)
            for i, t in T.Parallel(M, 8):
                for l in inner_loop(L):
                    P_s[i, t * L + l] = acc_cast[i, column(l, t)]
            T.copy(P_s, C)

    return f


def reference(a, b, column=strided):
    full = (a.float() @ b.float()).half()
    cols = torch.tensor([column(l, t) for t in range(8) for l in range(L)])
    return full[:, cols]


@pytest.mark.parametrize("inner_loop", [T.vectorized, T.serial, T.unroll], ids=["vectorized", "serial", "unroll"])
def test_inner_loop_index_follows_the_fragment(inner_loop):
    # mp_31's SQMMA accumulator keeps columns t, t + 8, t + 16, ... of a row on one thread: no exchange
    kernel = tilelang.compile(permuted_store(inner_loop), out_idx=[-1], target="musa -arch=mp_31")
    assert "acc_cast_exchange" not in kernel.get_kernel_source()
    a, b = rand((M, K), torch.float16, 1), rand((K, N), torch.float16, 2)
    torch.testing.assert_close(kernel(a, b), reference(a, b), rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("arch, column", [("mp_22", strided), ("mp_31", contiguous), ("mp_22", contiguous)],
                         ids=["mp_22-strided", "mp_31-contiguous", "mp_22-contiguous"])
def test_an_inner_index_another_thread_holds_goes_through_shared_memory(arch, column):
    # mp_22's MMA accumulator puts columns c and c + 8 on different threads; contiguous columns differ on both
    kernel = tilelang.compile(permuted_store(T.serial, column), out_idx=[-1], target=f"musa -arch={arch}")
    assert "acc_cast_exchange" in kernel.get_kernel_source()
    a, b = rand((M, K), torch.float16, 3), rand((K, N), torch.float16, 4)
    torch.testing.assert_close(kernel(a, b), reference(a, b, column), rtol=1e-2, atol=1e-2)
