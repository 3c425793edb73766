"""FP8 per-token quantization: each row (token) x of X [M, N] is scaled into the range of `float8_e4m3fn`
(finite maximum 448): scale = amax(|x|) / 448, y = cast(x / scale). Returns Y [M, N] float8_e4m3fn and the
per-row scales [M] float32, so that X ~ Y * scale.

A block owns `block_M` rows in a register fragment: `T.reduce_absmax` along the row gives amax (floored at a
tiny value so an all-zero row does not divide by zero), the scale is stored, and the quotient is cast to fp8 on
its way out (`T.copy` from a float32 fragment into an fp8 tile converts). Only the device string is MUSA's;
without a MUSA device it runs in the CPU simulator.

    python examples/quant/fp8_per_token_quant.py --m 256 --n 512
"""

import argparse

import torch

import tilelang
import tilelang.language as T

device = "musa" if hasattr(torch, "musa") and torch.musa.is_available() else "cpu"

FP8_MAX = 448.0  # largest finite float8_e4m3fn
AMAX_MIN = 1e-4


@tilelang.jit(out_idx=[1, 2])
def per_token_quant_fp8(M, N, block_M=4, threads=128, dtype="float32", fp8_dtype="float8_e4m3fn"):

    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), Y: T.Tensor((M, N), fp8_dtype), scales: T.Tensor((M,), "float32")):
        with T.Kernel(T.ceildiv(M, block_M), threads=threads) as bx:
            x_local = T.alloc_fragment((block_M, N), "float32")
            amax = T.alloc_fragment((block_M,), "float32")
            scale = T.alloc_fragment((block_M,), "float32")
            y_fp8 = T.alloc_fragment((block_M, N), fp8_dtype)

            T.copy(X[bx * block_M, 0], x_local)
            T.reduce_absmax(x_local, amax, dim=1)
            for i in T.Parallel(block_M):
                scale[i] = T.max(amax[i], AMAX_MIN) / FP8_MAX
            for i, j in T.Parallel(block_M, N):
                x_local[i, j] = T.clamp(x_local[i, j] / scale[i], -FP8_MAX, FP8_MAX)
            T.copy(x_local, y_fp8)
            T.copy(y_fp8, Y[bx * block_M, 0])
            for i in T.Parallel(block_M):
                scales[bx * block_M + i] = scale[i]

    return main


def ref_program(X):
    amax = X.float().abs().amax(dim=1).clamp(min=AMAX_MIN)
    scale = amax / FP8_MAX
    Y = (X.float() / scale[:, None]).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn)
    return Y, scale


def main(M=256, N=512):
    X = torch.randn((M, N), dtype=torch.float32, device=device) * 3
    kernel = per_token_quant_fp8(M, N)
    Y, scales = kernel(X)
    Y_ref, scales_ref = ref_program(X)
    torch.testing.assert_close(scales, scales_ref, rtol=0, atol=0)
    # bit-exact: the same quotient rounded to the same fp8 value
    assert torch.equal(Y.view(torch.uint8), Y_ref.view(torch.uint8))
    print(f"fp8 per-token quantization {M}x{N}: matches torch on {device}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--m", type=int, default=256)
    parser.add_argument("--n", type=int, default=512)
    args = parser.parse_args()
    main(args.m, args.n)
