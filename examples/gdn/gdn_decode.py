"""Gated DeltaNet decode: one new token per sequence updates each head's recurrent state and reads it out.

For every sequence b and value head h (query/key heads are shared by `num_v_heads // num_k_heads` value heads):

    S  = exp(g) * S                      decay the state [K, V] (g <= 0 is the token's log gate)
    u  = beta * (v - S^T k)              the delta rule's correction [V]
    S  = S + k u^T                       write it back into the state
    o  = scale * S^T q                   the token's output [V]

A block owns one (sequence, value head) and `block_V` columns of its state, held in a [K, block_V] register
fragment (float32, as the state is kept); S^T k and S^T q are `T.reduce_sum`s down the K dimension. q and k are
L2-normalised by the caller, as the model does. Only the device string is MUSA's; without a MUSA device it runs
in the CPU simulator.

    python examples/gdn/gdn_decode.py --batch 4 --k-heads 4 --v-heads 8 --dim 128
"""

import argparse

import torch

import tilelang
import tilelang.language as T

device = "musa" if hasattr(torch, "musa") and torch.musa.is_available() else "cpu"


@tilelang.jit(out_idx=[6])
def gdn_decode(batch, num_k_heads, num_v_heads, dim_k, dim_v, block_V=32, threads=128, dtype="bfloat16"):
    group = num_v_heads // num_k_heads
    scale = dim_k**-0.5

    @T.prim_func
    def main(
        q: T.Tensor((batch, num_k_heads, dim_k), dtype),
        k: T.Tensor((batch, num_k_heads, dim_k), dtype),
        v: T.Tensor((batch, num_v_heads, dim_v), dtype),
        g: T.Tensor((batch, num_v_heads), "float32"),
        beta: T.Tensor((batch, num_v_heads), "float32"),
        state: T.Tensor((batch, num_v_heads, dim_k, dim_v), "float32"),  # updated in place
        o: T.Tensor((batch, num_v_heads, dim_v), dtype),
    ):
        with T.Kernel(batch * num_v_heads, T.ceildiv(dim_v, block_V), threads=threads) as (bh, bv):
            b, h = bh // num_v_heads, bh % num_v_heads
            hk = h // group
            S = T.alloc_fragment((dim_k, block_V), "float32")
            prod = T.alloc_fragment((dim_k, block_V), "float32")
            kv = T.alloc_fragment((block_V,), "float32")
            out = T.alloc_fragment((block_V,), "float32")
            k_s = T.alloc_shared((dim_k,), "float32")
            q_s = T.alloc_shared((dim_k,), "float32")

            for i in T.Parallel(dim_k):
                k_s[i] = k[b, hk, i]
                q_s[i] = q[b, hk, i]
            T.copy(state[b, h, 0, bv * block_V], S)
            decay = T.exp(g[b, h])
            for i, j in T.Parallel(dim_k, block_V):
                S[i, j] = S[i, j] * decay
                prod[i, j] = S[i, j] * k_s[i]
            T.reduce_sum(prod, kv, dim=0, clear=True)  # (S^T k)[j]
            for j in T.Parallel(block_V):
                kv[j] = beta[b, h] * (T.cast(v[b, h, bv * block_V + j], "float32") - kv[j])  # u[j]
            for i, j in T.Parallel(dim_k, block_V):
                S[i, j] = S[i, j] + k_s[i] * kv[j]
                prod[i, j] = S[i, j] * q_s[i]
            T.reduce_sum(prod, out, dim=0, clear=True)  # (S^T q)[j]
            for j in T.Parallel(block_V):
                o[b, h, bv * block_V + j] = T.cast(out[j] * scale, dtype)
            T.copy(S, state[b, h, 0, bv * block_V])

    return main


def ref_program(q, k, v, g, beta, state):
    """The same step in float32 torch: (o, new state)."""
    group = v.shape[1] // q.shape[1]
    qf, kf = (x.float().repeat_interleave(group, dim=1) for x in (q, k))
    S = state * g.exp()[..., None, None]
    u = beta[..., None] * (v.float() - torch.einsum("bhkv,bhk->bhv", S, kf))
    S = S + kf[..., :, None] * u[..., None, :]
    o = torch.einsum("bhkv,bhk->bhv", S, qf) * q.shape[-1] ** -0.5
    return o.to(v.dtype), S


def make_inputs(batch, num_k_heads, num_v_heads, dim_k, dim_v, dtype=torch.bfloat16):
    q = torch.nn.functional.normalize(torch.randn(batch, num_k_heads, dim_k, device=device), dim=-1).to(dtype)
    k = torch.nn.functional.normalize(torch.randn(batch, num_k_heads, dim_k, device=device), dim=-1).to(dtype)
    v = torch.randn(batch, num_v_heads, dim_v, device=device).to(dtype)
    g = -torch.rand(batch, num_v_heads, device=device)  # log gates in (-1, 0]
    beta = torch.rand(batch, num_v_heads, device=device)
    state = torch.randn(batch, num_v_heads, dim_k, dim_v, device=device) * 0.1
    return q, k, v, g, beta, state


def main(batch=4, k_heads=4, v_heads=8, dim=128):
    q, k, v, g, beta, state = make_inputs(batch, k_heads, v_heads, dim, dim)
    ref_o, ref_state = ref_program(q, k, v, g, beta, state)
    kernel = gdn_decode(batch, k_heads, v_heads, dim, dim)
    o = kernel(q, k, v, g, beta, state)
    torch.testing.assert_close(o.float(), ref_o.float(), rtol=2e-2, atol=2e-2)
    torch.testing.assert_close(state, ref_state, rtol=1e-4, atol=1e-4)
    print(f"GDN decode, batch {batch}, {k_heads} key / {v_heads} value heads, dim {dim}: matches torch on {device}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--k-heads", type=int, default=4)
    parser.add_argument("--v-heads", type=int, default=8)
    parser.add_argument("--dim", type=int, default=128)
    args = parser.parse_args()
    main(args.batch, args.k_heads, args.v_heads, args.dim)
