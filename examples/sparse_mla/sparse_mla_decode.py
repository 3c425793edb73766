"""Sparse MLA decode (DeepSeek-V3.2's sparse attention over an FP8 compressed KV cache): each query token attends
to the `topk` cache positions an indexer chose for it. Unlike the prefill (sparse_mla_fwd.py) the cache is stored
as DeepSeek-V3.2's FP8 decode cache keeps it, 656 bytes a row, and nothing is masked causally (the indexer only
chooses visible positions; -1 means none):

    q        [S, H, D + Dr]   bfloat16 queries: the latent part (D = 512) and the rotary part (Dr = 64)
    kv_fp8   [S_kv, D]        float8_e4m3 latent rows, quantized in D / 128 tiles of 128 columns
    kv_scale [S_kv, D / 128]  float32: each tile's scale (latent = fp8 * scale)
    k_pe     [S_kv, Dr]       bfloat16 rotary keys
    indices  [S, topk]        the chosen positions (-1: none)
    o        [S, H, D]        softmax(q k^T * scale) v over the chosen positions, v = the dequantized latent

A block owns one token and `block_H` of its heads. It stages the token's chosen rows in shared memory once, then
walks them `block_I` at a time: gathers the fp8 latent rows, their scales and the rotary rows with asynchronous
copies (T.Parallel nests of element `T.async_copy`s, which the compiler cuts into 16-byte row pieces issued as one
group) into one of `kv_buffers` buffers, so that the next step's rows land while this step computes. The landed
rows are dequantized to bfloat16 into `KV_s` (read K-major by the score gemm) and, with `v_tile=True`, `V_s` (read
MN-major by `P @ V`), so that on mp_31 all three gemms run on SQMMA; then an online softmax (FlashAttention's).
On mp_22 (72 KiB of shared memory a block) the tiles shrink to block_H=32, block_I=16, one buffer, no V_s.

    python examples/sparse_mla/sparse_mla_decode.py --seq 16 --seq-kv 256 --heads 64 --topk 64
"""

import argparse

import torch

import tilelang
import tilelang.language as T

device = "musa" if hasattr(torch, "musa") and torch.musa.is_available() else "cpu"

QUANT_TILE = 128  # latent columns sharing one scale


