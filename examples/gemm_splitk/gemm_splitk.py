"""Split-K GEMM, C = A @ B (A: [M, K], B: [K, N] fp16; C float32), in the upstream TileLang split-K form.

The grid is (N tiles, M tiles, K splits). The block (bx, by, bz) computes the partial product of its C tile over
the K slice `[bz * K / split_k, (bz + 1) * K / split_k)` with shared tiles, a register-fragment accumulator and
`T.gemm`, stages it through shared memory and adds it into C element by element with `T.atomic_add`: the
`split_k` blocks of a tile meet in global memory, so C must start at zero. Only the device string is MUSA's;
without a MUSA device it runs in the CPU simulator.

    python examples/gemm_splitk/gemm_splitk.py --m 256 --n 256 --k 512 --split_k 4
"""

import argparse

import torch

import tilelang
import tilelang.language as T

device = "musa" if hasattr(torch, "musa") and torch.musa.is_available() else "cpu"


@tilelang.jit
def matmul_splitk(M, N, K, block_M, block_N, block_K, split_k, threads=128, dtype="float16", accum_dtype="float",
                  out_dtype="float32"):
    k_per_split = K // split_k

    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), out_dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), split_k, threads=threads) as (bx, by, bz):
            A_shared = T.alloc_shared((block_M, block_K), dtype)
            B_shared = T.alloc_shared((block_K, block_N), dtype)
            C_shared = T.alloc_shared((block_M, block_N), out_dtype)
            C_local = T.alloc_fragment((block_M, block_N), accum_dtype)

            T.clear(C_local)
            for ko in T.Pipelined(T.ceildiv(k_per_split, block_K), num_stages=2):
                T.copy(A[by * block_M, bz * k_per_split + ko * block_K], A_shared)
                T.copy(B[bz * k_per_split + ko * block_K, bx * block_N], B_shared)
                T.gemm(A_shared, B_shared, C_local)
            T.copy(C_local, C_shared)
            for i, j in T.Parallel(block_M, block_N):
                T.atomic_add(C[by * block_M + i, bx * block_N + j], C_shared[i, j])

    return main


def ref_program(A, B):
    return A.float() @ B.float()


def main(M=256, N=256, K=512, block_M=64, block_N=64, block_K=32, split_k=4):
    kernel = matmul_splitk(M, N, K, block_M, block_N, block_K, split_k)
    A = torch.randn((M, K), dtype=torch.float16, device=device)
    B = torch.randn((K, N), dtype=torch.float16, device=device)
    C = torch.zeros((M, N), dtype=torch.float32, device=device)
    kernel(A, B, C)
    torch.testing.assert_close(C, ref_program(A, B), rtol=1e-2, atol=1e-2)
    print(f"split-K gemm {M}x{N}x{K}, {split_k} splits: matches torch on {device}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--m", type=int, default=256)
    parser.add_argument("--n", type=int, default=256)
    parser.add_argument("--k", type=int, default=512)
    parser.add_argument("--split_k", type=int, default=4)
    args = parser.parse_args()
    main(args.m, args.n, args.k, split_k=args.split_k)
