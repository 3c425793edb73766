"""Torch references for the tilekernels cases (mHC, MoE routing, FP8 quantisation), written from the entry points'
documented semantics. Staged beside the drivers as `tilekernels_reference`; torch only."""

from __future__ import annotations

import math

import torch

E4M3_MAX = 448.0


def ceil_div(a: int, b: int) -> int:
    return (a + b - 1) // b


# ---------------------------------------------------------------------------------------------------------- MoE


def topk_gate(scores: torch.Tensor, num_topk: int) -> torch.Tensor:
    """Indices of the num_topk largest scores per row, largest first; ties go to the smaller index."""
    return torch.sort(scores, dim=-1, descending=True, stable=True).indices[:, :num_topk].contiguous()


def topk_sum_and_topk_group_idx(scores: torch.Tensor, num_topk_sum: int, num_topk_groups: int) -> torch.Tensor:
    """Groups ranked by the sum of their num_topk_sum largest scores, best first; ties go to the smaller group."""
    group_scores = scores.topk(num_topk_sum, dim=-1).values.sum(-1)
    return torch.sort(group_scores, dim=-1, descending=True, stable=True).indices[:, :num_topk_groups].contiguous()


def routing(num_tokens: int, num_topk: int, num_experts: int, pad: int, drop: float, seed: int = 0):
    """A random MoE routing: token_topk_to_pos (num_tokens, num_topk), -1 for dropped slots, each kept slot a
    distinct position; pos_to_expert (num_expanded,), -1 for the `pad` padding positions no slot maps to."""
    g = torch.Generator().manual_seed(seed)
    kept = torch.rand(num_tokens, num_topk, generator=g) >= drop
    num_kept = int(kept.sum())
    num_expanded = num_kept + pad
    perm = torch.randperm(num_expanded, generator=g)
    token_topk_to_pos = torch.full((num_tokens, num_topk), -1, dtype=torch.int32)
    token_topk_to_pos[kept] = perm[:num_kept].to(torch.int32)
    pos_to_expert = torch.randint(0, num_experts, (num_expanded,), generator=g, dtype=torch.int32)
    pos_to_expert[perm[num_kept:]] = -1
    return token_topk_to_pos, pos_to_expert


def expand_to_fused(x: torch.Tensor, token_topk_to_pos: torch.Tensor, pos_to_expert: torch.Tensor) -> torch.Tensor:
    """Row pos of the result is x[token] for each kept (token, k) slot mapping there, zero at padding positions."""
    out = torch.zeros((pos_to_expert.shape[0],) + x.shape[1:], dtype=x.dtype)
    for t in range(token_topk_to_pos.shape[0]):
        for k in range(token_topk_to_pos.shape[1]):
            pos = int(token_topk_to_pos[t, k])
            if pos >= 0:
                out[pos] = x[t]
    return out


def reduce_fused(x, topk_weights, token_topk_to_pos, sf=None, x_sf=None, out_dtype=None) -> torch.Tensor:
    """out[t] = sum over kept k (in k order, fp32) of x[pos] * w[t, k] (* x_sf[pos]), times sf, cast to out_dtype."""
    num_tokens, num_topk = token_topk_to_pos.shape
    acc = torch.zeros((num_tokens, x.shape[1]), dtype=torch.float32)
    for k in range(num_topk):
        pos = token_topk_to_pos[:, k].long()
        keep = pos >= 0
        s = torch.ones(num_tokens) if topk_weights is None else topk_weights[:, k].float()
        if x_sf is not None:
            s = s * x_sf[pos.clamp(min=0)]
        term = x[pos.clamp(min=0)].float() * s[:, None]
        acc = acc + torch.where(keep[:, None], term, torch.zeros_like(term))
    if sf is not None:
        acc = acc * sf[0]
    return acc.to(out_dtype or x.dtype)


# ---------------------------------------------------------------------------------------------------------- quant


def sf_and_inv(amax: torch.Tensor, round_sf: bool, clamp_min: float = 1e-4):
    """(sf, 1/sf) for an e4m3 cast of values whose absolute maximum is amax: sf = amax / 448 (amax clamped below at
    clamp_min), or, with round_sf, the next power of two at or above it (then sf is also returned as its biased
    exponent, the ue8m0 encoding)."""
    clamped = torch.clamp(amax.float(), min=clamp_min)
    sf = clamped / E4M3_MAX
    if not round_sf:
        # a true division, as the kernels' (a Python scalar / tensor is torch's reciprocal times the scalar)
        return sf, torch.full_like(clamped, E4M3_MAX) / clamped, None
    bits = sf.view(torch.int32).to(torch.int64)
    exp = ((bits - 1) >> 23) + 1 - 127  # ceil(log2(sf)) for a positive normal sf
    sf_pow2 = torch.ldexp(torch.ones_like(sf), exp.to(torch.int32))
    return sf_pow2, torch.ldexp(torch.ones_like(sf), (-exp).to(torch.int32)), (exp + 127).to(torch.uint8)


