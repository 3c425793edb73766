"""Cache-hit `tilelang.compile()` of the README's GEMM (examples/gemm/gemm.py, 1024^3 fp16, 256x256x64 tiles).

    python benchmark/bench_compile_cache.py [--cache-dir DIR]

Fills a kernel cache (a temporary directory unless --cache-dir is given) with one compile, then measures:
  memory hit   compile() again in the same process: the same JITKernel from the in-process memo
  disk hit     compile() after forgetting the in-process memo: key, metadata.json and library load
  fresh process  the first compile() in a new process whose cache holds the kernel (includes the once-per-process
               package digest and toolchain lookup), timed inside that process
Prints one line per measurement (medians); results are recorded in benchmark/RESULTS.md.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SIZES = dict(M=1024, N=1024, K=1024)  # the example's T.const sizes
TILES = dict(block_M=256, block_N=256, block_K=64)


def gemm_program():
    """The README GEMM's PrimFunc, traced (what `matmul.compile(...)` traces before calling compile())."""
    import tilelang
    from tilelang_musa.language.parser import parse_kernel
    from tilelang_musa.language.prim_func import trace_eager

    sys.path.insert(0, str(ROOT / "examples" / "gemm"))
    from gemm import matmul  # noqa: E402  (the user's example; it calls tilelang.disable_cache())

    tilelang.enable_cache()
    return trace_eager(parse_kernel(matmul.func), TILES, SIZES)


def _median_ms(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e3


def first_hit_in_this_process() -> None:
    """Child mode: the cache already holds the kernel; time this process's first compile() of it."""
    program = gemm_program()
    import tilelang

    t0 = time.perf_counter()
    tilelang.compile(program)
    print(f"{(time.perf_counter() - t0) * 1e3:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cache-dir")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        first_hit_in_this_process()
        return
    cache_dir = args.cache_dir or tempfile.mkdtemp(prefix="tilelang_bench_cache_")
    os.environ["TILELANG_CACHE_DIR"] = cache_dir

    import tilelang
    from tilelang_musa.jit import cache

    program = gemm_program()
    t0 = time.perf_counter()
    tilelang.compile(program)
    print(f"fill the cache (a miss unless --cache-dir holds it): {time.perf_counter() - t0:.2f} s")
    print(f"memory hit: {_median_ms(lambda: tilelang.compile(program), 200):.3f} ms (median of 200)")

    def disk_hit():
        cache.clear_memory_cache()
        tilelang.compile(program)

    print(f"disk hit: {_median_ms(disk_hit, 50):.3f} ms (median of 50)")
    fresh = [float(subprocess.run([sys.executable, __file__, "--child"], capture_output=True, text=True,
                                  check=True, env=dict(os.environ)).stdout.split()[-1]) for _ in range(3)]
    print(f"first compile() in a fresh process, cache hit: {statistics.median(fresh):.2f} ms (median of 3: "
          f"{', '.join(f'{t:.2f}' for t in fresh)})")


if __name__ == "__main__":
    main()
