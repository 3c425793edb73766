"""Fuzzer throughput with and without joint builds (`python -m tilelang_musa.fuzz --batch B`): programs a minute
on one selection of programs, the batch sizes alternating round by round.

    python benchmark/bench_fuzz_batch.py --n 12 --seed 777 --batch 1 --batch 8 [--rounds 1] [--families a,b]

Each run gets a fresh kernel cache, so that no run finds another's kernels. The simulator runtime and the
precompiled prelude, which a long campaign builds once, are linked in from --warm-cache (built there first if
missing). Prints wall time, CPU time (this process's children: the fuzz worker and its compilers) and programs a
minute per run."""

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ONCE_PER_CACHE = ("sim_prelude", "sim_runtime", "source_digests")  # those the cache holds (the runtime may not)


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _fuzz(args, batch: int, cache: Path, out: Path, n: int, start: int) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "tilelang_musa.fuzz", "--n", str(n), "--start", str(start), "--seed", str(args.seed),
           "--keep-going", "--no-shrink", "--batch", str(batch), "--out", str(out)]
    if args.families:
        cmd += ["--families", args.families]
    env = {**os.environ, "TILELANG_CACHE_DIR": str(cache), "TILELANG_SIM_WORKERS": "1"}
    return subprocess.run(cmd, env=env, capture_output=True, text=True)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--n", type=int, default=12)
    p.add_argument("--seed", type=int, default=777)
    p.add_argument("--families", default="")
    p.add_argument("--batch", type=int, action="append", help="batch sizes to compare (repeat the option)")
    p.add_argument("--rounds", type=int, default=1)
    p.add_argument("--warm-cache", default=str(Path(tempfile.gettempdir()) / "tilelang_fuzz_bench_warm"))
    args = p.parse_args()
    batches = args.batch or [1, 8]
    warm = Path(args.warm_cache)
    if not (warm / "sim_prelude").exists():  # one program on each arch builds them
        _fuzz(args, 1, warm, warm / "out", 1, args.n + 1000)
    print(f"{args.n} programs of seed {args.seed} on mp_31 and mp_22, checked mode")
    for round_ in range(args.rounds):
        for batch in batches:
            with tempfile.TemporaryDirectory(prefix="tilelang_fuzz_bench_") as tmp:
                cache = Path(tmp) / "cache"
                cache.mkdir()
                for name in ONCE_PER_CACHE:
                    if (warm / name).exists():
                        (cache / name).symlink_to(warm / name)
                wall, cpu = time.time(), _children_cpu()
                proc = _fuzz(args, batch, cache, Path(tmp) / "out", args.n, 0)
                wall, cpu = time.time() - wall, _children_cpu() - cpu
            summary = [line for line in proc.stdout.splitlines() if line.startswith("all ")]
            print(f"round {round_} --batch {batch}: {wall:.0f} s wall, {cpu:.0f} s CPU, "
                  f"{60 * args.n / wall:.1f} programs/min; {summary[0] if summary else proc.stdout[-400:]}",
                  flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
