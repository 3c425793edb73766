"""Sparse attention over gathered key/value rows (DeepSeek's sparse MLA shape, simplified): each query token attends
to the `topk` rows of a shared key/value tensor named by `Indices`, some of them invalid (-1, or past the end).

The rows are gathered into shared memory by LDLMS asynchronous copies through a *robust descriptor* covering one
batch's key/value rows, as Moore Threads' sparse MLA kernels do: a gathered row whose index points outside the
descriptor reads as zeros instead of faulting, so the copies need no per-row guard
(TL_DISABLE_SAFE_ROBUST_COPY_PREDICATION drops the compiler's own one); the invalid rows are then masked out of the
softmax. `T.lma_wait()` orders this warp's reads of the gathered tile before it is overwritten by the next gather.

    python examples/async/sparse_attention_robust.py
"""

import torch

import tilelang
import tilelang.language as T

device = "musa" if hasattr(torch, "musa") and torch.musa.is_available() else "cpu"


@tilelang.jit(target="musa -arch=mp_31", out_idx=[3], pass_configs={
    tilelang.PassConfigKey.TL_ENABLE_FAST_MATH: True,
    tilelang.PassConfigKey.TL_DISABLE_SAFE_ROBUST_COPY_PREDICATION: True,
})
def sparse_attention(batch, seq_len, seq_kv, heads, dim, topk, block_I=64, threads=128):
    scale = (1.0 / dim) ** 0.5 * 1.44269504
    dtype, accum_dtype = "float16", "float"
    assert topk % block_I == 0 and dim % 8 == 0

    @T.prim_func
    def main(Q: T.Tensor([batch, seq_len, heads, dim], dtype), KV: T.Tensor([batch, seq_kv, dim], dtype),
             Indices: T.Tensor([batch, seq_len, topk], "int32"), Output: T.Tensor([batch, seq_len, heads, dim], dtype)):
        with T.Kernel(seq_len, batch, threads=threads) as (s, b):
            Q_shared = T.alloc_shared([heads, dim], dtype)
            K_shared = T.alloc_shared([block_I, dim], dtype)  # the gathered rows as keys (read K-major) ...
            V_shared = T.alloc_shared([block_I, dim], dtype)  # ... and as values (read N-major: another swizzle)
            valid = T.alloc_shared([block_I], "bool")
            acc_s = T.alloc_fragment([heads, block_I], accum_dtype)
            acc_s_cast = T.alloc_fragment([heads, block_I], dtype)
            acc_o = T.alloc_fragment([heads, dim], accum_dtype)
            row_max = T.alloc_fragment([heads], accum_dtype)
            row_max_prev = T.alloc_fragment([heads], accum_dtype)
            row_scale = T.alloc_fragment([heads], accum_dtype)
            row_sum = T.alloc_fragment([heads], accum_dtype)
            logsum = T.alloc_fragment([heads], accum_dtype)

            # Bytes outside batch b's key/value rows read as zero through this descriptor.
            kv_desc = T.make_robust_desc(T.address_of(KV[b, 0, 0]), seq_kv * dim * 2)

            T.copy(Q[b, s, :, :], Q_shared)
            T.fill(acc_o, 0)
            T.fill(logsum, 0)
            T.fill(row_max, -T.infinity(accum_dtype))
            for t in T.serial(topk // block_I):
                for i in T.Parallel(block_I):
                    index = Indices[b, s, t * block_I + i]
                    valid[i] = index >= 0 and index < seq_kv
                for i, c in T.Parallel(block_I, dim // 8):  # one 16-byte piece of a gathered row per thread
                    row = Indices[b, s, t * block_I + i]
                    for v in T.vectorized(8):
                        T.copy(KV[b, row, c * 8 + v], K_shared[i, c * 8 + v], force_async_copy=True,
                               src_robust_desc=kv_desc)
                    for v in T.vectorized(8):
                        T.copy(KV[b, row, c * 8 + v], V_shared[i, c * 8 + v], force_async_copy=True,
                               src_robust_desc=kv_desc)
                T.call_extern("void", "__musa_memcpy_g2s_commit_group")
                T.call_extern("void", "__musa_memcpy_g2s_wait_group", 0)
                T.sync_threads()

                for h, i in T.Parallel(heads, block_I):
                    acc_s[h, i] = T.if_then_else(valid[i], 0, -T.infinity(accum_dtype))
                T.gemm(Q_shared, K_shared, acc_s, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
                T.copy(row_max, row_max_prev)
                T.reduce_max(acc_s, row_max, dim=1, clear=False)
                for h in T.Parallel(heads):
                    row_scale[h] = T.exp2(row_max_prev[h] * scale - row_max[h] * scale)
                for h, i in T.Parallel(heads, block_I):
                    acc_s[h, i] = T.exp2(acc_s[h, i] * scale - row_max[h] * scale)
                T.reduce_sum(acc_s, row_sum, dim=1)
                for h in T.Parallel(heads):
                    logsum[h] = logsum[h] * row_scale[h] + row_sum[h]
                T.copy(acc_s, acc_s_cast)
                for h, d in T.Parallel(heads, dim):
                    acc_o[h, d] *= row_scale[h]
                T.gemm(acc_s_cast, V_shared, acc_o, policy=T.GemmWarpPolicy.FullRow)
                T.lma_wait()  # this warp's reads of V_shared are done before the next gather overwrites it
                T.sync_threads()
            for h, d in T.Parallel(heads, dim):
                acc_o[h, d] /= logsum[h]
            T.copy(acc_o, Output[b, s, :, :])

    return main


def reference(Q, KV, Indices):
    batch, seq_len, heads, dim = Q.shape
    seq_kv = KV.shape[1]
    valid = (Indices >= 0) & (Indices < seq_kv)
    rows = KV.float()[torch.arange(batch)[:, None, None], Indices.clamp(0, seq_kv - 1).long()]  # [b, s, topk, d]
    scores = torch.einsum("bshd,bskd->bshk", Q.float(), rows) / dim ** 0.5
    scores = scores.masked_fill(~valid[:, :, None, :], float("-inf"))
    return torch.einsum("bshk,bskd->bshd", scores.softmax(-1), rows).to(Q.dtype)


def main(batch=2, seq_len=4, seq_kv=200, heads=64, dim=64, topk=128):
    kernel = sparse_attention(batch, seq_len, seq_kv, heads, dim, topk)
    g = torch.Generator().manual_seed(0)
    Q = torch.randn(batch, seq_len, heads, dim, generator=g).to(torch.float16).to(device)
    KV = torch.randn(batch, seq_kv, dim, generator=g).to(torch.float16).to(device)
    Indices = torch.randint(0, seq_kv, (batch, seq_len, topk), generator=g, dtype=torch.int32)
    Indices[:, :, 1::7] = -1  # invalid rows: before the start ...
    Indices[:, :, 3::11] = seq_kv + 5  # ... and past the end of a batch's rows
    Indices = Indices.to(device)
    out = kernel(Q, KV, Indices)
    torch.testing.assert_close(out.float(), reference(Q, KV, Indices).float(), rtol=1e-2, atol=1e-2)
    print(f"sparse_attention b={batch} s={seq_len} kv={seq_kv} h={heads} d={dim} topk={topk}: matches torch on {device}")


if __name__ == "__main__":
    main()
