"""GEMV, y = A x (A: [N, K] fp16, x: [K] fp16, fp32 accumulation, y fp16), in the two forms upstream TileLang
users write.

- `gemv` (thread level): a block owns `block_N` rows of A; its threads are laid out as
  `threads=(reduce_threads, block_N)`, so the `reduce_threads` threads of one row are consecutive lanes of a warp.
  Each thread loads 128-bit vectors of its row and of x into `T.alloc_local` registers and keeps a partial sum;
  the row's partial sums are then added across lanes with a butterfly of `T.shfl_xor`, and lane 0 stores y.
- `gemv_tile` (tile level): the block accumulates `A[rows, k-tile] * x[k-tile]` element-wise in a register
  fragment and finishes with one `T.reduce_sum(..., dim=1)`.

Only the device string is MUSA's; without a MUSA device it runs in the CPU simulator.

    python examples/gemv/gemv.py --n 512 --k 1024
"""

import argparse

import torch
from tvm import DataType

import tilelang
import tilelang.language as T

device = "musa" if hasattr(torch, "musa") and torch.musa.is_available() else "cpu"


@tilelang.jit(out_idx=[-1])
def gemv(N, K, block_N=4, reduce_threads=32, dtype="float16", accum_dtype="float"):
    vec = 128 // DataType(dtype).bits  # elements per 128-bit load
    block_K = reduce_threads * vec  # the K slice a block's row walks per step
    # a row's lanes must form a power-of-two group inside one warp (32 lanes on mp_31, 128 on mp_22), and this
    # form has no tails
    assert reduce_threads in (1, 2, 4, 8, 16, 32) and N % block_N == 0 and K % block_K == 0

    @T.prim_func
    def main(A: T.Tensor((N, K), dtype), x: T.Tensor((K,), dtype), y: T.Tensor((N,), dtype)):
        with T.Kernel(T.ceildiv(N, block_N), threads=(reduce_threads, block_N)) as bn:
            tk = T.get_thread_binding(0)  # position along K, consecutive lanes
            tn = T.get_thread_binding(1)  # row of the block
            a_local = T.alloc_local((vec,), dtype)
            x_local = T.alloc_local((vec,), dtype)
            acc = T.alloc_local((1,), accum_dtype)
            row = bn * block_N + tn

            T.clear(acc)
            for bk in T.serial(T.ceildiv(K, block_K)):
                for v in T.vectorized(vec):
                    a_local[v] = A[row, bk * block_K + tk * vec + v]
                    x_local[v] = x[bk * block_K + tk * vec + v]
                for v in T.serial(vec):
                    acc[0] += a_local[v].astype(accum_dtype) * x_local[v].astype(accum_dtype)
            # Butterfly over the row's lanes: after log2(reduce_threads) steps every lane holds the row's sum.
            offset = reduce_threads // 2
            while offset > 0:
                acc[0] += T.shfl_xor(acc[0], offset)
                offset //= 2
            if tk == 0:
                y[row] = acc[0]

    return main


@tilelang.jit(out_idx=[-1])
def gemv_tile(N, K, block_N=16, block_K=64, threads=128, dtype="float16", accum_dtype="float"):

    @T.prim_func
    def main(A: T.Tensor((N, K), dtype), x: T.Tensor((K,), dtype), y: T.Tensor((N,), dtype)):
        with T.Kernel(T.ceildiv(N, block_N), threads=threads) as bn:
            partial = T.alloc_fragment((block_N, block_K), accum_dtype)
            y_local = T.alloc_fragment((block_N,), accum_dtype)
            T.clear(partial)
            for bk in T.serial(T.ceildiv(K, block_K)):
                for i, j in T.Parallel(block_N, block_K):
                    partial[i, j] += A[bn * block_N + i, bk * block_K + j] * x[bk * block_K + j]
            T.reduce_sum(partial, y_local, dim=1)
            T.copy(y_local, y[bn * block_N])

    return main


def ref_program(A, x):
    return A.float() @ x.float()


def main(N=256, K=512):
    A = torch.randn((N, K), dtype=torch.float16, device=device)
    x = torch.randn((K,), dtype=torch.float16, device=device)
    ref = ref_program(A, x)
    for kernel in (gemv(N, K), gemv_tile(N, K)):
        y = kernel(A, x)
        torch.testing.assert_close(y.float(), ref, rtol=1e-2, atol=1e-2)
    print(f"gemv {N}x{K} (warp-shuffle and tile-reduction forms): matches torch on {device}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=256)
    parser.add_argument("--k", type=int, default=512)
    args = parser.parse_args()
    main(args.n, args.k)
