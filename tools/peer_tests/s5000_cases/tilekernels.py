"""tilekernels: mHC (pre-norm matmul and norm kernels, the pre-block big fusion), MoE routing (top-k gate, grouped
top-k, expand to / reduce from the fused expert layout) and FP8 e4m3 casts (per token, per block, fused SwiGLU),
each entry point called as the peer's benchmark_cases.py calls it, at simulator sizes, against
tilekernels_reference (torch, written from the documented semantics)."""

from s5000_cases import Case

PKG = "benchmark.mp31.tilekernels"
HEAD = "import torch\nimport tilekernels_reference as R\n"


def case(name: str, kernel: str, body: str) -> Case:
    return Case(f"tilekernels_{name}", f"tilekernels/{kernel}", HEAD + body)


TOPK_GATE = f"""
from {PKG}.moe.topk_gate_kernel import topk_gate
for tokens, experts, k in ((37, 64, 6), (16, 72, 8), (9, 256, 8), (5, 16, 4)):
    scores = torch.randn(tokens, experts)
    scores[::2] = (scores[::2] * 2).round() / 2  # ties: the smaller index first
    idx = topk_gate(scores, k)
    assert idx.dtype == torch.int64
    assert torch.equal(idx, R.topk_gate(scores, k)), (tokens, experts, k, idx[:2], R.topk_gate(scores, k)[:2])
print("ok")
"""

TOPK_GROUP = f"""
from {PKG}.moe.topk_sum_and_topk_group_idx_kernel import topk_sum_and_topk_group_idx as f
for tokens, groups, per_group, topk_sum, topk_groups in ((21, 8, 32, 2, 4), (13, 12, 6, 2, 4), (10, 16, 16, 1, 4),
                                                          (7, 8, 2, 2, 3)):
    scores = torch.randn(tokens, groups, per_group)
    scores[::3] = (scores[::3] * 2).round() / 2
    idx = f(scores, topk_sum, topk_groups)
    ref = R.topk_sum_and_topk_group_idx(scores, topk_sum, topk_groups)
    assert torch.equal(idx, ref), (tokens, groups, per_group, idx[:2], ref[:2])
print("ok")
"""

EXPAND = f"""
from {PKG}.moe.expand_to_fused_kernel import expand_to_fused
for tokens, hidden, topk, experts, pad, drop in ((23, 256, 6, 16, 5, 0.1), (8, 448, 2, 4, 3, 0.3),
                                                 (40, 128, 4, 8, 0, 0.0), (9, 200, 3, 4, 2, 0.2),
                                                 (5, 4096, 6, 72, 4, 0.1)):  # the benchmark's hidden / top-k
    for dtype in (torch.bfloat16, torch.float32):
        x = torch.randn(tokens, hidden).to(dtype)
        t2p, p2e = R.routing(tokens, topk, experts, pad, drop)
        out = expand_to_fused(x, t2p, p2e)
        assert torch.equal(out, R.expand_to_fused(x, t2p, p2e)), (tokens, hidden, dtype)
print("ok")
"""

REDUCE = f"""
from {PKG}.moe.reduce_fused_kernel import reduce_fused
for tokens, hidden, topk, drop, dtype in ((19, 256, 6, 0.2, torch.bfloat16), (5, 512, 2, 0.0, torch.bfloat16),
                                          (7, 256, 3, 0.1, torch.float32), (4, 4096, 6, 0.1, torch.bfloat16)):
    t2p, _ = R.routing(tokens, topk, 8, 3, drop)
    x = torch.randn(int(t2p.max()) + 4, hidden).to(dtype)
    w = torch.rand(tokens, topk)
    torch.testing.assert_close(reduce_fused(x, w, t2p).float(), R.reduce_fused(x, w, t2p).float(),
                               rtol=1e-2, atol=1e-2)
    torch.testing.assert_close(reduce_fused(x, None, t2p).float(), R.reduce_fused(x, None, t2p).float(),
                               rtol=1e-2, atol=1e-2)
    if dtype != torch.bfloat16:
        continue
    # fp8 output with a global scale, and per-row input scales
    sf = torch.tensor([0.5])
    x_sf = torch.rand(x.shape[0]) + 0.5
    out = reduce_fused((x, x_sf), w, t2p, fp8_format="e4m3", sf=sf)
    ref = R.reduce_fused(x, w, t2p, sf=sf, x_sf=x_sf, out_dtype=torch.float8_e4m3fn)
    R.assert_e4m3_close(out, ref)
print("ok")
"""

