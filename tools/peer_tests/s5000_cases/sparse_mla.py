"""sparse_mla: mate's sparse MLA prefill (V3.2: d_qk 576 = 512 + 64 RoPE; MODEL1: d_qk 512 with an extra KV set)
and scheduled FP8 decode (V3.2), called through their interfaces as mate/benchmark_cases.py calls them, checked
against the torch references of sparse_mla_reference.py (output, lse and max logits; -1 / out-of-range indices,
per-row lengths, empty rows and the attention sink included)."""

from s5000_cases import Case

PKG = "benchmark.mp31.mate.kernels"

_PREFILL_INPUTS = '''
import torch
from sparse_mla_reference import check, sparse_mla_prefill_ref


def prefill_indices(S, topk, rows, seed):
    """-1 padded random picks among the first min(s, rows) rows, as the runner's temp prefill indices."""
    g = torch.Generator().manual_seed(seed)
    indices = torch.full((S, 1, topk), -1, dtype=torch.int32)
    for s in range(S):
        picks = torch.randperm(max(1, min(s, rows)), generator=g)[:topk]
        indices[s, 0, :picks.numel()] = picks.int()
    return indices
'''

V32_PREFILL = _PREFILL_INPUTS + f'''
from {PKG} import sparse_mla_v32_fwd_pipelined as m

S, SKV, H, topk = 64, 256, 64, 128
q = torch.randn(S, H, 576, dtype=torch.bfloat16)
kv = torch.randn(SKV, 1, 576, dtype=torch.bfloat16)
indices = prefill_indices(S, topk, SKV, 1)
# the runner's call: default sm_scale, no lengths, no sink
out, max_logits, lse = m.tilelang_sparse_mla_prefill_fwd_interface(
    q, kv, indices, sm_scale=None, topk_length=None, attn_sink=None, d_v=512, return_max_logits=True)
ref_out, ref_max, ref_lse = sparse_mla_prefill_ref(q, kv, indices)
check("out", out, ref_out)
check("max_logits", max_logits, ref_max, rtol=1e-3, atol=1e-3)
check("lse", lse, ref_lse, rtol=1e-3, atol=1e-3)

# per-row lengths (one row empty), an attention sink, an explicit scale
S = 16
q, indices = q[:S].contiguous(), prefill_indices(S, topk, SKV, 2)
indices[5, 0, 7] = SKV + 3  # out of range: skipped
topk_length = torch.randint(1, topk + 1, (S,), dtype=torch.int32)
topk_length[3] = 0
sink = torch.randn(H, dtype=torch.float32)
out, max_logits, lse = m.tilelang_sparse_mla_prefill_fwd_interface(
    q, kv, indices, sm_scale=0.05, topk_length=topk_length, attn_sink=sink, d_v=512, return_max_logits=True)
ref_out, ref_max, ref_lse = sparse_mla_prefill_ref(q, kv, indices, sm_scale=0.05, topk_length=topk_length,
                                                   attn_sink=sink)
check("out (lengths, sink)", out, ref_out)
check("max_logits (lengths, sink)", max_logits, ref_max, rtol=1e-3, atol=1e-3)
check("lse (lengths, sink)", lse, ref_lse, rtol=1e-3, atol=1e-3)
'''

MODEL1_PREFILL = _PREFILL_INPUTS + f'''
from {PKG} import sparse_mla_model1_fwd_pipelined as m

S, SKV, H, topk, ESKV, etopk = 64, 256, 64, 128, 128, 64
q = torch.randn(S, H, 512, dtype=torch.bfloat16)
kv = torch.randn(SKV, 1, 512, dtype=torch.bfloat16)
extra_kv = torch.randn(ESKV, 1, 512, dtype=torch.bfloat16)
indices, extra_indices = prefill_indices(S, topk, SKV, 3), prefill_indices(S, etopk, ESKV, 4)
# the runner's call: both KV sets, scale d_qk ** -0.5, no lengths, no sink
out, max_logits, lse = m.sparse_mla_fwd_interface_model1(
    q=q, kv=kv, indices=indices, extra_kv=extra_kv, extra_indices=extra_indices, topk_length=None,
    extra_topk_length=None, sm_scale=512 ** -0.5, attn_sink=None, d_v=512, return_max_logits=True)
ref_out, ref_max, ref_lse = sparse_mla_prefill_ref(q, kv, indices, sm_scale=512 ** -0.5, extra_kv=extra_kv,
                                                   extra_indices=extra_indices)
check("out", out, ref_out)
check("max_logits", max_logits, ref_max, rtol=1e-3, atol=1e-3)
check("lse", lse, ref_lse, rtol=1e-3, atol=1e-3)

# lengths on both sets (a row empty in both), a sink
S = 16
q = q[:S].contiguous()
indices, extra_indices = prefill_indices(S, topk, SKV, 5), prefill_indices(S, etopk, ESKV, 6)
topk_length = torch.randint(0, topk + 1, (S,), dtype=torch.int32)
extra_topk_length = torch.randint(0, etopk + 1, (S,), dtype=torch.int32)
topk_length[3] = extra_topk_length[3] = 0
sink = torch.randn(H, dtype=torch.float32)
out, max_logits, lse = m.sparse_mla_fwd_interface_model1(
    q=q, kv=kv, indices=indices, extra_kv=extra_kv, extra_indices=extra_indices, topk_length=topk_length,
    extra_topk_length=extra_topk_length, sm_scale=None, attn_sink=sink, d_v=512, return_max_logits=True)
ref_out, ref_max, ref_lse = sparse_mla_prefill_ref(q, kv, indices, topk_length=topk_length, attn_sink=sink,
                                                   extra_kv=extra_kv, extra_indices=extra_indices,
                                                   extra_topk_length=extra_topk_length)
check("out (lengths, sink)", out, ref_out)
check("max_logits (lengths, sink)", max_logits, ref_max, rtol=1e-3, atol=1e-3)
check("lse (lengths, sink)", lse, ref_lse, rtol=1e-3, atol=1e-3)
'''

