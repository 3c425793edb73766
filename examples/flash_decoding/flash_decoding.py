"""Flash decoding: attention of one query token per sequence against a long key/value cache, split along the
cache so that many blocks work on one sequence (multi-head, or grouped-query when `kv_heads < heads`).

Shapes: Q [batch, heads, dim], K and V [batch, seqlen_kv, kv_heads, dim], Output [batch, heads, dim]; query head
h reads key/value head h // (heads // kv_heads). Two kernels in one prim_func, launched in order:

1. `flash_attn_split`, grid (batch, kv_heads, num_split): the block takes the query heads of one key/value head
   (a `block_H`-row tile, padded when fewer heads share it) and one contiguous slice of the cache, and runs the
   online softmax over it `block_N` keys at a time (S = Q K^T on `T.gemm`, row max/sum with `T.reduce_max` /
   `T.reduce_sum`, O += P V on a second gemm). It writes the slice's normalised partial output and its
   log-sum-exp (base 2) to the workspaces `Output_partial` and `glse`.
2. `combine`, grid (heads, batch): rescales the num_split partial outputs of a head by exp2(lse_s - lse) and sums
   them, lse being the log-sum-exp over all slices.

The script is written as for upstream TileLang (macros holding the `T.Kernel` scopes); only the device string is
MUSA's. Without a MUSA device it runs in the CPU simulator.

    python examples/flash_decoding/flash_decoding.py --heads 8 --kv_heads 2 --seqlen_kv 512 --num_split 4
"""

import argparse

import torch
import torch.nn.functional as F

import tilelang
import tilelang.language as T

device = "musa" if hasattr(torch, "musa") and torch.musa.is_available() else "cpu"


