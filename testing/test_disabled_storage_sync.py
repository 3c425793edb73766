"""TL_DISABLE_THREAD_STORAGE_SYNC leaves the user's shared tiles to the user, but not the barriers a user cannot
know are needed: a fragment re-laid out through a shared tile (`T.copy(acc, S); T.copy(S, acc_cast)`, whose threads
follow layouts the compiler chooses) and the shared tile a gemm operand in registers is staged through on mp_22.
Checked mode (the race detector) runs the kernel; it named both races before the fix (Moore Threads' unified
attention gave NaN). The kernels run on two warps: a block of one warp keeps every barrier (pipeline.py)."""

import re

import pytest
import torch

import tilelang
import tilelang.language as T
from conftest import poison, rand

M = N = K = 64


def two_gemms(through_shared: bool):
    """acc = A @ B; o = half(acc) @ V, the cast either through a shared tile of the user's (`T.copy(acc, S);
    T.copy(S, acc_cast)`: stored by acc's threads, loaded by acc_cast's; on mp_22 acc_cast is then laid out as the
    MMA's operand and read from registers) or directly (`T.copy(acc, acc_cast)`: on mp_22 acc_cast, filled from an
    accumulator, is staged through a shared tile of the compiler's)."""
    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), V: T.Tensor((N, N), "float16"),
             O: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=256):  # two warps on mp_22: one warp keeps the barriers
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
            if through_shared:
                S = T.alloc_shared((M, N), "float32")
                T.copy(acc, S)
                T.copy(S, acc_cast)
            else:
                T.copy(acc, acc_cast)
            T.gemm(acc_cast, V_s, o)
            T.copy(o, O)

    return main


def _check(kernel, a, b, v):
    out = poison((M, N), torch.float32)
    kernel(a, b, v, out)
    reference = (a.float() @ b.float()).half().float() @ v.float()
    torch.testing.assert_close(out, reference, rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("arch", ["mp_31", "mp_22"])
def test_compiler_made_exchanges_keep_their_barriers_without_thread_storage_sync(arch, monkeypatch):
    kernel = tilelang.compile(two_gemms(through_shared=True), target=f"musa -arch={arch}",
                              pass_configs={tilelang.PassConfigKey.TL_DISABLE_THREAD_STORAGE_SYNC: True})
    body = kernel.get_kernel_source().split("= acc[")[1]  # after the stores into S
    first_load = re.search(r"acc_cast(?!_)", body).start()  # acc_cast's first element (or vector) from S
    assert body.index("__syncthreads();") < first_load, body  # before the loads from S
    assert ("tl::gemm_rs_mp22_mma" if arch == "mp_22" else "tl::gemm_ss_mp31_sqmma") in body
    monkeypatch.setenv("TILELANG_SIM_CHECK", "1")
    a, b, v = (rand((64, 64), torch.float16, seed) for seed in (31, 32, 33))
    _check(kernel, a, b, v)
    if arch == "mp_22":  # the staging tile of an operand filled from an accumulator: a barrier before the gemm
        kernel = tilelang.compile(two_gemms(through_shared=False), target=f"musa -arch={arch}",
                                  pass_configs={tilelang.PassConfigKey.TL_DISABLE_THREAD_STORAGE_SYNC: True})
        staged = kernel.get_kernel_source().split("acc_cast_staged[")[1]
        assert "__syncthreads();\n  tl::gemm_ss_mp22_mma" in staged, staged
        _check(kernel, a, b, v)


@T.prim_func
def normalize_through_a_shared_tile(A: T.Tensor((M, 32), "float16"), B: T.Tensor((32, N), "float16"),
                                    L: T.Tensor((M,), "float32"), O: T.Tensor((M, N), "float16")):
    with T.Kernel(1, threads=256):  # two warps on mp_22: one warp keeps the barriers
        A_s = T.alloc_shared((M, 32), "float16")
        B_s = T.alloc_shared((32, N), "float16")
        o_shared = T.alloc_shared((M, N), "float16")
        acc_o = T.alloc_fragment((M, N), "float32")
        logsum = T.alloc_fragment((M,), "float32")
        T.copy(A, A_s)
        T.copy(B, B_s)
        T.copy(L, logsum)
        T.sync_threads()
        T.gemm(A_s, B_s, acc_o, clear_accum=True)
        for i, d in T.Parallel(M, N):  # runs where acc_o lives
            o_shared[i, d] = acc_o[i, d] / logsum[i]
        for i, d in T.Parallel(M, N):  # no fragment: without barriers, it must read what its own threads wrote
            if i < M - 3:
                O[i, d] = o_shared[i, d]


@pytest.mark.parametrize("arch", ["mp_31", "mp_22"])
def test_a_nest_reading_a_tile_the_previous_nest_wrote_runs_on_the_writers_threads(arch, monkeypatch):
    """Moore Threads' unified attention (o_shared between two T.Parallel nests, barriers off) gave NaN: the reading
    nest took a coalesced plan of its own. It now runs where the writing nest ran: each element is read by the
    thread that stored it, and checked mode finds no race. With the compiler's barriers the plan stays coalesced."""
    def o_shared_indices(source):
        return [re.sub(r"it_\d+", "it", m) for m in re.findall(r"o_shared\[(.*?)\](?: =|;)", source)]

    kernel = tilelang.compile(normalize_through_a_shared_tile, target=f"musa -arch={arch}",
                              pass_configs={tilelang.PassConfigKey.TL_DISABLE_THREAD_STORAGE_SYNC: True})
    store, load = o_shared_indices(kernel.get_kernel_source())
    assert store == load
    synced = tilelang.compile(normalize_through_a_shared_tile, target=f"musa -arch={arch}")
    indices = o_shared_indices(synced.get_kernel_source())
    assert indices.count(indices[0]) == 1  # the store's threads and elements are not the load's
    monkeypatch.setenv("TILELANG_SIM_CHECK", "1")
    a, b, l = rand((M, 32), torch.float16, 34), rand((32, N), torch.float16, 35), rand((M,), torch.float32, 36).abs() + 1
    for k in (kernel, synced):
        out = poison((M, N), torch.float16)
        k(a, b, l, out)
        reference = (a.float() @ b.float()) / l[:, None]
        torch.testing.assert_close(out[:M - 3].float(), reference[:M - 3], rtol=1e-2, atol=1e-2)
