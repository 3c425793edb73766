"""Sparse MLA forward (DeepSeek-V3.2's sparse attention over a compressed KV cache), prefill: each query token
attends to the `topk` cache positions an indexer chose for it, not to every earlier token.

    q       [S, H, D + Dr]   queries: the latent part (D = 512) and the rotary part (Dr = 64)
    kv      [S_kv, D + Dr]   the cache: keys are whole rows, values their first D columns
    indices [S, topk]        the chosen positions (-1: none; a position after the token's own is masked too)
    o       [S, H, D]        softmax(q k^T * scale) v over the chosen positions

A block owns one token and `block_H` of its heads. It stages the token's chosen rows (`rows`, `valid`) in
shared memory once, then walks them `block_I` at a time: gathers those cache rows into `KV_s` [block_I, D] and
`K_tail_s` [block_I, Dr] with asynchronous copies (a T.Parallel nest of element `T.async_copy`s, which the compiler
cuts into 16-byte row pieces issued as one group), scores them with `Q_s @ KV_s^T + Q_tail_s @ K_tail_s^T` (two
gemms into one accumulator), keeps an online softmax (FlashAttention's), and accumulates `P @ V`. With
`kv_buffers=2` the next step's rows land in the other buffer while this step computes. SQMMA (mp_31) reads a
shared tile in one major, and the score gemm reads the rows K-major where `P @ V` reads them MN-major, so with
`v_tile=True` the landed rows are copied into `V_s` (laid out for `P @ V`) and all three gemms run on SQMMA.
On mp_22 (MTT S4000: 72 KiB of shared memory a block) the tiles must shrink to block_H=32, block_I=16 with one
buffer and no V_s (its warp MMA reads one tile both ways); the score gemm (N = 16, under the warp MMA's 32) runs
as FMA code. Only the device string is MUSA's; without a MUSA device it runs in the CPU simulator.

    python examples/sparse_mla/sparse_mla_fwd.py --seq 64 --seq-kv 256 --heads 64 --topk 128
"""

import argparse

import torch

import tilelang
import tilelang.language as T

device = "musa" if hasattr(torch, "musa") and torch.musa.is_available() else "cpu"


