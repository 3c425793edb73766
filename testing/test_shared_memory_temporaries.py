"""The compiler's shared temporaries cost shared memory only while they hold a value, when the kernel would not fit
otherwise.

The key/value-gradient loop of attention's backward pass stages two gemm A operands that live in registers
(`qkT_cast`, `dsT_cast`) in shared memory, on mp_22's MMA (a fragment filled from another gemm's accumulator) and
mp_31's SQMMA alike. Each staged tile is written just before its gemm reads it, one after the other in each
iteration: past the target's limit they share bytes, with the barriers between them in both directions. At 64 x 64
tiles with a 128-wide head the kernel needs 81,920 bytes with the two apart, 73,728 with them together: mp_22's
limit (mp_31 given the same limit). Within the limit the plan does not change, unless
TL_ENABLE_AGGRESSIVE_SHARED_MEMORY_MERGE asks for it.
"""

import re

import pytest
import torch

import tilelang
import tilelang.language as T
from conftest import poison, rand

BM, BN, D, STEPS = 64, 64, 128, 2
LIMIT = 73728  # mp_22's shared memory per block


def _key_value_gradients():
    @T.prim_func
    def main(K: T.Tensor((BM, D), "float16"), V: T.Tensor((BM, D), "float16"), Q: T.Tensor((STEPS * BN, D), "float16"),
             dO: T.Tensor((STEPS * BN, D), "float16"), dK: T.Tensor((BM, D), "float32"),
             dV: T.Tensor((BM, D), "float32")):
        with T.Kernel(1, threads=128) as _:
            k_s = T.alloc_shared((BM, D), "float16")
            v_s = T.alloc_shared((BM, D), "float16")
            q_s = T.alloc_shared((BN, D), "float16")
            do_s = T.alloc_shared((BN, D), "float16")
            qkT = T.alloc_fragment((BM, BN), "float32")
            dsT = T.alloc_fragment((BM, BN), "float32")
            qkT_cast = T.alloc_fragment((BM, BN), "float16")
            dsT_cast = T.alloc_fragment((BM, BN), "float16")
            dv = T.alloc_fragment((BM, D), "float32")
            dk = T.alloc_fragment((BM, D), "float32")
            T.copy(K, k_s)
            T.copy(V, v_s)
            T.clear(dv)
            T.clear(dk)
            for s in T.serial(STEPS):
                T.copy(Q[s * BN:(s + 1) * BN, :], q_s)
                T.copy(dO[s * BN:(s + 1) * BN, :], do_s)
                T.gemm(k_s, q_s, qkT, transpose_B=True, clear_accum=True)
                T.gemm(v_s, do_s, dsT, transpose_B=True, clear_accum=True)
                T.copy(qkT, qkT_cast)
                T.gemm(qkT_cast, do_s, dv)
                for i, j in T.Parallel(BM, BN):
                    dsT_cast[i, j] = qkT[i, j] * dsT[i, j]
                T.gemm(dsT_cast, q_s, dk)
            T.copy(dv, dV)
            T.copy(dk, dK)

    return main


def _offset(source: str, tile: str) -> int:
    match = re.search(rf"\* {tile} = reinterpret_cast<half_t\*>\(buf_dyn_shmem(?: \+ (\d+))?\);", source)
    assert match, f"{tile} is not placed in the dynamic arena"
    return int(match.group(1) or 0)


def _reference(k, v, q, do):
    dk, dv = torch.zeros(BM, D), torch.zeros(BM, D)
    for s in range(STEPS):
        qs, dos = q[s * BN:(s + 1) * BN].float(), do[s * BN:(s + 1) * BN].float()
        qkT, dsT = k.float() @ qs.T, v.float() @ dos.T
        dv += qkT.half().float() @ dos
        dk += (qkT * dsT).half().float() @ qs
    return dk, dv


@pytest.mark.parametrize("target", ["musa -arch=mp_22", f"musa -arch=mp_31 -max_shared_memory_per_block={LIMIT}"])
def test_staged_operands_used_in_turn_share_bytes_when_the_kernel_would_not_fit(target):
    kernel = tilelang.compile(_key_value_gradients(), target=target)
    source = kernel.get_kernel_source()
    assert _offset(source, "qkT_cast_staged") == _offset(source, "dsT_cast_staged")
    # in the loop: dv's gemm reads qkT_cast_staged, a barrier, then dsT_cast_staged is written; dk's gemm reads it,
    # and a barrier stands before the next iteration writes qkT_cast_staged
    loop = source[source.index("for (int s = 0;"):]
    dv_gemm = loop.index("(&qkT_cast_staged[0]")
    dsT_write = loop.index("dsT_cast_staged[", dv_gemm)
    assert "__syncthreads();" in loop[dv_gemm:dsT_write]
    assert loop.index("__syncthreads();") < loop.index("qkT_cast_staged[")
    k, v = rand((BM, D), torch.float16, seed=1) / 4, rand((BM, D), torch.float16, seed=2) / 4
    q, do = rand((STEPS * BN, D), torch.float16, seed=3) / 4, rand((STEPS * BN, D), torch.float16, seed=4) / 4
    dk, dv = poison((BM, D), torch.float32), poison((BM, D), torch.float32)
    kernel(k, v, q, do, dk, dv)
    ref_dk, ref_dv = _reference(k, v, q, do)
    torch.testing.assert_close(dv, ref_dv, atol=1e-3, rtol=1e-3)
    torch.testing.assert_close(dk, ref_dk, atol=1e-3, rtol=1e-3)


def test_a_kernel_that_fits_keeps_its_temporaries_apart():
    """On mp_31 at its own limit (196,608 bytes) the kernel fits as it is: the staged tiles keep their own bytes."""
    source = tilelang.compile(_key_value_gradients(), target="musa -arch=mp_31").get_kernel_source()
    assert _offset(source, "qkT_cast_staged") != _offset(source, "dsT_cast_staged")


def test_aggressive_shared_memory_merge_asks_for_the_finer_plan_of_a_kernel_that_fits():
    """TL_ENABLE_AGGRESSIVE_SHARED_MEMORY_MERGE: the staged tiles share bytes on mp_31 though the kernel fits, and
    the results are the same."""
    kernel = tilelang.compile(_key_value_gradients(), target="musa -arch=mp_31",
                              pass_configs={tilelang.PassConfigKey.TL_ENABLE_AGGRESSIVE_SHARED_MEMORY_MERGE: True})
    source = kernel.get_kernel_source()
    assert _offset(source, "qkT_cast_staged") == _offset(source, "dsT_cast_staged")
    k, v = rand((BM, D), torch.float16, seed=5) / 4, rand((BM, D), torch.float16, seed=6) / 4
    q, do = rand((STEPS * BN, D), torch.float16, seed=7) / 4, rand((STEPS * BN, D), torch.float16, seed=8) / 4
    dk, dv = poison((BM, D), torch.float32), poison((BM, D), torch.float32)
    kernel(k, v, q, do, dk, dv)
    ref_dk, ref_dv = _reference(k, v, q, do)
    torch.testing.assert_close(dv, ref_dv, atol=1e-3, rtol=1e-3)
    torch.testing.assert_close(dk, ref_dk, atol=1e-3, rtol=1e-3)
