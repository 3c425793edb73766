"""FlashAttention forward with explicit warp specialization, in the style of Moore Threads' own S5000 kernel
(TileLang-MUSA's benchmark/mp31 example_mha_fwd_bhsd.py: 343 TFLOPS at B=2, H=28, S=8192, D=128 on an MTT S5000).

The block has four consumer squads (512 threads) and one producer squad (128 threads):

    producer (T.ws(4))   K by LDLMS async copies (every producer thread copies its share, waits for its own
                         copies, then its warp arrives on k_ready), V by the copy engine (TME; the elected thread
                         arrives on v_ready, the engine adds the bytes)
    consumers (T.ws(0, 1, 2, 3))   S = Q K^T on SQMMA, the online softmax on fragments, P staged through shared
                         memory, O += P V on SQMMA; each consumer warp arrives on k_free / v_free when done reading

Each barrier is used once per key block, so the waits alternate parity: consumers wait `k_ready` with parity k & 1,
the producer waits `k_free` with parity (k & 1) ^ 1 (its first wait passes on the fresh barrier). Q is loaded once by
TME before the split. Without a MUSA device it runs in the CPU simulator.

    python examples/async/flash_attention_ws.py
"""

import torch
import torch.nn.functional as F

import tilelang
import tilelang.language as T

device = "musa" if hasattr(torch, "musa") and torch.musa.is_available() else "cpu"

SQUAD = 128


@tilelang.jit(target="musa -arch=mp_31", out_idx=[3], pass_configs={tilelang.PassConfigKey.TL_ENABLE_FAST_MATH: True})
def flash_attention_ws(batch, heads, seq_len, dim, block_M=256, block_N=64, consumer_threads=4 * SQUAD,
                       producer_threads=SQUAD):
    scale = (1.0 / dim) ** 0.5 * 1.44269504  # exp(x) = exp2(x * log2(e))
    shape = [batch, heads, seq_len, dim]
    dtype, accum_dtype = "float16", "float"

    @T.prim_func
    def main(Q: T.Tensor(shape, dtype), K: T.Tensor(shape, dtype), V: T.Tensor(shape, dtype),
             Output: T.Tensor(shape, dtype)):
        with T.Kernel(T.ceildiv(seq_len, block_M), heads, batch,
                      threads=consumer_threads + producer_threads) as (bx, by, bz):
            Q_shared = T.alloc_shared([block_M, dim], dtype)
            K_shared = T.alloc_shared([block_N, dim], dtype)
            V_shared = T.alloc_shared([block_N, dim], dtype)
            P_shared = T.alloc_shared([block_M, block_N], dtype)
            acc_s = T.alloc_fragment([block_M, block_N], accum_dtype)
            acc_s_cast = T.alloc_fragment([block_M, block_N], dtype)
            acc_o = T.alloc_fragment([block_M, dim], accum_dtype)
            scores_max = T.alloc_fragment([block_M], accum_dtype)
            scores_max_prev = T.alloc_fragment([block_M], accum_dtype)
            scores_scale = T.alloc_fragment([block_M], accum_dtype)
            scores_sum = T.alloc_fragment([block_M], accum_dtype)
            logsum = T.alloc_fragment([block_M], accum_dtype)

            q_ready = T.alloc_barrier(1)
            k_ready = T.alloc_barrier(producer_threads)
            k_free = T.alloc_barrier(consumer_threads)
            v_ready = T.alloc_barrier(1)
            v_free = T.alloc_barrier(consumer_threads)

            tx = T.get_thread_binding()
            num_blocks = T.ceildiv(seq_len, block_N)

            T.tma_copy(Q[bz, by, bx * block_M:(bx + 1) * block_M, :], Q_shared, barrier=q_ready)
            if tx == 0:
                T.barrier_arrive(q_ready)

            with T.ws(4):
                for k in T.serial(num_blocks):
                    T.barrier_wait(k_free, (k & 1) ^ 1)
                    T.async_copy(K[bz, by, k * block_N:(k + 1) * block_N, :], K_shared)
                    T.ptx_wait_group(0)
                    T.barrier_arrive(k_ready)

                    T.barrier_wait(v_free, (k & 1) ^ 1)
                    T.tma_copy(V[bz, by, k * block_N:(k + 1) * block_N, :], V_shared, barrier=v_ready)
                    if tx == consumer_threads:
                        T.barrier_arrive(v_ready)

            with T.ws(0, 1, 2, 3):
                T.fill(acc_o, 0)
                T.fill(logsum, 0)
                T.fill(scores_max, -T.infinity(accum_dtype))
                T.barrier_wait(q_ready, 0)
                for k in T.serial(num_blocks):
                    T.barrier_wait(k_ready, k & 1)
                    for i, j in T.Parallel(block_M, block_N):  # keys past the end (the last block) are masked
                        acc_s[i, j] = T.if_then_else(k * block_N + j < seq_len, 0, -T.infinity(accum_dtype))
                    T.gemm(Q_shared, K_shared, acc_s, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
                    T.barrier_arrive(k_free)

                    T.copy(scores_max, scores_max_prev)
                    T.reduce_max(acc_s, scores_max, dim=1, clear=False)
                    for i in T.Parallel(block_M):
                        scores_scale[i] = T.exp2(scores_max_prev[i] * scale - scores_max[i] * scale)
                    for i, j in T.Parallel(block_M, block_N):
                        acc_s[i, j] = T.exp2(acc_s[i, j] * scale - scores_max[i] * scale)
                    T.reduce_sum(acc_s, scores_sum, dim=1)
                    for i in T.Parallel(block_M):
                        logsum[i] = logsum[i] * scores_scale[i] + scores_sum[i]
                    T.copy(acc_s, acc_s_cast)
                    T.copy(acc_s_cast, P_shared)
                    for i, j in T.Parallel(block_M, dim):
                        acc_o[i, j] *= scores_scale[i]

                    T.barrier_wait(v_ready, k & 1)
                    T.gemm(P_shared, V_shared, acc_o, policy=T.GemmWarpPolicy.FullRow)
                    T.barrier_arrive(v_free)
                for i, j in T.Parallel(block_M, dim):
                    acc_o[i, j] /= logsum[i]
                T.copy(acc_o, Output[bz, by, bx * block_M:(bx + 1) * block_M, :])

    return main


def reference(Q, K, V):
    return F.scaled_dot_product_attention(Q.float(), K.float(), V.float()).to(Q.dtype)


def main(batch=1, heads=2, seq_len=320, dim=64):
    kernel = flash_attention_ws(batch, heads, seq_len, dim)
    Q, K, V = (torch.randn(batch, heads, seq_len, dim, dtype=torch.float16, device=device) for _ in range(3))
    out = kernel(Q, K, V)
    torch.testing.assert_close(out.float(), reference(Q, K, V).float(), rtol=1e-2, atol=1e-2)
    print(f"flash_attention_ws b={batch} h={heads} s={seq_len} d={dim}: matches torch on {device}")


if __name__ == "__main__":
    main()
