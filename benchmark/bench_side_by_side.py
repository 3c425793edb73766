"""The compile path and the simulator at this checkout and at an earlier revision, side by side in one run.

    python benchmark/bench_side_by_side.py --against 005dd0f [--repeat 3] [--case lower_gemm ...] [--cpu-time]

The revision is extracted with `git archive` into a temporary directory and given this checkout's built native
pieces (tilelang_musa/lib/libtilelang_musa.so; the Cython launcher, rebuilt from the revision's own .pyx with cython
and g++ when it differs from ours), so both sides run from source through PYTHONPATH, each with its own Python,
templates and examples. Every measurement runs in a fresh child process of the side being measured, and the sides
alternate within each round, so the machine's load falls on both alike. Per case, the median over `--repeat` rounds:

  compile_miss_add / compile_miss_gemm   `tilelang.compile` of the elementwise add (4096) / README GEMM with the
                                         kernel cache off (the simulator prelude in the cache dir already built,
                                         as after a first kernel): lowering, codegen and the host build
  compile_hit           the first `tilelang.compile` in a fresh process whose cache holds the kernel (elementwise
                        add; neither the import of the package nor the tracing of the @T.prim_func is counted)
  lower_gemm            lowering + device/host codegen of the README GEMM (1024^3, 256x256x64, mp_31), warm
                        (the third of three in one process; median of five)
  lower_stream_k        lowering + device codegen of a GEMM on a stream-K schedule (tl.stream_k=3; 256^3, 64x64x32
                        tiles, 3 stages, T.use_swizzle; mp_22, where it was slowest), warm (the second of two in
                        one process)
  sim_add               one simulated call of the elementwise add on 2^20 fp32 (median of 5 calls)
  sim_gemm              one simulated call of the README GEMM, 1024^3 fp16 (median of 3 calls)
  sim_flash_attention   one simulated call of examples/flash_attention at its defaults (1x4x256x64; median of 3)

With --cpu-time, each measurement is the CPU time of the child process and of the processes it waited for (the
host compiler) instead of wall time: on a shared, loaded machine it varies far less. Each kernel's output is checked
against torch once per side. Results go to benchmark/RESULTS.md with the command.
"""

from __future__ import annotations

import argparse
import filecmp
import os
import resource
import shutil
import statistics
import subprocess
import sys
import sysconfig
import tarfile
import tempfile
import time
from io import BytesIO
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CASES = ("compile_miss_add", "compile_miss_gemm", "compile_hit", "lower_gemm", "lower_stream_k", "sim_add",
         "sim_gemm", "sim_flash_attention")
ADD_N = 1 << 20


# ---- the cases (run in a child process whose PYTHONPATH is the side's root) ------------------------------------------