PER_TOKEN = f"""
from {PKG}.quant.per_token_cast_kernel import per_token_cast
for tokens, hidden, dtype, channels, col_major, round_sf, packed in (
        (33, 512, torch.bfloat16, 128, True, True, True),  # the benchmark's configuration
        (33, 512, torch.bfloat16, 128, False, False, False),
        (17, 384, torch.bfloat16, 32, True, True, False),
        (9, 256, torch.float32, 128, False, True, False),
        (12, 256, torch.bfloat16, 256, False, False, False),  # one group of the whole row
        (5, 4096, torch.bfloat16, 128, True, True, True),  # the benchmark's hidden: one row a block
        (3, 7168, torch.bfloat16, 128, True, True, True),  # the int32-index kernel (hidden >= 7168)
        (10, 384, torch.bfloat16, 128, True, True, True)):  # 3 groups: a packed word with a padding byte
    x = torch.randn(tokens, hidden).to(dtype) * 3
    x[1] = 0  # a zero row: the clamped amax
    out, sf = per_token_cast(x, "e4m3", num_per_channels=channels, use_tma_aligned_col_major_sf=col_major,
                             round_sf=round_sf, use_packed_ue8m0=packed)
    ref_out, ref_sf = R.per_token_cast(x, channels, round_sf, packed)
    R.assert_sf_equal(sf, ref_sf, packed, R.ceil_div(hidden, channels))
    R.assert_e4m3_close(out, ref_out)
print("ok")
"""

PER_BLOCK = f"""
from {PKG}.quant.per_block_cast_kernel import per_block_cast
for tokens, hidden, block, col_major, round_sf, packed in (
        (200, 384, (128, 128), True, True, True),  # the benchmark's configuration, partial row block
        (130, 256, (128, 128), False, False, False),
        (70, 320, (32, 128), False, True, False),
        (64, 192, (32, 32), True, False, False),
        (40, 7168, (128, 128), True, True, True)):  # the benchmark's hidden
    x = torch.randn(tokens, hidden).bfloat16() * 2
    out, sf = per_block_cast(x, "e4m3", block_size=block, use_tma_aligned_col_major_sf=col_major,
                             round_sf=round_sf, use_packed_ue8m0=packed)
    ref_out, ref_sf = R.per_block_cast(x, block, round_sf, packed)
    R.assert_sf_equal(sf, ref_sf, packed, R.ceil_div(hidden, block[1]))
    R.assert_e4m3_close(out, ref_out)
print("ok")
"""

SWIGLU = f"""
from {PKG}.quant.swiglu_forward_and_per_token_cast_kernel import swiglu_forward_and_per_token_cast as f

def run(x, col_major, round_sf, packed, clamp=None, routed=False, count=False, channels=128):
    hidden = x.shape[1] // 2
    kw = {{}}
    p2tk = w = p2e = None
    if routed:
        tokens, topk = 7, 4
        w = torch.rand(tokens, topk)
        p2tk = torch.randint(-1, tokens * topk, (x.shape[0],), dtype=torch.int32)
        # padding rows (no expert) are the rows no (token, k) slot maps to: the kernel reads no weight for them
        p2e = torch.where(p2tk >= 0, torch.randint(0, 4, (x.shape[0],), dtype=torch.int32), -1).to(torch.int32)
        kw = dict(pos_to_token_topk=p2tk, topk_weights=w, pos_to_expert=p2e)
    counts = torch.zeros(3, dtype=torch.int64) if count else None
    out, sf = f(x, "e4m3", channels, use_tma_aligned_col_major_sf=col_major, round_sf=round_sf,
                use_packed_ue8m0=packed, swiglu_clamp_value=clamp, clamped_count=counts, **kw)
    val, keep, ref_counts = R.swiglu(x, p2tk, w, p2e, clamp)
    ref_out, ref_sf = R.per_token_cast(val, channels, round_sf, packed)
    groups = hidden // channels
    got_sf = R.sf_unpack(sf, packed, groups)[keep]
    want_sf = R.sf_unpack(ref_sf, packed, groups)[keep]
    # silu's exp may differ from torch's by an ulp: the scale (an fp32 amax / 448) by about as much
    torch.testing.assert_close(got_sf, want_sf, rtol=0 if round_sf else 1e-5, atol=0)
    R.assert_e4m3_close(out[keep], ref_out[keep], max_ulps=1)
    if count:
        assert counts.tolist() == ref_counts, (counts.tolist(), ref_counts)

for rows, hidden in ((33, 256), (6, 640), (3, 4096)):  # 4096: the benchmark's hidden, one row a block
    x = torch.randn(rows, 2 * hidden).bfloat16() * 2
    run(x, True, True, True)  # the benchmark's configuration
    run(x, False, False, False)
run(torch.randn(28, 512).bfloat16() * 2, False, True, False, routed=True)
run(torch.randn(10, 512).bfloat16() * 2, False, False, False, channels=256)  # one group of the whole row
run(torch.randn(28, 512).bfloat16() * 2, False, False, False, clamp=1.5)
run(torch.randn(28, 512).bfloat16() * 2, False, False, False, clamp=1.5, count=True)
print("ok")
"""