def pack_ue8m0(exp: torch.Tensor) -> torch.Tensor:
    """(rows, groups) uint8 exponents -> (rows, ceil(groups / 4)) int32, group g in byte g % 4 of word g // 4."""
    rows, groups = exp.shape
    padded = torch.zeros((rows, ceil_div(groups, 4) * 4), dtype=torch.uint8)
    padded[:, :groups] = exp
    return padded.view(torch.int32)


def per_token_cast(x: torch.Tensor, num_per_channels: int, round_sf=False, use_packed_ue8m0=False, clamp_min=1e-4):
    """(e4m3 out, sf): per row, per group of num_per_channels columns."""
    rows, hidden = x.shape
    groups = ceil_div(hidden, num_per_channels)
    xf = x.float()
    padded = torch.zeros((rows, groups * num_per_channels))
    padded[:, :hidden] = xf
    amax = padded.abs().view(rows, groups, num_per_channels).amax(-1)
    sf, sf_inv, exp = sf_and_inv(amax, round_sf, clamp_min)
    out = (xf * sf_inv.repeat_interleave(num_per_channels, dim=1)[:, :hidden]).to(torch.float8_e4m3fn)
    return out, (pack_ue8m0(exp) if use_packed_ue8m0 else sf)


E2M1_GRID = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)


def e2m1_codes(v: torch.Tensor) -> torch.Tensor:
    """fp32 -> e2m1 nibbles (sign << 3 | magnitude code), round to nearest, ties to the even code, saturating."""
    grid = torch.tensor(E2M1_GRID, dtype=torch.float64)
    mag = v.double().abs().clamp(max=6.0)
    # exact distances (fp64); an odd code loses a tie by a margin far below any real difference
    dist = (mag[..., None] - grid).abs() + (torch.arange(8) % 2) * 1e-12
    code = dist.argmin(-1)
    return code.to(torch.int32) | ((v < 0).to(torch.int32) << 3)


def e2m1_values(nibbles: torch.Tensor) -> torch.Tensor:
    grid = torch.tensor(E2M1_GRID)
    mag = grid[(nibbles & 7).long()]
    return torch.where((nibbles & 8) != 0, -mag, mag)


def unpack_e2m1(packed: torch.Tensor) -> torch.Tensor:
    """(rows, n / 2) int8 of two e2m1 values a byte (the low nibble first) -> (rows, n) fp32."""
    b = packed.view(torch.uint8).to(torch.int32)
    return torch.stack([e2m1_values(b & 15), e2m1_values(b >> 4)], dim=-1).reshape(packed.shape[0], -1)


def per_token_cast_e2m1(x: torch.Tensor, num_per_channels: int, round_sf=False):
    """(fp4 values as fp32, sf): per row, per group; the scale is amax / 6 (amax clamped at 6 * 2^-126)."""
    rows, hidden = x.shape
    groups = ceil_div(hidden, num_per_channels)
    xf = x.float()
    amax = xf.abs().view(rows, groups, num_per_channels).amax(-1)
    clamped = torch.clamp(amax, min=6.0 * 2.0 ** -126)
    sf = clamped / 6.0
    sf_inv = torch.full_like(clamped, 6.0) / clamped
    if round_sf:
        bits = sf.view(torch.int32).to(torch.int64)
        exp = ((bits - 1) >> 23) + 1 - 127
        sf = torch.ldexp(torch.ones_like(sf), exp.to(torch.int32))
        sf_inv = torch.ldexp(torch.ones_like(sf), (-exp).to(torch.int32))
    scaled = xf * sf_inv.repeat_interleave(num_per_channels, dim=1)
    return e2m1_values(e2m1_codes(scaled)), sf


def per_block_cast_e2m1(x: torch.Tensor, block: tuple[int, int]):
    """(fp4 values as fp32, sf): one scale per block[0] x block[1] tile, amax / 6 as per_token_cast_e2m1's."""
    rows, hidden = x.shape
    bm, bk = block
    gm, gk = ceil_div(rows, bm), ceil_div(hidden, bk)
    padded = torch.zeros((gm * bm, gk * bk))
    padded[:rows, :hidden] = x.float()
    amax = padded.abs().view(gm, bm, gk, bk).amax(dim=(1, 3))
    clamped = torch.clamp(amax, min=6.0 * 2.0 ** -126)
    sf_inv = torch.full_like(clamped, 6.0) / clamped
    full = sf_inv.repeat_interleave(bm, 0).repeat_interleave(bk, 1)[:rows, :hidden]
    return e2m1_values(e2m1_codes(x.float() * full)), clamped / 6.0


