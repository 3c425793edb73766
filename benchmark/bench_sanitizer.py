"""What the simulator's sanitizer costs at run time (benchmark/RESULTS.md, "The sanitizer").

For the README GEMM and the elementwise add, times one launch of: the kernel as printed for users (no checks,
built from `get_kernel_source()` through TILELANG_REPLACE_MUSAC), the sanitizer build in default mode (bounds
checks, poisoned locals), and the same in checked mode (TILELANG_SIM_CHECK=1: race detector, random schedule).
Minimum of --runs launches each, TILELANG_SIM_WORKERS=1 unless set.

    python benchmark/bench_sanitizer.py [--runs 7]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import torch

os.environ.setdefault("TILELANG_SIM_WORKERS", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples" / "gemm"))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples" / "elementwise"))

import tilelang  # noqa: E402


def best_of(runs: int, launch) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        launch()
        times.append(time.perf_counter() - start)
    return min(times)


def measure(name: str, program, inputs: list[torch.Tensor], runs: int) -> None:
    checked = tilelang.compile(program)
    with tempfile.NamedTemporaryFile("w", suffix=".mu", delete=False) as f:
        f.write(checked.get_kernel_source(kernel_only=False))
    os.environ["TILELANG_REPLACE_MUSAC"] = f.name
    try:
        plain = tilelang.compile(program)  # the replaced source: built as users read it, without the hooks
    finally:
        del os.environ["TILELANG_REPLACE_MUSAC"]
        os.unlink(f.name)
    t_plain = best_of(runs, lambda: plain(*inputs))
    t_default = best_of(runs, lambda: checked(*inputs))
    os.environ["TILELANG_SIM_CHECK"] = "1"
    try:
        t_checked = best_of(runs, lambda: checked(*inputs))
    finally:
        del os.environ["TILELANG_SIM_CHECK"]
    print(f"{name}: unchecked {t_plain * 1e3:.1f} ms, sanitizer default mode {t_default * 1e3:.1f} ms "
          f"({t_default / t_plain:.2f}x), checked mode {t_checked * 1e3:.1f} ms ({t_checked / t_plain:.2f}x)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    tilelang.disable_cache()

    import elementwise_add
    import gemm

    m = n = k = 512
    program = gemm.matmul.compile(M=m, N=n, K=k, block_M=256, block_N=256, block_K=64).program
    a, b = torch.randn(m, k).half(), torch.randn(k, n).half()
    measure(f"README GEMM {m}x{n}x{k} fp16, mp_31", program, [a, b], args.runs)

    size = 1 << 22
    program = elementwise_add.elementwise_add.compile(N=size).program
    measure(f"elementwise add N={size} fp32, mp_31", program, [torch.randn(size), torch.randn(size)], args.runs)


if __name__ == "__main__":
    main()
