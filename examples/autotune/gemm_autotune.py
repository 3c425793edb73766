"""Autotune the README's GEMM (examples/gemm/gemm.py) over tile shapes with `@autotune` over `@tilelang.jit`.

On a MUSA device every tile shape is timed with MUSA events and the fastest wins. In the CPU simulator every shape
is compiled (in parallel worker processes), checked against torch, and ranked by its modelled device time (the
simulator's performance model, `kernel.get_profiler().model()`, for the arch compiled for); shapes that do not
compile are skipped with their error.

The script then runs itself a second time, as a new process: that run reads the persisted tuning result back and
compiles only the best shape (from the kernel cache). Results go to $TILELANG_CACHE_DIR, or, when that is not set,
to a temporary directory that both runs share (so that the first run always tunes).

    python examples/autotune/gemm_autotune.py [--m 256 --n 256 --k 256]
"""

import argparse
import os
import subprocess
import sys
import tempfile

import torch

import tilelang
import tilelang.language as T
from tilelang.autotuner import autotune

device = "musa" if hasattr(torch, "musa") and torch.musa.is_available() else "cpu"


def get_configs():
    # (256, 256, 64) is the README's; the last needs 256 KiB of shared memory, more than a MUSA block has: it does
    # not compile and is skipped
    tiles = [(64, 64, 32), (128, 64, 32), (64, 128, 64), (128, 128, 32), (256, 128, 64), (256, 256, 64),
             (512, 512, 128)]
    return [{"block_M": m, "block_N": n, "block_K": k} for m, n, k in tiles]


def ref_program(A, B):
    return (A.float() @ B.float()).to(A.dtype)


@autotune(configs=get_configs(), warmup=10, rep=10, ref_prog=ref_program)
@tilelang.jit
def matmul(A, B, block_M, block_N, block_K, dtype="float16", accum_dtype="float"):
    M, N, K = T.const("M N K")
    A: T.Tensor[[M, K], dtype]
    B: T.Tensor[[K, N], dtype]
    C = T.empty((M, N), dtype)

    with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=512) as (bx, by):
        T.use_swizzle(panel_size=4, order="col")
        A_shared = T.alloc_shared((block_M, block_K), dtype)
        B_shared = T.alloc_shared((block_K, block_N), dtype)
        C_local = T.alloc_fragment((block_M, block_N), accum_dtype)
        T.clear(C_local)
        for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=3):
            T.copy(A[by * block_M, k * block_K], A_shared)
            T.copy(B[k * block_K, bx * block_N], B_shared)
            T.gemm(A_shared, B_shared, C_local, policy=T.GemmWarpPolicy.Square)
        T.copy(C_local, C[by * block_M, bx * block_N])
    return C


def main(M, N, K, second_run):
    kernel = matmul.compile(M=M, N=N, K=K)  # tunes (or reads the persisted result)
    result = matmul.last_result
    label = "second run" if second_run else "first run"
    how = ("read back the persisted result: only the best config was compiled" if result.loaded_from_disk
           else f"tuned {len(result.trials)} configs")
    print(f"{label}: {how}")
    for trial in result.trials:
        error = (trial.error or "").splitlines()[0] if trial.error else ""
        latency = f"{trial.latency:.4f} ms" if trial.valid else ""
        print(f"  config {trial.index} {trial.config}: {trial.status} {latency}{error}".rstrip())
    print(f"{label}: best config {kernel.config}, latency {result.latency:.4f} ms ({result.latency_source})")

    A = torch.randn((M, K), dtype=torch.float16, device=device)
    B = torch.randn((K, N), dtype=torch.float16, device=device)
    C = matmul(A, B)  # the tuned kernel on tensors of the tuned sizes
    torch.testing.assert_close(C.float(), ref_program(A, B).float(), rtol=1.25e-1, atol=1.25e-1)
    print(f"{label}: gemm {M}x{N}x{K} with the best config matches torch on {device}")
    if second_run and not result.loaded_from_disk:
        sys.exit("the second run did not find the persisted result (is TILELANG_DISABLE_CACHE set?)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--m", type=int, default=256)
    parser.add_argument("--n", type=int, default=256)
    parser.add_argument("--k", type=int, default=256)
    parser.add_argument("--second-run", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if not args.second_run:
        os.environ.setdefault("TILELANG_CACHE_DIR", tempfile.mkdtemp(prefix="tilelang_autotune_example_"))
    main(args.m, args.n, args.k, args.second_run)
    if not args.second_run:
        again = [sys.executable, __file__, "--m", str(args.m), "--n", str(args.n), "--k", str(args.k), "--second-run"]
        sys.exit(subprocess.run(again).returncode)
