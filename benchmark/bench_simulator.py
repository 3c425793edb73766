"""Simulator run time (and cache-miss compile time) of kernels, optionally side by side with another revision's
simulator headers.

    python benchmark/bench_simulator.py                  # this checkout's simulator
    python benchmark/bench_simulator.py --against REV    # REV's headers (git archive) and this checkout's, alternately
    python benchmark/bench_simulator.py --compile ...    # time a cache-miss tilelang.compile instead of a call
    python benchmark/bench_simulator.py --cpu-time ...   # CPU seconds (this process and its compilers), not wall



The kernels are compiled once per side (same lowering, same generated MUSA C: only `tl_templates/` differs, through
TILELANG_TEMPLATES) and each call is timed; the median of `--repeat` calls is printed. Alternating the two sides
in one run keeps the machine's load the same for both. Results go to benchmark/RESULTS.md with the command.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from io import BytesIO
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CASES = {
    "elementwise_add_2e20_mp31": "the elementwise example, 2^20 fp32, mp_31",
    "flash_attention_mp31": "the FlashAttention example, 1x4x256x64 fp16, mp_31",
    "readme_gemm_1024_mp31": "the README GEMM, 1024^3 fp16, 256x256x64 tiles, mp_31 (SQMMA, TME, warp-specialized)",
    "gemm_1024_mp22_64x64x32": "GEMM 1024^3 fp16, B transposed, 64x64x32 tiles, 128 threads, mp_22 (warp MMA)",
    "gemm_1024_mp22_32x32x16": "GEMM 1024^3 fp16, B transposed, 32x32x16 tiles, 128 threads, mp_22 (warp MMA)",
}


def _mp22_gemm(size: int, block: tuple[int, int, int]):
    import tilelang
    import tilelang.language as T

    bm, bn, bk = block

    @T.prim_func
    def gemm(A: T.Tensor((size, size), "float16"), B: T.Tensor((size, size), "float16"),
             C: T.Tensor((size, size), "float16")):
        with T.Kernel(T.ceildiv(size, bn), T.ceildiv(size, bm), threads=128) as (bx, by):
            A_s = T.alloc_shared((bm, bk), "float16")
            B_s = T.alloc_shared((bn, bk), "float16")
            C_l = T.alloc_fragment((bm, bn), "float32")
            T.clear(C_l)
            for k in T.Pipelined(T.ceildiv(size, bk), num_stages=0):
                T.copy(A[by * bm, k * bk], A_s)
                T.copy(B[bx * bn, k * bk], B_s)
                T.gemm(A_s, B_s, C_l, transpose_B=True)
            T.copy(C_l, C[by * bm, bx * bn])

    return tilelang.compile(gemm, out_idx=-1, target="musa -arch=mp_22")


def _compile(case: str, size: int):
    """`case`'s kernel at problem size `size` (a fresh compile for each size), its inputs and its reference."""
    import torch

    if case.startswith("elementwise"):
        sys.path.insert(0, str(ROOT / "testing"))
        from test_elementwise import elementwise_add  # noqa: E402  (the user's elementwise example, verbatim)

        n = size * 1024
        a, b = torch.randn(n), torch.randn(n)
        return elementwise_add.compile(N=n), (a, b), lambda: a + b
    if case.startswith("flash_attention"):
        sys.path.insert(0, str(ROOT / "examples" / "flash_attention"))
        from flash_attention import flash_attention, ref_program  # noqa: E402  (the user's example)

        q, k, v = (torch.randn(1, size // 4, 4, 64, dtype=torch.float16) for _ in range(3))
        return flash_attention(1, 4, size // 4, 64, False), (q, k, v), lambda: ref_program(q, k, v, False)
    a = torch.randn(size, size, dtype=torch.float16)
    b = torch.randn(size, size, dtype=torch.float16)
    if case == "readme_gemm_1024_mp31":
        sys.path.insert(0, str(ROOT / "examples" / "gemm"))
        from gemm import matmul  # noqa: E402  (the user's example)

        kernel = matmul.compile(M=size, N=size, K=size, block_M=256, block_N=256, block_K=64)
        return kernel, (a, b), lambda: a.float() @ b.float()
    block = (64, 64, 32) if case.endswith("64x64x32") else (32, 32, 16)
    return _mp22_gemm(size, block), (a, b), lambda: a.float() @ b.float().T


# Problem size of each case (elementwise: KiB of elements; FlashAttention: 4 x its sequence length).
SIZES = {"elementwise_add_2e20_mp31": 1024, "flash_attention_mp31": 1024}


def _clock(cpu: bool) -> float:
    """Wall seconds, or the CPU seconds of this process and its finished children (the compiler): on a loaded
    machine the CPU time of a side is far steadier than its wall time."""
    if not cpu:
        return time.perf_counter()
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


def measure(case: str, repeat: int, compile_only: bool = False, cpu: bool = False) -> float:
    """Median seconds of one call of `case`'s kernel (compiled first, checked against torch once); with
    `compile_only`, the seconds of one cache-miss compile (after a compile of another size has warmed up the
    process and the simulator's one-time builds: its precompiled prelude, its runtime)."""
    import torch

    import tilelang

    tilelang.disable_cache()
    size = SIZES.get(case, 1024)
    if compile_only:
        _compile(case, size // 2)
        start = _clock(cpu)
        _compile(case, size)
        return _clock(cpu) - start
    kernel, inputs, reference = _compile(case, size)
    out = kernel(*inputs)
    torch.testing.assert_close(out.float(), reference().float(), rtol=1e-2, atol=1e-1)
    times = []
    for _ in range(repeat):
        start = _clock(cpu)
        kernel(*inputs)
        times.append(_clock(cpu) - start)
    return statistics.median(times)


def _templates_of(rev: str, into: Path) -> Path:
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev, "src/tl_templates"], check=True,
                             capture_output=True).stdout
    with tarfile.open(fileobj=BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    return into / "src"


def _run_side(case: str, repeat: int, templates: Path | None, compile_only: bool, cpu: bool) -> float:
    env = dict(os.environ)
    if templates is not None:
        env["TILELANG_TEMPLATES"] = str(templates)
    cmd = [sys.executable, __file__, "--case", case, "--repeat", str(repeat)]
    cmd += (["--compile"] if compile_only else []) + (["--cpu-time"] if cpu else [])
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"{case} failed{' with ' + str(templates) if templates else ''}:\n{proc.stderr[-3000:]}")
    return float(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--against", help="a git revision whose simulator headers to time side by side")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--case", choices=sorted(CASES), help="time one case in this process (prints seconds)")
    parser.add_argument("--cases", nargs="+", choices=sorted(CASES), help="the cases to run (default: all)")
    parser.add_argument("--compile", action="store_true", help="time a cache-miss tilelang.compile, not a call")
    parser.add_argument("--cpu-time", action="store_true", help="CPU seconds (with the compiler's), not wall seconds")
    args = parser.parse_args()
    if args.case:
        print(measure(args.case, args.repeat, args.compile, args.cpu_time))
        return
    what = ("CPU " if args.cpu_time else "") + ("per compile (cache miss)" if args.compile else "per call")
    with tempfile.TemporaryDirectory() as tmp:
        old = _templates_of(args.against, Path(tmp)) if args.against else None
        for case in args.cases or CASES:
            title = CASES[case]
            new_s = _run_side(case, args.repeat, None, args.compile, args.cpu_time)
            line = f"{title}: {new_s:.3f} s {what}"
            if old is not None:
                old_s = _run_side(case, args.repeat, old, args.compile, args.cpu_time)
                line += f"; at {args.against}: {old_s:.3f} s ({old_s / new_s:.1f}x)"
            print(line, flush=True)


if __name__ == "__main__":
    main()
