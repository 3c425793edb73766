"""RMS norm over the rows of X: Y = X * rsqrt(mean(X^2, dim=-1) + eps) (* an optional weight), fp16 or fp32 in
and out, statistics in fp32.

Two upstream-style kernels, a block per `block_M` rows:
- `rms_norm`: the whole row fits in a fragment: load it, square it element-wise, `T.reduce_sum` along the row,
  `T.rsqrt`, scale, store.
- `rms_norm_splitk`: long rows walked `block_K` columns at a time: the squares accumulate in a fragment over the
  column tiles, one `T.reduce_sum` at the end, then a second sweep scales and stores each tile.

Only the device string is MUSA's; without a MUSA device it runs in the CPU simulator.

    python examples/norm/rms_norm.py --m 256 --n 1024 --dtype float32
"""

import argparse

import torch

import tilelang
import tilelang.language as T

device = "musa" if hasattr(torch, "musa") and torch.musa.is_available() else "cpu"


@tilelang.jit(out_idx=[-1])
def rms_norm(M, N, block_M=4, eps=1e-6, dtype="float16", accum_dtype="float", threads=128):

    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), W: T.Tensor((N,), dtype), Y: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, block_M), threads=threads) as bx:
            x_shared = T.alloc_shared((block_M, N), dtype)
            x_local = T.alloc_fragment((block_M, N), accum_dtype)
            x_sq = T.alloc_fragment((block_M, N), accum_dtype)
            rms = T.alloc_fragment((block_M,), accum_dtype)

            T.copy(X[bx * block_M:(bx + 1) * block_M, :], x_shared)
            T.copy(x_shared, x_local)
            for i, j in T.Parallel(block_M, N):
                x_sq[i, j] = x_local[i, j] * x_local[i, j]
            T.reduce_sum(x_sq, rms, dim=1)
            for i in T.Parallel(block_M):
                rms[i] = T.rsqrt(rms[i] / N + eps)
            for i, j in T.Parallel(block_M, N):
                x_local[i, j] = x_local[i, j] * rms[i] * W[j]
            T.copy(x_local, Y[bx * block_M:(bx + 1) * block_M, :])

    return main


@tilelang.jit(out_idx=[-1])
def rms_norm_splitk(M, N, block_M=4, block_K=128, eps=1e-6, dtype="float16", accum_dtype="float", threads=128):
    num_k = T.ceildiv(N, block_K)

    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), W: T.Tensor((N,), dtype), Y: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, block_M), threads=threads) as bx:
            x_shared = T.alloc_shared((block_M, block_K), dtype)
            sq_sum = T.alloc_fragment((block_M, block_K), accum_dtype)
            y_local = T.alloc_fragment((block_M, block_K), accum_dtype)
            rms = T.alloc_fragment((block_M,), accum_dtype)

            T.clear(sq_sum)
            for k in T.serial(num_k):
                T.copy(X[bx * block_M, k * block_K], x_shared)
                for i, j in T.Parallel(block_M, block_K):
                    sq_sum[i, j] += T.cast(x_shared[i, j], accum_dtype) * T.cast(x_shared[i, j], accum_dtype)
            T.reduce_sum(sq_sum, rms, dim=1)
            for i in T.Parallel(block_M):
                rms[i] = T.rsqrt(rms[i] / N + eps)
            for k in T.serial(num_k):
                T.copy(X[bx * block_M, k * block_K], x_shared)
                for i, j in T.Parallel(block_M, block_K):
                    y_local[i, j] = x_shared[i, j] * rms[i] * W[k * block_K + j]
                T.copy(y_local, Y[bx * block_M, k * block_K])

    return main


def ref_program(X, W, eps=1e-6):
    x = X.float()
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * W.float()


def main(M=128, N=512, dtype="float16"):
    torch_dtype = getattr(torch, dtype)
    X = torch.randn((M, N), dtype=torch_dtype, device=device)
    W = torch.randn((N,), dtype=torch_dtype, device=device)
    ref = ref_program(X, W)
    tol = 1e-2 if dtype == "float16" else 1e-4
    for kernel in (rms_norm(M, N, dtype=dtype), rms_norm_splitk(M, N, dtype=dtype)):
        Y = kernel(X, W)
        torch.testing.assert_close(Y.float(), ref, rtol=tol, atol=tol)
    print(f"rms norm {M}x{N} {dtype} (row-in-registers and split-K forms): matches torch on {device}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--m", type=int, default=128)
    parser.add_argument("--n", type=int, default=512)
    parser.add_argument("--dtype", choices=["float16", "float32"], default="float16")
    args = parser.parse_args()
    main(args.m, args.n, args.dtype)
