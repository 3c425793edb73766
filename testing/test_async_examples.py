"""The asynchronous examples (examples/async/), written as Moore Threads writes its S5000 kernels: a GEMM on a TME +
barrier ring with a producer squad, a warp-specialized FlashAttention forward (K by LDLMS async copies, V and Q by
TME, four consumer squads on SQMMA), and a sparse attention that gathers rows through a robust descriptor. Each is
compiled for mp_31, its MUSA C checked for the constructs it exists to show, and run in the simulator against torch
(outputs poisoned by the launcher), once in default mode and once in checked mode (race detector, random schedule):
the examples' hand-placed arrivals, waits and parities must hold under any order of the threads."""

import importlib.util
import pathlib
import re

import pytest
import torch

from conftest import rand

EXAMPLES = pathlib.Path(__file__).parents[1] / "examples" / "async"


def load(name):
    path = EXAMPLES / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"{name}_example", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


gemm_ring = load("gemm_tme_ring")
fa_ws = load("flash_attention_ws")
sparse = load("sparse_attention_robust")

MODES = [pytest.param({}, id="default"), pytest.param({"TILELANG_SIM_CHECK": "1", "TILELANG_SIM_SEED": "3"},
                                                      id="checked")]


def set_mode(monkeypatch, mode):
    for key, value in mode.items():  # the simulator reads these at every launch
        monkeypatch.setenv(key, value)


@pytest.mark.parametrize("mode", MODES)
def test_gemm_tme_ring(monkeypatch, mode):
    M, N, K = 256, 128, 200  # K is no multiple of block_K: the last tiles are zero-filled by the copy engine
    kernel = gemm_ring.gemm_tme_ring(M, N, K)
    source = kernel.get_kernel_source()
    assert "__grid_constant__ const MUtensorDescriptor desc_A" in source
    # the producer's elected thread: the stage's bytes on the barrier, then the TME load of A's box
    assert re.search(r"tl::barrier_expect_tx\(\(k & 1\) \+ 1, 16384\);\s*tl::tma_load<[^>]*>\(desc_A, ", source)
    assert "tl::barrier_wait((k & 1) + 3, ((k >> 1) & 1) ^ 1)" in source  # the producer waits for a free slot
    assert "tl::gemm_ss_mp31_sqmma_swizzled<128, 128, 64" in source
    assert "muTensorDescriptorEncode(&desc_B" in kernel.get_host_source()
    set_mode(monkeypatch, mode)
    A, B = rand((M, K), torch.float16, 1), rand((K, N), torch.float16, 2)
    C = kernel(A, B)
    torch.testing.assert_close(C.float(), (A.float() @ B.float()), rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("mode", MODES)
def test_flash_attention_ws(monkeypatch, mode):
    batch, heads, seq_len, dim = 1, 1, 200, 64  # seq_len: a partial query tile and a partial key block
    kernel = fa_ws.flash_attention_ws(batch, heads, seq_len, dim)
    source = kernel.get_kernel_source()
    assert "__launch_bounds__(640, 1)" in source  # four consumer squads and a producer squad
    assert "if (512 <= ((int)threadIdx.x)) {" in source and "if (((int)threadIdx.x) < 512) {" in source
    assert "tl::cp_async_gs_conditional<16>(" in source and "tl::cp_async_wait<0>();" in source  # K: LDLMS
    assert "tl::tma_load<" in source  # Q and V: TME
    assert "tl::gemm_ss_mp31_sqmma_swizzled<256, 64, 64" in source
    set_mode(monkeypatch, mode)
    Q, K, V = (rand((batch, heads, seq_len, dim), torch.float16, seed) for seed in (1, 2, 3))
    out = kernel(Q, K, V)
    torch.testing.assert_close(out.float(), fa_ws.reference(Q, K, V).float(), rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("mode", MODES)
def test_sparse_attention_robust(monkeypatch, mode):
    batch, seq_len, seq_kv, heads, dim, topk = 2, 2, 100, 64, 64, 64
    kernel = sparse.sparse_attention(batch, seq_len, seq_kv, heads, dim, topk)
    source = kernel.get_kernel_source()
    assert "tl::make_robust_desc(&KV[" in source
    assert "tl::cp_async_gs_robust<16>(" in source
    assert "tl::lma_wait();" in source
    set_mode(monkeypatch, mode)
    g = torch.Generator().manual_seed(4)
    Q, KV = rand((batch, seq_len, heads, dim), torch.float16, 5), rand((batch, seq_kv, dim), torch.float16, 6)
    Indices = torch.randint(0, seq_kv, (batch, seq_len, topk), generator=g, dtype=torch.int32)
    Indices[:, :, 1::7] = -1
    Indices[:, :, 3::11] = seq_kv + 5  # inside the next batch's rows in memory, outside this batch's descriptor
    out = kernel(Q, KV, Indices)
    torch.testing.assert_close(out.float(), sparse.reference(Q, KV, Indices).float(), rtol=1e-2, atol=1e-2)
