"""Default-mode simulated time of a kernel bound by integer-local updates (benchmark/RESULTS.md, "Integer fragments
and locals in checked mode"): what the checked print's defined bytes (uninit_reads.h) cost when checked mode is off.

Run it from two trees (before and after), alternating, each with its own TILELANG_CACHE_DIR:

    TILELANG_SIM_WORKERS=1 python benchmark/bench_int_locals.py --reps 800 --label after
"""

import argparse
import os
import statistics
import time

os.environ.pop("TILELANG_SIM_CHECK", None)

import torch  # noqa: E402

import tilelang  # noqa: E402
import tilelang.language as T  # noqa: E402


@T.prim_func
def int_hot(A: T.Tensor((1024,), "int32"), B: T.Tensor((1024,), "int32")):
    with T.Kernel(8, threads=128) as bx:
        H = T.alloc_local((8,), "int32")
        F = T.alloc_fragment((128,), "int32")
        tx = T.get_thread_binding()
        for k in T.serial(8):
            H[k] = A[bx * 128 + tx] + k
        for i in T.Parallel(128):
            F[i] = A[bx * 128 + i] * 3
        for it in T.serial(256):
            H[it % 8] = H[(it + 3) % 8] * 5 + H[it % 8] + (it ^ tx)
        B[bx * 128 + tx] = H[0] + H[1] + H[7] + F[tx]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--reps", type=int, default=800)
    p.add_argument("--label", default="")
    p.add_argument("--arch", default="mp_31")
    args = p.parse_args()
    torch.manual_seed(0)
    kernel = tilelang.compile(int_hot, target=f"musa -arch={args.arch}")
    a = torch.randint(-9, 9, (1024,), dtype=torch.int32)
    b = torch.zeros(1024, dtype=torch.int32)
    for _ in range(3):
        kernel(a, b)
    times = []
    for _ in range(args.reps):
        start = time.perf_counter()
        kernel(a, b)
        times.append(time.perf_counter() - start)
    print(f"{args.label} median {statistics.median(times) * 1e3:.3f} ms, fastest {min(times) * 1e3:.3f} ms "
          f"(checksum {int(b.sum())})")


if __name__ == "__main__":
    main()
