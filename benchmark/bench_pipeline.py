"""What `T.Pipelined` becomes, and what it costs to lower: for the user's GEMM, the classic upstream GEMM and the
FlashAttention forward, on mp_31 and mp_22.

    python benchmark/bench_pipeline.py                 # this project
    python benchmark/bench_pipeline.py --upstream      # upstream TileLang (pip install tilelang), target cuda sm_90

Per kernel: the versions of each shared tile (the pipeline's depth), the copy kinds and the instruction mix counted
in the generated source, and the lowering time (`tilelang.lower`-equivalent: the passes and the device/host code
generation, no C++ build), median of 5. Results go to benchmark/RESULTS.md with the command and machine.
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def gemm(T, M, N, K, bm, bn, bk, threads, num_stages):
    """The user's GEMM (examples/gemm/gemm.py) as a plain prim_func, so upstream TileLang can lower it too."""
    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float16")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=threads) as (bx, by):
            A_shared = T.alloc_shared((bm, bk), "float16")
            B_shared = T.alloc_shared((bk, bn), "float16")
            C_local = T.alloc_fragment((bm, bn), "float32")
            T.clear(C_local)
            for k in T.Pipelined(T.ceildiv(K, bk), num_stages=num_stages):
                T.copy(A[by * bm, k * bk], A_shared)
                T.copy(B[k * bk, bx * bn], B_shared)
                T.gemm(A_shared, B_shared, C_local)
            T.copy(C_local, C[by * bm, bx * bn])

    return main


def describe(source: str) -> dict:
    """The kernel's instruction mix: how often each tl:: template / built-in and each block barrier appears in the
    generated source (calls in loops count once: this is the code, not a trace)."""
    body = source[source.find("__global__"):]
    counts: dict = {}
    for name in re.findall(r"\btl::(\w+)|(__syncthreads)\(\)", body):
        key = name[0] or name[1]
        counts[key] = counts.get(key, 0) + 1
    return dict(sorted(counts.items()))


def _median_time(fn, repeat=5):
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def ours() -> None:
    import tilelang.language as T

    sys.path.insert(0, str(ROOT / "testing"))
    import test_flash_attention as fa  # the example's prim_func (examples/flash_attention)
    from tilelang_musa.codegen import generate
    from tilelang_musa.target import determine_target
    from tilelang_musa.transform import lower, normalize_pass_configs

    kernels = {
        "user's GEMM 1024^3, 256x256x64, 512 threads, num_stages=3": gemm(T, 1024, 1024, 1024, 256, 256, 64, 512, 3),
        "classic GEMM 1024^3, 128x128x32, 128 threads, num_stages=3": gemm(T, 1024, 1024, 1024, 128, 128, 32, 128, 3),
        "FlashAttention fwd, S=1024 D=64, 64x64 blocks, num_stages=2":
            fa.example.flash_attention.func(batch=1, heads=2, seq_len=1024, dim=64, is_causal=False, num_stages=2),
    }
    for arch in ("mp_31", "mp_22"):
        target = determine_target(f"musa -arch={arch}")
        for name, program in kernels.items():
            code = {}

            def run():
                code["source"] = generate(lower(program, target, normalize_pass_configs({})), target, "k")

            seconds = _median_time(run)
            text = code["source"]
            text = text if isinstance(text, str) else str(getattr(text, "device", text))
            threads = re.search(r"__launch_bounds__\((\d+)", text).group(1)
            print(f"{arch} | {name} | lowering {seconds * 1e3:.0f} ms | {threads} threads | {describe(text)}")


def upstream() -> None:
    import tilelang
    import tilelang.language as T

    for name, program in {
        "user's GEMM 1024^3, 256x256x64, 512 threads, num_stages=3": gemm(T, 1024, 1024, 1024, 256, 256, 64, 512, 3),
        "classic GEMM 1024^3, 128x128x32, 128 threads, num_stages=3": gemm(T, 1024, 1024, 1024, 128, 128, 32, 128, 3),
    }.items():
        for arch in ("sm_90", "sm_80"):
            target = tilelang.tvm.target.Target({"kind": "cuda", "arch": arch})
            result = {}

            def run():
                with target:  # its passes ask for the current target
                    result.update(artifact=tilelang.lower(program, target=target))

            seconds = _median_time(run)
            source = result["artifact"].kernel_source
            threads = re.search(r"__launch_bounds__\((\d+)", source)
            print(f"upstream {arch} | {name} | lowering {seconds * 1e3:.0f} ms | "
                  f"{threads.group(1) if threads else '?'} threads | {describe(source)}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--upstream", action="store_true", help="lower with upstream TileLang instead")
    (upstream if parser.parse_args().upstream else ours)()
