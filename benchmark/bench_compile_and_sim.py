"""Compile time (lowering + codegen + host build) and simulator run time of the seed kernels.

    python benchmark/bench_compile_and_sim.py

Writes nothing; prints one line per measurement. Results are recorded in benchmark/RESULTS.md with the
command and machine that produced them.
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

import torch

import tilelang
from tilelang_musa.codegen import generate
from tilelang_musa.target import determine_target
from tilelang_musa.transform import lower, normalize_pass_configs

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "examples" / "gemm"))
sys.path.insert(0, str(ROOT / "examples" / "elementwise"))


def _time(fn, repeat=3):
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    tilelang.disable_cache()
    from gemm import matmul  # noqa: E402  (the user's example)

    from tilelang_musa.language.parser import parse_kernel
    from tilelang_musa.language.prim_func import trace_eager

    sys.path.insert(0, str(ROOT / "testing"))
    from test_elementwise import elementwise_add  # noqa: E402  (the user's elementwise example, verbatim)

    target = determine_target("musa")
    programs = {
        "elementwise add N=4096 fp32": trace_eager(parse_kernel(elementwise_add.func), {}, {"N": 4096}),
        "gemm 512^3 fp16 (256x256x64 tiles)": matmul.compile(M=512, N=512, K=512, block_M=256, block_N=256,
                                                             block_K=64).program,
    }
    for name, program in programs.items():
        lowering = _time(lambda: generate(lower(program, target, normalize_pass_configs({})), target, "k"))
        build = _time(lambda: tilelang.compile(program), repeat=1)
        print(f"{name}: lowering+codegen {lowering * 1e3:.1f} ms, full compile (incl. host build) {build:.2f} s")
    kernel = tilelang.compile(programs["gemm 512^3 fp16 (256x256x64 tiles)"])
    a = torch.randn(512, 512, dtype=torch.float16)
    b = torch.randn(512, 512, dtype=torch.float16)
    run = _time(lambda: kernel(a, b), repeat=3)
    print(f"gemm 512^3 fp16 simulator run ({kernel.backend.name}, mp_31, {kernel}): {run:.2f} s")


if __name__ == "__main__":
    main()
