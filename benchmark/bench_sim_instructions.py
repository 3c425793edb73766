"""Instructions per simulated call (callgrind), by where they run: repeatable on a loaded machine, unlike time.

    python benchmark/bench_sim_instructions.py [--side <checkout>]... [--case add|flash_attention|gemm]... [--calls N]

Per side (a checkout with its native pieces built; default: this one) and case, a child process under
`valgrind --tool=callgrind --instr-atstart=no` compiles the kernel (the kernel cache of --cache-root/<side name>,
kept between runs), checks one call against torch, and only then turns instrumentation on for N calls
(callgrind's client requests, through a small library built here with the valgrind headers). One simulator worker
(TILELANG_SIM_WORKERS=1) keeps the counts independent of scheduling. The cases are bench_side_by_side.py's:
add (2^20 fp32), flash_attention (examples/flash_attention at 1x4x256x64), gemm (the README GEMM, 1024^3). The
table gives millions of instructions per call: the kernel library, the simulator runtime, the per-call Python and
launcher path (the interpreter, torch, the Cython launcher) and the rest (libc, the loader's TLS lookups, libm).
The gemm case aborts valgrind 3.19 (inside the fiber switch of the simulator's async waits): time it instead
(bench_side_by_side.py --case sim_gemm).
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CASES = ("add", "flash_attention", "gemm")
CLIENT = r"""
#include <valgrind/callgrind.h>
void measured_start(void) { CALLGRIND_ZERO_STATS; CALLGRIND_START_INSTRUMENTATION; }
void measured_stop(void) { CALLGRIND_DUMP_STATS_AT("calls"); CALLGRIND_STOP_INSTRUMENTATION; }
"""
GROUPS = (("kernel", re.compile(r"/[0-9a-f]{32}/[^/]+\.so$")), ("runtime", re.compile(r"libtilelang_musa_sim")),
          ("python+launcher", re.compile(r"python|_launcher|torch|libc10|libgomp|_ctypes|libffi")))


def child(case: str, calls: int, client: str) -> None:
    """In the side's root: build `case`, check it, then count `calls` calls."""
    import ctypes

    import torch

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from bench_side_by_side import ADD_N, _add_program, _gemm_program

    import tilelang

    target = "musa -arch=mp_31"
    if case == "add":
        kernel = tilelang.compile(_add_program(ADD_N), out_idx=-1, target=target)
        args = (torch.randn(ADD_N), torch.randn(ADD_N))
        reference = args[0] + args[1]
    elif case == "gemm":
        kernel = tilelang.compile(_gemm_program(), target=target)
        args = tuple(torch.randn(1024, 1024, dtype=torch.float16) for _ in range(2))
        reference = args[0].float() @ args[1].float()
    else:
        sys.path.insert(0, str(Path.cwd() / "examples" / "flash_attention"))
        import flash_attention as fa  # noqa: E402  (the side's example)

        kernel = fa.flash_attention(1, 4, 256, 64, False)
        args = tuple(torch.randn(1, 256, 4, 64, dtype=torch.float16) for _ in range(3))
        reference = fa.ref_program(*args, False)
    torch.testing.assert_close(kernel(*args).float(), reference.float(), rtol=1e-2, atol=1e-1)
    measured = ctypes.CDLL(client)
    measured.measured_start()
    for _ in range(calls):
        kernel(*args)
    measured.measured_stop()


def by_group(profile: Path) -> dict[str, int]:
    """The profile's self cost per group of objects (GROUPS; the rest is "other")."""
    text = subprocess.run(["callgrind_annotate", "--threshold=100", str(profile)], capture_output=True, text=True,
                          check=True).stdout
    totals: dict[str, int] = collections.Counter()
    for line in text.splitlines():
        m = re.match(r"\s*([\d,]+) \([^)]*\)\s+(.*?)(?: \[(.*)\])?$", line)
        if m is None or m.group(2).startswith("PROGRAM TOTALS"):
            continue
        obj = m.group(3) or ""
        group = next((name for name, pattern in GROUPS if pattern.search(obj)), "other")
        totals[group] += int(m.group(1).replace(",", ""))
    return totals


def measure(side: Path, case: str, calls: int, cache: Path, client: Path, work: Path) -> dict[str, int]:
    env = dict(os.environ, PYTHONPATH=str(side), TILELANG_CACHE_DIR=str(cache), TILELANG_SIM_WORKERS="1")
    env.pop("TILELANG_SIM_CHECK", None)
    out = work / f"{case}-{side.name}.%p"
    python = os.path.realpath(sys.executable)  # the binary itself: valgrind does not follow a wrapper script's exec
    cmd = ["valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={out}", python,
           str(Path(__file__).resolve()), "--child", case, "--calls", str(calls), "--client", str(client)]
    proc = subprocess.run(cmd, cwd=side, env=env, capture_output=True, text=True, check=False)
    dumps = sorted(work.glob(f"{case}-{side.name}.*.1"))
    if proc.returncode != 0 or not dumps:
        raise SystemExit(f"{case} failed at {side}:\n{proc.stderr[-3000:]}")
    return by_group(dumps[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--side", action="append", type=Path, help="a checkout (default: this one)")
    parser.add_argument("--case", action="append", choices=CASES, help="only these cases (default: all)")
    parser.add_argument("--calls", type=int, default=3, help="calls counted per case")
    parser.add_argument("--cache-root", type=Path, help="kernel caches, one per side (default: a temporary dir)")
    parser.add_argument("--child", choices=CASES, help=argparse.SUPPRESS)
    parser.add_argument("--client", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child(args.child, args.calls, args.client)
    with tempfile.TemporaryDirectory(prefix="tilelang_sim_instructions_") as tmp:
        work = Path(tmp)
        client = work / "measured.so"
        subprocess.run(["gcc", "-O2", "-shared", "-fPIC", "-x", "c", "-", "-o", str(client)], input=CLIENT,
                       text=True, check=True)
        cache_root = args.cache_root or work
        columns = ("kernel", "runtime", "python+launcher", "other")
        print("| case | side | total | " + " | ".join(columns) + " |\n|---|---|---|" + "---|" * len(columns))
        for case in args.case or CASES:
            for side in args.side or [ROOT]:
                side = side.resolve()
                totals = measure(side, case, args.calls, cache_root / side.name, client, work)
                per_call = {name: totals.get(name, 0) / args.calls / 1e6 for name in columns}
                cells = " | ".join(f"{per_call[name]:.2f}" for name in columns)
                print(f"| {case} | {side.name} | {sum(per_call.values()):.2f} | {cells} |", flush=True)


if __name__ == "__main__":
    main()
