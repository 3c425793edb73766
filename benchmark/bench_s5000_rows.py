"""The performance model against Moore Threads' measured S5000 rows (issue 40): each row's own benchmark case,
run at the row's shape with the row's kernel, modelled instead of timed.

    python benchmark/bench_s5000_rows.py PEER_TREE [--family gdn_decode ...] [--half held_out|calibration|all]
                                         [--sample-blocks 8] [--cache DIR] [--calibrated]

PEER_TREE is an extracted tile-ai/tilelang-musa checkout. Its benchmark/ package is staged unchanged but for device
strings (tools/peer_tests/s5000.py), and its own case builders and runners (benchmark/mp31/mate/benchmark_cases.py)
make each row's inputs and call the kernels exactly as when the row was measured; only their timer is replaced: the
case's function runs once more with every kernel launch inside it run in the simulator on `--sample-blocks` evenly
spaced blocks and modelled (profiler/model.py), and the launches' modelled times add up to the row's. A row is
modelled only when the record the case returns names the same kernel, operation and parameters (the kernel config
the peer's heuristics chose included) as the measured row (benchmark/s5000_split.py says which rows are held out).

Each launch's counters are kept under --cache (one pickle a row), so the table can be composed again with other
figures without running the simulator: `--calibrated` composes with benchmark/s5000_calibration.py's figures, which
that script fitted on the calibration half only.

Prints a row per modelled measurement, then a table per family of median and worst |modelled - measured| / measured.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import pickle
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmark"))
sys.path.insert(0, str(ROOT / "tools" / "peer_tests"))
from s5000_split import family, split  # noqa: E402

RUNNERS = {  # our family name: the peer's runner name (benchmark_cases.py)
    "gdn_decode": "gdn_decode", "gdn_mtp": "gdn_mtp", "gdn_prefill": "gdn_prefill",
}


def row_key(row: dict) -> str:
    return json.dumps([row["kernel"], row["operation"], row["params"]], sort_keys=True)


@dataclasses.dataclass
class Launch:
    """What one modelled launch needs to be composed again: its counters and the inputs of model_launch."""
    counters: object
    arch: str
    distinct_bytes: int
    registers: int


def install_hook(sample_blocks: int, launches: list[Launch]) -> None:
    """Every kernel launch from now on runs `sample_blocks` blocks in the simulator with the counters on, and
    appends what it counted to `launches`."""
    from tilelang_musa.jit.kernel import JITKernel
    from tilelang_musa.profiler.counters import profiling, read_counters
    from tilelang_musa.profiler.model import registers_per_thread
    from tilelang_musa.profiler.profiler import _as_list, _distinct_bytes

    launch = JITKernel.__call__

    def modelled_launch(self, *args):
        with profiling(sample_blocks=sample_blocks):
            result = launch(self, *args)
        tensors = list(args) + _as_list(result, None)
        launches.append(Launch(read_counters(self.library_path), self.target.attrs["arch"],
                               _distinct_bytes(tensors), registers_per_thread(self.get_kernel_source())))
        return result

    JITKernel.__call__ = modelled_launch


def compose(launches: list[Launch], figures_by_arch=None) -> float:
    """The row's modelled seconds: its launches' modelled times added up."""
    from tilelang_musa.profiler.arch_figures import figures_for
    from tilelang_musa.profiler.model import model_launch

    figures_by_arch = figures_by_arch or {}
    return sum(model_launch(l.counters, figures_by_arch.get(l.arch) or figures_for(l.arch), l.distinct_bytes,
                            l.registers).seconds for l in launches)


def model_rows(peer: Path, rows: list[dict], sample_blocks: int, cache: Path) -> dict[str, list[Launch]]:
    """Each row's launches, from the cache or by running its case; rows whose case is not found are left out."""
    cache.mkdir(parents=True, exist_ok=True)
    stored = {}
    for path in cache.glob(f"*_{sample_blocks}.pkl"):
        key, launches = pickle.loads(path.read_bytes())
        stored[key] = launches
    found: dict[str, list[Launch]] = {}
    wanted = {}
    for row in rows:
        if row_key(row) in stored:
            found[row_key(row)] = stored[row_key(row)]
        else:
            digest = hashlib.sha1(row_key(row).encode()).hexdigest()[:16]
            wanted[row_key(row)] = cache / f"{digest}_{sample_blocks}.pkl"
    if not wanted:
        return found

    exec(compile(_conftest(), "peer_conftest", "exec"), {})  # torch.musa's stand-in, as the peer tests get it
    from s5000 import stage

    root = stage(peer.resolve(), cache / "staged")
    (root / ".git").mkdir(exist_ok=True)  # the peer's benchmark_common finds its repository root by a .git
    sys.path.insert(0, str(root))
    from benchmark.mp31.mate import benchmark_cases as cases

    launches: list[Launch] = []
    install_hook(sample_blocks, launches)

    def modelled_timer(fn, warmup=0, rep=0):  # the case's timed call, once, every launch modelled
        launches.clear()
        fn()
        return 1.0  # the record's time: unused

    cases.benchmark_timer = modelled_timer
    kernels = {json.loads(key)[0] for key in wanted}
    for case in cases.build_cases():
        if case.runner not in RUNNERS.values():
            continue
        # the record's params are known only once the case ran; skip cases of families no wanted row has
        if f"mate/{case.runner}" not in kernels or not _may_match(case, wanted):
            continue
        start = time.perf_counter()
        try:
            record = cases.run_case(case, "cpu")
        except Exception as err:  # noqa: BLE001  (a case we cannot compile or run is reported, not modelled)
            print(f"  {case.name}: not modelled: {type(err).__name__}: {str(err).splitlines()[-1][:200]}",
                  file=sys.stderr, flush=True)
            continue
        key = row_key(record)
        if key in wanted:
            found[key] = list(launches)
            wanted[key].write_bytes(pickle.dumps((key, list(launches))))
            print(f"  modelled {case.name} ({len(launches)} launches) in {time.perf_counter() - start:.0f} s",
                  file=sys.stderr, flush=True)
        else:
            print(f"  {case.name}: no measured row has its record's parameters {record['params']}", file=sys.stderr)
        torch.cuda.empty_cache() if torch.cuda.is_available() else None
    return found