def per_token_requant(x8: torch.Tensor, x_sf_full: torch.Tensor, num_per_channels: int, round_sf=False,
                      use_packed_ue8m0=False):
    """An e4m3 tensor with per-element input scales (x_sf_full, the input's block scales spread over its
    elements) cast again per row and group: the amax of |x| * scale, then out = x * (scale * sf_inv)."""
    rows, hidden = x8.shape
    groups = ceil_div(hidden, num_per_channels)
    xf = x8.float()
    amax = (xf.abs() * x_sf_full).view(rows, groups, num_per_channels).amax(-1)
    sf, sf_inv, exp = sf_and_inv(amax, round_sf)
    out = (xf * (x_sf_full * sf_inv.repeat_interleave(num_per_channels, dim=1))).to(torch.float8_e4m3fn)
    return out, (pack_ue8m0(exp) if use_packed_ue8m0 else sf)


def per_block_cast(x: torch.Tensor, block: tuple[int, int], round_sf=False, use_packed_ue8m0=False):
    """(e4m3 out, sf): one scale per block[0] x block[1] tile."""
    rows, hidden = x.shape
    bm, bk = block
    gm, gk = ceil_div(rows, bm), ceil_div(hidden, bk)
    padded = torch.zeros((gm * bm, gk * bk))
    padded[:rows, :hidden] = x.float()
    amax = padded.abs().view(gm, bm, gk, bk).amax(dim=(1, 3))
    sf, sf_inv, exp = sf_and_inv(amax, round_sf)
    full = sf_inv.repeat_interleave(bm, 0).repeat_interleave(bk, 1)[:rows, :hidden]
    out = (x.float() * full).to(torch.float8_e4m3fn)
    return out, (pack_ue8m0(exp) if use_packed_ue8m0 else sf)


def swiglu(x: torch.Tensor, pos_to_token_topk=None, topk_weights=None, pos_to_expert=None, clamp=None):
    """silu(left) * right in fp32 per row of x = [left | right], times the row's top-k weight; rows whose expert is
    negative are skipped (returned as a mask). With clamp, left is clamped above and right on both sides at
    +-clamp; the counts of clamped (left, right-upper, right-lower) values are returned too."""
    hidden = x.shape[1] // 2
    left, right = x[:, :hidden].float(), x[:, hidden:].float()
    counts = None
    if clamp is not None:
        counts = [int((left > clamp).sum()), int((right > clamp).sum()), int((right < -clamp).sum())]
        left = torch.clamp(left, max=clamp)
        right = torch.clamp(right, min=-clamp, max=clamp)
    val = left / (1 + torch.exp(-left)) * right
    if pos_to_token_topk is not None:
        flat = topk_weights.reshape(-1)
        w = torch.where(pos_to_token_topk >= 0, flat[pos_to_token_topk.clamp(min=0).long()], torch.zeros(()))
        val = val * w[:, None]
    keep = torch.ones(x.shape[0], dtype=torch.bool) if pos_to_expert is None else pos_to_expert >= 0
    return val, keep, counts


def fresh(t: torch.Tensor) -> torch.Tensor:
    """A row-major copy with fresh strides (a transposed (n, 1) view keeps stride 4 even after .contiguous())."""
    return torch.empty(t.shape, dtype=t.dtype).copy_(t)


def _bytes(words: torch.Tensor) -> torch.Tensor:
    """A 2-d tensor's rows as bytes."""
    return fresh(words).view(torch.uint8).view(words.shape[0], -1)


def sf_unpack(sf: torch.Tensor, use_packed_ue8m0: bool, groups: int) -> torch.Tensor:
    """The scale factors as fp32 (rows, groups), from fp32 or packed ue8m0 (int32 words of 4 exponents)."""
    if not use_packed_ue8m0:
        return sf.float()
    exp = _bytes(sf)[:, :groups].to(torch.int32)
    return torch.ldexp(torch.ones(exp.shape), exp - 127)


def assert_sf_equal(sf: torch.Tensor, ref: torch.Tensor, packed: bool, groups: int, what: str = "sf"):
    """Scale factors equal: fp32 exactly, packed ue8m0 byte for byte over the real groups (the padding bytes of
    the last word are never written: torch.empty leaves them arbitrary)."""
    assert sf.shape == ref.shape and sf.dtype == ref.dtype, (what, sf.shape, sf.dtype, ref.shape, ref.dtype)
    if packed:
        sf, ref = _bytes(sf)[:, :groups], _bytes(ref)[:, :groups]
    bad = sf != ref
    assert not bad.any(), (f"{what}: {int(bad.sum())} of {bad.numel()} differ; first at {bad.nonzero()[0].tolist()}: "
                           f"{sf[bad][:4].tolist()} vs {ref[bad][:4].tolist()}")