@tilelang.jit(out_idx=[-1])
def flash_decoding(batch, heads, kv_heads, seqlen_kv, dim, num_split=4, block_N=32, block_H=64, threads=128):
    assert heads % kv_heads == 0 and seqlen_kv % num_split == 0
    group_size = heads // kv_heads  # query heads per key/value head
    assert group_size <= block_H
    split_len = seqlen_kv // num_split
    scale = (1.0 / dim) ** 0.5 * 1.44269504  # softmax in base 2: exp(x) = exp2(x * log2(e))
    dtype, accum_dtype = "float16", "float"
    q_shape, kv_shape = [batch, heads, dim], [batch, seqlen_kv, kv_heads, dim]
    part_shape = [batch, heads, num_split, dim]

    @T.macro
    def flash_attn_split(
        Q: T.Tensor(q_shape, dtype),
        K: T.Tensor(kv_shape, dtype),
        V: T.Tensor(kv_shape, dtype),
        glse: T.Tensor([batch, heads, num_split], accum_dtype),
        Output_partial: T.Tensor(part_shape, accum_dtype),
    ):
        with T.Kernel(batch, kv_heads, num_split, threads=threads) as (bid, kv_head, sid):
            Q_shared = T.alloc_shared([block_H, dim], dtype)
            K_shared = T.alloc_shared([block_N, dim], dtype)
            V_shared = T.alloc_shared([block_N, dim], dtype)
            acc_s = T.alloc_fragment([block_H, block_N], accum_dtype)
            acc_s_cast = T.alloc_fragment([block_H, block_N], dtype)
            acc_o = T.alloc_fragment([block_H, dim], accum_dtype)
            scores_max = T.alloc_fragment([block_H], accum_dtype)
            scores_max_prev = T.alloc_fragment([block_H], accum_dtype)
            scores_scale = T.alloc_fragment([block_H], accum_dtype)
            scores_sum = T.alloc_fragment([block_H], accum_dtype)
            logsum = T.alloc_fragment([block_H], accum_dtype)

            head0 = kv_head * group_size
            split_start = sid * split_len
            # Rows past the group's heads read the next heads (or zeros past the end); they are never stored.
            T.copy(Q[bid, head0:head0 + block_H, :], Q_shared)
            T.fill(acc_o, 0)
            T.fill(logsum, 0)
            T.fill(scores_max, -T.infinity(accum_dtype))

            for k in T.Pipelined(T.ceildiv(split_len, block_N), num_stages=1):
                T.copy(K[bid, split_start + k * block_N:split_start + (k + 1) * block_N, kv_head, :], K_shared)
                T.clear(acc_s)
                T.gemm(Q_shared, K_shared, acc_s, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
                # keys past this split's slice (its last, partial block) are masked
                for i, j in T.Parallel(block_H, block_N):
                    acc_s[i, j] = T.if_then_else(k * block_N + j < split_len, acc_s[i, j], -T.infinity(accum_dtype))
                T.copy(scores_max, scores_max_prev)
                T.fill(scores_max, -T.infinity(accum_dtype))
                T.reduce_max(acc_s, scores_max, dim=1, clear=False)
                for i in T.Parallel(block_H):
                    scores_max[i] = T.max(scores_max[i], scores_max_prev[i])
                    scores_scale[i] = T.exp2(scores_max_prev[i] * scale - scores_max[i] * scale)
                for i, j in T.Parallel(block_H, block_N):
                    acc_s[i, j] = T.exp2(acc_s[i, j] * scale - scores_max[i] * scale)
                T.reduce_sum(acc_s, scores_sum, dim=1)
                for i in T.Parallel(block_H):
                    logsum[i] = logsum[i] * scores_scale[i] + scores_sum[i]
                T.copy(acc_s, acc_s_cast)
                for i, j in T.Parallel(block_H, dim):
                    acc_o[i, j] *= scores_scale[i]
                T.copy(V[bid, split_start + k * block_N:split_start + (k + 1) * block_N, kv_head, :], V_shared)
                T.gemm(acc_s_cast, V_shared, acc_o, policy=T.GemmWarpPolicy.FullRow)
            for i, j in T.Parallel(block_H, dim):
                acc_o[i, j] /= logsum[i]
            for i in T.Parallel(block_H):
                logsum[i] = T.log2(logsum[i]) + scores_max[i] * scale
            for i in T.Parallel(block_H):
                if i < group_size:
                    glse[bid, head0 + i, sid] = logsum[i]
            for i, j in T.Parallel(block_H, dim):
                if i < group_size:
                    Output_partial[bid, head0 + i, sid, j] = acc_o[i, j]

    @T.macro
    def combine(
        glse: T.Tensor([batch, heads, num_split], accum_dtype),
        Output_partial: T.Tensor(part_shape, accum_dtype),
        Output: T.Tensor(q_shape, dtype),
    ):
        with T.Kernel(heads, batch, threads=dim) as (hid, bid):
            o_accum = T.alloc_fragment([dim], accum_dtype)
            lse_max = T.alloc_local([1], accum_dtype)
            lse_sum = T.alloc_local([1], accum_dtype)
            weight = T.alloc_local([1], accum_dtype)

            # lse = log2(sum_s exp2(lse_s)), computed about the largest lse_s
            lse_max[0] = -T.infinity(accum_dtype)
            for s in T.serial(num_split):
                lse_max[0] = T.max(lse_max[0], glse[bid, hid, s])
            lse_sum[0] = 0
            for s in T.serial(num_split):
                lse_sum[0] += T.exp2(glse[bid, hid, s] - lse_max[0])
            T.clear(o_accum)
            for s in T.serial(num_split):
                weight[0] = T.exp2(glse[bid, hid, s] - lse_max[0]) / lse_sum[0]
                for i in T.Parallel(dim):
                    o_accum[i] += Output_partial[bid, hid, s, i] * weight[0]
            T.copy(o_accum, Output[bid, hid, :])

    @T.prim_func
    def main(
        Q: T.Tensor(q_shape, dtype),
        K: T.Tensor(kv_shape, dtype),
        V: T.Tensor(kv_shape, dtype),
        glse: T.Tensor([batch, heads, num_split], accum_dtype),
        Output_partial: T.Tensor(part_shape, accum_dtype),
        Output: T.Tensor(q_shape, dtype),
    ):
        flash_attn_split(Q, K, V, glse, Output_partial)
        combine(glse, Output_partial, Output)

    return main


def ref_program(Q, K, V):
    """softmax(q K^T / sqrt(dim)) V for the one query token of each head, in float32."""
    group_size = Q.shape[1] // K.shape[2]
    K, V = (x.float().transpose(1, 2).repeat_interleave(group_size, dim=1) for x in (K, V))  # [b, h, s, d]
    return F.scaled_dot_product_attention(Q.float().unsqueeze(2), K, V).squeeze(2)


def main(batch=2, heads=8, kv_heads=2, seqlen_kv=512, dim=64, num_split=4):
    kernel = flash_decoding(batch, heads, kv_heads, seqlen_kv, dim, num_split)
    Q = torch.randn((batch, heads, dim), dtype=torch.float16, device=device)
    K = torch.randn((batch, seqlen_kv, kv_heads, dim), dtype=torch.float16, device=device)
    V = torch.randn((batch, seqlen_kv, kv_heads, dim), dtype=torch.float16, device=device)
    glse = torch.empty((batch, heads, num_split), dtype=torch.float32, device=device)
    Output_partial = torch.empty((batch, heads, num_split, dim), dtype=torch.float32, device=device)
    out = kernel(Q, K, V, glse, Output_partial)
    torch.testing.assert_close(out.float(), ref_program(Q, K, V), rtol=1e-2, atol=1e-2)
    kind = "GQA" if kv_heads < heads else "MHA"
    print(f"flash decoding ({kind}) batch={batch} heads={heads} kv_heads={kv_heads} seqlen_kv={seqlen_kv} "
          f"dim={dim}, {num_split} splits: matches torch on {device}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--kv_heads", type=int, default=2)
    parser.add_argument("--seqlen_kv", type=int, default=512)
    parser.add_argument("--dim", type=int, default=64)
    parser.add_argument("--num_split", type=int, default=4)
    args = parser.parse_args()
    main(args.batch, args.heads, args.kv_heads, args.seqlen_kv, args.dim, args.num_split)