@tilelang.jit(out_idx=[3])
def sparse_mla_fwd(seq, seq_kv, heads, dim, tail_dim, topk, block_H=64, block_I=32, threads=256, v_tile=True, kv_buffers=2,
                   dtype="bfloat16"):
    dim_qk = dim + tail_dim
    scale = dim_qk**-0.5 * 1.44269504  # log2(e): the softmax runs on exp2
    assert heads % block_H == 0 and topk % block_I == 0
    steps = topk // block_I

    @T.macro
    def gather(kv, rows, KV_s, K_tail_s, step, buf):
        """Issue step `step`'s rows into buffer `buf`: two groups of asynchronous 16-byte row pieces."""
        for i, d in T.Parallel(block_I, dim):
            T.async_copy(kv[rows[step * block_I + i], d], KV_s[buf, i, d])
        for i, d in T.Parallel(block_I, tail_dim):
            T.async_copy(kv[rows[step * block_I + i], dim + d], K_tail_s[buf, i, d])

    @T.prim_func
    def main(
        q: T.Tensor((seq, heads, dim_qk), dtype),
        kv: T.Tensor((seq_kv, dim_qk), dtype),
        indices: T.Tensor((seq, topk), "int32"),
        o: T.Tensor((seq, heads, dim), dtype),
    ):
        with T.Kernel(seq, heads // block_H, threads=threads) as (s, hb):
            Q_s = T.alloc_shared((block_H, dim), dtype)
            Q_tail_s = T.alloc_shared((block_H, tail_dim), dtype)
            KV_s = T.alloc_shared((kv_buffers, block_I, dim), dtype)
            K_tail_s = T.alloc_shared((kv_buffers, block_I, tail_dim), dtype)
            V_s = T.alloc_shared((block_I, dim), dtype) if v_tile else None
            P_s = T.alloc_shared((block_H, block_I), dtype)
            valid = T.alloc_shared((topk,), "bool")  # every step's, staged once: no index load between steps
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
            # The token's chosen rows (masked: invalid or after the token), then step 0's gathers in flight (one
            # group per T.async_copy nest). A masked row is gathered too (row 0 for -1) and scored -inf.
            for i in T.Parallel(topk):
                index = indices[s, i]
                valid[i] = index >= 0 and index <= seq_kv - seq + s  # causal: the token's own row is the last
                rows[i] = T.max(index, 0)
            gather(kv, rows, KV_s, K_tail_s, 0, 0)
            for it in T.serial(steps):
                buf = it % kv_buffers
                T.ptx_wait_group(0)  # this step's rows have landed (in KV_s[buf], K_tail_s[buf])
                if kv_buffers == 2 and it + 1 < steps:
                    gather(kv, rows, KV_s, K_tail_s, it + 1, 1 - buf)  # the next step's rows land while this step computes
                if v_tile:
                    for i, d in T.Parallel(block_I, dim):
                        V_s[i, d] = KV_s[buf, i, d]
                T.clear(acc_s)
                T.gemm(Q_s, KV_s[buf, :, :], acc_s, transpose_B=True)
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
                    T.gemm(P_s, KV_s[buf, :, :], acc_o)
                if kv_buffers == 1 and it + 1 < steps:
                    gather(kv, rows, KV_s, K_tail_s, it + 1, 0)
            for h, d in T.Parallel(block_H, dim):
                acc_o[h, d] = T.if_then_else(l[h] == 0.0, 0.0, acc_o[h, d] / l[h])
            T.copy(acc_o, o[s, hb * block_H:(hb + 1) * block_H, :])

    return main


def ref_program(q, kv, indices, dim):
    """Masked dense attention over the chosen rows, in float32: o [S, H, dim] (zeros where nothing is chosen)."""
    seq, seq_kv = q.shape[0], kv.shape[0]
    allowed = (indices >= 0) & (indices <= (seq_kv - seq + torch.arange(seq))[:, None])
    keys = kv.float()[indices.clamp(min=0).long()]  # [S, topk, D + Dr]
    scores = torch.einsum("shd,std->sht", q.float(), keys) * q.shape[-1] ** -0.5
    scores = scores.masked_fill(~allowed[:, None, :], float("-inf"))
    p = torch.softmax(scores, dim=-1).nan_to_num(0.0)
    return torch.einsum("sht,std->shd", p, keys[..., :dim]).to(q.dtype)


def make_indices(seq, seq_kv, topk, device=device):
    """Each token picks up to `topk` distinct earlier (or its own) positions; the rest are -1."""
    indices = torch.full((seq, topk), -1, dtype=torch.int32, device=device)
    for t in range(seq):
        visible = seq_kv - seq + t + 1
        chosen = torch.randperm(visible, device=device)[:topk]
        indices[t, :len(chosen)] = chosen.to(torch.int32)
    return indices


def main(seq=64, seq_kv=256, heads=64, topk=128, dim=512, tail_dim=64):
    q = torch.randn(seq, heads, dim + tail_dim, dtype=torch.bfloat16, device=device)
    kv = torch.randn(seq_kv, dim + tail_dim, dtype=torch.bfloat16, device=device)
    indices = make_indices(seq, seq_kv, topk)
    kernel = sparse_mla_fwd(seq, seq_kv, heads, dim, tail_dim, topk)
    out = kernel(q, kv, indices)
    torch.testing.assert_close(out.float(), ref_program(q, kv, indices, dim).float(), rtol=2e-2, atol=2e-2)
    print(f"sparse MLA forward, {seq} tokens x {heads} heads over {seq_kv} cached, top-{topk}: matches torch on "
          f"{device}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--seq", type=int, default=64)
    parser.add_argument("--seq-kv", type=int, default=256)
    parser.add_argument("--heads", type=int, default=64)
    parser.add_argument("--topk", type=int, default=128)
    args = parser.parse_args()
    main(args.seq, args.seq_kv, args.heads, args.topk)
