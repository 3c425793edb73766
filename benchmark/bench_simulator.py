"""Simulator run time of GEMMs, optionally side by side with another revision's simulator headers.

    python benchmark/bench_simulator.py                  # this checkout's simulator
    python benchmark/bench_simulator.py --against REV    # REV's headers (git archive) and this checkout's, alternately

The kernels are compiled once per side (same lowering, same generated MUSA C: only `tl_templates/` differs, through
TILELANG_TEMPLATES) and each call is timed; the median of `--repeat` calls is printed. Alternating the two sides
in one run keeps the machine's load the same for both. Results go to benchmark/RESULTS.md with the command.
"""

from __future__ import annotations

import argparse
import os
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


def _kernel(case: str):
    if case == "readme_gemm_1024_mp31":
        sys.path.insert(0, str(ROOT / "examples" / "gemm"))
        from gemm import matmul  # noqa: E402  (the user's example)

        return matmul.compile(M=1024, N=1024, K=1024, block_M=256, block_N=256, block_K=64), False
    block = (64, 64, 32) if case.endswith("64x64x32") else (32, 32, 16)
    return _mp22_gemm(1024, block), True


def measure(case: str, repeat: int) -> float:
    """Median seconds of one call of `case`'s kernel (compiled first, checked against torch once)."""
    import torch

    import tilelang

    tilelang.disable_cache()
    kernel, b_transposed = _kernel(case)
    a = torch.randn(1024, 1024, dtype=torch.float16)
    b = torch.randn(1024, 1024, dtype=torch.float16)
    c = kernel(a, b)
    ref = a.float() @ (b.float().T if b_transposed else b.float())
    torch.testing.assert_close(c.float(), ref, rtol=1e-2, atol=1e-1)
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        kernel(a, b)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _templates_of(rev: str, into: Path) -> Path:
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev, "src/tl_templates"], check=True,
                             capture_output=True).stdout
    with tarfile.open(fileobj=BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    return into / "src"


def _run_side(case: str, repeat: int, templates: Path | None) -> float:
    env = dict(os.environ)
    if templates is not None:
        env["TILELANG_TEMPLATES"] = str(templates)
    proc = subprocess.run([sys.executable, __file__, "--case", case, "--repeat", str(repeat)], env=env,
                          capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"{case} failed{' with ' + str(templates) if templates else ''}:\n{proc.stderr[-3000:]}")
    return float(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--against", help="a git revision whose simulator headers to time side by side")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--case", choices=sorted(CASES), help="time one case in this process (prints seconds)")
    args = parser.parse_args()
    if args.case:
        print(measure(args.case, args.repeat))
        return
    with tempfile.TemporaryDirectory() as tmp:
        old = _templates_of(args.against, Path(tmp)) if args.against else None
        for case, title in CASES.items():
            new_s = _run_side(case, args.repeat, None)
            line = f"{title}: {new_s:.3f} s per call"
            if old is not None:
                old_s = _run_side(case, args.repeat, old)
                line += f"; at {args.against}: {old_s:.3f} s ({old_s / new_s:.1f}x)"
            print(line, flush=True)


if __name__ == "__main__":
    main()