MHC_BIG_FUSE = f"""
from {PKG}.mhc.pre_big_fuse import _resolve_big_fuse_config
from {PKG}.mhc.pre_big_fuse_kernel import _mhc_pre_big_fuse
mult, mult3 = 4, 24
# "burst" (decode-like), "safe", and "aggressive" (no bounds guards) on 256 threads
for tokens, hidden in ((16, 512), (70, 1280), (24, 1024)):
    gemm_out_mul = torch.randn(1, tokens, mult3)
    gemm_out_sqrsum = torch.rand(1, tokens) * mult * hidden
    scale = torch.randn(3) * 0.1
    base = torch.randn(mult3) * 0.1
    residual = torch.randn(tokens, mult, hidden).bfloat16()
    post = torch.full((tokens, mult), float("nan"))
    comb = torch.full((tokens, mult * mult), float("nan"))
    layer = torch.full((tokens, hidden), float("nan")).bfloat16()
    threads, hidden_block, pass_config = _resolve_big_fuse_config(tokens, None, None, "auto")
    if tokens == 24:
        threads, hidden_block, pass_config = 256, 512, "aggressive"
    kernel = _mhc_pre_big_fuse(hidden, 1e-6, 1e-6, 1e-6, 1.0, 10, n_splits=1, mhc_mult=mult, threads=threads,
                               hidden_block=hidden_block, pass_config=pass_config)
    kernel(gemm_out_mul, gemm_out_sqrsum, scale, base, residual, post, comb, layer)
    ref = R.mhc_pre_big_fuse(gemm_out_mul, gemm_out_sqrsum, scale, base, residual, hidden, 1e-6, 1e-6, 1e-6, 1.0,
                             10)
    R.check("post_mix", post, ref[0], rtol=1e-5, atol=1e-5)
    R.check("comb_mix", comb, ref[1], rtol=1e-4, atol=1e-5)
    R.check("layer_input", layer.float(), ref[2].float(), rtol=1e-2, atol=1e-2)
print("ok")
"""

MHC_PRE = f"""
from {PKG}.mhc.pre_big_fuse import mhc_pre_big_fuse
mult, mult3 = 4, 24
for tokens, hidden in ((12, 256), (67, 512)):
    residual = torch.randn(tokens, mult, hidden).bfloat16()
    fn = torch.randn(mult3, mult * hidden) * 0.05
    scale = torch.randn(3) * 0.1
    base = torch.randn(mult3) * 0.1
    post, comb, layer = mhc_pre_big_fuse(residual, fn, scale, base, 1e-6, 1e-6, 1e-6, 1.0, 10)
    mul, sqrsum = R.mhc_norm_fn_fwd_mul(residual.view(tokens, -1), R.round_to_tf32(fn), 1)
    ref = R.mhc_pre_big_fuse(mul.view(1, tokens, mult3), sqrsum.view(1, tokens), scale, base, residual, hidden,
                             1e-6, 1e-6, 1e-6, 1.0, 10)
    R.check("post_mix", post.view(tokens, mult), ref[0], rtol=1e-4, atol=1e-5)
    R.check("comb_mix", comb.view(tokens, -1), ref[1], rtol=1e-4, atol=1e-5)
    R.check("layer_input", layer.float(), ref[2].float(), rtol=1e-2, atol=1e-2)
print("ok")
"""

