"""The performance model against Moore Threads' measured S5000 rows (issue 40): each row's own benchmark case,
run at the row's shape with the row's kernel, modelled instead of timed.

    python benchmark/bench_s5000_rows.py PEER_TREE [--family gdn_decode ...] [--half held_out|calibration|all]
                                         [--sample-blocks 8] [--cache DIR] [--calibrated] [--tme-loads]

PEER_TREE is an extracted tile-ai/tilelang-musa checkout. Its benchmark/ package is staged unchanged but for device
strings (tools/peer_tests/s5000.py), and its own case builders and runners (benchmark/mp31/mate/benchmark_cases.py)
make each row's inputs and call the kernels exactly as when the row was measured; only their timer is replaced: the
case's function runs once more with every kernel launch inside it run in the simulator on `--sample-blocks` evenly
spaced blocks and modelled (profiler/model.py), and the launches' modelled times add up to the row's. A row is
modelled only when the record the case returns names the same kernel, operation and parameters (the kernel config
the peer's heuristics chose included) as the measured row (benchmark/s5000_split.py says which rows are held out).

Each launch's counters are kept under --cache (one pickle a row), so the table can be composed again with other
figures without running the simulator: `--calibrated` composes with benchmark/s5000_calibration.py's figures,
which that script fitted on the calibration half only (since issue 40's fifth stop they are arch_figures.py's, so
both give the same table; a test keeps them equal).

`--tme-loads`: every plain `T.copy` from global to shared memory (no force_async_copy / robust descriptor /
disable_tma / prefer_instruction) of the GDN prefill kernels (TME_LOADS_KERNELS) is compiled as if it said
`prefer_instruction="tma"`, as Moore Threads' compiler did for any qualifying copy when the rows were measured
(d8ffe7f3; RESULTS.md). Our compiler makes the copies that matter TME loads by itself now: the fused kernel's
q / k / a / v tiles, each copied by one thread (`if tx == 768: T.copy(...)`), are one-thread copies
(transform/one_thread_tme_loads.py), so the what-if changes only copies that many threads share, and little
(1x2048 H8: 153.0 us with it, 153.4 us without). It is kept because the GDN prefill rows in the cache were
simulated with it (their pickles carry a `_tme` suffix): the held-out tables pass it so that those counters are
used; without it, each prefill row is simulated again as we compile it (minutes a row).

The cache is keyed by the row, not by the simulator: after a change to the cycle model (src/tl_templates/sim),
remove the pickles of the rows it concerns. The tensors a row's kernel updates in place (in_place_bytes(): GDN
decode's state) are named from the row when it is composed, not cached. `--stride K` models every K-th row of the
selection (a spread sample of a family whose rows take minutes each).

Prints a row per modelled measurement, then a table per family of median and worst |modelled - measured| / measured.
"""

from __future__ import annotations

import argparse
import contextlib
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
    "sparse_mla_prefill_model1": "sparse_mla_prefill_model1",
    "mhc_pre_big_fuse": "mhc_raw", "representative_mhc_pre_big_fuse": "mhc_rep",
    "topk_sum_and_topk_group_idx": "topk_group",
}
# The peer's runners by the record's kernel name and suite (benchmark/mp31/<suite>/benchmark_cases.py).
KERNELS = {"gdn_decode": ("mate/gdn_decode", "mate"), "gdn_mtp": ("mate/gdn_mtp", "mate"),
           "gdn_prefill": ("mate/gdn_prefill", "mate"),
           "sparse_mla_prefill_model1": ("mate/sparse_mla_prefill_model1", "mate"),
           "mhc_raw": ("mhc_pre_big_fuse", "tilekernels"),
           "mhc_rep": ("representative/mhc_pre_big_fuse", "tilekernels"),
           "topk_group": ("representative/topk_sum_and_topk_group_idx", "tilekernels")}


def row_key(row: dict) -> str:
    return json.dumps([row["kernel"], row["operation"], row["params"]], sort_keys=True)


@dataclasses.dataclass
class Launch:
    """What one modelled launch needs to be composed again: its counters and the inputs of model_launch."""
    counters: object
    arch: str
    distinct_bytes: int
    registers: int
    in_place_bytes: int = 0  # set from the row (in_place_bytes()), not cached: older pickles lack it


def counts_shuffles(launches: list[Launch]) -> bool:
    """Whether the launches' counters were taken by a simulator that counts warp shuffles (older cached pickles
    lack the counter; the model then charges their shuffles as none)."""
    return all("warp_shuffles" in vars(launch.counters) for launch in launches)