V32_DECODE = f'''
import os
import torch
from sparse_mla_reference import check, sparse_mla_decode_ref
# mate's benchmark_common finds the checkout's root by its .git (the staged tree is that checkout, without one)
os.makedirs(".git", exist_ok=True)
from benchmark.mp31.mate.benchmark_cases import _make_sparse_decode_metadata, _make_sparse_temp_decode_indices
from {PKG} import sparse_mla_v32_decode_fwd_scheduled as m


def fp8_cache(total):
    """The runner's cache: bf16 rows quantized to fp8 (512), four fp32 scales, the bf16 RoPE part (64)."""
    kv = torch.randn(total, 1, 576, dtype=torch.bfloat16)
    scales = torch.tensor([0.6, 0.7, 0.8, 0.9], dtype=torch.float32).view(1, 1, 4).repeat_interleave(total, dim=0)
    return torch.cat([kv[..., :512].to(torch.float8_e4m3fn).view(torch.uint8), scales.view(torch.uint8),
                      kv[..., 512:].contiguous().view(torch.uint8)], dim=-1).contiguous()


def run(B, Sq, SKV, H, topk, mp_count, lengths=None, sink=None):
    cache_seqlens = torch.tensor([SKV - 4 * i for i in range(B)], dtype=torch.int32)
    cu_seqlens = torch.tensor([0] + [SKV - 4 * i for i in range(B)], dtype=torch.int32).cumsum(0, dtype=torch.int32)
    total = int(cache_seqlens.sum())
    q = torch.randn(B, Sq, H, 576, dtype=torch.bfloat16)
    k_cache = fp8_cache(total)
    indices = _make_sparse_temp_decode_indices(B, Sq, topk, cache_seqlens, cu_seqlens, "cpu")
    meta, num_splits = _make_sparse_decode_metadata(seqlens_k=cache_seqlens, num_q_tokens_per_head_k=Sq * H,
                                                    num_heads_k=1, topk=topk, mp_count=mp_count, tile_m=64)
    topk_length = torch.full((B,), topk, dtype=torch.int32) if lengths is None else lengths
    out, lse = m.tilelang_flashmla_interface(q, k_cache, indices, meta, num_splits, sm_scale=None,
                                             topk_length=topk_length, attn_sink=sink, d_v=512, threads=512)
    ref_out, ref_lse = sparse_mla_decode_ref(q, k_cache, indices, topk_length=topk_length, attn_sink=sink)
    splits = (num_splits[1:] - num_splits[:-1]).tolist()
    check(f"out (B={{B}}, splits {{splits}})", out, ref_out)
    check(f"lse (B={{B}}, splits {{splits}})", lse, ref_lse, rtol=1e-3, atol=1e-3)


# the runner's call at a simulator size: one split a batch
run(B=2, Sq=1, SKV=256, H=64, topk=128, mp_count=4)
# a batch split over two parts (combined by the second kernel), shorter lengths and a sink
run(B=1, Sq=1, SKV=512, H=64, topk=512, mp_count=4, lengths=torch.tensor([400], dtype=torch.int32),
    sink=torch.randn(64, dtype=torch.float32))
'''

CASES = [
    Case("mate_sparse_mla_prefill_v32", "mate/kernels/sparse_mla_v32_fwd_pipelined.py", V32_PREFILL),
    Case("mate_sparse_mla_prefill_model1", "mate/kernels/sparse_mla_model1_fwd_pipelined.py", MODEL1_PREFILL),
    Case("mate_sparse_mla_decode_v32", "mate/kernels/sparse_mla_v32_decode_fwd_scheduled.py", V32_DECODE),
]