NORM_FN = f"""
from {PKG}.mhc import norm_fn_kernel as K
mult3 = 24
# fn * normw merge, forward and backward
m, n = 24, 600
fn, normw, g = torch.randn(m, n), torch.randn(n), torch.randn(m, n)
out = torch.full((m, n), float("nan"))
K._mhc_fn_normw_merge_fwd(m, n)(fn, normw, out)
R.check("normw_merge_fwd", out, fn * normw)
fn_grad0, normw_grad0 = torch.randn(m, n), torch.randn(n)
fn_grad, normw_grad = fn_grad0.clone(), normw_grad0.clone()
K._mhc_fn_normw_merge_bwd(m, n)(fn, normw, g, fn_grad, normw_grad)
R.check("normw_merge_bwd fn_grad", fn_grad, fn_grad0 + g * normw, rtol=1e-5, atol=1e-5)
R.check("normw_merge_bwd normw_grad", normw_grad, normw_grad0 + (g * fn).sum(0), rtol=1e-4, atol=1e-4)
for tokens, groups, size in ((45, 1, 512), (8, 2, 256)):
    x = torch.randn(tokens, groups * size).bfloat16()
    w = torch.randn(mult3, groups * size) * 0.05
    out = torch.full((tokens, groups, mult3), float("nan"))
    sqrsum = torch.full((tokens, groups), float("nan"))
    K._mhc_pre_norm_fn_fwd_mul(mult3, groups, size)(x, w, out, sqrsum)
    ref_out, ref_sqrsum = R.mhc_norm_fn_fwd_mul(x, w, groups)
    R.check("fwd_mul out", out, ref_out, rtol=1e-4, atol=1e-4)
    R.check("fwd_mul sqrsum", sqrsum, ref_sqrsum, rtol=1e-4, atol=1e-3)
    # norm forward over 3 splits
    splits, eps = 3, 1e-6
    out_split = torch.randn(splits, tokens, groups, mult3)
    sq_split = torch.rand(splits, tokens, groups) * size
    out_mul = torch.full((tokens, groups, mult3), float("nan"))
    sq = torch.full((tokens, groups), float("nan"))
    res = torch.full((tokens, mult3), float("nan"))
    K._mhc_pre_norm_fn_fwd_norm(mult3, groups, size, eps, splits)(out_split, sq_split, out_mul, sq, res)
    rs = torch.rsqrt(sq_split.sum(0) / size + eps)
    R.check("fwd_norm out_mul", out_mul, out_split.sum(0), rtol=1e-5, atol=1e-5)
    R.check("fwd_norm sqrsum", sq, sq_split.sum(0), rtol=1e-5, atol=1e-5)
    R.check("fwd_norm out", res, (out_split.sum(0) * rs[..., None]).sum(1), rtol=1e-5, atol=1e-5)
    # norm backward
    out_grad = torch.randn(tokens, mult3)
    sqs = torch.rand(tokens, groups) * size + 1
    omg = torch.full((tokens, groups, mult3), float("nan"))
    sqg = torch.full((tokens, groups), float("nan"))
    K._mhc_pre_norm_fn_bwd_norm(mult3, groups, size, eps)(out_grad, out_split[0], sqs, omg, sqg)
    rs = torch.rsqrt(sqs / size + eps)
    R.check("bwd_norm out_mul_grad", omg, out_grad[:, None, :] * rs[..., None], rtol=1e-5, atol=1e-5)
    rg = (out_grad[:, None, :] * out_split[0]).sum(-1)
    R.check("bwd_norm sqrsum_grad", sqg, rg * rs / (sqs + eps * size) / -2, rtol=1e-4, atol=1e-6)
    # matmul backward (x_grad accumulates into its input)
    x_grad0 = torch.randn(tokens, groups * size).bfloat16()
    x_grad = x_grad0.clone()
    fn_grad = torch.full((mult3, groups * size), float("nan"))
    K._mhc_pre_norm_fn_bwd_mul(mult3, groups, size)(omg, sqg, x, w, x_grad, fn_grad)
    xs = x.float().view(tokens, groups, size)
    ws = w.view(mult3, groups, size)
    ref_x_grad = (x_grad0.float().view(tokens, groups, size) + torch.einsum("tgj,jgk->tgk", omg, ws)
                  + 2 * xs * sqg[..., None]).view(tokens, -1)
    ref_fn_grad = torch.einsum("tgj,tgk->jgk", omg, xs).reshape(mult3, -1)
    R.check("bwd_mul x_grad", x_grad.float(), ref_x_grad, rtol=2e-2, atol=2e-2)
    R.check("bwd_mul fn_grad", fn_grad, ref_fn_grad, rtol=1e-4, atol=1e-4)
print("ok")
"""

