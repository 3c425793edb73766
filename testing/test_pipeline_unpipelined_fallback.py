"""A T.Pipelined loop whose tiles pass the target's shared memory even at one stage runs in order (upstream's
num_stages=0) with a warning, instead of failing: its copies then complete inside the iteration that reads them, so
the tiles each iteration writes whole share bytes (MarkRewrittenTiles, PlanDynamicSharedMemory). The shape is
Moore Threads' mp22 flash decoding (testing/musa/mp22/flash_decoding/example_mha_inference.py): Q 32 KB read in
every iteration, K and V 16 KB each, and an fp32 tile declared in the loop body (32 KB) that carries the scores to a
second gemm: 96 KB at one stage, 64 KB in order, of mp_22's 72 KB."""

import warnings

import pytest
import torch

import tilelang
import tilelang.language as T
from conftest import poison, rand

M, N, D, KV = 128, 64, 128, 256


def scores_through_shared(num_stages):
    @T.prim_func
    def main(Q: T.Tensor((M, D), "float16"), K: T.Tensor((KV, D), "float16"), V: T.Tensor((KV, D), "float16"),
             O: T.Tensor((M, D), "float32")):
        with T.Kernel(1, threads=128):
            Q_s = T.alloc_shared((M, D), "float16")
            K_s = T.alloc_shared((N, D), "float16")
            V_s = T.alloc_shared((N, D), "float16")
            acc_s = T.alloc_fragment((M, N), "float32")
            acc_s_cast = T.alloc_fragment((M, N), "float16")
            acc_o = T.alloc_fragment((M, D), "float32")
            T.copy(Q, Q_s)
            T.clear(acc_o)
            for k in T.Pipelined(KV // N, num_stages=num_stages):
                T.copy(K[k * N, 0], K_s)
                T.clear(acc_s)
                T.gemm(Q_s, K_s, acc_s, transpose_B=True)
                temp = T.alloc_shared((M, N), "float32")
                T.copy(acc_s, temp)
                T.copy(temp, acc_s_cast)
                T.copy(V[k * N, 0], V_s)
                T.gemm(acc_s_cast, V_s, acc_o)
            T.copy(acc_o, O)

    return main


@pytest.fixture
def fresh_warnings(monkeypatch):
    from tilelang_musa import diagnostics

    monkeypatch.setattr(diagnostics, "_WARNED", set())


def _run(kernel):
    q, k, v = rand((M, D), torch.float16, 31), rand((KV, D), torch.float16, 32), rand((KV, D), torch.float16, 33)
    o = poison((M, D), torch.float32)
    kernel(q, k, v, o)
    scores = (q.float() @ k.float().T).half().float()  # the kernel rounds the scores to fp16 for the second gemm
    torch.testing.assert_close(o, scores @ v.float(), rtol=1e-2, atol=5e-2)


@pytest.mark.parametrize("num_stages", [1, 2])
def test_a_loop_over_shared_memory_at_one_stage_runs_in_order_on_mp_22(num_stages, fresh_warnings):
    with pytest.warns(tilelang.TileLangWarning, match=rf"T.Pipelined\(num_stages={num_stages}\) would need \d+ "
                      r"bytes .* 73728 per block; not pipelined instead"):
        kernel = tilelang.compile(scores_through_shared(num_stages), target="musa -arch=mp_22")
    source = kernel.get_kernel_source()
    assert "for (int k = 0; k < 4; ++k)" in source and "cp_async_wait" not in source  # in order, no prologue
    _run(kernel)


def test_the_same_loop_keeps_its_stages_where_they_fit(fresh_warnings):
    """mp_31 (192 KB): the requested stages fit, no warning, the loads of the next iteration are issued ahead."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", tilelang.TileLangWarning)
        kernel = tilelang.compile(scores_through_shared(2), target="musa -arch=mp_31")
    assert "tl::barrier_expect_tx" in kernel.get_kernel_source()  # TME loads on a barrier ring
    _run(kernel)
