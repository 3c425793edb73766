"""Torch references for the mate sparse MLA kernels (prefill V3.2, prefill MODEL1, scheduled decode V3.2).

Sparse MLA attends each query head to the KV rows its index list selects: position j of the list counts when
0 <= index < rows and j < the row's length (topk_length); every counted position is one softmax term (a repeated
index counts once per position). Logits are `q . k * sm_scale` in fp32 over the bf16 inputs; the values are the
first d_v columns of the selected rows. Returned: the output in bf16's range (as fp32 here), the log-sum-exp of
the scaled logits (natural log) and their maximum; a head with no counted position gives output 0, lse +inf and
max -inf. An attention sink s (per head) adds exp(s) to the softmax denominator: output * 1 / (1 + exp(s - lse)),
lse unchanged.
"""

from __future__ import annotations

import torch


def _gather_attention(q, k_rows, valid, sm_scale, d_v, attn_sink=None):
    """q [N, H, D]; k_rows [N, T, D] (the selected rows, D >= d_v); valid [N, T]: (out [N, H, d_v], lse [N, H],
    max [N, H]), all fp32."""
    logits = torch.einsum("nhd,ntd->nht", q.float(), k_rows.float()) * sm_scale
    logits = logits.masked_fill(~valid[:, None, :], float("-inf"))
    lse = torch.logsumexp(logits, dim=-1)
    top = logits.amax(dim=-1)
    empty = ~valid.any(dim=-1)[:, None].expand_as(lse)
    p = torch.exp(logits - lse[..., None]).nan_to_num(0.0)
    out = torch.einsum("nht,ntd->nhd", p, k_rows[..., :d_v].float())
    if attn_sink is not None:
        out = out / (1 + torch.exp(attn_sink.float()[None, :] - lse))[..., None]
    out = out.masked_fill(empty[..., None], 0.0)
    lse = lse.masked_fill(empty, float("inf"))
    top = top.masked_fill(empty, float("-inf"))
    return out, lse, top


def _select(kv, indices, lengths):
    """kv [R, 1, D]; indices [N, 1, T]; lengths [N] or None: (rows [N, T, D], valid [N, T])."""
    rows = kv.shape[0]
    idx = indices[:, 0, :].long()
    valid = (idx >= 0) & (idx < rows)
    if lengths is not None:
        valid &= torch.arange(idx.shape[1], device=idx.device)[None, :] < lengths.long()[:, None]
    gathered = kv[:, 0, :][idx.clamp(0, rows - 1)]
    return gathered, valid


def sparse_mla_prefill_ref(q, kv, indices, *, sm_scale=None, d_v=512, topk_length=None, attn_sink=None,
                           extra_kv=None, extra_indices=None, extra_topk_length=None):
    """q [S, H, D], kv [R, 1, D], indices [S, 1, topk] (and an extra set of rows with its own indices and lengths,
    attended in the same softmax): (out [S, H, d_v], max_logits [S, H], lse [S, H]) in fp32."""
    sm_scale = q.shape[-1] ** -0.5 if sm_scale is None else sm_scale
    rows, valid = _select(kv, indices, topk_length)
    if extra_kv is not None and extra_indices is not None and extra_indices.shape[-1] > 0:
        extra_rows, extra_valid = _select(extra_kv, extra_indices, extra_topk_length)
        rows, valid = torch.cat([rows, extra_rows], dim=1), torch.cat([valid, extra_valid], dim=1)
    out, lse, top = _gather_attention(q, rows, valid, sm_scale, d_v, attn_sink)
    return out, top, lse


def dequantize_fp8_kv_cache(k_cache, d_v=512, group=128):
    """The V3.2 FP8 cache, [R, 1, 656] bytes a row: d_v float8_e4m3 values, d_v / group float32 scales (one per
    `group` values), then 64 bf16 RoPE values. Returns [R, 1, d_v + 64] fp32: the scaled values rounded to bf16
    (the kernel multiplies in registers and stores bf16 tiles), then the RoPE part."""
    rows = k_cache.shape[0]
    raw = k_cache.view(rows, -1)
    nope = raw[:, :d_v].contiguous().view(torch.float8_e4m3fn).float()
    n_scales = d_v // group
    scales = raw[:, d_v:d_v + 4 * n_scales].contiguous().view(torch.float32)
    latent = (nope * scales.repeat_interleave(group, dim=1)).bfloat16().float()
    rope = raw[:, d_v + 4 * n_scales:].contiguous().view(torch.bfloat16).float()
    return torch.cat([latent, rope], dim=1).view(rows, 1, -1)


def sparse_mla_decode_ref(q, k_cache, indices, *, topk_length=None, sm_scale=None, d_v=512, attn_sink=None):
    """q [B, Sq, H, 576] bf16, k_cache [R, 1, 656] uint8 (dequantize_fp8_kv_cache), indices [B, Sq, 1, topk] (rows of
    the whole cache), topk_length [B]: (out [B, Sq, H, d_v], lse [B, H, Sq]) in fp32."""
    batch, seq_q, heads, dim = q.shape
    sm_scale = dim ** -0.5 if sm_scale is None else sm_scale
    kv = dequantize_fp8_kv_cache(k_cache, d_v)
    flat_q = q.reshape(batch * seq_q, heads, dim)
    flat_idx = indices.reshape(batch * seq_q, 1, -1)
    lengths = None if topk_length is None else topk_length.repeat_interleave(seq_q)
    rows, valid = _select(kv, flat_idx, lengths)
    out, lse, _ = _gather_attention(flat_q, rows, valid, sm_scale, d_v, attn_sink)
    return out.view(batch, seq_q, heads, d_v), lse.view(batch, seq_q, heads).transpose(1, 2)


def check(name, got, want, *, rtol=1e-2, atol=1e-2):
    """assert_close in fp32, naming the output."""
    try:
        torch.testing.assert_close(got.float(), want.float(), rtol=rtol, atol=atol)
    except AssertionError as err:
        raise AssertionError(f"{name}: {err}") from None
    print(f"{name}: ok")