def _add_program(n: int):
    import tilelang.language as T

    threads, per_thread = 256, 8  # the user's elementwise example (examples/elementwise), at n elements

    @T.prim_func
    def elementwise_add(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32"), C: T.Tensor((n,), "float32")):
        with T.Kernel(T.ceildiv(n, threads * per_thread), threads=threads) as b_x:
            for i, j in T.Parallel(threads, per_thread):
                offsets = (b_x * threads + i) * per_thread
                C[offsets + j] = A[offsets + j] + B[offsets + j]

    return elementwise_add


def _gemm_program():
    """The README GEMM (the side's examples/gemm/gemm.py), traced at 1024^3 with 256x256x64 tiles."""
    sys.path.insert(0, str(Path.cwd() / "examples" / "gemm"))
    from gemm import matmul  # noqa: E402  (it calls tilelang.disable_cache())

    import tilelang

    tilelang.enable_cache()
    return matmul.compile(M=1024, N=1024, K=1024, block_M=256, block_N=256, block_K=64).program


def _stream_k_gemm_program(n: int = 256, bm: int = 64, bn: int = 64, bk: int = 32):
    """testing/test_stream_k.py's GEMM (swizzled, 3 stages), which tl.stream_k puts on persistent blocks."""
    import tilelang.language as T

    @T.prim_func
    def main(A: T.Tensor((n, n), "float16"), B: T.Tensor((n, n), "float16"), C: T.Tensor((n, n), "float16")):
        with T.Kernel(T.ceildiv(n, bn), T.ceildiv(n, bm), threads=128) as (bx, by):
            T.use_swizzle(panel_size=2, order="col")
            A_s = T.alloc_shared((bm, bk), "float16")
            B_s = T.alloc_shared((bk, bn), "float16")
            acc = T.alloc_fragment((bm, bn), "float32")
            T.clear(acc)
            for k in T.Pipelined(T.ceildiv(n, bk), num_stages=3):
                T.copy(A[by * bm, k * bk], A_s)
                T.copy(B[k * bk, bx * bn], B_s)
                T.gemm(A_s, B_s, acc)
            T.copy(acc, C[by * bm, bx * bn])

    return main


def _cpu_seconds() -> float:
    """CPU time of this process and of its waited-for children (the host compiler)."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


_clock = time.perf_counter  # _cpu_seconds with --cpu-time


def _timed(fn) -> float:
    start = _clock()
    fn()
    return _clock() - start


def _median_call(kernel, args, repeat: int) -> float:
    kernel(*args)  # warm-up
    return statistics.median(_timed(lambda: kernel(*args)) for _ in range(repeat))


def run_case(case: str) -> float:
    """Seconds of one measurement of `case` in this process (see the module docstring)."""
    import torch

    import tilelang

    target = "musa -arch=mp_31"
    if case == "compile_hit":
        program = _add_program(4096)  # tracing the program is the user's script, not tilelang.compile
        return _timed(lambda: tilelang.compile(program, out_idx=-1, target=target))
    if case.startswith("compile_miss"):
        program, out_idx = (_add_program(4096), -1) if case.endswith("add") else (_gemm_program(), None)
        tilelang.disable_cache()  # no entry is read or written; the simulator prelude stays in the cache dir
        return _timed(lambda: tilelang.compile(program, out_idx=out_idx, target=target))
    if case == "lower_gemm":
        from tilelang_musa.codegen import generate
        from tilelang_musa.target import determine_target
        from tilelang_musa.transform import lower, normalize_pass_configs

        program, musa = _gemm_program(), determine_target(target)
        work = lambda: generate(lower(program, musa, normalize_pass_configs({})), musa, "k")  # noqa: E731
        work(), work()
        return statistics.median(_timed(work) for _ in range(5))
    if case == "lower_stream_k":
        from tilelang_musa.codegen import generate
        from tilelang_musa.target import determine_target
        from tilelang_musa.transform import lower_program, normalize_pass_configs, program_passes

        program, musa = _stream_k_gemm_program(), determine_target("musa -arch=mp_22")
        configs = normalize_pass_configs({"tl.stream_k": 3})

        def work():
            return generate(lower_program(program_passes(program, musa, configs), musa, configs), musa, "k")

        work()
        return _timed(work)
    if case == "sim_add":
        kernel = tilelang.compile(_add_program(ADD_N), out_idx=-1, target=target)
        a, b = torch.randn(ADD_N), torch.randn(ADD_N)
        torch.testing.assert_close(kernel(a, b), a + b)
        return _median_call(kernel, (a, b), 5)
    if case == "sim_gemm":
        kernel = tilelang.compile(_gemm_program(), target=target)  # its T.empty output is returned
        a, b = torch.randn(1024, 1024, dtype=torch.float16), torch.randn(1024, 1024, dtype=torch.float16)
        torch.testing.assert_close(kernel(a, b).float(), a.float() @ b.float(), rtol=1e-2, atol=1e-1)
        return _median_call(kernel, (a, b), 3)
    if case == "sim_flash_attention":
        sys.path.insert(0, str(Path.cwd() / "examples" / "flash_attention"))
        import flash_attention as fa  # noqa: E402  (the side's example)

        kernel = fa.flash_attention(1, 4, 256, 64, False)
        q, k, v = (torch.randn(1, 256, 4, 64, dtype=torch.float16) for _ in range(3))
        torch.testing.assert_close(kernel(q, k, v).float(), fa.ref_program(q, k, v, False).float(), rtol=1e-2,
                                   atol=1e-2)
        return _median_call(kernel, (q, k, v), 3)
    raise ValueError(case)


# ---- the sides ---------------------------------------------------------------------------------------------------

def _launcher_pyx(root: Path) -> Path:
    [pyx] = [p for p in (root / "tilelang_musa").rglob("_launcher.pyx")]
    return pyx


def prepare_revision(rev: str, into: Path, native: Path | None = None) -> Path:
    """`rev`'s tree under `into`, with this checkout's native library (or `native`, one built from `rev`'s C++, when
    the code generator changed in between) and a launcher for its own .pyx."""
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev], check=True, capture_output=True).stdout
    with tarfile.open(fileobj=BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    (into / "tilelang_musa" / "lib").mkdir(exist_ok=True)
    shutil.copy2(native or ROOT / "tilelang_musa" / "lib" / "libtilelang_musa.so", into / "tilelang_musa" / "lib")
    ours, theirs = _launcher_pyx(ROOT), _launcher_pyx(into)
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    built = next(ours.parent.glob("_launcher*.so"))
    target = theirs.parent / f"_launcher{suffix}"
    if filecmp.cmp(ours, theirs, shallow=False) and ours.relative_to(ROOT) == theirs.relative_to(into):
        shutil.copy2(built, target)
        return into
    module = ".".join(theirs.relative_to(into).with_suffix("").parts)
    cpp = into / "_launcher.cpp"
    subprocess.run([sys.executable, "-m", "cython", "--cplus", "-3", "--module-name", module, str(theirs), "-o",
                    str(cpp)], check=True, capture_output=True)
    includes = sysconfig.get_paths()["include"]
    subprocess.run(["g++", "-O2", "-shared", "-fPIC", f"-I{includes}", str(cpp), "-o", str(target)], check=True,
                   capture_output=True)
    return into


def measure(side: Path, case: str, cache: Path, cpu_time: bool = False) -> float:
    env = dict(os.environ, PYTHONPATH=str(side), TILELANG_CACHE_DIR=str(cache))
    env.pop("TILELANG_TEMPLATES", None)
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", case] + (["--cpu-time"] if cpu_time else [])
    proc = subprocess.run(cmd, cwd=side, env=env, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"{case} failed at {side}:\n{proc.stderr[-3000:]}")
    return float(proc.stdout.strip().splitlines()[-1])


def _show(seconds: float) -> str:
    return f"{seconds * 1e3:.1f} ms" if seconds < 1 else f"{seconds:.2f} s"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--against", required=False, help="the earlier git revision")
    parser.add_argument("--native", type=Path, help="the revision's libtilelang_musa.so (default: this checkout's; "
                        "needed when src/codegen changed since the revision)")
    parser.add_argument("--repeat", type=int, default=3, help="rounds (each side measured once per round)")
    parser.add_argument("--case", action="append", choices=CASES, help="only these cases (default: all)")
    parser.add_argument("--cpu-time", action="store_true", help="CPU time of the process and its compiler, not wall")
    parser.add_argument("--child", choices=CASES, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        global _clock
        _clock = _cpu_seconds if args.cpu_time else time.perf_counter
        print(run_case(args.child))
        return
    if not args.against:
        parser.error("--against REV is required")
    with tempfile.TemporaryDirectory(prefix="tilelang_side_by_side_") as tmp:
        tmp = Path(tmp)
        sides = {"HEAD": ROOT, args.against: prepare_revision(args.against, tmp / "revision", args.native)}
        print(f"| case | this checkout | at {args.against} | {args.against} / this |\n|---|---|---|---|", flush=True)
        for case in args.case or CASES:
            times: dict[str, list[float]] = {name: [] for name in sides}
            for round_ in range(args.repeat):
                for name, side in sides.items():
                    cache = tmp / f"cache-{'head' if side is ROOT else 'rev'}"
                    if case.startswith("compile_") and round_ == 0:
                        measure(side, case, cache)  # builds the prelude (and the entry a hit reads); not counted
                    times[name].append(measure(side, case, cache, args.cpu_time))
            new, old = (statistics.median(times[name]) for name in sides)
            print(f"| {case} | {_show(new)} | {_show(old)} | {old / new:.2f}x |", flush=True)


if __name__ == "__main__":
    main()