@tilelang.jit(out_idx=[5])
def sparse_mla_decode(seq, seq_kv, heads, dim, tail_dim, topk, block_H=64, block_I=32, threads=256, v_tile=True,
                      kv_buffers=2):
    dtype, fp8 = "bfloat16", "float8_e4m3"
    dim_qk = dim + tail_dim
    tiles = dim // QUANT_TILE
    scale = dim_qk**-0.5 * 1.44269504  # log2(e): the softmax runs on exp2
    assert heads % block_H == 0 and topk % block_I == 0 and dim % QUANT_TILE == 0
    steps = topk // block_I

    @T.macro
    def gather(kv_fp8, kv_scale, k_pe, rows, KV8_s, scale_s, K_tail_s, step, buf):
        """Issue step `step`'s rows into buffer `buf`: three groups of asynchronous row pieces."""
        for i, d in T.Parallel(block_I, dim):
            T.async_copy(kv_fp8[rows[step * block_I + i], d], KV8_s[buf, i, d])
        for i, t in T.Parallel(block_I, tiles):
            T.async_copy(kv_scale[rows[step * block_I + i], t], scale_s[buf, i, t])
        for i, d in T.Parallel(block_I, tail_dim):
            T.async_copy(k_pe[rows[step * block_I + i], d], K_tail_s[buf, i, d])

    @T.prim_func
    def main(
        q: T.Tensor((seq, heads, dim_qk), dtype),
        kv_fp8: T.Tensor((seq_kv, dim), fp8),
        kv_scale: T.Tensor((seq_kv, tiles), "float32"),
        k_pe: T.Tensor((seq_kv, tail_dim), dtype),
        indices: T.Tensor((seq, topk), "int32"),
        o: T.Tensor((seq, heads, dim), dtype),
    ):
        with T.Kernel(seq, heads // block_H, threads=threads) as (s, hb):
            Q_s = T.alloc_shared((block_H, dim), dtype)
            Q_tail_s = T.alloc_shared((block_H, tail_dim), dtype)
            KV8_s = T.alloc_shared((kv_buffers, block_I, dim), fp8)
            scale_s = T.alloc_shared((kv_buffers, block_I, tiles), "float32")
            K_tail_s = T.alloc_shared((kv_buffers, block_I, tail_dim), dtype)
            KV_s = T.alloc_shared((block_I, dim), dtype)
            V_s = T.alloc_shared((block_I, dim), dtype) if v_tile else None
            P_s = T.alloc_shared((block_H, block_I), dtype)
            valid = T.alloc_shared((topk,), "bool")
            rows = T.alloc_shared((topk,), "int32")
            acc_s = T.alloc_fragment((block_H, block_I), "float32")
            acc_o = T.alloc_fragment((block_H, dim), "float32")
            m = T.alloc_fragment((block_H,), "float32")
            m_prev = T.alloc_fragment((block_H,), "float32")
            row_sum = T.alloc_fragment((block_H,), "float32")
            l = T.alloc_fragment((block_H,), "float32")

            T.copy(q[s, hb * block_H:(hb + 1) * block_H, 0:dim], Q_s)
            T.copy(q[s, hb * block_H:(hb + 1) * block_H, dim:dim_qk], Q_tail_s)
            T.fill(acc_o, 0)
            T.fill(l, 0)
            T.fill(m, -T.infinity("float32"))
            # The token's chosen rows (a -1 is gathered as row 0 and scored -inf), then step 0's gathers in flight.
            for i in T.Parallel(topk):
                index = indices[s, i]
                valid[i] = index >= 0 and index < seq_kv
                rows[i] = T.min(T.max(index, 0), seq_kv - 1)
            gather(kv_fp8, kv_scale, k_pe, rows, KV8_s, scale_s, K_tail_s, 0, 0)
            for it in T.serial(steps):
                buf = it % kv_buffers
                T.ptx_wait_group(0)  # this step's rows have landed
                if kv_buffers == 2 and it + 1 < steps:
                    gather(kv_fp8, kv_scale, k_pe, rows, KV8_s, scale_s, K_tail_s, it + 1, 1 - buf)
                for i, t, d in T.Parallel(block_I, tiles, QUANT_TILE):  # the scale is the same along d: vectorizes
                    latent = T.cast(T.cast(KV8_s[buf, i, t * QUANT_TILE + d], "float32") * scale_s[buf, i, t], dtype)
                    KV_s[i, t * QUANT_TILE + d] = latent
                    if v_tile:
                        V_s[i, t * QUANT_TILE + d] = latent  # written from registers: no second pass over KV_s
                T.clear(acc_s)
                T.gemm(Q_s, KV_s, acc_s, transpose_B=True)
                T.gemm(Q_tail_s, K_tail_s[buf, :, :], acc_s, transpose_B=True)
                for h, i in T.Parallel(block_H, block_I):
                    acc_s[h, i] = T.if_then_else(valid[it * block_I + i], acc_s[h, i] * scale, -T.infinity("float32"))
                T.copy(m, m_prev)
                T.reduce_max(acc_s, m, dim=1, clear=False)
                for h, i in T.Parallel(block_H, block_I):
                    # a row with nothing valid yet keeps m = -inf: exp2(-inf - -inf) would be NaN
                    acc_s[h, i] = T.if_then_else(m[h] == -T.infinity("float32"), 0.0, T.exp2(acc_s[h, i] - m[h]))
                T.reduce_sum(acc_s, row_sum, dim=1)
                for h in T.Parallel(block_H):
                    rescale = T.if_then_else(m[h] == -T.infinity("float32"), 1.0, T.exp2(m_prev[h] - m[h]))
                    l[h] = l[h] * rescale + row_sum[h]
                    m_prev[h] = rescale
                for h, d in T.Parallel(block_H, dim):
                    acc_o[h, d] *= m_prev[h]
                T.copy(acc_s, P_s)
                if v_tile:
                    T.gemm(P_s, V_s, acc_o)
                else:
                    T.gemm(P_s, KV_s, acc_o)
                if kv_buffers == 1 and it + 1 < steps:
                    gather(kv_fp8, kv_scale, k_pe, rows, KV8_s, scale_s, K_tail_s, it + 1, 0)
            for h, d in T.Parallel(block_H, dim):
                acc_o[h, d] = T.if_then_else(l[h] == 0.0, 0.0, acc_o[h, d] / l[h])
            T.copy(acc_o, o[s, hb * block_H:(hb + 1) * block_H, :])

    return main


def quantize_cache(kv, dim):
    """A bfloat16 cache [S_kv, D + Dr] as the FP8 decode cache: fp8 latent, one float32 scale per 128 columns
    (amax / 448), bfloat16 rotary keys."""
    latent = kv[:, :dim].float().view(kv.shape[0], dim // QUANT_TILE, QUANT_TILE)
    scales = latent.abs().amax(dim=-1).clamp(min=1e-4) / 448.0
    kv_fp8 = (latent / scales[..., None]).view(kv.shape[0], dim).to(torch.float8_e4m3fn)
    return kv_fp8, scales.contiguous(), kv[:, dim:].contiguous()


def ref_program(q, kv_fp8, kv_scale, k_pe, indices):
    """Dense attention over the chosen rows of the dequantized cache, in float32: o [S, H, D] (0 where none)."""
    seq_kv, dim = kv_fp8.shape
    latent = (kv_fp8.float().view(seq_kv, -1, QUANT_TILE) * kv_scale[..., None]).view(seq_kv, dim)
    keys_all = torch.cat([latent.to(torch.bfloat16).float(), k_pe.float()], dim=-1)
    allowed = (indices >= 0) & (indices < seq_kv)
    keys = keys_all[indices.clamp(0, seq_kv - 1).long()]  # [S, topk, D + Dr]
    scores = torch.einsum("shd,std->sht", q.float(), keys) * q.shape[-1] ** -0.5
    scores = scores.masked_fill(~allowed[:, None, :], float("-inf"))
    p = torch.softmax(scores, dim=-1).nan_to_num(0.0)
    return torch.einsum("sht,std->shd", p, keys[..., :dim]).to(q.dtype)


def make_indices(seq, seq_kv, topk, device=device):
    """Each token picks `topk` distinct cache positions (up to all of them); the rest are -1."""
    indices = torch.full((seq, topk), -1, dtype=torch.int32, device=device)
    for t in range(seq):
        chosen = torch.randperm(seq_kv, device=device)[:topk]
        indices[t, :len(chosen)] = chosen.to(torch.int32)
    return indices


def main(seq=16, seq_kv=256, heads=64, topk=64, dim=512, tail_dim=64):
    q = torch.randn(seq, heads, dim + tail_dim, dtype=torch.bfloat16, device=device)
    kv_fp8, kv_scale, k_pe = quantize_cache(torch.randn(seq_kv, dim + tail_dim, dtype=torch.bfloat16, device=device),
                                            dim)
    indices = make_indices(seq, seq_kv, topk)
    kernel = sparse_mla_decode(seq, seq_kv, heads, dim, tail_dim, topk)
    out = kernel(q, kv_fp8, kv_scale, k_pe, indices)
    torch.testing.assert_close(out.float(), ref_program(q, kv_fp8, kv_scale, k_pe, indices).float(), rtol=2e-2,
                               atol=2e-2)
    print(f"sparse MLA decode, {seq} tokens x {heads} heads over {seq_kv} cached (FP8), top-{topk}: matches torch "
          f"on {device}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--seq", type=int, default=16)
    parser.add_argument("--seq-kv", type=int, default=256)
    parser.add_argument("--heads", type=int, default=64)
    parser.add_argument("--topk", type=int, default=64)
    args = parser.parse_args()
    main(args.seq, args.seq_kv, args.heads, args.topk)
