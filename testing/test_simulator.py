"""The CPU simulator of the MUSA device (`src/tl_templates/sim/`), driven through handwritten MUSA C kernels.

Each kernel under `testing/sim_kernels/` is compiled with exactly the command the simulator toolchain runs (g++
against the simulator headers, one shared library per kernel file and arch) and its host entry points are called
through ctypes on numpy arrays. Libraries are built once per module and shared by the tests.
"""

from __future__ import annotations

import bisect
import ctypes
import threading
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
import torch

REPO = Path(__file__).resolve().parents[1]
KERNELS = Path(__file__).resolve().parent / "sim_kernels"

from sim_build import SimLibrary, build_shared, sim_compile_command  # noqa: E402

POISON32 = 0xFFFFFFFF
LAUNCH_FAILURE = 719
ASSERT = 710
INVALID_VALUE = 1
INVALID_CONFIGURATION = 9
INVALID_DEVICE_FUNCTION = 98


@pytest.fixture(scope="module")
def build(session_dir):
    """build(name, arch, *flags) -> SimLibrary, built once per test session (sim_build.build_shared)."""
    cache: dict[tuple, SimLibrary] = {}

    def _build(name: str, arch: int = 310, *extra: str) -> SimLibrary:
        key = (name, arch, extra)
        if key not in cache:
            source = KERNELS / f"{name}.mu"
            output, stderr = build_shared(session_dir / "sim_kernels", f"{name}_{arch}",
                                          lambda out: sim_compile_command(source, out, arch, extra))
            if output is None:
                pytest.fail(f"compiling {source.name} for arch {arch} failed:\n{stderr}")
            cache[key] = SimLibrary(output, source)
        return cache[key]

    return _build


def ptr(array: np.ndarray) -> ctypes.c_void_p:
    return array.ctypes.data_as(ctypes.c_void_p)


def u32(array: np.ndarray) -> np.ndarray:
    return array.view(np.uint32)


# ---- shared memory and block barriers ------------------------------------------------------------------------------


@pytest.mark.parametrize("extra", [(), ("-DTL_SIM_FIBER_UCONTEXT=1",)], ids=["asm_switch", "ucontext"])
def test_barrier_makes_neighbour_writes_visible(build, extra):
    lib = build("shared_exchange", 310, *extra)
    x = np.arange(1, 2 * 256 + 1, dtype=np.float32)
    out = np.zeros_like(x)
    assert lib.call_synced(ptr(x), ptr(out), 2, 256) == 0, lib.error()
    np.testing.assert_array_equal(out.reshape(2, 256), np.roll(x.reshape(2, 256), -1, axis=1))


@pytest.mark.parametrize("extra", [(), ("-DTL_SIM_FIBER_UCONTEXT=1",)], ids=["asm_switch", "ucontext"])
def test_missing_barrier_reads_poison_deterministically(build, extra):
    """Without the barrier thread t reads slot t+1 before thread t+1 runs: it sees the 0xFF poison, in every block."""
    lib = build("shared_exchange", 310, *extra)
    x = np.arange(1, 2 * 256 + 1, dtype=np.float32)
    out = np.zeros_like(x)
    assert lib.call_unsynced(ptr(x), ptr(out), 2, 256) == 0, lib.error()
    got = u32(out).reshape(2, 256)
    assert (got[:, :-1] == POISON32).all()
    np.testing.assert_array_equal(out.reshape(2, 256)[:, -1], x.reshape(2, 256)[:, 0])  # slot 0 was written


