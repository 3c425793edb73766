"""FlashAttention forward in the classic TileLang form: multi-head or grouped-query attention, causal or not,
tensors laid out [batch, seq, heads, dim] ("bshd") or [batch, heads, seq, dim] ("bhsd").

Each block owns `block_M` query rows of one head and walks the keys `block_N` at a time with the online
softmax: S = Q K^T on a gemm, row maxima and sums on fragments, P = exp2(S - max) cast to half, O += P V on a
second gemm whose A operand is the fragment P. The script is written as for upstream TileLang (macros with
`T.SharedBuffer` / `T.FragmentBuffer` parameters, `T.Pipelined`, `T.GemmWarpPolicy.FullRow`); only the
device string is MUSA's. Without a MUSA device it runs in the CPU simulator.

    python examples/flash_attention/flash_attention.py --causal --groups 2 --layout bhsd
"""

import argparse

import torch
import torch.nn.functional as F

import tilelang
import tilelang.language as T

device = "musa" if hasattr(torch, "musa") and torch.musa.is_available() else "cpu"


@tilelang.jit(out_idx=[3], pass_configs={tilelang.PassConfigKey.TL_ENABLE_FAST_MATH: True})
def flash_attention(batch, heads, seq_len, dim, is_causal, groups=1, layout="bshd", block_M=64, block_N=64,
                    num_stages=1, threads=128, policy=T.GemmWarpPolicy.FullRow):
    scale = (1.0 / dim) ** 0.5 * 1.44269504  # exp(x) = exp2(x * log2(e)): the row softmax in base 2
    kv_heads = heads // groups
    q_shape = [batch, seq_len, heads, dim] if layout == "bshd" else [batch, heads, seq_len, dim]
    kv_shape = [batch, seq_len, kv_heads, dim] if layout == "bshd" else [batch, kv_heads, seq_len, dim]
    dtype, accum_dtype = "float16", "float"

    def rows(X, b, h, start, count):
        """Rows [start, start + count) of head h of batch b: a [count, dim] tile of X."""
        if layout == "bshd":
            return X[b, start:start + count, h, :]
        return X[b, h, start:start + count, :]

    @T.macro
    def attention_scores(
        Q_shared: T.SharedBuffer([block_M, dim], dtype),
        K_shared: T.SharedBuffer([block_N, dim], dtype),
        acc_s: T.FragmentBuffer([block_M, block_N], accum_dtype),
        q_start: T.int32,
        k_start: T.int32,
    ):
        # Keys past the sequence end (the last, partial block) and, if causal, keys after the query are masked.
        for i, j in T.Parallel(block_M, block_N):
            visible = k_start + j < seq_len
            if is_causal:
                visible = visible and q_start + i >= k_start + j
            acc_s[i, j] = T.if_then_else(visible, 0, -T.infinity(accum_dtype))
        T.gemm(Q_shared, K_shared, acc_s, transpose_B=True, policy=policy)

    @T.macro
    def online_softmax(
        acc_s: T.FragmentBuffer([block_M, block_N], accum_dtype),
        acc_s_cast: T.FragmentBuffer([block_M, block_N], dtype),
        scores_max: T.FragmentBuffer([block_M], accum_dtype),
        scores_max_prev: T.FragmentBuffer([block_M], accum_dtype),
        scores_scale: T.FragmentBuffer([block_M], accum_dtype),
        scores_sum: T.FragmentBuffer([block_M], accum_dtype),
        logsum: T.FragmentBuffer([block_M], accum_dtype),
    ):
        T.copy(scores_max, scores_max_prev)
        T.fill(scores_max, -T.infinity(accum_dtype))
        T.reduce_max(acc_s, scores_max, dim=1, clear=False)
        # A row whose keys in this block are all masked keeps its running maximum.
        for i in T.Parallel(block_M):
            scores_max[i] = T.max(scores_max[i], scores_max_prev[i])
        for i in T.Parallel(block_M):
            scores_scale[i] = T.exp2(scores_max_prev[i] * scale - scores_max[i] * scale)
        for i, j in T.Parallel(block_M, block_N):
            acc_s[i, j] = T.exp2(acc_s[i, j] * scale - scores_max[i] * scale)
        T.reduce_sum(acc_s, scores_sum, dim=1)
        for i in T.Parallel(block_M):
            logsum[i] = logsum[i] * scores_scale[i] + scores_sum[i]
        T.copy(acc_s, acc_s_cast)

    @T.macro
    def rescale(
        acc_o: T.FragmentBuffer([block_M, dim], accum_dtype),
        scores_scale: T.FragmentBuffer([block_M], accum_dtype),
    ):
        for i, j in T.Parallel(block_M, dim):
            acc_o[i, j] *= scores_scale[i]

    @T.prim_func
    def main(
        Q: T.Tensor(q_shape, dtype),
        K: T.Tensor(kv_shape, dtype),
        V: T.Tensor(kv_shape, dtype),
        Output: T.Tensor(q_shape, dtype),
    ):
        with T.Kernel(T.ceildiv(seq_len, block_M), heads, batch, threads=threads) as (bx, by, bz):
            Q_shared = T.alloc_shared([block_M, dim], dtype)
            K_shared = T.alloc_shared([block_N, dim], dtype)
            V_shared = T.alloc_shared([block_N, dim], dtype)
            O_shared = T.alloc_shared([block_M, dim], dtype)
            acc_s = T.alloc_fragment([block_M, block_N], accum_dtype)
            acc_s_cast = T.alloc_fragment([block_M, block_N], dtype)
            acc_o = T.alloc_fragment([block_M, dim], accum_dtype)
            scores_max = T.alloc_fragment([block_M], accum_dtype)
            scores_max_prev = T.alloc_fragment([block_M], accum_dtype)
            scores_scale = T.alloc_fragment([block_M], accum_dtype)
            scores_sum = T.alloc_fragment([block_M], accum_dtype)
            logsum = T.alloc_fragment([block_M], accum_dtype)

            kv_head = by // groups
            T.copy(rows(Q, bz, by, bx * block_M, block_M), Q_shared)
            T.fill(acc_o, 0)
            T.fill(logsum, 0)
            T.fill(scores_max, -T.infinity(accum_dtype))

            loop_range = (T.min(T.ceildiv(seq_len, block_N), T.ceildiv((bx + 1) * block_M, block_N))
                          if is_causal else T.ceildiv(seq_len, block_N))
            for k in T.Pipelined(loop_range, num_stages=num_stages):
                T.copy(rows(K, bz, kv_head, k * block_N, block_N), K_shared)
                attention_scores(Q_shared, K_shared, acc_s, bx * block_M, k * block_N)
                online_softmax(acc_s, acc_s_cast, scores_max, scores_max_prev, scores_scale, scores_sum, logsum)
                rescale(acc_o, scores_scale)
                T.copy(rows(V, bz, kv_head, k * block_N, block_N), V_shared)
                T.gemm(acc_s_cast, V_shared, acc_o, policy=policy)
            for i, j in T.Parallel(block_M, dim):
                acc_o[i, j] /= logsum[i]
            T.copy(acc_o, O_shared)
            T.copy(O_shared, rows(Output, bz, by, bx * block_M, block_M))

    return main


