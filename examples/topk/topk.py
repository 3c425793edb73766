"""Top-k per row (e.g. the gate of a mixture-of-experts router): for each row of `logits` [M, N], the k largest
values in descending order and their column indices, as `torch.topk(logits, k, dim=1)` returns them.

A block owns `block_M` rows held in a register fragment and runs k rounds of: `T.reduce_max` along the row; the
column of the maximum found by equality (each element equal to its row's maximum offers its column, the others
-1) and a second `T.reduce_max`; that element masked to -inf for the next round. Ties would all be masked
at once, so rows are expected to hold distinct values. Only the device string is MUSA's; without a MUSA device
it runs in the CPU simulator.

    python examples/topk/topk.py --m 320 --n 128 --topk 6
"""

import argparse

import torch

import tilelang
import tilelang.language as T

device = "musa" if hasattr(torch, "musa") and torch.musa.is_available() else "cpu"


@tilelang.jit(out_idx=[1, 2])
def topk(M, N, k, block_M=16, threads=128, dtype="float32"):

    @T.prim_func
    def main(
        logits: T.Tensor((M, N), dtype),
        values: T.Tensor((M, k), dtype),
        indices: T.Tensor((M, k), "int32"),
    ):
        with T.Kernel(T.ceildiv(M, block_M), threads=threads) as bx:
            row_frag = T.alloc_fragment((block_M, N), dtype)
            cand_idx = T.alloc_fragment((block_M, N), "int32")
            max_val = T.alloc_fragment((block_M,), dtype)
            max_idx = T.alloc_fragment((block_M,), "int32")

            T.copy(logits[bx * block_M, 0], row_frag)
            for r in T.serial(k):
                T.reduce_max(row_frag, max_val, dim=1, clear=True)
                for i, j in T.Parallel(block_M, N):
                    cand_idx[i, j] = T.if_then_else(row_frag[i, j] == max_val[i], j, -1)
                T.reduce_max(cand_idx, max_idx, dim=1, clear=True)
                for i, j in T.Parallel(block_M, N):
                    if row_frag[i, j] == max_val[i]:
                        row_frag[i, j] = -T.infinity(dtype)
                for i in T.Parallel(block_M):
                    values[bx * block_M + i, r] = max_val[i]
                    indices[bx * block_M + i, r] = max_idx[i]

    return main


def ref_program(logits, k):
    values, indices = torch.topk(logits, k, dim=1)
    return values, indices.to(torch.int32)


def main(M=320, N=128, k=6):
    logits = torch.randn((M, N), dtype=torch.float32, device=device)  # continuous: no ties in practice
    kernel = topk(M, N, k)
    values, indices = kernel(logits)
    ref_values, ref_indices = ref_program(logits, k)
    torch.testing.assert_close(values, ref_values, rtol=0, atol=0)
    torch.testing.assert_close(indices, ref_indices, rtol=0, atol=0)
    print(f"top-{k} of {M}x{N}: matches torch.topk on {device}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--m", type=int, default=320)
    parser.add_argument("--n", type=int, default=128)
    parser.add_argument("--topk", type=int, default=6)
    args = parser.parse_args()
    main(args.m, args.n, args.topk)
