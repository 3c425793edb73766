"""TL_DISABLE_THREAD_STORAGE_SYNC leaves the user's shared tiles to the user, but not the barriers a user cannot
know are needed: a fragment re-laid out through a shared tile (`T.copy(acc, S); T.copy(S, acc_cast)`, whose threads
follow layouts the compiler chooses) and the shared tile a gemm operand in registers is staged through on mp_22.
Checked mode (the race detector) runs the kernel; it named both races before the fix (Moore Threads' unified
attention gave NaN)."""

import pytest
import torch

import tilelang
import tilelang.language as T
from conftest import poison, rand

M = N = K = 64


@T.prim_func
def two_gemms_through_a_shared_relayout(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"),
                                        V: T.Tensor((N, N), "float16"), O: T.Tensor((M, N), "float32")):
    with T.Kernel(1, threads=128):
        A_s = T.alloc_shared((M, K), "float16")
        B_s = T.alloc_shared((K, N), "float16")
        V_s = T.alloc_shared((N, N), "float16")
        acc = T.alloc_fragment((M, N), "float32")
        acc_cast = T.alloc_fragment((M, N), "float16")
        o = T.alloc_fragment((M, N), "float32")
        T.copy(A, A_s)
        T.copy(B, B_s)
        T.copy(V, V_s)
        T.sync_threads()
        T.clear(acc)
        T.clear(o)
        T.gemm(A_s, B_s, acc)
        S = T.alloc_shared((M, N), "float32")
        T.copy(acc, S)
        T.copy(S, acc_cast)  # the round trip: stored by acc's threads, loaded by acc_cast's
        T.gemm(acc_cast, V_s, o)  # mp_22: read from registers, acc_cast laid out as the MMA's operand
        T.copy(o, O)


@T.prim_func
def two_gemms_through_a_cast(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"),
                             V: T.Tensor((N, N), "float16"), O: T.Tensor((M, N), "float32")):
    with T.Kernel(1, threads=128):
        A_s = T.alloc_shared((M, K), "float16")
        B_s = T.alloc_shared((K, N), "float16")
        V_s = T.alloc_shared((N, N), "float16")
        acc = T.alloc_fragment((M, N), "float32")
        acc_cast = T.alloc_fragment((M, N), "float16")
        o = T.alloc_fragment((M, N), "float32")
        T.copy(A, A_s)
        T.copy(B, B_s)
        T.copy(V, V_s)
        T.sync_threads()
        T.clear(acc)
        T.clear(o)
        T.gemm(A_s, B_s, acc)
        T.copy(acc, acc_cast)
        T.gemm(acc_cast, V_s, o)  # mp_22: acc_cast, filled from an accumulator, is staged through a shared tile
        T.copy(o, O)


def _check(kernel, a, b, v):
    out = poison((M, N), torch.float32)
    kernel(a, b, v, out)
    reference = (a.float() @ b.float()).half().float() @ v.float()
    torch.testing.assert_close(out, reference, rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("arch", ["mp_31", "mp_22"])
def test_compiler_made_exchanges_keep_their_barriers_without_thread_storage_sync(arch, monkeypatch):
    kernel = tilelang.compile(two_gemms_through_a_shared_relayout, target=f"musa -arch={arch}",
                              pass_configs={tilelang.PassConfigKey.TL_DISABLE_THREAD_STORAGE_SYNC: True})
    body = kernel.get_kernel_source().split("= acc[")[1]  # after the stores into S
    assert body.index("__syncthreads();") < body.index("acc_cast["), body  # before the loads from S
    assert ("tl::gemm_rs_mp22_mma" if arch == "mp_22" else "tl::gemm_ss_mp31_sqmma") in body
    monkeypatch.setenv("TILELANG_SIM_CHECK", "1")
    a, b, v = (rand((64, 64), torch.float16, seed) for seed in (31, 32, 33))
    _check(kernel, a, b, v)
    if arch == "mp_22":  # the staging tile of an operand filled from an accumulator: a barrier before the gemm
        kernel = tilelang.compile(two_gemms_through_a_cast, target=f"musa -arch={arch}",
                                  pass_configs={tilelang.PassConfigKey.TL_DISABLE_THREAD_STORAGE_SYNC: True})
        staged = kernel.get_kernel_source().split("acc_cast_staged[")[1]
        assert "__syncthreads();\n  tl::gemm_ss_mp22_mma" in staged, staged
        _check(kernel, a, b, v)