def test_host_threads_launch_concurrently_with_private_shared_memory(build):
    """Each OS thread runs its blocks on its own fibers and its own instance of shared memory."""
    lib = build("shared_exchange")
    blocks, threads = 64, 256
    results = {}

    def launch(k: int):
        x = np.arange(blocks * threads, dtype=np.float32) + 100000 * (k + 1)
        synced, unsynced = np.zeros_like(x), np.zeros_like(x)
        codes = (lib.call_synced(ptr(x), ptr(synced), blocks, threads),
                 lib.call_unsynced(ptr(x), ptr(unsynced), blocks, threads))  # fmt: skip
        results[k] = (codes, x, synced, unsynced)

    workers = [threading.Thread(target=launch, args=(k,)) for k in range(2)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    for codes, x, synced, unsynced in results.values():
        assert codes == (0, 0)
        np.testing.assert_array_equal(synced.reshape(blocks, threads), np.roll(x.reshape(blocks, threads), -1, axis=1))
        assert (u32(unsynced).reshape(blocks, threads)[:, :-1] == POISON32).all()


def test_static_shared_memory_is_fresh_in_every_block(build):
    """Thread 0 of block b writes only s[b]: other slots read as poison, never as an earlier block's write."""
    lib = build("shared_exchange")
    blocks = 6
    out = np.zeros((blocks, blocks), dtype=np.float32)
    assert lib.call_isolation(ptr(out), blocks) == 0, lib.error()
    np.testing.assert_array_equal(np.diag(out), np.arange(blocks, dtype=np.float32))
    assert (u32(out)[~np.eye(blocks, dtype=bool)] == POISON32).all()


def reverse_dynamic(lib: SimLibrary, smem: int, filled: int | None = None):
    out = np.zeros(smem // 4, dtype=np.float32)
    align = np.ones(1, dtype=np.uint64)
    code = lib.call(ptr(out), smem, smem // 4 if filled is None else filled, ptr(align))
    return code, out, int(align[0])


def test_dynamic_shared_memory_within_default_limit(build):
    lib = build("dynamic_smem")
    code, out, align = reverse_dynamic(lib, 16 * 1024)
    assert code == 0, lib.error()
    np.testing.assert_array_equal(out, np.arange(4096, dtype=np.float32)[::-1])
    assert align == 0  # buf_dyn_shmem is 4096-aligned, like the device's shared window


def test_dynamic_shared_memory_unwritten_part_is_poison(build):
    lib = build("dynamic_smem")
    code, out, _ = reverse_dynamic(lib, 8192, filled=1024)
    assert code == 0, lib.error()
    assert (u32(out)[:1024] == POISON32).all()  # reads of s[2047..1024]
    np.testing.assert_array_equal(out[1024:], np.arange(1024, dtype=np.float32)[::-1])


@pytest.mark.parametrize("arch,arch_name,maximum", [(310, "mp_31", 196608), (220, "mp_22", 73728)])
def test_dynamic_shared_memory_above_48k_needs_the_attribute(build, arch, arch_name, maximum):
    lib = build("dynamic_smem", arch)
    # Without musaFuncSetAttribute the default 48 KiB limit applies, as on the device.
    code, _, _ = reverse_dynamic(lib, 64 * 1024)
    assert code == INVALID_VALUE
    assert lib.error().startswith("kernel reverse_dynamic: 65536 bytes of dynamic shared memory requested")
    assert "above the kernel's limit of 49152 bytes" in lib.error()
    assert "musaFuncSetAttribute(kernel, musaFuncAttributeMaxDynamicSharedMemorySize, 65536)" in lib.error()
    # The arch's maximum is the most the attribute accepts.
    assert lib.set_smem_limit(maximum + 1) == INVALID_VALUE
    assert f"{arch_name} allows 0 to {maximum} bytes per block" in lib.error()
    assert lib.set_smem_limit(maximum) == 0, lib.error()
    for smem in (64 * 1024, maximum):
        code, out, _ = reverse_dynamic(lib, smem)
        assert code == 0, lib.error()
        np.testing.assert_array_equal(out, np.arange(smem // 4, dtype=np.float32)[::-1])
    code, _, _ = reverse_dynamic(lib, maximum + 4)
    assert code == INVALID_VALUE
    assert f"{arch_name} allows at most {maximum} bytes per block" in lib.error()


# ---- errors inside kernels -----------------------------------------------------------------------------------------


def run_barrier_case(lib: SimLibrary, which: int) -> tuple[int, str]:
    out = np.zeros(128, dtype=np.int32)
    code = lib.call(which, ptr(out))
    return code, lib.error() if code else ""


def test_exit_while_others_wait_at_barrier_is_reported(build):
    lib = build("barrier_errors")
    code, message = run_barrier_case(lib, 0)
    line = lib.line_of("if (threadIdx.x < 32) __syncthreads();")
    assert code == LAUNCH_FAILURE
    assert message == (
        "kernel exit_while_waiting: block (0,0,0), thread (32,0,0): divergent __syncthreads: this thread exited "
        f"while 32 of 64 threads of the block wait at __syncthreads (barrier_errors.mu:{line})"
    )


def test_barrier_after_other_threads_exited_is_reported(build):
    lib = build("barrier_errors")
    code, message = run_barrier_case(lib, 1)
    assert code == LAUNCH_FAILURE
    assert "kernel barrier_after_exit: block (0,0,0), thread (32,0,0): divergent __syncthreads" in message
    assert "thread (0,0,0) of the block has exited and can never arrive" in message


def test_deadlock_between_barrier_and_shuffle_is_reported(build):
    lib = build("barrier_errors")
    code, message = run_barrier_case(lib, 2)
    assert code == LAUNCH_FAILURE
    assert "kernel barrier_vs_shuffle: block (0,0,0): deadlock, no thread can proceed:" in message
    assert "33 of 64 threads of the block wait at __syncthreads" in message
    assert "31 of 32 threads of warp 0 wait at __shfl_xor_sync" in message
    assert "while thread (0,0,0) waits at __syncthreads" in message


def test_lanes_meeting_at_different_shuffles_is_reported(build):
    lib = build("barrier_errors")
    code, message = run_barrier_case(lib, 3)
    assert code == LAUNCH_FAILURE
    assert "block (0,0,0), thread (1,0,0): divergent collective: this thread reaches __shfl_down_sync" in message
    assert "while 1 of 32 threads of warp 0 wait at __shfl_xor_sync" in message


def test_trap_aborts_the_launch_naming_block_and_thread(build):
    lib = build("barrier_errors")
    code, message = run_barrier_case(lib, 4)
    assert code == LAUNCH_FAILURE
    assert message == "kernel trap_in_block_one: block (1,0,0), thread (5,0,0): __trap() was called"


def test_failed_device_assert_aborts_the_launch(build):
    lib = build("barrier_errors")
    code, message = run_barrier_case(lib, 5)
    assert code == ASSERT
    assert "kernel failing_assert: block (0,0,0), thread (3,0,0): assertion `threadIdx.x != 3' failed" in message


def test_library_keeps_working_after_failed_launches(build):
    lib = build("barrier_errors")
    for which in range(6):
        assert run_barrier_case(lib, which)[0] != 0
    out = np.zeros(64, dtype=np.int32)
    assert lib.call(6, ptr(out)) == 0, lib.error()
    np.testing.assert_array_equal(out, np.arange(64))


# ---- indices and schedule ------------------------------------------------------------------------------------------

GRID, BLOCK = (3, 2, 2), (4, 3, 2)


@pytest.fixture(scope="module")
def recorded_indices(build):
    lib = build("thread_indices")
    blocks, threads = int(np.prod(GRID)), int(np.prod(BLOCK))
    out = np.full((blocks * threads, 14), -1, dtype=np.int32)
    order = np.zeros(blocks * 2, dtype=np.int32)
    grid, block = np.array(GRID, dtype=np.uint32), np.array(BLOCK, dtype=np.uint32)
    assert lib.call(ptr(out), ptr(order), ptr(grid), ptr(block)) == 0, lib.error()
    return out.reshape(blocks, threads, 14)


def test_multi_dimensional_indices_and_extents(recorded_indices):
    bz, by, bx, tz, ty, tx = np.meshgrid(*(np.arange(n) for n in GRID[::-1] + BLOCK[::-1]), indexing="ij")
    blocks, threads = int(np.prod(GRID)), int(np.prod(BLOCK))
    expected = np.stack([tx, ty, tz, bx, by, bz], axis=-1).reshape(blocks, threads, 6)
    np.testing.assert_array_equal(recorded_indices[..., :6], expected)
    np.testing.assert_array_equal(recorded_indices[..., 6:12], np.broadcast_to(BLOCK + GRID, (blocks, threads, 6)))


def test_threads_run_in_deterministic_order(recorded_indices):
    """Thread 0 runs first, each until it waits; after a barrier the last arrival goes on, then the others in order."""
    threads = int(np.prod(BLOCK))
    linear = np.arange(threads)
    np.testing.assert_array_equal(recorded_indices[..., 12], np.broadcast_to(linear, recorded_indices.shape[:2]))
    woken = np.broadcast_to((linear + 1) % threads, recorded_indices.shape[:2])
    np.testing.assert_array_equal(recorded_indices[..., 13], woken)


# ---- warp collectives ----------------------------------------------------------------------------------------------

ARCHS = [(220, 128), (310, 32)]


def cuda_shuffle_reference(values: np.ndarray, warp: int, width: int, arg: int) -> np.ndarray:
    """CUDA's documented shuffle results per lane (idx, up, down, xor), warp by warp."""
    out = np.zeros((len(values), 4), dtype=values.dtype)
    for t in range(len(values)):
        base, lane = t - t % warp, t % warp
        seg = lane // width
        sources = (
            seg * width + arg % width,
            lane - arg if lane % width >= arg else lane,
            lane + arg if lane % width + arg < width else lane,
            lane ^ arg if (lane ^ arg) // width <= seg else lane,  # later segments are out of reach
        )
        out[t] = [values[base + s] for s in sources]
    return out


@pytest.mark.parametrize("arch,warp", ARCHS)
def test_warp_size_follows_arch(build, arch, warp):
    assert build("warp_shuffle", arch).warp_size() == warp


@pytest.mark.parametrize("arch,warp", ARCHS)
def test_xor_butterfly_sums_each_warp(build, arch, warp):
    lib = build("warp_shuffle", arch)
    x = np.random.default_rng(0).integers(-1000, 1000, size=2 * warp).astype(np.float32)
    out = np.zeros_like(x)
    assert lib.call_xor_reduce(ptr(x), ptr(out)) == 0, lib.error()
    np.testing.assert_array_equal(out, np.repeat(x.reshape(2, warp).sum(axis=1), warp))


@pytest.mark.parametrize("arch,warp", ARCHS)
def test_shuffles_follow_width_segments(build, arch, warp):
    lib = build("warp_shuffle", arch)
    x = np.random.default_rng(1).integers(-(2**30), 2**30, size=2 * warp).astype(np.int32)
    for width in sorted({1, 2, 8, 16, warp // 2, warp}):
        for arg in sorted({0, 1, 3, width - 1, width, min(width + 5, warp - 1), warp - 1}):
            out = np.zeros((2 * warp, 4), dtype=np.int32)
            assert lib.call_shuffle_kinds(ptr(x), ptr(out), width, arg) == 0, lib.error()
            expected = cuda_shuffle_reference(x, warp, width, arg)
            np.testing.assert_array_equal(out, expected, err_msg=f"width={width} arg={arg}")


@pytest.mark.parametrize("arch,warp", ARCHS)
def test_shuffle_width_must_be_a_power_of_two(build, arch, warp):
    lib = build("warp_shuffle", arch)
    x = np.zeros(2 * warp, dtype=np.int32)
    out = np.zeros((2 * warp, 4), dtype=np.int32)
    assert lib.call_shuffle_kinds(ptr(x), ptr(out), 12, 0) == LAUNCH_FAILURE
    line = lib.line_of("o[0] = __shfl_sync")
    assert f"__shfl_sync (warp_shuffle.mu:{line}): width 12 is not a power of two in [1, {warp}]" in lib.error()


@pytest.mark.parametrize("arch,warp", ARCHS)
def test_disjoint_masks_shuffle_independently(build, arch, warp):
    """Lanes with (lane % 32) < 16 and the others shuffle at once with their own masks (a mask bit names lane i of
    every 32-lane quarter on 128-lane warps); reading a lane outside the mask gives all-one bits."""
    lib = build("warp_shuffle", arch)
    x = np.arange(100, 100 + 2 * warp, dtype=np.int32)
    out = np.zeros((2 * warp, 2), dtype=np.int32)
    assert lib.call_split_masks(ptr(x), ptr(out)) == 0, lib.error()
    t = np.arange(2 * warp)
    low = (t % warp & 31) < 16
    np.testing.assert_array_equal(out[low, 0], x[t[low] ^ 1])
    assert (out[low, 1] == -1).all()
    down = np.where(t % 16 + 1 < 16, t + 1, t)
    np.testing.assert_array_equal(out[~low, 0], x[down[~low]])


@pytest.mark.parametrize("arch,warp", ARCHS)
def test_votes_counting_barrier_and_active_mask(build, arch, warp):
    lib = build("warp_shuffle", arch)
    pred = np.zeros(2 * warp, dtype=np.int32)
    pred[[1, 4, warp - 1]] = 1  # warp 0: some lanes
    pred[warp:] = 1  # warp 1: all lanes
    out = np.zeros((2 * warp, 5), dtype=np.int32)
    assert lib.call_votes(ptr(pred), ptr(out)) == 0, lib.error()
    np.testing.assert_array_equal(out[:, 0], 1)
    np.testing.assert_array_equal(out[:, 1], np.repeat([0, 1], warp))
    if warp == 32:
        ballot = np.array([(1 << 1) | (1 << 4) | (1 << 31), 0xFFFFFFFF], dtype=np.uint32)
        np.testing.assert_array_equal(out[:, 2].view(np.uint32), np.repeat(ballot, warp))
    np.testing.assert_array_equal(out[:, 3], pred.sum())
    np.testing.assert_array_equal(out[:, 4].view(np.uint32), 0xFFFFFFFF)  # lanes that ran ahead were present


@pytest.mark.parametrize("arch,warp", ARCHS)
def test_active_mask_excludes_lanes_that_exited_before_the_call(build, arch, warp):
    lib = build("warp_shuffle", arch)
    out = np.full(2 * warp, -1, dtype=np.int32)
    assert lib.call_early_exit_activemask(ptr(out)) == 0, lib.error()
    asked = np.arange(2 * warp) % 32 >= 16
    # Lanes that left are not active; lanes that passed the same call and then left still count (lockstep view).
    np.testing.assert_array_equal(out.view(np.uint32)[asked], 0xFFFF0000)
    np.testing.assert_array_equal(out[~asked], -1)


# ---- atomics -------------------------------------------------------------------------------------------------------

COUNTERS = np.dtype([("count", "i4"), ("bits_or", "u4"), ("sum", "f4"), ("max_i", "i4"), ("min_i", "i4"),
                     ("max_f", "f4"), ("min_f", "f4"), ("cas_count", "i4"), ("exch", "i4")])  # fmt: skip


def test_atomics_from_every_thread_are_exact(build):
    lib = build("atomics")
    blocks, threads = 8, 128
    n = blocks * threads
    c = np.zeros(1, dtype=COUNTERS)
    c["max_i"], c["min_i"], c["max_f"], c["min_f"], c["exch"] = -(2**30), 2**30, -np.inf, np.inf, -1
    tickets = np.full(n, -1, dtype=np.int32)
    assert lib.call(ptr(c), ptr(tickets), blocks, threads) == 0, lib.error()
    gid = np.arange(n)
    np.testing.assert_array_equal(np.sort(tickets), gid)  # atomicAdd returned every old value exactly once
    assert c["count"][0] == n and c["cas_count"][0] == n
    assert c["bits_or"][0] == 0xFFFFFFFF
    assert c["sum"][0] == (gid % 7).sum()
    assert c["max_i"][0] == ((gid * 37) % 1001).max() and c["min_i"][0] == (500 - (gid * 37) % 1001).min()
    assert c["max_f"][0] == ((gid * 13) % 997).max() * 0.5 and c["min_f"][0] == -((gid * 13) % 997).max() * 0.25
    assert 0 <= c["exch"][0] < n


# ---- half and bfloat16 ---------------------------------------------------------------------------------------------

ALL_BITS = np.arange(65536, dtype=np.uint32).astype(np.uint16)
HALF_FORMAT = {"max_bits": 0x7BFF, "inf_bits": 0x7C00, "overflow": 2.0**16}
BF16_FORMAT = {"max_bits": 0x7F7F, "inf_bits": 0x7F80, "overflow": 2.0**128}


def bf16_bits_to_f32(bits: np.ndarray) -> np.ndarray:
    return (bits.astype(np.uint32) << 16).view(np.float32)


def half_bits_to_f64(bits: np.ndarray) -> np.ndarray:
    return bits.view(np.float16).astype(np.float64)


def round_to_format(x: np.ndarray, fmt: dict, to_f64) -> np.ndarray:
    """Reference round-to-nearest-even of float64 values onto a 16-bit format, by search in its sorted grid of
    values (no bit tricks): the distances to both neighbours are exact doubles (Sterbenz)."""
    grid_bits = np.arange(fmt["max_bits"] + 1, dtype=np.uint32).astype(np.uint16)
    grid = np.append(to_f64(grid_bits), fmt["overflow"])  # the first unrepresentable power of two stands for inf
    grid_bits = np.append(grid_bits, np.uint16(fmt["inf_bits"]))
    mag = np.abs(x)
    big = mag >= fmt["overflow"]
    idx = np.clip(np.searchsorted(grid, mag, side="right") - 1, 0, len(grid) - 2)
    lo, hi = grid[idx], grid[idx + 1]
    d_lo, d_hi = mag - lo, hi - mag
    take_hi = (d_hi < d_lo) | ((d_hi == d_lo) & (grid_bits[idx] & 1 == 1))
    bits = np.where(take_hi, grid_bits[idx + 1], grid_bits[idx])
    bits = np.where(big, np.uint16(fmt["inf_bits"]), bits).astype(np.uint16)
    return bits | (np.signbit(x).astype(np.uint16) << 15)


def tie_cases(grid_values: np.ndarray, dtype) -> np.ndarray:
    """Midpoints between neighbouring representable values, and the nearest `dtype` values on each side."""
    mid = ((grid_values[:-1] + grid_values[1:]) / 2).astype(dtype)
    inf = np.array(np.inf, dtype=dtype)
    cases = np.concatenate([mid, np.nextafter(mid, inf), np.nextafter(mid, -inf)])
    return np.concatenate([cases, -cases])


def check_narrowing(got: np.ndarray, expected: np.ndarray, source: np.ndarray, what: str):
    nan = np.isnan(source)
    np.testing.assert_array_equal(got[~nan], expected[~nan], err_msg=what)
    exp_field = 0x7C00 if "half" in what else 0x7F80
    quiet = 0x0200 if "half" in what else 0x0040
    assert ((got[nan] & exp_field) == exp_field).all() and ((got[nan] & quiet) != 0).all(), f"{what}: NaN stays NaN"
    sign = np.signbit(source[nan]).astype(np.uint16)
    np.testing.assert_array_equal(got[nan] >> 15, sign, err_msg=f"{what}: NaN sign")


@pytest.fixture(scope="module")
def fp(build):
    return build("half_bf16")


def test_half_to_float_is_exact_for_all_bit_patterns(fp):
    out = np.zeros(65536, dtype=np.float32)
    fp.half_bits_to_float(ptr(ALL_BITS), ptr(out), 65536)
    np.testing.assert_array_equal(u32(out), u32(ALL_BITS.view(np.float16).astype(np.float32)))


def test_bf16_to_float_is_exact_for_all_bit_patterns(fp):
    out = np.zeros(65536, dtype=np.float32)
    fp.bf16_bits_to_float(ptr(ALL_BITS), ptr(out), 65536)
    ref = torch.from_numpy(ALL_BITS.view(np.int16).copy()).view(torch.bfloat16).float().numpy()
    np.testing.assert_array_equal(u32(out), u32(ref))


def float_samples(rng) -> np.ndarray:
    half_grid = half_bits_to_f64(ALL_BITS[: 0x7BFF + 1])
    edges = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan, 65504, 65519.996, 65520, 2.0**-24, 2.0**-25,
                      2.0**-25 * (1 + 2.0**-20), 2.0**-26, 6.1e-5, 1e-8, 3.4e38, 1.4e-45],
                     dtype=np.float32)  # fmt: skip
    return np.concatenate([
        rng.integers(0, 2**32, size=1 << 20, dtype=np.uint64).astype(np.uint32).view(np.float32),  # any bits
        rng.uniform(-70000, 70000, size=1 << 18).astype(np.float32),
        (rng.uniform(-1, 1, size=1 << 18) * 2.0 ** rng.integers(-30, 2, size=1 << 18)).astype(np.float32),
        tie_cases(half_grid, np.float32),
        tie_cases(bf16_bits_to_f32(ALL_BITS[: 0x7F7F + 1]).astype(np.float64)[::97], np.float32),
        edges,
    ])  # fmt: skip


def double_samples(rng) -> np.ndarray:
    half_grid = half_bits_to_f64(ALL_BITS[: 0x7BFF + 1])
    bf16_grid = bf16_bits_to_f32(ALL_BITS[: 0x7F7F + 1]).astype(np.float64)
    n = 1 << 18
    return np.concatenate([
        rng.integers(0, 2**64, size=n, dtype=np.uint64).view(np.float64),  # any bits
        rng.uniform(1, 2, size=n) * 2.0 ** rng.integers(-140, 130, size=n) * rng.choice([-1.0, 1.0], size=n),
        tie_cases(half_grid, np.float64), tie_cases(bf16_grid, np.float64),
        np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 65520.0, 65519.99999999999, 2.0**-25, 2.0**-25 * (1 + 2.0**-50)]),
    ])  # fmt: skip


def test_float_to_half_rounds_to_nearest_even(fp):
    x = float_samples(np.random.default_rng(2))
    got = np.zeros(len(x), dtype=np.uint16)
    fp.float_to_half_bits(ptr(x), ptr(got), len(x))
    with np.errstate(over="ignore"):
        check_narrowing(got, x.astype(np.float16).view(np.uint16), x, "float->half")


def test_double_to_half_rounds_once(fp):
    """From double directly: rounding through float first would turn near-ties into ties."""
    x = double_samples(np.random.default_rng(3))
    got = np.zeros(len(x), dtype=np.uint16)
    fp.double_to_half_bits(ptr(x), ptr(got), len(x))
    with np.errstate(over="ignore"):
        check_narrowing(got, x.astype(np.float16).view(np.uint16), x, "double->half")
    finite = np.isfinite(x)
    np.testing.assert_array_equal(got[finite], round_to_format(x[finite], HALF_FORMAT, half_bits_to_f64))


def test_float_to_bf16_rounds_to_nearest_even(fp):
    x = float_samples(np.random.default_rng(4))
    got = np.zeros(len(x), dtype=np.uint16)
    fp.float_to_bf16_bits(ptr(x), ptr(got), len(x))
    ref = torch.from_numpy(x).to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16)
    check_narrowing(got, ref, x, "float->bf16")


def test_double_to_bf16_rounds_once(fp):
    x = double_samples(np.random.default_rng(5))
    got = np.zeros(len(x), dtype=np.uint16)
    fp.double_to_bf16_bits(ptr(x), ptr(got), len(x))
    ref = round_to_format(np.nan_to_num(x), BF16_FORMAT, lambda b: bf16_bits_to_f32(b).astype(np.float64))
    check_narrowing(got, ref, x, "double->bf16")


def test_integer_to_half(fp):
    ints = np.array([0, 1, -1, 2049, 2051, 65504, 65519, 65520, -70000, 2**53 + 1, -(2**62)], dtype=np.int64)
    got = np.zeros(len(ints), dtype=np.uint16)
    fp.int_to_half_bits(ptr(ints), ptr(got), len(ints))
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(got, ints.astype(np.float64).astype(np.float16).view(np.uint16))


def random_finite(rng, n: int, max_bits: int) -> np.ndarray:
    bits = rng.integers(0, max_bits + 1, size=n).astype(np.uint16)
    return bits | (rng.integers(0, 2, size=n).astype(np.uint16) << 15)


def exact_round(q: Fraction, fmt: dict, grid: list[float]) -> int:
    """Round an exact rational onto the format's grid (nearest, ties to even bits)."""
    mag = abs(q)
    sign = 0x8000 if q < 0 else 0
    if mag >= fmt["overflow"]:
        return sign | fmt["inf_bits"]
    i = bisect.bisect_right(grid, mag) - 1
    lo, hi = Fraction(grid[i]), Fraction(grid[i + 1])
    take_hi = hi - mag < mag - lo or (hi - mag == mag - lo and i % 2 == 1)
    bits = i + 1 if take_hi else i
    return sign | (fmt["inf_bits"] if bits > fmt["max_bits"] else bits)


@pytest.mark.parametrize("kind", ["half", "bf16"])
def test_16bit_arithmetic_is_correctly_rounded(fp, kind):
    rng = np.random.default_rng(6)
    fmt = HALF_FORMAT if kind == "half" else BF16_FORMAT
    to_f64 = half_bits_to_f64 if kind == "half" else (lambda b: bf16_bits_to_f32(b).astype(np.float64))
    n = 1 << 16
    a, b, c = (random_finite(rng, n, fmt["max_bits"]) for _ in range(3))
    # Hard fma cases: a*b exactly between two representable values, c the smallest subnormal.
    grid64 = to_f64(np.arange(fmt["max_bits"] + 1, dtype=np.uint32).astype(np.uint16))
    p = to_f64(a) * to_f64(b)
    finite = np.abs(p) < fmt["overflow"] / 2
    rounded = round_to_format(np.where(finite, p, 0), fmt, to_f64)
    rounded_above = round_to_format(np.where(finite, np.nextafter(p, np.inf), 0), fmt, to_f64)
    ties = np.flatnonzero(finite & (rounded != rounded_above))
    c[ties[:200]] = 1 | (rng.integers(0, 2, size=len(ties[:200])).astype(np.uint16) << 15)
    out = np.zeros((5, n), dtype=np.uint16)
    getattr(fp, f"{kind}_ops")(ptr(a), ptr(b), ptr(c), ptr(out), n)
    if kind == "half":
        x, y = a.view(np.float16), b.view(np.float16)
        with np.errstate(all="ignore"):
            refs = [(x + y), (x - y), (x * y), (x / y)]
        refs = [r.view(np.uint16) for r in refs]
    else:
        x, y = (torch.from_numpy(v.view(np.int16).copy()).view(torch.bfloat16) for v in (a, b))
        refs = [r.view(torch.int16).numpy().view(np.uint16) for r in (x + y, x - y, x * y, x / y)]
    for k, name in enumerate("+-*/"):
        nan = np.isnan(to_f64(refs[k]))
        np.testing.assert_array_equal(out[k][~nan], refs[k][~nan], err_msg=f"{kind} {name}")
        assert np.isnan(to_f64(out[k][nan])).all()
    grid = list(grid64) + [fmt["overflow"]]
    check = np.concatenate([ties[:200], rng.choice(n, size=2000, replace=False)])
    for i in check:
        fa, fb, fc = (float(to_f64(v[i : i + 1])[0]) for v in (a, b, c))
        exact = Fraction(fa) * Fraction(fb) + Fraction(fc)
        if exact == 0:
            continue  # the sign of an exact zero sum follows IEEE rules not modelled by exact_round
        assert out[4][i] == exact_round(exact, fmt, grid), f"{kind} fma({fa!r}, {fb!r}, {fc!r})"


def test_half_moves_through_shared_memory_and_shuffles(fp):
    x = np.random.default_rng(7).uniform(-100, 100, size=64).astype(np.float16)
    out = np.zeros(64, dtype=np.uint16)
    assert fp.call_half_roundtrip(ptr(x), ptr(out)) == 0, fp.error()
    expected = torch.from_numpy(x[np.arange(64) ^ 1].astype(np.float32)).to(torch.bfloat16)
    np.testing.assert_array_equal(out, expected.view(torch.int16).numpy().view(np.uint16))


# ---- launch validation and runtime API -----------------------------------------------------------------------------


@pytest.mark.parametrize("grid,block", [((1, 1, 1), (1025, 1, 1)), ((1, 1, 1), (32, 32, 2)), ((1, 1, 1), (1, 1, 65)),
                                        ((0, 1, 1), (32, 1, 1))])  # fmt: skip
def test_invalid_launch_configuration_is_rejected(build, grid, block):
    lib = build("launch_errors")
    out = np.zeros(2048, dtype=np.int32)
    g, b = np.array(grid, dtype=np.uint32), np.array(block, dtype=np.uint32)
    assert lib.call_dims(ptr(out), ptr(g), ptr(b)) == INVALID_CONFIGURATION
    assert lib.error().startswith("kernel fill: ")
    assert "is invalid" in lib.error()
    assert (out == 0).all()


def test_untyped_and_argumentless_launches_are_rejected(build):
    lib = build("launch_errors")
    out = np.zeros(1, dtype=np.int32)
    assert lib.call_untyped(ptr(out)) == INVALID_DEVICE_FUNCTION
    assert "musaLaunchKernel(fill): the simulator needs the kernel's typed function pointer" in lib.error()
    assert lib.call_null_args() == INVALID_VALUE
    assert lib.error() == "kernel fill: args is null but the kernel takes 2 parameters"


def test_last_error_is_kept_until_read(build):
    lib = build("launch_errors")
    lib.error_string.restype = lib.error_name.restype = ctypes.c_char_p
    assert lib.call_null_args() == INVALID_VALUE
    assert lib.peek_error() == INVALID_VALUE
    assert lib.last_error() == INVALID_VALUE
    assert lib.last_error() == 0
    assert lib.error_string(INVALID_VALUE) == b"kernel fill: args is null but the kernel takes 2 parameters"
    assert lib.error_string(0) == b"no error"
    assert lib.error_string(LAUNCH_FAILURE) == b"unspecified launch failure"
    assert lib.error_name(LAUNCH_FAILURE) == b"musaErrorLaunchFailure"


def test_device_memory_roundtrip(build):
    lib = build("launch_errors")
    x = np.arange(10, 74, dtype=np.int32)
    out = np.zeros_like(x)
    assert lib.device_roundtrip(ptr(x), ptr(out), len(x)) == 0, lib.error()
    np.testing.assert_array_equal(out, np.concatenate([np.full(32, 11), x[32:]]))


def test_stack_size_comes_from_the_environment(build, monkeypatch):
    lib = build("launch_errors")
    out = np.zeros(64, dtype=np.int32)
    one, block = np.ones(3, dtype=np.uint32), np.array([64, 1, 1], dtype=np.uint32)
    monkeypatch.setenv("TILELANG_SIM_STACK_KB", "lots")
    assert lib.call_dims(ptr(out), ptr(one), ptr(block)) == INVALID_VALUE
    assert lib.error() == "kernel fill: TILELANG_SIM_STACK_KB='lots' is not a whole number of KiB in [16, 65536]"
    monkeypatch.setenv("TILELANG_SIM_STACK_KB", "32")
    assert lib.call_dims(ptr(out), ptr(one), ptr(block)) == 0, lib.error()
    assert (out == 7).all()


@pytest.mark.parametrize("workers", ["1", "2", "7"])
def test_blocks_run_on_several_workers(build, monkeypatch, workers):
    """Blocks are independent: any number of OS-thread workers gives the same result (each block has its own
    shared memory), and a bad worker count is a launch error, not a crash."""
    monkeypatch.setenv("TILELANG_SIM_WORKERS", workers)
    lib = build("shared_exchange")
    n = 256 * 16
    data = np.arange(n, dtype=np.float32)
    out = np.full(n, np.nan, dtype=np.float32)
    assert lib.call_synced(ptr(data), ptr(out), 16, 256) == 0, lib.error()
    np.testing.assert_array_equal(out, np.roll(data.reshape(16, 256), -1, axis=1).reshape(-1))


def test_bad_worker_count_is_a_launch_error(build, monkeypatch):
    monkeypatch.setenv("TILELANG_SIM_WORKERS", "0")
    lib = build("shared_exchange")
    data = np.zeros(256, dtype=np.float32)
    out = np.zeros(256, dtype=np.float32)
    assert lib.call_synced(ptr(data), ptr(out), 1, 256) != 0
    assert "TILELANG_SIM_WORKERS='0'" in lib.error()