def _may_match(case, wanted: dict) -> bool:
    """Whether a wanted row has the case's shape (its config is checked once the case has run)."""
    for key in wanted:
        kernel, _, params = json.loads(key)
        if kernel != f"mate/{case.runner}":
            continue
        if case.runner == "gdn_decode" and (params["B"], params["Hq"], params["Hv"]) == case.args[:3]:
            return True
        if case.runner == "gdn_mtp" and (params["B"], params["T"], params["Hq"], params["Hv"]) == case.args[:4]:
            return True
        if case.runner == "gdn_prefill" and params["endpoints"] == "+".join(map(str, case.args[0])) \
                and (params["Hq"], params["Hv"]) == case.args[1:3]:
            return True
    return False


def _conftest() -> str:
    from run import CONFTEST
    return CONFTEST


def error_table(results: list[tuple[dict, float]]) -> str:
    by_family: dict[str, list[float]] = {}
    for row, seconds in results:
        by_family.setdefault(family(row), []).append(abs(seconds * 1e6 - row["time_us"]) / row["time_us"])
    lines = ["| family | rows | median error | worst error |", "|---|---|---|---|"]
    everything = []
    for name, errors in sorted(by_family.items()):
        everything += errors
        lines.append(f"| {name} | {len(errors)} | {statistics.median(errors):.0%} | {max(errors):.0%} |")
    if everything:
        lines.append(f"| all | {len(everything)} | {statistics.median(everything):.0%} | {max(everything):.0%} |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("peer", type=Path)
    parser.add_argument("--family", choices=sorted(RUNNERS), action="append")
    parser.add_argument("--half", choices=["held_out", "calibration", "all"], default="held_out")
    parser.add_argument("--sample-blocks", type=int, default=8)
    parser.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "s5000_rows_cache")
    parser.add_argument("--calibrated", action="store_true", help="compose with s5000_calibration.py's figures")
    parser.add_argument("--limit", type=int, default=0, help="model at most this many rows (0: all)")
    args = parser.parse_args()

    calibration, held_out = split()
    rows = {"held_out": held_out, "calibration": calibration, "all": calibration + held_out}[args.half]
    families = args.family or sorted(RUNNERS)
    rows = [r for r in rows if any(r["kernel"] == f"mate/{RUNNERS[f]}" for f in families)]
    if args.limit:
        rows = rows[:args.limit]
    figures = None
    if args.calibrated:
        from s5000_calibration import calibrated_figures
        figures = calibrated_figures()
    sys.modules["__main__"].Launch = Launch
    launches = model_rows(args.peer, rows, args.sample_blocks, args.cache)
    results = []
    print("| family | params | measured | modelled | error |")
    print("|---|---|---|---|---|")
    for row in rows:
        if row_key(row) not in launches:
            continue
        seconds = compose(launches[row_key(row)], figures)
        results.append((row, seconds))
        print(f"| {family(row)} | {json.dumps(row['params'], sort_keys=True)} | {row['time_us']:,.1f} us "
              f"| {seconds * 1e6:,.1f} us | {(seconds * 1e6 - row['time_us']) / row['time_us']:+.0%} |")
    print(f"\n{len(results)} of {len(rows)} rows modelled ({args.half}); sample of {args.sample_blocks} blocks\n")
    print(error_table(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