EXPAND_WITH_SF = f"""
from {PKG}.moe.expand_to_fused_kernel import expand_to_fused_with_sf
from {PKG}.quant.per_token_cast_kernel import per_token_cast
tokens, hidden, topk = 21, 512, 4
x = torch.randn(tokens, hidden).bfloat16()
t2p, p2e = R.routing(tokens, topk, 8, 6, 0.2)
for col_major, packed in ((False, False), (True, False), (True, True)):
    x8, x_sf = per_token_cast(x, "e4m3", num_per_channels=128, use_tma_aligned_col_major_sf=col_major or packed,
                              round_sf=packed, use_packed_ue8m0=packed)
    x_sf = R.fresh(x_sf)  # the input scales row-major; col_major is the output's layout
    out, out_sf = expand_to_fused_with_sf((x8, x_sf), 128, t2p, p2e, use_tma_aligned_col_major_sf=col_major)
    ref = R.expand_to_fused(x8.view(torch.uint8), t2p, p2e)
    assert torch.equal(out.view(torch.uint8), ref), (col_major, packed)
    ref_sf = R.expand_to_fused(x_sf, t2p, p2e)
    assert out_sf.shape == ref_sf.shape and out_sf.dtype == ref_sf.dtype, (out_sf.shape, ref_sf.shape)
    assert torch.equal(out_sf, ref_sf), (col_major, packed, out_sf[:3], ref_sf[:3])
print("ok")
"""

PER_TOKEN_FP4 = f"""
from {PKG}.quant.per_token_cast_kernel import per_token_cast
for tokens, hidden, channels, round_sf in ((13, 256, 32, False), (9, 512, 16, True), (6, 128, 128, False)):
    x = torch.randn(tokens, hidden).bfloat16() * 3
    out, sf = per_token_cast(x, "e2m1", num_per_channels=channels, round_sf=round_sf)
    assert out.dtype == torch.int8 and out.shape == (tokens, hidden // 2), (out.dtype, out.shape)
    ref_vals, ref_sf = R.per_token_cast_e2m1(x, channels, round_sf)
    R.check("sf", sf, ref_sf, rtol=0, atol=0)
    R.check("out", R.unpack_e2m1(out), ref_vals, rtol=0, atol=0)
print("ok")
"""

PER_TOKEN_REQUANT = f"""
from {PKG}.quant.per_token_cast_kernel import (per_token_cast, per_token_cast_with_sf_only,
                                               per_token_cast_with_precomputed_sf)
from {PKG}.quant.per_block_cast_kernel import per_block_cast
tokens, hidden = 40, 512
x = torch.randn(tokens, hidden).bfloat16() * 3
# fp8 input with per-token (1 x 128) fp32 scales, and with per-block (128 x 128) ones, cast again per 128 / 64
x8, x_sf = per_token_cast(x, "e4m3", num_per_channels=128)
full = x_sf.repeat_interleave(128, dim=1)
for channels, round_sf, packed in ((128, False, False), (64, True, True)):
    out, sf = per_token_cast((x8, x_sf), "e4m3", channels, x_block_size=(1, 128), round_sf=round_sf,
                             use_tma_aligned_col_major_sf=packed, use_packed_ue8m0=packed)
    ref_out, ref_sf = R.per_token_requant(x8, full, channels, round_sf, packed)
    R.assert_sf_equal(sf, ref_sf, packed, hidden // channels)
    R.assert_e4m3_close(out, ref_out)
xb8, xb_sf = per_block_cast(x, "e4m3", block_size=(128, 128))
full = xb_sf.repeat_interleave(128, dim=0)[:tokens].repeat_interleave(128, dim=1)
out, sf = per_token_cast((xb8, xb_sf), "e4m3", 128, x_block_size=(128, 128))
ref_out, ref_sf = R.per_token_requant(xb8, full, 128)
R.assert_sf_equal(sf, ref_sf, False, hidden // 128)
R.assert_e4m3_close(out, ref_out)
# packed ue8m0 input scales (column-major int32 words)
xp8, xp_sf = per_token_cast(x, "e4m3", 128, use_tma_aligned_col_major_sf=True, round_sf=True, use_packed_ue8m0=True)
full = R.sf_unpack(xp_sf, True, hidden // 128).repeat_interleave(128, dim=1)
out, sf = per_token_cast((xp8, xp_sf), "e4m3", 128, x_block_size=(1, 128))
ref_out, ref_sf = R.per_token_requant(xp8, full, 128)
R.assert_sf_equal(sf, ref_sf, False, hidden // 128)
R.assert_e4m3_close(out, ref_out)
# e2m1 input (two values a byte) with per-32 scales: held in fragments a code a byte
for round_sf in (False, True):
    q, q_sf = per_token_cast(x, "e2m1", num_per_channels=32, round_sf=round_sf)
    out, sf = per_token_cast((q, q_sf), "e4m3", 128, x_block_size=(1, 32))
    ref_out, ref_sf = R.per_token_requant(R.unpack_e2m1(q), q_sf.repeat_interleave(32, dim=1), 128)
    R.assert_sf_equal(sf, ref_sf, False, hidden // 128)
    R.assert_e4m3_close(out, ref_out)
# scale factors only, then the cast with them
sf_only = per_token_cast_with_sf_only(x, "e4m3", 128)
ref_out, ref_sf = R.per_token_cast(x, 128)
R.assert_sf_equal(sf_only, ref_sf, False, hidden // 128)
out = per_token_cast_with_precomputed_sf(x, "e4m3", 128, sf_only.contiguous())
R.assert_e4m3_close(out, ref_out, max_ulps=1)  # the kernel multiplies by 1 / sf, not 448 / amax
print("ok")
"""

