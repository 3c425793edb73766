"""Device templates for reductions, prefix sums and atomics (`src/tl_templates/musa/{reduce,scan,atomic}.h`),
run in the CPU simulator through handwritten kernels (`testing/sim_kernels/tpl_*.mu`).

Each kernel file is compiled once per test session and arch with the simulator toolchain's command (g++ against
`src/tl_templates/sim`), two builds at a time, shared by xdist's workers, and its host entry points are called
through ctypes on numpy arrays.
mp_22 (128-lane warps) exercises the shared-memory path that replaces shuffles with lane offsets of 32 and more.
Inputs are fresh seeded random data and outputs start poisoned (all-one bits: NaN, or -1). Sums use integer-valued
inputs small enough that every partial sum is exact in the element type, so results compare bit for bit whatever
order the threads combine in.
"""

from __future__ import annotations

import ctypes
import subprocess
import threading
import zlib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
import torch

REPO = Path(__file__).resolve().parents[1]
KERNELS = Path(__file__).resolve().parent / "sim_kernels"
ARCHS = (220, 310)
KERNEL_FILES = ("tpl_reduce", "tpl_scan", "tpl_atomic")

from sim_build import SimLibrary, build_shared, sim_compile_command  # noqa: E402



@pytest.fixture(scope="module")
def build(session_dir):
    """build(name, arch) -> SimLibrary. The first call starts every (file, arch) build, two at a time; the session's
    processes share the libraries (sim_build.build_shared: xdist's workers build each once)."""
    root = session_dir / "sim_kernels"
    pool = ThreadPoolExecutor(max_workers=2)
    futures = {}

    def compile_one(name: str, arch: int) -> tuple[Path | None, str]:
        return build_shared(root, f"{name}_{arch}",
                            lambda output: sim_compile_command(KERNELS / f"{name}.mu", output, arch))

    def _build(name: str, arch: int) -> SimLibrary:
        if not futures:
            for key in [(n, a) for n in KERNEL_FILES for a in ARCHS]:
                futures[key] = pool.submit(compile_one, *key)
        output, stderr = futures[(name, arch)].result()
        if output is None:
            pytest.fail(f"compiling {name}.mu for arch {arch} failed:\n{stderr}")
        return SimLibrary(output)

    yield _build
    pool.shutdown(wait=True)


def ptr(array: np.ndarray) -> ctypes.c_void_p:
    return array.ctypes.data_as(ctypes.c_void_p)


def rng_for(*key) -> np.random.Generator:
    """A generator seeded from the test's parameters: fresh data per case, reproducible per case."""
    return np.random.default_rng(zlib.crc32(repr(key).encode()))