def counts_chain(launches: list[Launch]) -> bool:
    """Whether the launches' counters were taken by a simulator that counts the dependent chain of arithmetic
    (src/codegen/dependence_depth.h; older pickles lack it, and the model then puts every arithmetic instruction
    on the chain)."""
    return all(getattr(launch.counters, "arithmetic_chain_units", -1) >= 0 for launch in launches)


def in_place_bytes(row: dict, launch: Launch) -> int:
    """The bytes of the tensors the row's launch reads and writes back in place, from the peer kernel's signature
    (the model cannot tell which tensor a store wrote; model_launch caps this by the bytes the stores wrote).
    GDN decode updates its float32 `state: T.Tensor([batch, head, dim_v, dim_k])` in place (`gdn_decode.py`:
    "updating ``state`` in-place"); the other families' kernels write their states to separate outputs."""
    if row["kernel"] == "mate/gdn_decode" and launch.counters.kernel.startswith("gated_deltanet_decode"):
        p = row["params"]
        return p["B"] * p["Hv"] * p["D"] * p["D"] * 4
    return 0


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
                            l.registers, getattr(l, "in_place_bytes", 0)).seconds for l in launches)


TME_LOADS_KERNELS = ("mate/gdn_prefill",)  # --tme-loads: the programs whose single-thread tile copies it concerns


@contextlib.contextmanager
def tme_loads():
    """--tme-loads: inside, plain global -> shared T.copy loads are compiled as prefer_instruction="tma" (see the
    module docstring); every other T.copy is untouched."""
    import tilelang.language as T
    from tilelang_musa.tileop.region import to_region

    plain = T.copy

    def copy(src, dst, *args, **kwargs):
        options = ("disable_tma", "force_async_copy", "src_robust_desc", "prefer_instruction", "annotations",
                   "loop_layout")
        if not args and all(kwargs.get(name) in (None, False) for name in options):
            (src_region, _), (dst_region, _) = to_region(src, "T.copy", "src"), to_region(dst, "T.copy", "dst")
            if src_region.scope == "global" and dst_region.scope.startswith("shared"):
                kwargs["prefer_instruction"] = "tma"
        return plain(src, dst, *args, **kwargs)

    T.copy = copy
    try:
        yield
    finally:
        T.copy = plain


def cache_suffix(row: dict, tme: bool) -> str:
    return "_tme" if tme and row["kernel"] in TME_LOADS_KERNELS else ""


def cached_keys(cache: Path, sample_blocks: int) -> set[str]:
    """The row keys (with their what-if suffix) whose counters the cache holds."""
    keys = set()
    for suffix in ("", "_tme"):
        for path in cache.glob(f"*_{sample_blocks}{suffix}.pkl"):
            keys.add(pickle.loads(path.read_bytes())[0] + suffix)
    return keys


def model_rows(peer: Path, rows: list[dict], sample_blocks: int, cache: Path,
               tme: bool = False) -> dict[str, list[Launch]]:
    """Each row's launches, from the cache or by running its case, with their in-place bytes (in_place_bytes());
    rows whose case is not found are left out. `tme`: --tme-loads for the rows of TME_LOADS_KERNELS (cached
    apart)."""
    found = _simulated_rows(peer, rows, sample_blocks, cache, tme)
    for row in rows:
        for launch in found.get(row_key(row), ()):
            launch.in_place_bytes = in_place_bytes(row, launch)
    return found


