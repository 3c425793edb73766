"""The simulator side by side with Triton's interpreter (TRITON_INTERPRET=1), the same computations on the same tiles.

    pip install triton==3.9.0        # not a dependency of this package; 3.9.0 runs with torch 2.13.0+cpu
    python benchmark/bench_triton_interpreter.py [--repeat 3] [--only CASE ...]

Each case is one computation written twice with the same tile shapes: (a) a TileLang program compiled with
`tilelang.compile` for the default target (mp_31) and run on CPU torch tensors, which without a MUSA device runs
the generated kernel in the simulator; (b) a Triton kernel run by Triton's interpreter on CPU torch tensors.

Cases:
  gemm_128x128x64  C = A @ B, 1024x1024x1024, fp16 in, fp32 accumulate, fp16 out, 128x128x64 tiles
                   (TileLang: 256 threads, T.Pipelined num_stages=2, T.gemm; Triton: the tutorial's tl.dot loop)
  gemm_128x128x32  the same with 128x128x32 tiles (TileLang: 128 threads, num_stages=3)
  add_2p24         C = A + B, 2^24 fp32, 1024-element blocks (TileLang: examples/elementwise/elementwise_add.py
                   with 128 threads x 8; Triton: the vector-add tutorial kernel with BLOCK_SIZE=1024)

Measured: wall clock of one kernel call from Python (launch, run, return), excluding compilation; one warm-up
call per side, then `--repeat` timed calls, the two sides alternating call by call so that the machine's load
falls on both alike; the median is printed. Each side's output is checked against torch first. The elementwise
case also prints effective bandwidth (3 x 4 bytes per element: two reads, one write) and torch's own `torch.add`
on the same tensors as the machine's memory speed. The simulator uses TILELANG_SIM_WORKERS threads (default: the
cores); Triton's interpreter runs a grid's programs one after another in one thread (its numpy ops may use more).
Results go to benchmark/RESULTS.md with the command.
"""

from __future__ import annotations

import os

os.environ["TRITON_INTERPRET"] = "1"  # must be set before triton is imported

import argparse
import statistics
import time

import torch
import triton
import triton.language as tl

import tilelang
import tilelang.language as T

GEMM_SIZE = 1024
ADD_SIZE = 1 << 24


# ---------------------------------------------------------------------------------------------- TileLang programs


@tilelang.jit
def tilelang_gemm(A, B, block_M, block_N, block_K, threads, num_stages, dtype="float16", accum_dtype="float"):
    M, N, K = T.const("M N K")
    A: T.Tensor[[M, K], dtype]
    B: T.Tensor[[K, N], dtype]
    C = T.empty((M, N), dtype)

    with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
        A_shared = T.alloc_shared((block_M, block_K), dtype)
        B_shared = T.alloc_shared((block_K, block_N), dtype)
        C_local = T.alloc_fragment((block_M, block_N), accum_dtype)
        T.clear(C_local)
        for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
            T.copy(A[by * block_M, k * block_K], A_shared)
            T.copy(B[k * block_K, bx * block_N], B_shared)
            T.gemm(A_shared, B_shared, C_local)
        T.copy(C_local, C[by * block_M, bx * block_N])
    return C


@tilelang.jit
def tilelang_add(A, B, num_per_thread, threads, dtype="float32"):
    N = T.const("N")
    A: T.Tensor[(N,), dtype]
    B: T.Tensor[(N,), dtype]
    C = T.empty((N,), dtype)

    with T.Kernel(T.ceildiv(N, threads * num_per_thread), threads=threads) as b_x:
        for i, j in T.Parallel(threads, num_per_thread):
            offsets = (b_x * threads + i) * num_per_thread
            C[offsets + j] = A[offsets + j] + B[offsets + j]
    return C


# ------------------------------------------------------------------------------------------------ Triton kernels