def assert_e4m3_close(out: torch.Tensor, ref: torch.Tensor, max_ulps: int = 0, what: str = "out"):
    """e4m3 tensors equal, or (max_ulps > 0) at most max_ulps e4m3 steps apart (a scale one fp32 ulp off moves an
    element to the neighbouring e4m3 value at most)."""
    assert out.dtype == torch.float8_e4m3fn and out.shape == ref.shape, (out.dtype, out.shape, ref.shape)
    a, b = out.view(torch.uint8).to(torch.int32), ref.view(torch.uint8).to(torch.int32)
    # e4m3 bit patterns: sign in bit 7, magnitude ordered; map to a signed ordinal
    oa = torch.where(a >= 128, -(a - 128), a)
    ob = torch.where(b >= 128, -(b - 128), b)
    diff = (oa - ob).abs()
    bad = diff > max_ulps
    assert not bad.any(), (f"{what}: {int(bad.sum())} of {bad.numel()} e4m3 values differ by more than {max_ulps} "
                           f"steps; first at {bad.nonzero()[0].tolist()}: {out.float()[bad][:4].tolist()} vs "
                           f"{ref.float()[bad][:4].tolist()}")


# ---------------------------------------------------------------------------------------------------------- mHC


def round_to_tf32(x: torch.Tensor) -> torch.Tensor:
    return (x.view(torch.int32) + 0x1000).view(torch.float32)


def mhc_norm_fn_fwd_mul(x: torch.Tensor, fn: torch.Tensor, n_rms_group: int):
    """x (tokens, n_rms_group * size) bf16, fn (mult3, same) fp32 -> out (tokens, n_rms_group, mult3) = the
    per-group products x . fn, sqrsum (tokens, n_rms_group) = per-group sums of x^2 (fp64 here)."""
    tokens, width = x.shape
    xs = x.double().view(tokens, n_rms_group, width // n_rms_group)
    fs = fn.double().view(fn.shape[0], n_rms_group, width // n_rms_group)
    out = torch.einsum("tgk,jgk->tgj", xs, fs)
    return out.float(), (xs * xs).sum(-1).float()


def mhc_pre_big_fuse(gemm_out_mul, gemm_out_sqrsum, mhc_scale, mhc_base, residual, hidden_size, rms_eps,
                     mhc_pre_eps, mhc_sinkhorn_eps, mhc_post_mult_value, sinkhorn_repeat):
    """mHC pre-block fusion: RMS-normalised mixes split into pre (sigmoid + eps), post (sigmoid * mult) and comb
    (softmax + eps then alternating column / row normalisation, sinkhorn_repeat column passes in all); the layer
    input is the pre-weighted sum of the residual streams. Computed in fp64."""
    mult = residual.shape[1]
    mul = gemm_out_mul.double().sum(0)  # (tokens, mult3)
    sqrsum = gemm_out_sqrsum.double().sum(0)
    rms = torch.rsqrt(sqrsum / (mult * hidden_size) + rms_eps)
    mixes = mul * rms[:, None]
    scale, base = mhc_scale.double(), mhc_base.double()
    pre = torch.sigmoid(mixes[:, :mult] * scale[0] + base[:mult]) + mhc_pre_eps
    post = torch.sigmoid(mixes[:, mult:2 * mult] * scale[1] + base[mult:2 * mult]) * mhc_post_mult_value
    cm = (mixes[:, 2 * mult:] * scale[2] + base[2 * mult:]).view(-1, mult, mult)
    cm = torch.softmax(cm, dim=-1) + mhc_sinkhorn_eps
    cm = cm / (cm.sum(-2, keepdim=True) + mhc_sinkhorn_eps)
    for _ in range(sinkhorn_repeat - 1):
        cm = cm / (cm.sum(-1, keepdim=True) + mhc_sinkhorn_eps)
        cm = cm / (cm.sum(-2, keepdim=True) + mhc_sinkhorn_eps)
    layer_input = (pre.float()[:, :, None] * residual.float()).sum(1)
    return post.float(), cm.reshape(-1, mult * mult).float(), layer_input.to(torch.bfloat16)


def check(name, out, ref, **tol):
    torch.testing.assert_close(out, ref, msg=lambda m: f"{name}: {m}", **tol)


__all__ = [n for n in dir() if not n.startswith("_")] + ["math"]