def run_concurrently(launch, copies: int = 2) -> list[int]:
    """Call launch(k) for k < copies from as many OS threads, released together (ctypes drops the GIL): the
    simulator runs each launch on its calling thread, so updates of shared counters may truly race. How much the
    launches overlap is up to the OS; test_cas_update_retries_after_a_racing_write forces the retry path."""
    codes = [None] * copies
    start = threading.Barrier(copies)

    def work(k: int):
        start.wait()
        codes[k] = launch(k)

    workers = [threading.Thread(target=work, args=(k,)) for k in range(copies)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    return codes


# ---- element types -------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DType:
    """An element type as the kernels see it: `storage` is its numpy layout (bfloat16 is held as uint16 bits)."""

    name: str
    code: int  # the kernels' dtype code
    storage: type
    is_float: bool

    @property
    def bits_type(self) -> type:
        return {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[np.dtype(self.storage).itemsize]

    @property
    def nbits(self) -> int:
        return 8 * np.dtype(self.storage).itemsize

    def encode(self, values) -> np.ndarray:
        """Round (nearest even) or convert values to stored elements."""
        values = np.asarray(values)
        if self.name == "bfloat16":
            as_bf16 = torch.from_numpy(values.astype(np.float32)).to(torch.bfloat16)
            return as_bf16.view(torch.int16).numpy().view(np.uint16)
        return values.astype(self.storage)

    def decode(self, stored: np.ndarray) -> np.ndarray:
        """Stored elements as float64 (floating point) or int64."""
        if self.name == "bfloat16":
            return torch.from_numpy(stored.view(np.int16)).view(torch.bfloat16).double().numpy()
        return stored.astype(np.float64 if self.is_float else np.int64)

    def bits(self, stored: np.ndarray) -> np.ndarray:
        return stored.view(self.bits_type)

    def from_bits(self, bits: np.ndarray) -> np.ndarray:
        return bits.astype(self.bits_type).view(self.storage)

    def poison(self, shape) -> np.ndarray:
        out = np.empty(shape, self.storage)
        out.view(np.uint8)[...] = 0xFF
        return out


FLOAT32 = DType("float32", 0, np.float32, True)
FLOAT16 = DType("float16", 1, np.float16, True)
BFLOAT16 = DType("bfloat16", 2, np.uint16, True)
INT32 = DType("int32", 3, np.int32, False)
FLOAT64 = DType("float64", 4, np.float64, True)
INT64 = DType("int64", 5, np.int64, False)
REDUCE_DTYPES = (FLOAT32, FLOAT16, BFLOAT16, INT32)

# The largest integer magnitude every partial sum may reach and stay exact.
EXACT_INT = {"float32": 2**24, "float16": 2048, "bfloat16": 256, "int32": 2**31 - 1, "float64": 2**53,
             "int64": 2**63 - 1}  # fmt: skip


def assert_same_bits(dtype: DType, got: np.ndarray, expected: np.ndarray):
    np.testing.assert_array_equal(dtype.bits(got), dtype.bits(expected))


# ---- AllReduce -----------------------------------------------------------------------------------------------------

OPS = ("sum", "max", "min", "abssum", "absmax", "bitand", "bitor", "bitxor")  # kernel op code = index
POW2 = [2**i for i in range(11)]
FULL_GRID = [(t, s) for t in POW2 for s in POW2 if t * s <= 1024]
# Shuffles only (span 2 and 32), shuffles then shared memory (span 128 and 1024), shared memory only (Scale 64).
MIXED_GRID = [(2, 1), (16, 2), (8, 16), (256, 4), (4, 64)]
ON_FULL_GRID = [("sum", FLOAT32)]  # as instantiated in tpl_reduce.mu


def all_reduce_cases():
    cases = {(op, dt.name, t, s): (op, dt, t, s) for op in OPS for dt in REDUCE_DTYPES for t, s in MIXED_GRID}
    cases.update({(op, dt.name, t, s): (op, dt, t, s) for op, dt in ON_FULL_GRID for t, s in FULL_GRID})
    return [pytest.param(*case, id=f"{case[0]}-{case[1].name}-T{case[2]}xS{case[3]}") for case in cases.values()]


def launch_shape(threads: int, scale: int, warp: int) -> tuple[int, int]:
    """(blocks, block threads): several groups per block, whole warps, and two blocks."""
    return 2, min(1024, max(2 * threads * scale, warp))


def biased_bits(op: str, dtype: DType, n: int, members: int, rng) -> np.ndarray:
    """Bit patterns whose and/or over `members` elements keeps a few bits set/clear (uniform bits would reduce to
    all-zero / all-one); xor takes uniform bits."""
    full = (1 << dtype.nbits) - 1
    if op == "bitxor":
        return rng.integers(0, full, n, endpoint=True, dtype=np.uint64)
    one_bit = np.left_shift(np.uint64(1), rng.integers(0, dtype.nbits, n).astype(np.uint64))
    hit = rng.random(n) < min(1.0, 2.0 / members)
    if op == "bitand":
        return np.where(hit, np.uint64(full) ^ one_bit, np.uint64(full))
    return np.where(hit, one_bit, np.uint64(0))


def all_reduce_input(op: str, dtype: DType, n: int, members: int, rng) -> np.ndarray:
    if op.startswith("bit"):
        return dtype.from_bits(biased_bits(op, dtype, n, members, rng))
    if op in ("sum", "abssum"):
        if dtype.name == "bfloat16" and op == "abssum":
            return dtype.encode(rng.random(n) < 0.1)  # sparse ones: a 1024-member sum stays below 256
        bound = min(1000, EXACT_INT[dtype.name] // 1024) if dtype.is_float else 10**6
        low = 0 if op == "abssum" else -bound  # AbsSum combines partials the caller already made absolute
        return dtype.encode(rng.integers(low, bound, n, endpoint=True))
    if dtype.is_float:
        return dtype.encode(rng.standard_normal(n) * 100)
    return dtype.encode(rng.integers(-(2**31), 2**31, n))


def all_reduce_reference(op: str, dtype: DType, x: np.ndarray, threads: int, scale: int) -> np.ndarray:
    """Every thread's expected result: its group is the `threads` elements `scale` apart in its span."""
    if op.startswith("bit"):
        ufunc = {"bitand": np.bitwise_and, "bitor": np.bitwise_or, "bitxor": np.bitwise_xor}[op]
        groups = dtype.bits(x).reshape(-1, threads, scale)
        reduced = dtype.from_bits(ufunc.reduce(groups, axis=1))
    else:
        groups = dtype.decode(x).reshape(-1, threads, scale)
        if op in ("sum", "abssum"):
            reduced = groups.sum(axis=1)
        elif op == "max":
            reduced = np.fmax.reduce(groups, axis=1)
        elif op == "min":
            reduced = np.fmin.reduce(groups, axis=1)
        else:
            reduced = np.fmax.reduce(np.abs(groups), axis=1)
        reduced = dtype.encode(reduced)
    return np.broadcast_to(reduced[:, None, :], (reduced.shape[0], threads, scale)).reshape(-1)


def run_all_reduce(lib, op: str, dtype: DType, threads: int, scale: int, a: np.ndarray, b: np.ndarray):
    blocks, block = launch_shape(threads, scale, lib.warp_size())
    assert a.size == b.size == blocks * block
    out_a, out_b = dtype.poison(a.size), dtype.poison(b.size)
    rc = lib.call_all_reduce(OPS.index(op), dtype.code, threads, scale, ptr(a), ptr(b), ptr(out_a), ptr(out_b),
                             blocks, block)  # fmt: skip
    assert rc == 0, lib.error()
    return out_a, out_b


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("op,dtype,threads,scale", all_reduce_cases())
def test_all_reduce_combines_each_strided_group(build, arch, op, dtype, threads, scale):
    """Two back-to-back calls sharing red_buf each return their group's reduction to every member."""
    lib = build("tpl_reduce", arch)
    n = int(np.prod(launch_shape(threads, scale, lib.warp_size())))
    rng = rng_for(arch, op, dtype.name, threads, scale)
    a, b = (all_reduce_input(op, dtype, n, threads, rng) for _ in range(2))
    out_a, out_b = run_all_reduce(lib, op, dtype, threads, scale, a, b)
    assert_same_bits(dtype, out_a, all_reduce_reference(op, dtype, a, threads, scale))
    assert_same_bits(dtype, out_b, all_reduce_reference(op, dtype, b, threads, scale))


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("threads,scale", FULL_GRID, ids=[f"T{t}xS{s}" for t, s in FULL_GRID])
def test_all_reduce_inexact_float_sum_gives_every_member_the_same_bits(build, arch, threads, scale):
    lib = build("tpl_reduce", arch)
    n = int(np.prod(launch_shape(threads, scale, lib.warp_size())))
    rng = rng_for(arch, threads, scale)
    a, b = (rng.standard_normal(n).astype(np.float32) for _ in range(2))
    out_a, _ = run_all_reduce(lib, "sum", FLOAT32, threads, scale, a, b)
    groups = out_a.reshape(-1, threads, scale)
    assert (groups.view(np.uint32) == groups[:, :1, :].view(np.uint32)).all()
    x = a.astype(np.float64).reshape(-1, threads, scale)
    bound = threads * np.finfo(np.float32).eps * np.abs(x).sum(axis=1)  # loose rounding bound of a float32 tree
    assert (np.abs(groups[:, 0, :] - x.sum(axis=1)) <= bound).all()


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("dtype", [FLOAT32, FLOAT16, BFLOAT16], ids=lambda d: d.name)
@pytest.mark.parametrize("op", ["max", "min"])
def test_all_reduce_max_min_skip_nan_unless_all_members_are_nan(build, arch, dtype, op):
    threads, scale = 256, 4
    lib = build("tpl_reduce", arch)
    n = int(np.prod(launch_shape(threads, scale, lib.warp_size())))
    rng = rng_for(arch, dtype.name, op)
    values = rng.standard_normal(n) * 100
    values[rng.random(n) < 0.3] = np.nan
    values.reshape(-1, threads, scale)[0, :, 1] = np.nan  # one group entirely NaN
    a, b = dtype.encode(values), dtype.encode(rng.standard_normal(n))
    out_a, _ = run_all_reduce(lib, op, dtype, threads, scale, a, b)
    expected = all_reduce_reference(op, dtype, a, threads, scale)
    assert np.isnan(dtype.decode(expected)).sum() == threads  # exactly the all-NaN group
    assert_same_bits(dtype, out_a, expected)


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("dtype", [FLOAT32, FLOAT16, BFLOAT16], ids=lambda d: d.name)
@pytest.mark.parametrize("op", ["max", "min", "absmax"])
def test_all_reduce_orders_signed_zeros_so_members_agree(build, arch, dtype, op):
    """-0 and +0 compare equal; the functors still order -0 below +0, so op(a, b) and op(b, a) give the same bits."""
    threads, scale = 8, 16
    lib = build("tpl_reduce", arch)
    n = int(np.prod(launch_shape(threads, scale, lib.warp_size())))
    negative = rng_for(arch, dtype.name, op).random(n) < 0.5
    groups = negative.reshape(-1, threads, scale)  # a view: the first group all -0, the second all +0
    groups[0, :, 0], groups[0, :, 1] = True, False
    a = dtype.encode(np.where(negative, -0.0, 0.0))
    out_a, _ = run_all_reduce(lib, op, dtype, threads, scale, a, a.copy())
    result_negative = {"max": groups.all(axis=1), "min": groups.any(axis=1), "absmax": np.zeros_like(groups[:, 0])}[op]
    expected = np.broadcast_to(result_negative[:, None, :], groups.shape).reshape(-1)
    assert_same_bits(dtype, out_a, dtype.encode(np.where(expected, -0.0, 0.0)))


# ---- Scan (sums, maxima) ----------------------------------------------------------------------------------------------

CUMSUM_KINDS = {"1d": 0, "2d_axis0": 1, "2d_axis1": 2}
SHAPES_1D = [(1, 1), (1, 7), (1, 33), (1, 100), (1, 1000), (1, 4099)]
SHAPES_2D = [(1, 37), (5, 3), (17, 33), (3, 300), (300, 3), (65, 9), (129, 63)]
# Threads -> block threads: threads beyond `Threads` (in the same or other warps) call along and must stay idle.
CUMSUM_BLOCK = {1: 32, 64: 128, 96: 128, 128: 128, 256: 256, 1024: 1024}


def cumsum_cases():
    """Every element type at Threads = 128, and float at the other thread counts (as instantiated)."""
    configs = [(d, 128) for d in REDUCE_DTYPES] + [(FLOAT32, t) for t in (1, 64, 96, 256, 1024)]
    return [pytest.param(kind, dtype, threads, id=f"{kind}-{dtype.name}-T{threads}")
            for kind in CUMSUM_KINDS for dtype, threads in configs]  # fmt: skip


def cumsum_reference(x: np.ndarray, kind: str, reverse: bool, scan=np.cumsum) -> np.ndarray:
    """x is (blocks, H, W); the scan runs along W for 1D and axis 1, along H for axis 0."""
    axis = 1 if kind == "2d_axis0" else 2
    if reverse:
        return np.flip(scan(np.flip(x, axis), axis), axis)
    return scan(x, axis)


def run_cumsum(lib, dtype: DType, threads: int, kind: str, reverse: bool, in_place: bool, x: np.ndarray, op: int = 0):
    blocks, height, width = x.shape
    out = dtype.poison((blocks, 2, height, width))
    rc = lib.call_scan(op, dtype.code, threads, CUMSUM_KINDS[kind], int(reverse), int(in_place), ptr(x), ptr(out),
                       height, width, blocks, CUMSUM_BLOCK[threads])  # fmt: skip
    assert rc == 0, lib.error()
    return out[:, 0], out[:, 1]


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("in_place", [False, True], ids=["out_of_place", "in_place"])
@pytest.mark.parametrize("reverse", [False, True], ids=["forward", "reverse"])
@pytest.mark.parametrize("kind,dtype,threads", cumsum_cases())
def test_cumsum_matches_numpy_on_odd_shapes(build, arch, in_place, reverse, kind, dtype, threads):
    """Integer-valued inputs: the float accumulator is exact, so each output is the exact sum rounded once."""
    lib = build("tpl_scan", arch)
    bound = 4 if dtype.name in ("float16", "bfloat16") else 50
    for shape in SHAPES_1D if kind == "1d" else SHAPES_2D:
        rng = rng_for(arch, in_place, reverse, kind, shape, dtype.name, threads)
        x = dtype.encode(rng.integers(-bound, bound, (2, *shape), endpoint=True))
        dst, src_after = run_cumsum(lib, dtype, threads, kind, reverse, in_place, x)
        expected = dtype.encode(cumsum_reference(dtype.decode(x), kind, reverse))
        assert (dtype.bits(dst) == dtype.bits(expected)).all(), f"H x W = {shape}: {dtype.decode(dst)}"
        if not in_place:
            assert (dtype.bits(src_after) == dtype.bits(x)).all(), f"H x W = {shape}: src was modified"


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("kind,shape", [("1d", (1, 4099)), ("2d_axis0", (129, 63)), ("2d_axis1", (3, 300))])
def test_cumsum_of_random_floats_is_close_to_float64(build, arch, kind, shape):
    lib = build("tpl_scan", arch)
    x = rng_for(arch, kind, shape).standard_normal((2, *shape)).astype(np.float32)
    dst, _ = run_cumsum(lib, FLOAT32, 256, kind, True, False, x)
    expected = cumsum_reference(x.astype(np.float64), kind, True)
    scale = cumsum_reference(np.abs(x.astype(np.float64)), kind, True)
    assert (np.abs(dst - expected) <= 1e-5 * scale + 1e-6).all()


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("reverse", [False, True], ids=["forward", "reverse"])
@pytest.mark.parametrize("dtype,threads", [(d, 128) for d in REDUCE_DTYPES] + [(FLOAT32, 1024)],
                         ids=lambda v: getattr(v, "name", str(v)))
def test_cummax_matches_numpy(build, arch, reverse, dtype, threads):
    """Running maxima (tl::MaxOp) are exact: every kind, odd shapes, negative values (the identity is the lowest
    value, not 0), in place and not."""
    lib = build("tpl_scan", arch)
    for kind in CUMSUM_KINDS:
        shapes = (SHAPES_1D[-1], SHAPES_1D[3]) if kind == "1d" else (SHAPES_2D[2], SHAPES_2D[-1])
        for shape, in_place in zip(shapes, (False, True)):
            rng = rng_for(arch, reverse, kind, shape, dtype.name, threads, "max")
            x = dtype.encode(rng.integers(-1000 if dtype.name == "int32" else -200, -1, (2, *shape), endpoint=True))
            dst, _ = run_cumsum(lib, dtype, threads, kind, reverse, in_place, x, op=1)
            expected = dtype.encode(cumsum_reference(dtype.decode(x), kind, reverse, np.maximum.accumulate))
            assert (dtype.bits(dst) == dtype.bits(expected)).all(), f"{kind} {shape}: {dtype.decode(dst)}"


# ---- atomics -------------------------------------------------------------------------------------------------------

ATOMIC_DTYPES = (FLOAT32, FLOAT16, BFLOAT16, INT32, FLOAT64, INT64)
SCALAR_KINDS = {("add", True): 0, ("add", False): 1, ("max", True): 2, ("max", False): 3, ("min", True): 4,
                ("min", False): 5}  # fmt: skip
BLOCKS, THREADS = 16, 128  # per launch; two launches race on the same counters
COUNTERS = 31  # odd: 16-bit counters sit in both halves of their 32-bit words


def scalar_atomic(lib, dtype: DType, op: str, ret: bool, counters: np.ndarray, vals: list[np.ndarray]):
    """Two concurrent launches; launch k updates counters with vals[k]. Returns each launch's returned values."""
    rets = [dtype.poison(v.size) for v in vals]
    kind = SCALAR_KINDS[(op, ret)]
    codes = run_concurrently(
        lambda k: lib.call_scalar(dtype.code, kind, ptr(counters), counters.size, ptr(vals[k]), ptr(rets[k]),
                                  BLOCKS, THREADS))  # fmt: skip
    assert codes == [0, 0], lib.error()
    return rets


def by_counter(values: list[np.ndarray], m: int) -> list[np.ndarray]:
    """Thread g of each launch updated counter g % m (values has one row per thread): each counter's values."""
    return [np.concatenate([v[c::m] for v in values]) for c in range(m)]


def counter_sums(values: list[np.ndarray], m: int) -> np.ndarray:
    return np.stack([group.sum(axis=0) for group in by_counter(values, m)])


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("dtype", ATOMIC_DTYPES, ids=lambda d: d.name)
def test_atomic_add_sums_every_contribution(build, arch, dtype):
    lib = build("tpl_atomic", arch)
    rng = rng_for(arch, dtype.name)
    n = BLOCKS * THREADS
    bound = 2**40 if dtype.name == "int64" else min(1000, EXACT_INT[dtype.name] // (2 * n // COUNTERS + 4))
    init = dtype.encode(rng.integers(-bound, bound, COUNTERS))
    vals = [dtype.encode(rng.integers(-bound, bound, n, endpoint=True)) for _ in range(2)]
    counters = init.copy()
    scalar_atomic(lib, dtype, "add", False, counters, vals)
    expected = dtype.decode(init) + counter_sums([dtype.decode(v) for v in vals], COUNTERS)
    assert_same_bits(dtype, counters, dtype.encode(expected))


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("dtype", ATOMIC_DTYPES, ids=lambda d: d.name)
def test_atomic_add_ret_hands_out_each_ticket_once(build, arch, dtype):
    """Adding 1 from every thread: the old values of one counter are exactly init, init + 1, ..."""
    lib = build("tpl_atomic", arch)
    n = BLOCKS * THREADS
    init = dtype.encode(rng_for(arch, dtype.name).integers(-20, 20, COUNTERS))
    counters = init.copy()
    rets = scalar_atomic(lib, dtype, "add", True, counters, [dtype.encode(np.ones(n)) for _ in range(2)])
    for c, olds in enumerate(by_counter([dtype.decode(r) for r in rets], COUNTERS)):
        start = dtype.decode(init)[c]
        np.testing.assert_array_equal(np.sort(olds), start + np.arange(olds.size))
    hits = np.array([olds.size for olds in by_counter([np.ones(n)] * 2, COUNTERS)])
    assert_same_bits(dtype, counters, dtype.encode(dtype.decode(init) + hits))


def extreme_values(dtype: DType, shape, rng) -> np.ndarray:
    if dtype.is_float:
        return dtype.encode(rng.standard_normal(shape) * 100)
    info = np.iinfo(dtype.storage)
    return dtype.encode(rng.integers(info.min, info.max, shape, endpoint=True))


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("ret", [False, True], ids=["void", "ret"])
@pytest.mark.parametrize("op", ["max", "min"])
@pytest.mark.parametrize("dtype", ATOMIC_DTYPES, ids=lambda d: d.name)
def test_atomic_max_min_keep_the_extreme(build, arch, ret, op, dtype):
    lib = build("tpl_atomic", arch)
    rng = rng_for(arch, ret, op, dtype.name)
    init = extreme_values(dtype, COUNTERS, rng)
    vals = [extreme_values(dtype, BLOCKS * THREADS, rng) for _ in range(2)]
    counters = init.copy()
    rets = scalar_atomic(lib, dtype, op, ret, counters, vals)
    reduce = np.maximum if op == "max" else np.minimum
    per_counter = by_counter([dtype.decode(v) for v in vals], COUNTERS)
    expected = [reduce.reduce(np.append(v, dtype.decode(init)[c])) for c, v in enumerate(per_counter)]
    assert_same_bits(dtype, counters, dtype.encode(np.array(expected)))
    if ret:
        for c, olds in enumerate(by_counter([dtype.decode(r) for r in rets], COUNTERS)):
            seen = np.append(per_counter[c], dtype.decode(init)[c])
            assert np.isin(olds, seen).all()  # every old value was once stored
            assert dtype.decode(init)[c] in olds  # the first update saw the initial value
            assert (reduce(olds, expected[c]) == expected[c]).all()


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("op", ["max", "min"])
@pytest.mark.parametrize("dtype", [FLOAT32, FLOAT16, BFLOAT16, FLOAT64], ids=lambda d: d.name)
def test_atomic_max_min_ignore_nan_values_and_replace_stored_nan(build, arch, op, dtype):
    lib = build("tpl_atomic", arch)
    rng = rng_for(arch, op, dtype.name)
    init = np.where(np.arange(COUNTERS) % 2 == 0, np.nan, rng.standard_normal(COUNTERS))
    raw = [rng.standard_normal(BLOCKS * THREADS) * 100 for _ in range(2)]
    for r in raw:
        r[rng.random(r.size) < 0.2] = np.nan
    counters = dtype.encode(init)
    scalar_atomic(lib, dtype, op, False, counters, [dtype.encode(r) for r in raw])
    fold = np.fmax if op == "max" else np.fmin
    expected = [fold.reduce(np.append(v, init[c])) for c, v in enumerate(by_counter(raw, COUNTERS))]
    assert not np.isnan(dtype.decode(counters)).any()
    assert_same_bits(dtype, counters, dtype.encode(np.array(expected)))


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("ret", [False, True], ids=["void", "ret"])
@pytest.mark.parametrize("lanes", [2, 4])
@pytest.mark.parametrize("dtype", [FLOAT32, FLOAT16, BFLOAT16], ids=lambda d: d.name)
def test_atomic_add_vector_adds_every_lane(build, arch, ret, lanes, dtype):
    """Lane values 1, 2, 1, 2 (Ret): a counter's old lane 0 values are tickets, and as 16-bit pairs are updated as
    one 32-bit word, each returned pair is (k, 2k) from one moment."""
    lib = build("tpl_atomic", arch)
    m, n = COUNTERS, BLOCKS * THREADS  # bfloat16 tickets stay below 2 * 4096 / 31 + 2 < 512 (even ones exact)
    rng = rng_for(arch, ret, lanes, dtype.name)
    if ret:
        raw = [np.tile([1.0, 2.0], n * lanes // 2) for _ in range(2)]
    else:
        bound = min(50, EXACT_INT[dtype.name] // (2 * n // m + 4))
        raw = [rng.integers(-bound, bound, n * lanes, endpoint=True) for _ in range(2)]
    vals = [dtype.encode(r) for r in raw]
    counters = dtype.encode(np.zeros(m * lanes))
    rets = [dtype.poison(v.size) for v in vals]
    codes = run_concurrently(
        lambda k: lib.call_vector(dtype.code, lanes, int(ret), ptr(counters), m, ptr(vals[k]), ptr(rets[k]),
                                  BLOCKS, THREADS))  # fmt: skip
    assert codes == [0, 0], lib.error()
    expected = counter_sums([r.reshape(n, lanes) for r in raw], m)
    assert_same_bits(dtype, counters, dtype.encode(expected.reshape(-1)))
    if ret:
        for olds in by_counter([dtype.decode(r).reshape(n, lanes) for r in rets], m):
            pairs = olds.reshape(-1, lanes // 2, 2)  # (update, pair, lane in pair)
            tickets = np.broadcast_to(np.arange(pairs.shape[0])[:, None], pairs.shape[:2])
            np.testing.assert_array_equal(np.sort(pairs[:, :, 0], axis=0), tickets)
            if dtype is not FLOAT32:
                np.testing.assert_array_equal(pairs[:, :, 1], 2 * pairs[:, :, 0])


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("dtype", [FLOAT16, INT32], ids=lambda d: d.name)
def test_atomic_add_converts_a_float_value_to_the_element_type(build, arch, dtype):
    lib = build("tpl_atomic", arch)
    n = BLOCKS * THREADS
    vals = (rng_for(arch, dtype.name).integers(-40, 40, n) / 4).astype(np.float32)  # quarters: int truncates
    counters = dtype.encode(np.zeros(COUNTERS))
    rc = lib.call_add_converted(dtype.code, ptr(counters), COUNTERS, ptr(vals), BLOCKS, THREADS)
    assert rc == 0, lib.error()
    converted = np.trunc(vals) if dtype is INT32 else vals
    assert_same_bits(dtype, counters, dtype.encode(counter_sums([converted], COUNTERS)))


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("dtype", [FLOAT32, FLOAT16, BFLOAT16], ids=lambda d: d.name)
def test_atomic_add_on_shared_memory_counters(build, arch, dtype):
    lib = build("tpl_atomic", arch)
    m, blocks, threads = 37, 4, 256
    vals = dtype.encode(rng_for(arch, dtype.name).integers(-10, 10, blocks * threads, endpoint=True))
    out = dtype.poison(blocks * m)
    rc = lib.call_shared(dtype.code, m, ptr(vals), ptr(out), blocks, threads)
    assert rc == 0, lib.error()
    per_thread = dtype.decode(vals).reshape(blocks, threads)
    expected = np.stack([np.bincount(np.arange(threads) % m, weights=row, minlength=m) for row in per_thread])
    assert_same_bits(dtype, out, dtype.encode(expected.reshape(-1)))


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("index", [0, 1, 2, 3])
@pytest.mark.parametrize("dtype", [FLOAT32, FLOAT16, BFLOAT16, FLOAT64], ids=lambda d: d.name)
def test_cas_update_retries_after_a_racing_write(build, arch, index, dtype):
    """A write to the element's word between the read and the CAS (by the update functor, see tpl_atomic.mu) makes
    the first CAS fail; the retry must apply the update to what the racer left, keeping the racer's write."""
    lib = build("tpl_atomic", arch)
    rng = rng_for(arch, index, dtype.name)
    data = dtype.encode(rng.integers(-20, 20, 4))
    before = data.copy()
    params = dtype.encode([3.0, 100.0])  # operand, racer's value (4/8-byte elements)
    out, calls = dtype.poison(1), np.zeros(1, np.int32)
    rc = lib.call_cas_retry(dtype.code, ptr(data), index, ptr(params), ptr(out), ptr(calls))
    assert rc == 0, lib.error()
    assert calls[0] == 2
    expected = before.copy()
    if np.dtype(dtype.storage).itemsize == 2:  # the racer bumped the neighbour's bits; our half kept its value
        expected_old = before[index]
        dtype.bits(expected)[index ^ 1] += 1
    else:  # the racer replaced the element itself
        expected_old = params[1]
    expected[index] = dtype.encode(dtype.decode(np.array([expected_old])) + 3.0)[0]
    assert_same_bits(dtype, out, np.array([expected_old], dtype.storage))
    assert_same_bits(dtype, data, expected)


# ---- compile-time checks -------------------------------------------------------------------------------------------


def compile_static_checks(tmp_path: Path, arch: int, *extra: str) -> subprocess.CompletedProcess:
    cmd = sim_compile_command(KERNELS / "tpl_static_checks.mu", tmp_path / "x.o", arch, ("-fsyntax-only", *extra))
    return subprocess.run(cmd, capture_output=True, text=True)


@pytest.fixture(scope="module")
def misuse_errors(tmp_path_factory) -> str:
    """The compiler's report on tpl_static_checks.mu with every misuse enabled (one compile for all of them)."""
    proc = compile_static_checks(tmp_path_factory.mktemp("static_checks"), 220, "-DTPL_MISUSE")
    assert proc.returncode != 0
    return proc.stderr


@pytest.mark.parametrize(
    "kernel,message",
    [
        ("threads_not_pow2", "tl::AllReduce: Threads must be a power of two"),
        ("scale_not_pow2", "tl::AllReduce: Scale must be a power of two"),
        ("span_too_wide", "tl::AllReduce: Threads * Scale exceeds the 1024 threads of a block"),
        ("warp_size_mismatch", "tl::AllReduce: WarpSize differs from the warp size of the architecture"),
        ("scan_bad_axis", "tl::Scan2D: Axis must be 0 or 1"),
        ("scan_too_many_threads", "tl::Scan: Threads must be in [1, 1024]"),
        ("atomic_bad_type", "tl atomics support float, double, half_t, bfloat16_t and 32/64-bit integer elements"),
    ],
)
def test_template_misuse_fails_to_compile_with_the_templates_message(misuse_errors, kernel, message):
    """Each misuse (kernel `kernel` of tpl_static_checks.mu) is a static_assert naming the template."""
    assert f"static assertion failed: {message}" in misuse_errors


@pytest.mark.parametrize("arch", ARCHS)
def test_correct_uses_compile_without_diagnostics(tmp_path, arch):
    proc = compile_static_checks(tmp_path, arch)
    assert proc.returncode == 0, proc.stderr
