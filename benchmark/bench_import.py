"""`import tilelang` next to `import torch` + `import tvm` alone, each in fresh processes.

    python benchmark/bench_import.py [--runs 5]

Prints the median wall time of each statement, and from `python -X importtime -c "import tilelang"` the time spent
in our own modules (tilelang, tilelang_musa.*: the sum of their self times) and in `tvm.runtime.disco.session`.
Results are recorded in benchmark/RESULTS.md.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys

STATEMENTS = {
    "import torch": "import torch",
    "import torch, tvm": "import torch, tvm",
    "import tilelang": "import tilelang",
}


def wall(statement: str) -> float:
    code = f"import time; t = time.perf_counter(); {statement}; print(time.perf_counter() - t)"
    return float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                check=True).stdout.split()[-1])


def importtime_self(statement: str) -> dict[str, float]:
    """Self time per module, seconds, from -X importtime."""
    err = subprocess.run([sys.executable, "-X", "importtime", "-c", statement], capture_output=True, text=True,
                         check=True).stderr
    times = {}
    for line in err.splitlines():
        if line.startswith("import time:") and "|" in line:
            self_us, _, name = line[len("import time:"):].split("|")
            if self_us.strip().isdigit():
                times[name.strip()] = int(self_us) / 1e6
    return times


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    runs = parser.parse_args().runs
    for label, statement in STATEMENTS.items():
        times = [wall(statement) for _ in range(runs)]
        print(f"{label}: {statistics.median(times):.2f} s (median of {runs})")
    ours, disco = [], []
    for _ in range(runs):
        times = importtime_self("import tilelang")
        ours.append(sum(t for name, t in times.items() if name == "tilelang" or name.startswith("tilelang_musa")))
        disco.append(times.get("tvm.runtime.disco.session", 0.0))
    print(f"our modules (self times, -X importtime): {statistics.median(ours):.3f} s (median of {runs})")
    print(f"tvm.runtime.disco.session (self time): {statistics.median(disco):.2f} s (median of {runs})")


if __name__ == "__main__":
    main()