PER_BLOCK_MORE = f"""
from {PKG}.quant.per_block_cast_kernel import (per_block_cast, per_block_cast_with_sf_only,
                                               per_block_cast_with_precomputed_sf)
tokens, hidden = 150, 256
x = torch.randn(tokens, hidden).bfloat16() * 2
ref_out, ref_sf = R.per_block_cast(x, (128, 128))
sf = per_block_cast_with_sf_only(x, "e4m3", (128, 128))
R.assert_sf_equal(sf, ref_sf, False, 2)
out = per_block_cast_with_precomputed_sf(x, "e4m3", (128, 128), sf.contiguous())
R.assert_e4m3_close(out, ref_out, max_ulps=1)  # the kernel multiplies by 1 / sf, not 448 / amax
# e2m1 output (two values a byte), one scale per 32 x 32 block
out, sf = per_block_cast(x, "e2m1", block_size=(32, 32))
ref_vals, ref_sf = R.per_block_cast_e2m1(x, (32, 32))
R.check("e2m1 sf", sf, ref_sf, rtol=0, atol=0)
R.check("e2m1 out", R.unpack_e2m1(out), ref_vals, rtol=0, atol=0)
print("ok")
"""

CASES = [
    case("topk_gate", "moe/topk_gate_kernel.py", TOPK_GATE),
    case("topk_sum_and_topk_group_idx", "moe/topk_sum_and_topk_group_idx_kernel.py", TOPK_GROUP),
    case("expand_to_fused", "moe/expand_to_fused_kernel.py", EXPAND),
    case("expand_to_fused_with_sf", "moe/expand_to_fused_kernel.py", EXPAND_WITH_SF),
    case("reduce_fused", "moe/reduce_fused_kernel.py", REDUCE),
    case("per_token_cast", "quant/per_token_cast_kernel.py", PER_TOKEN),
    case("per_token_cast_e2m1", "quant/per_token_cast_kernel.py", PER_TOKEN_FP4),
    case("per_token_cast_requant", "quant/per_token_cast_kernel.py", PER_TOKEN_REQUANT),
    case("per_block_cast", "quant/per_block_cast_kernel.py", PER_BLOCK),
    case("per_block_cast_sf_only", "quant/per_block_cast_kernel.py", PER_BLOCK_MORE),
    case("swiglu_forward_and_per_token_cast", "quant/swiglu_forward_and_per_token_cast_kernel.py", SWIGLU),
    case("mhc_pre_big_fuse", "mhc/pre_big_fuse_kernel.py", MHC_BIG_FUSE),
    case("mhc_pre_big_fuse_e2e", "mhc/pre_big_fuse_kernel.py", MHC_PRE),
    case("mhc_norm_fn", "mhc/norm_fn_kernel.py", NORM_FN),
]