def _simulated_rows(peer: Path, rows: list[dict], sample_blocks: int, cache: Path,
                    tme: bool) -> dict[str, list[Launch]]:
    cache.mkdir(parents=True, exist_ok=True)
    stored = {}
    for suffix in ("", "_tme"):
        for path in cache.glob(f"*_{sample_blocks}{suffix}.pkl"):
            key, launches = pickle.loads(path.read_bytes())
            stored[key + suffix] = launches
    found: dict[str, list[Launch]] = {}
    wanted = {}
    for row in rows:
        suffix = cache_suffix(row, tme)
        if row_key(row) + suffix in stored:
            found[row_key(row)] = stored[row_key(row) + suffix]
        else:
            digest = hashlib.sha1(row_key(row).encode()).hexdigest()[:16]
            wanted[row_key(row)] = cache / f"{digest}_{sample_blocks}{suffix}.pkl"
    if not wanted:
        return found

    exec(compile(_conftest(), "peer_conftest", "exec"), {})  # torch.musa's stand-in, as the peer tests get it
    from s5000 import stage

    root = stage(peer.resolve(), cache / "staged")
    (root / ".git").mkdir(exist_ok=True)  # the peer's benchmark_common finds its repository root by a .git
    sys.path.insert(0, str(root))
    import importlib

    launches: list[Launch] = []
    install_hook(sample_blocks, launches)

    def modelled_timer(fn, warmup=0, rep=0):  # the case's timed call, once, every launch modelled
        launches.clear()
        fn()
        return 1.0  # the record's time: unused

    suites = {}
    for suite in ("mate", "tilekernels"):
        suites[suite] = importlib.import_module(f"benchmark.mp31.{suite}.benchmark_cases")
        suites[suite].benchmark_timer = modelled_timer
    ops = importlib.import_module("benchmark.mp31.tilekernels")
    kernels = {json.loads(key)[0] for key in wanted}
    cases = [(suite, case) for suite, module in suites.items() for case in module.build_cases()]
    for suite, case in cases:
        if case.runner not in KERNELS or KERNELS[case.runner][1] != suite:
            continue
        # the record's params are known only once the case ran; skip cases of families no wanted row has
        if KERNELS[case.runner][0] not in kernels or not _may_match(case, wanted):
            continue
        start = time.perf_counter()
        try:
            with tme_loads() if tme and KERNELS[case.runner][0] in TME_LOADS_KERNELS else contextlib.nullcontext():
                record = (suites[suite].run_case(case, "cpu") if suite == "mate"
                          else suites[suite].run_case(case, ops, "cpu"))
        except Exception as err:  # noqa: BLE001  (a case we cannot compile or run is reported, not modelled)
            why = (str(err).strip().splitlines() or [""])[-1][:300]
            print(f"  {case.name}: not modelled: {type(err).__name__}: {why}", file=sys.stderr, flush=True)
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
        if kernel != KERNELS[case.runner][0]:
            continue
        if case.runner == "sparse_mla_prefill_model1" and case.args == tuple(params[name] for name in (
                "seq_len_q", "seq_len_kv", "heads", "topk", "extra_seq_len_kv", "extra_topk")):
            return True
        if case.runner in ("mhc_raw", "mhc_rep") and case.args == (params["num_tokens"], params["hidden"]):
            return True
        if case.runner == "topk_group" and case.args[0] == params["groups"]:
            return True
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
    parser.add_argument("--stride", type=int, default=1,
                        help="model every STRIDE-th row of the selection (in the split's order), for a spread sample")
    parser.add_argument("--tme-loads", action="store_true",
                        help="what-if: plain global -> shared T.copy loads as TME loads (module docstring)")
    parser.add_argument("--only-cached", action="store_true", help="compose the rows already in the cache only")
    args = parser.parse_args()

    calibration, held_out = split()
    rows = {"held_out": held_out, "calibration": calibration, "all": calibration + held_out}[args.half]
    families = args.family or sorted(RUNNERS)
    rows = [r for r in rows if any(r["kernel"] == KERNELS[RUNNERS[f]][0] for f in families)]
    if args.only_cached:
        keys = cached_keys(args.cache, args.sample_blocks)
        rows = [r for r in rows if row_key(r) + cache_suffix(r, args.tme_loads) in keys]
    rows = rows[::args.stride]
    if args.limit:
        rows = rows[:args.limit]
    figures = None
    if args.calibrated:
        from s5000_calibration import calibrated_figures
        figures = calibrated_figures()
    sys.modules["__main__"].Launch = Launch
    launches = model_rows(args.peer, rows, args.sample_blocks, args.cache, args.tme_loads)
    results = []
    uncounted = unchained = 0
    print("| family | params | measured | modelled | error |")
    print("|---|---|---|---|---|")
    for row in rows:
        if row_key(row) not in launches:
            continue
        seconds = compose(launches[row_key(row)], figures)
        results.append((row, seconds))
        uncounted += not counts_shuffles(launches[row_key(row)])
        unchained += not counts_chain(launches[row_key(row)])
        print(f"| {family(row)} | {json.dumps(row['params'], sort_keys=True)} | {row['time_us']:,.1f} us "
              f"| {seconds * 1e6:,.1f} us | {(seconds * 1e6 - row['time_us']) / row['time_us']:+.0%} |")
    print(f"\n{len(results)} of {len(rows)} rows modelled ({args.half}); sample of {args.sample_blocks} blocks; "
          f"{uncounted} of them from counters without warp shuffles (charged none), {unchained} without the "
          f"dependent chain (every arithmetic instruction on it)\n")
    print(error_table(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