def ref_program(Q, K, V, is_causal, groups=1, layout="bshd"):
    """softmax(Q K^T / sqrt(dim)) V in float32, each query head attending to its group's key/value head."""
    if layout == "bshd":
        Q, K, V = (x.transpose(1, 2) for x in (Q, K, V))
    K, V = (x.float().repeat_interleave(groups, dim=1) for x in (K, V))
    out = F.scaled_dot_product_attention(Q.float(), K, V, is_causal=is_causal)
    return out.transpose(1, 2) if layout == "bshd" else out


def main(batch=1, heads=4, seq_len=256, dim=64, is_causal=False, groups=1, layout="bshd"):
    kernel = flash_attention(batch, heads, seq_len, dim, is_causal, groups=groups, layout=layout)
    q_shape = (batch, seq_len, heads, dim) if layout == "bshd" else (batch, heads, seq_len, dim)
    kv_shape = (batch, seq_len, heads // groups, dim) if layout == "bshd" else (batch, heads // groups, seq_len, dim)
    Q = torch.randn(q_shape, dtype=torch.float16, device=device)
    K = torch.randn(kv_shape, dtype=torch.float16, device=device)
    V = torch.randn(kv_shape, dtype=torch.float16, device=device)
    out = kernel(Q, K, V)
    ref = ref_program(Q, K, V, is_causal, groups, layout)
    torch.testing.assert_close(out.float(), ref.float(), rtol=1e-2, atol=1e-2)
    kind = "GQA" if groups > 1 else "MHA"
    print(f"flash attention ({kind}, {layout}, causal={is_causal}) {batch}x{heads}x{seq_len}x{dim}: matches torch "
          f"on {device}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--seq_len", type=int, default=256)
    parser.add_argument("--dim", type=int, default=64)
    parser.add_argument("--groups", type=int, default=1, help="query heads per key/value head (GQA when > 1)")
    parser.add_argument("--layout", choices=["bshd", "bhsd"], default="bshd")
    parser.add_argument("--causal", action="store_true")
    args = parser.parse_args()
    main(args.batch, args.heads, args.seq_len, args.dim, args.causal, args.groups, args.layout)