@triton.jit
def triton_gemm(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(1)
    pid_n = tl.program_id(0)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + offs_m[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_n[None, :] * stride_bn
    accumulator = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        a = tl.load(a_ptrs, mask=offs_k[None, :] < K - k * BLOCK_K, other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < K - k * BLOCK_K, other=0.0)
        accumulator = tl.dot(a, b, accumulator)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    c_ptrs = c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn
    c_mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
    tl.store(c_ptrs, accumulator.to(tl.float16), mask=c_mask)


@triton.jit
def triton_add(x_ptr, y_ptr, output_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    tl.store(output_ptr + offsets, x + y, mask=mask)


def run_triton_gemm(a: torch.Tensor, b: torch.Tensor, block_m: int, block_n: int, block_k: int) -> torch.Tensor:
    m, k = a.shape
    _, n = b.shape
    c = torch.empty((m, n), dtype=torch.float16)
    grid = (triton.cdiv(n, block_n), triton.cdiv(m, block_m))
    triton_gemm[grid](a, b, c, m, n, k, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
                      BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=block_k)
    return c


def run_triton_add(x: torch.Tensor, y: torch.Tensor, block_size: int) -> torch.Tensor:
    output = torch.empty_like(x)
    n = x.numel()
    triton_add[(triton.cdiv(n, block_size),)](x, y, output, n, BLOCK_SIZE=block_size)
    return output


# ------------------------------------------------------------------------------------------------------- cases


def gemm_case(block_m: int, block_n: int, block_k: int, threads: int, num_stages: int) -> dict:
    size = GEMM_SIZE
    kernel = tilelang_gemm.compile(M=size, N=size, K=size, block_M=block_m, block_N=block_n, block_K=block_k,
                                   threads=threads, num_stages=num_stages)
    a = torch.randn((size, size), dtype=torch.float16)
    b = torch.randn((size, size), dtype=torch.float16)
    reference = torch.mm(a.float(), b.float())
    return {
        "title": f"GEMM {size}^3 fp16 in, fp32 acc, fp16 out",
        "tiles": f"{block_m}x{block_n}x{block_k} (TileLang: {threads} threads, {num_stages} stages)",
        "ours": lambda: kernel(a, b),
        "triton": lambda: run_triton_gemm(a, b, block_m, block_n, block_k),
        "check": lambda c: torch.testing.assert_close(c.float(), reference, rtol=1e-2, atol=1e-1),
        "bytes": None,
    }


def add_case() -> dict:
    n, threads, num_per_thread = ADD_SIZE, 128, 8
    block_size = threads * num_per_thread
    kernel = tilelang_add.compile(N=n, num_per_thread=num_per_thread, threads=threads)
    a = torch.randn(n, dtype=torch.float32)
    b = torch.randn(n, dtype=torch.float32)
    reference = a + b
    out = torch.empty_like(a)
    return {
        "title": "elementwise add 2^24 fp32",
        "tiles": f"{block_size}-element blocks (TileLang: {threads} threads x {num_per_thread})",
        "ours": lambda: kernel(a, b),
        "triton": lambda: run_triton_add(a, b, block_size),
        "check": lambda c: torch.testing.assert_close(c, reference, rtol=0, atol=0),
        "bytes": 3 * 4 * n,
        "torch": lambda: torch.add(a, b, out=out),
    }


CASES = {
    "gemm_128x128x64": lambda: gemm_case(128, 128, 64, threads=256, num_stages=2),
    "gemm_128x128x32": lambda: gemm_case(128, 128, 32, threads=128, num_stages=3),
    "add_2p24": add_case,
}


def seconds(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def measure(case: dict, repeat: int) -> dict:
    """Checks both sides once (that call is the warm-up), then alternates `repeat` timed calls of each."""
    case["check"](case["ours"]())
    case["check"](case["triton"]())
    sides = ["ours", "triton"] + (["torch"] if "torch" in case else [])
    if "torch" in case:
        case["torch"]()
    times = {side: [] for side in sides}
    for _ in range(repeat):
        for side in sides:
            times[side].append(seconds(case[side]))
    return {side: statistics.median(ts) for side, ts in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=3, help="timed calls per side (median printed)")
    parser.add_argument("--only", action="append", choices=sorted(CASES), help="run only this case (repeatable)")
    args = parser.parse_args()

    tilelang.disable_cache()  # compile time is not measured; a fresh build keeps runs independent of the cache
    print(f"torch {torch.__version__}, triton {triton.__version__}, "
          f"simulator workers: {os.environ.get('TILELANG_SIM_WORKERS', 'default (cores)')}, "
          f"load average: {os.getloadavg()[0]:.1f}", flush=True)

    rows, bandwidth_lines = [], []
    for name in args.only or list(CASES):
        case = CASES[name]()
        result = measure(case, args.repeat)
        rows.append(f"| {case['title']} | {case['tiles']} | {result['ours']:.3f} | {result['triton']:.3f} | "
                    f"{result['triton'] / result['ours']:.1f}x |")
        print(f"{name}: ours {result['ours']:.3f} s, Triton interpreter {result['triton']:.3f} s", flush=True)
        if case["bytes"]:
            gbps = {side: case["bytes"] / s / 1e9 for side, s in result.items()}
            bandwidth_lines.append(
                f"{case['title']}: ours {gbps['ours']:.2f} GB/s, Triton interpreter {gbps['triton']:.2f} GB/s, "
                f"torch.add {gbps['torch']:.2f} GB/s ({result['torch'] * 1e3:.1f} ms)")

    print(f"\nload average at the end: {os.getloadavg()[0]:.1f}\n")
    print("| case | tiles | ours (s) | Triton interpreter (s) | ratio (Triton / ours) |")
    print("|---|---|---|---|---|")
    print("\n".join(rows))
    if bandwidth_lines:
        print("\nEffective bandwidth (3 x 4 bytes per element):")
        print("\n".join(bandwidth_lines))


if __name__ == "__main__":
    main()
