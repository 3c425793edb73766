"""The simulator's models of MUSA's asynchronous built-ins (docs/ASYNC_MODEL.md section 2): async barriers, LDLMS
and robust copies, TME loads and stores.

The kernels are handwritten (`testing/sim_kernels/async_barrier.mu`, `async_copy.mu`, `tme.mu`), built once per
arch with the simulator toolchain's own command and called through ctypes. Each behaviour is checked against its
documented semantics, and each planted misuse against the error that names it; checked mode
(TILELANG_SIM_CHECK=1) is switched on per test through the environment, which every launch reads.
"""

from __future__ import annotations

import ctypes
import re
import subprocess
from pathlib import Path

import numpy as np
import pytest

KERNELS = Path(__file__).resolve().parent / "sim_kernels"

from sim_build import SimLibrary, build_shared, sim_compile_command  # noqa: E402

LAUNCH_FAILURE = 719
ILLEGAL_INSTRUCTION = 715
POISON32 = 0xFFFFFFFF
ENCODE_ERROR = 1000  # call_* return 1000 + the encoder's MUresult


@pytest.fixture(scope="module")
def build(session_dir):
    """build(name, arch) -> SimLibrary, built once per test session (sim_build.build_shared)."""
    cache: dict[tuple, SimLibrary] = {}

    def _build(name: str, arch: int = 310) -> SimLibrary:
        if (name, arch) not in cache:
            source = KERNELS / f"{name}.mu"
            output, stderr = build_shared(session_dir / "sim_kernels", f"{name}_{arch}",
                                          lambda out: sim_compile_command(source, out, arch))
            if output is None:
                pytest.fail(f"compiling {source.name} for arch {arch} failed:\n{stderr}")
            cache[(name, arch)] = SimLibrary(output, source)
        return cache[(name, arch)]

    return _build


@pytest.fixture
def checked(monkeypatch):
    monkeypatch.setenv("TILELANG_SIM_CHECK", "1")


def ptr(array: np.ndarray) -> ctypes.c_void_p:
    return array.ctypes.data_as(ctypes.c_void_p)


def rand(n: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).random(n, dtype=np.float32)


# ---- async barriers ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("elected", [0, 1, 2], ids=["all_lanes_arrive", "lane_0_arrives", "lane_0_arrives_and_waits"])
@pytest.mark.parametrize("check", [False, True], ids=["default", "checked"])
def test_producer_consumer_ping_pong_over_two_stages_delivers_every_row(build, monkeypatch, elected, check):
    lib = build("async_barrier")
    iters = 6
    x = rand(iters * 32, seed=elected)
    seeds = [1, 2, 3] if check else [None]
    for seed in seeds:
        if check:  # random thread orders; no race may be reported between a warp's arrival and the waiters
            monkeypatch.setenv("TILELANG_SIM_CHECK", "1")
            monkeypatch.setenv("TILELANG_SIM_SEED", str(seed))
        out = np.full(iters * 32, np.nan, dtype=np.float32)
        assert lib.call_ping_pong(iters, elected, ptr(x), ptr(out)) == 0, lib.error()
        np.testing.assert_array_equal(out, 2 * x)


def test_an_arrival_counts_once_per_warp_and_extra_arrivals_go_to_the_next_phase(build):
    lib = build("async_barrier")
    out = np.zeros(64, dtype=np.int32)
    assert lib.call_count_arrivals(ptr(out)) == 0, lib.error()
    # bits: phase of the arrive on barrier 1 | first arrive on 2 << 1 | second arrive on 2 << 2 (1 = no call)
    expected = [0 | 0 << 1 | 1 << 2] * 32 + [0 | 1 << 1 | 1 << 2] + [7] * 31
    assert out.tolist() == expected


def test_waiting_for_the_wrong_parity_is_a_deadlock_naming_barrier_phase_and_line(build):
    lib = build("async_barrier")
    assert lib.call_misuse(0, ptr(np.zeros(64, dtype=np.float32))) == LAUNCH_FAILURE
    line = lib.line_of("else __musa_async_wait(1, 1);")
    assert ("deadlock, no thread can proceed: async barrier 1 in phase 1 (parity 1): 1 of 1 warp arrivals pending; "
            f"thread (32,0,0) waits for parity 1 at async_barrier.mu:{line}") in lib.error()


def test_too_few_arrivals_is_a_deadlock_naming_the_pending_arrivals(build):
    lib = build("async_barrier")
    assert lib.call_misuse(1, ptr(np.zeros(64, dtype=np.float32))) == LAUNCH_FAILURE
    line = lib.line_of("never returns: warp 1 does not arrive")
    message = lib.error()
    assert "async barrier 1 in phase 0 (parity 0): 1 of 2 warp arrivals pending" in message, message
    assert f"waits for parity 0 at async_barrier.mu:{line}" in message, message


@pytest.mark.parametrize("mode, text", [
    (2, "__musa_async_init_arrival (async_barrier.mu:{line}): barrier id 3 is beyond the 2 barriers "
        "__musa_async_bar_record"),
    (3, "__musa_async_init_arrival (async_barrier.mu:{line}): barrier id 0 is not in 1..63"),
    (4, "__musa_async_arrive (async_barrier.mu:{line}): barrier 2 is used before __musa_async_init_arrival"),
], ids=["beyond_record", "id_0", "not_initialised"])
def test_a_bad_barrier_id_or_an_uninitialised_barrier_is_named(build, mode, text):
    lib = build("async_barrier")
    snippet = {2: "__musa_async_init_arrival(3, 1, 0)", 3: "__musa_async_init_arrival(0, 1, 0)",
               4: "if (mode == 4) __musa_async_arrive(2)"}[mode]
    assert lib.call_misuse(mode, ptr(np.zeros(64, dtype=np.float32))) == LAUNCH_FAILURE
    assert text.format(line=lib.line_of(snippet)) in lib.error()


def test_a_use_with_no_block_barrier_after_the_initialisation_is_an_error_in_checked_mode(build, checked):
    lib = build("async_barrier")
    assert lib.call_misuse(5, ptr(np.zeros(64, dtype=np.float32))) == LAUNCH_FAILURE
    init = lib.line_of("__musa_async_init_arrival(1, mode == 1 ? 2 : 1, 0)")
    use = lib.line_of("threadIdx.x == 1) __musa_async_arrive")
    assert (f"thread (1,0,0): __musa_async_arrive (async_barrier.mu:{use}): barrier 1 was initialised by thread (0,0,0) at async_barrier.mu:{init} with no block barrier between "
            "that and this use") in lib.error()


def test_a_consumer_reading_without_waiting_is_a_data_race_in_checked_mode(build, checked):
    lib = build("async_barrier")
    assert lib.call_misuse(6, ptr(np.zeros(64, dtype=np.float32))) == LAUNCH_FAILURE
    message = lib.error()
    assert "data race on byte" in message and "shared `data`" in message, message
    assert str(lib.line_of("missing __musa_async_wait(1, 0)")) in message, message


def test_async_barriers_do_not_exist_on_mp_22(tmp_path):
    source = KERNELS / "async_barrier.mu"
    command = sim_compile_command(source, tmp_path / "a.so", 220, ("-fsyntax-only",))
    proc = subprocess.run(command, capture_output=True, text=True)
    assert proc.returncode != 0
    assert ("__musa_async_bar_record is a built-in of mp_31/mp_32 (async barriers) only, but this library is "
            "compiled with -D__MUSA_ARCH__=220") in proc.stderr


# ---- LDLMS copies --------------------------------------------------------------------------------------------------

ARCHS = [310, 220]
THREADS = 128


@pytest.mark.parametrize("arch", ARCHS)
def test_wait_group_1_lands_the_older_group_only(build, arch):
    lib = build("async_copy", arch)
    x = rand(8 * THREADS, seed=3)
    out = np.full(12 * THREADS, np.nan, dtype=np.float32)
    assert lib.call_groups(THREADS, ptr(x), ptr(out), 1) == 0, lib.error()
    n = 4 * THREADS
    np.testing.assert_array_equal(out[:n], x[:n])  # group A landed at wait_group(1)
    assert (out[n:2 * n].view(np.uint32) == POISON32).all()  # group B had not
    np.testing.assert_array_equal(out[2 * n:], x[n:])  # ... until wait_group(0)


@pytest.mark.parametrize("arch", ARCHS)
def test_uncommitted_copies_are_not_waited_for_by_wait_group_but_by_wait(build, arch):
    lib = build("async_copy", arch)
    x = rand(8 * THREADS, seed=4)
    out = np.full(12 * THREADS, np.nan, dtype=np.float32)
    assert lib.call_groups(THREADS, ptr(x), ptr(out), 0) == 0, lib.error()
    n = 4 * THREADS
    # one committed group may stay in flight under wait_group(1): A had not landed either
    assert (out[:n].view(np.uint32) == POISON32).all()
    np.testing.assert_array_equal(out[2 * n:], x[n:])  # __musa_memcpy_g2s_wait() waits for everything


@pytest.mark.parametrize("arch", ARCHS)
def test_robust_copies_and_loads_read_zero_past_the_descriptor(build, arch):
    lib = build("async_copy", arch)
    x = np.arange(1, 4 * THREADS + 1, dtype=np.int32)
    valid = 4 * 37 + 8  # bytes: ints 0..38 are inside
    copied, loaded = np.full(4 * THREADS, -1, np.int32), np.full(4 * THREADS, -1, np.int32)
    first = np.full(THREADS, -1, np.int32)
    assert lib.call_robust(THREADS, ptr(x), valid, ptr(copied), ptr(loaded), ptr(first)) == 0, lib.error()
    expected = np.where(np.arange(4 * THREADS) < valid // 4, x, 0)
    np.testing.assert_array_equal(copied, expected)
    np.testing.assert_array_equal(loaded, expected)
    np.testing.assert_array_equal(first, expected[::4])


@pytest.mark.parametrize("arch", ARCHS)
def test_reading_a_copy_before_its_wait_reads_poison_and_is_named_in_checked_mode(build, monkeypatch, arch):
    lib = build("async_copy", arch)
    x = rand(4 * THREADS, seed=5)
    out = np.zeros(THREADS, dtype=np.float32)
    assert lib.call_misuse(THREADS, 0, ptr(x), ptr(out)) == 0, lib.error()
    assert (out.view(np.uint32) == POISON32).all()
    monkeypatch.setenv("TILELANG_SIM_CHECK", "1")
    assert lib.call_misuse(THREADS, 0, ptr(x), ptr(out)) == LAUNCH_FAILURE
    issue = lib.line_of("__musa_memcpy_g2s(&s[4 * t], &in[4 * t], mode == 2")
    read = lib.line_of("missing __musa_memcpy")
    assert re.search(rf"thread \((\d+),0,0\): read of shared memory at byte \d+ of `s` \(line {read}\) while an "
                     rf"asynchronous copy \(__musa_memcpy_g2s\) issued at async_copy.mu:{issue} by thread \(\1,0,0\) "
                     r"has not completed \(missing __musa_memcpy_g2s_wait\?\)", lib.error()), lib.error()


@pytest.mark.parametrize("arch", [220])
def test_a_copy_never_waited_for_is_an_error_when_its_thread_exits_in_checked_mode(build, checked, arch):
    lib = build("async_copy", arch)
    x = rand(4 * THREADS, seed=6)
    assert lib.call_misuse(THREADS, 1, ptr(x), ptr(np.zeros(THREADS, dtype=np.float32))) == LAUNCH_FAILURE
    assert ("the thread exits with 1 asynchronous copies it never waited for, the first (__musa_memcpy_g2s) issued at "
            f"async_copy.mu:{lib.line_of('mode == 2 ? 2 : 16')} (missing __musa_memcpy_g2s_wait?)") in lib.error()


@pytest.mark.parametrize("arch", [310])
def test_a_copy_of_2_bytes_is_an_error(build, arch):
    lib = build("async_copy", arch)
    x = rand(4 * THREADS, seed=7)
    assert lib.call_misuse(THREADS, 2, ptr(x), ptr(np.zeros(THREADS, dtype=np.float32))) == ILLEGAL_INSTRUCTION
    assert (f"__musa_memcpy_g2s (async_copy.mu:{lib.line_of('mode == 2 ? 2 : 16')}): 2 bytes; a copy moves 4, 8 or "
            "16 bytes") in lib.error()


@pytest.mark.parametrize("arch", [310])
def test_another_threads_copy_read_without_a_block_barrier_is_a_race_in_checked_mode(build, checked, arch):
    lib = build("async_copy", arch)
    x = rand(4 * THREADS, seed=8)
    assert lib.call_misuse(THREADS, 3, ptr(x), ptr(np.zeros(THREADS, dtype=np.float32))) == LAUNCH_FAILURE
    assert "data race on byte 0 of shared `the destination of an asynchronous copy" in lib.error()


@pytest.mark.parametrize("arch", ARCHS)
def test_a_copy_issued_after_another_threads_read_with_no_barrier_between_names_the_missing_barrier(build, monkeypatch,
                                                                                                   arch):
    # Each thread reads the previous thread's row, then refills its own row with a copy, with no barrier between the
    # read and the copy; the copy is waited for after a later barrier. Whichever thread runs first, checked mode names
    # the missing barrier: the read meets the copy in flight, or the copy's issue meets the read. It is not a missing
    # wait (the issuing thread waits), which the in-flight case used to say; and the issue after the read used to go
    # unreported, since the barrier before the wait ordered the landing after the read.
    lib = build("async_copy", arch)
    x = rand(4 * THREADS, seed=9)
    read, issue = lib.line_of("the previous thread's row, before its refill"), lib.line_of("mode == 2 ? 2 : 16")
    in_flight = re.compile(
        rf"read of shared memory at byte \d+ of `s` \(line {read}\) while an asynchronous copy \(__musa_memcpy_g2s\) "
        rf"issued at async_copy.mu:{issue} by thread \(\d+,0,0\) has not completed \(missing barrier\? nothing orders "
        "this access with the copy's issue by another thread: if the access belongs before the copy, a barrier between "
        "the two is missing; if it belongs after, the issuing thread's __musa_memcpy_g2s_wait and a barrier after "
        "it\\)")
    at_issue = re.compile(rf"data race on byte 0 of shared `the destination of an asynchronous copy, at its issue`: "
                          rf"this thread stores it at line {issue} while thread \(\d+,0,0\) loaded it at line {read}, "
                          "with no (__syncwarp or )?barrier between them")
    monkeypatch.setenv("TILELANG_SIM_CHECK", "1")
    seen = set()
    for seed in range(1, 9):
        monkeypatch.setenv("TILELANG_SIM_SEED", str(seed))
        assert lib.call_misuse(THREADS, 4, ptr(x), ptr(np.zeros(THREADS, dtype=np.float32))) == LAUNCH_FAILURE
        error = lib.error()
        assert "__musa_memcpy_g2s_wait?" not in error, error
        seen.add("in flight" if in_flight.search(error) else "at issue" if at_issue.search(error) else error)
    assert seen == {"in flight", "at issue"}, seen


@pytest.mark.parametrize("arch", [310])
def test_another_threads_read_after_a_barrier_the_issuer_passed_without_waiting_names_the_missing_wait(build, checked,
                                                                                                      arch):
    lib = build("async_copy", arch)
    x = rand(4 * THREADS, seed=10)
    assert lib.call_misuse(THREADS, 5, ptr(x), ptr(np.zeros(THREADS, dtype=np.float32))) == LAUNCH_FAILURE
    read, issue = lib.line_of("the next thread never waited for its copy"), lib.line_of("mode == 2 ? 2 : 16")
    assert re.search(rf"thread \((\d+),0,0\): read of shared memory at byte \d+ of `s` \(line {read}\) while an "
                     rf"asynchronous copy \(__musa_memcpy_g2s\) issued at async_copy.mu:{issue} by thread \(\d+,0,0\) "
                     r"has not completed \(missing __musa_memcpy_g2s_wait\? a barrier orders this access after the "
                     r"copy's issue, but not after its completion\)", lib.error()), lib.error()


# ---- TME ----------------------------------------------------------------------------------------------------------


def tme_load(lib, shape, box, coord, mode=0, fill=0, seed=0):
    """Run tme_load on a random float32 tensor of `shape`; all sizes innermost first. Returns (rc, out, reference)."""
    rank = len(shape)
    g = np.random.default_rng(seed).random(shape[::-1], dtype=np.float32)
    dims = np.array(shape, dtype=np.uint64)
    strides = np.array([g.strides[rank - 1 - d] for d in range(1, rank)] or [0], dtype=np.uint64)
    n = int(np.prod(box))
    out = np.full(n + 1, np.nan, dtype=np.float32)
    rc = lib.call_tme_load(rank, ptr(g), ptr(dims), ptr(strides), ptr(np.array(box, np.int32)),
                           ptr(np.array(coord, np.int32)), ptr(out), mode, ctypes.c_ulonglong(fill))
    reference = np.full(box[::-1], np.uint32(fill).view(np.float32), dtype=np.float32)
    src, dst = [], []
    for d in reversed(range(rank)):
        lo, hi = max(coord[d], 0), max(min(coord[d] + box[d], shape[d]), max(coord[d], 0))
        src.append(slice(lo, hi))
        dst.append(slice(lo - coord[d], hi - coord[d]))
    reference[tuple(dst)] = g[tuple(src)]
    return rc, out, reference.ravel()


@pytest.mark.parametrize("shape, box, coord", [
    ((40,), (16,), (32,)),                                 # 1-D, tail past the end
    ((12, 7), (8, 4), (8, 5)),                             # 2-D, tails in both dimensions
    ((8, 5, 3), (4, 4, 2), (-2, 3, 2)),                    # 3-D, a negative start
    ((4, 3, 3, 2), (4, 2, 2, 2), (0, 2, -1, 1)),           # 4-D
    ((4, 2, 2, 2, 3), (4, 2, 2, 2, 2), (0, 1, 1, 0, 2)),   # 5-D (the older mcc form, without cache hints)
], ids=["1d", "2d", "3d", "4d", "5d"])
def test_tme_loads_of_rank_1_to_5_fill_out_of_bounds_elements_with_zero(build, shape, box, coord):
    lib = build("tme")
    rc, out, reference = tme_load(lib, shape, box, coord)
    assert rc == 0, lib.error()
    np.testing.assert_array_equal(out[:-1], reference)


def test_arrive_add_trans_expects_the_bytes_and_arrives_in_one_call(build):
    lib = build("tme")
    rc, out, reference = tme_load(lib, (12, 7), (8, 4), (8, 5), mode=5, seed=2)
    assert rc == 0, lib.error()
    np.testing.assert_array_equal(out[:-1], reference)


def test_tme_out_of_bounds_elements_take_the_descriptors_fill_value(build):
    lib = build("tme")
    one = int(np.float32(1).view(np.uint32))
    rc, out, reference = tme_load(lib, (12, 7), (8, 4), (8, 5), fill=one, seed=1)
    assert rc == 0, lib.error()
    np.testing.assert_array_equal(out[:-1], reference)
    assert (out[:-1] == 1).sum() > 0


@pytest.mark.parametrize("sg, ss, sl", [(0, 3, 1), (1, 3, 1), (2, 3, 1), (3, 3, 1), (1, 0, 0), (3, 2, 0)])
def test_a_swizzled_tme_tile_lies_as_musa_layouts_says_and_sqmma_reads_it_back(build, sg, ss, sl):
    lib = build("tme")
    g = np.arange(64 * 64, dtype=np.uint16).reshape(64, 64)  # 64 rows of 128 bytes
    raw, via_sqmma = np.zeros(64 * 64, np.uint16), np.zeros(64 * 64, np.uint16)
    assert lib.call_tme_swizzle(ptr(g), 64, sg, ss, sl, ptr(raw), ptr(via_sqmma)) == 0, lib.error()
    a = np.arange(64 * 64) * 2  # unswizzled byte addresses (the tile starts at shared address 0)
    if sg:
        granularity, stride, line = 8 << sg, 32 << ss, 128 << sl
        a = a ^ (((a >> int(np.log2(line))) & (stride // granularity - 1)) << int(np.log2(granularity)))
    np.testing.assert_array_equal(raw[a // 2], g.ravel())  # MUSA_LAYOUTS.md section 4
    if (ss, sl) == (3, 1):  # SQMMA's swizzle is the copy engine's with stride = line = 256 B
        np.testing.assert_array_equal(via_sqmma.reshape(64, 64), g)


def test_reading_a_tme_tile_before_the_wait_reads_poison_and_is_named_in_checked_mode(build, monkeypatch):
    lib = build("tme")
    rc, out, _ = tme_load(lib, (16, 16), (8, 8), (0, 0), mode=1)
    assert rc == 0, lib.error()
    assert out[-1:].view(np.uint32)[0] == POISON32
    monkeypatch.setenv("TILELANG_SIM_CHECK", "1")
    rc, out, _ = tme_load(lib, (16, 16), (8, 8), (0, 0), mode=1)
    assert rc == LAUNCH_FAILURE
    assert (f"read of shared memory at byte 0 of `tile` (line {lib.line_of('missing __musa_async_wait(1, 0)')}) while "
            f"an asynchronous copy (__musa_tme_ld_tile_2d) issued at tme.mu:{lib.line_of('__musa_tme_ld_tile_2d(bar')} "
            "by thread (0,0,0) has not completed (missing __musa_async_wait on its barrier?)") in lib.error()


def test_two_tme_loads_in_flight_to_the_same_bytes_are_an_error_in_checked_mode(build, monkeypatch):
    lib = build("tme")
    rc, out, reference = tme_load(lib, (16, 16), (8, 8), (4, 4), mode=4)
    assert rc == 0, lib.error()  # the same data lands twice
    np.testing.assert_array_equal(out[:-1], reference)
    monkeypatch.setenv("TILELANG_SIM_CHECK", "1")
    rc, _, _ = tme_load(lib, (16, 16), (8, 8), (4, 4), mode=4)
    assert rc == LAUNCH_FAILURE
    line = lib.line_of("__musa_tme_ld_tile_2d(bar")
    assert (f"__musa_tme_ld_tile_2d (tme.mu:{line}) writes shared address 0 while __musa_tme_ld_tile_2d issued at "
            f"tme.mu:{line} by thread (0,0,0) is still in flight there (missing __musa_async_wait on its barrier?)"
            ) in lib.error()


@pytest.mark.parametrize("mode, text", [
    (2, "async barrier 1 in phase 0 (parity 0): 0 of 4 warp arrivals pending, 64 of 320 transaction bytes pending"),
    (3, "async barrier 1 in phase 0 (parity 0): 0 of 4 warp arrivals pending, TME loads of 256 bytes in flight but "
        "only 240 transaction bytes expected"),
], ids=["expect_too_many_bytes", "expect_too_few_bytes"])
def test_transaction_bytes_that_do_not_match_the_loads_deadlock_naming_the_bytes(build, mode, text):
    lib = build("tme")
    rc, _, _ = tme_load(lib, (16, 16), (8, 8), (0, 0), mode=mode)
    assert rc == LAUNCH_FAILURE
    assert text in lib.error()
    assert f"waits for parity 0 at tme.mu:{lib.line_of('  __musa_async_wait(1, 0);')}" in lib.error()


@pytest.mark.parametrize("mode, text", [
    (6, "__musa_tme_ld_tile_2d (tme.mu:{line}): swizzle sg=3 ss=0 sl=1 is invalid (sg 0..3, ss 0..3, sl 0..1, "
        "sg < ss + 2, ss <= sl + 2)"),
    (7, "__musa_tme_ld_tile_2d (tme.mu:{line}): 0x[0-9a-f]+ is not the address of a MUtensorDescriptor filled by "
        "muTensorDescriptorEncode"),
], ids=["invalid_swizzle", "not_a_descriptor"])
def test_a_bad_tme_load_is_an_error_naming_the_built_in_and_the_line(build, mode, text):
    lib = build("tme")
    rc, _, _ = tme_load(lib, (16, 16), (8, 8), (0, 0), mode=mode)
    assert rc == ILLEGAL_INSTRUCTION
    pattern = re.escape(text.format(line=lib.line_of("__musa_tme_ld_tile_2d(bar"))).replace(re.escape("0x[0-9a-f]+"),
                                                                                             "0x[0-9a-f]+")
    assert re.search(pattern, lib.error()), lib.error()


def tme_store(lib, mode):
    """Store an 8 x 8 tile at (8, 6) (innermost first) into a 10 x 12 tensor of -7: half of it is out of bounds."""
    g = np.full((10, 12), -7, dtype=np.float32)
    rc = lib.call_tme_store(ptr(g), 12, 10, 8, 8, ptr(np.array([8, 6], np.int32)), mode)
    tile = (np.arange(64, dtype=np.float32) + 0.5).reshape(8, 8)
    expected = np.full((10, 12), -7, dtype=np.float32)
    expected[6:, 8:] = tile[:4, :4]
    return rc, g, expected


def test_a_tme_store_writes_the_in_bounds_elements_at_its_wait(build):
    lib = build("tme")
    rc, g, expected = tme_store(lib, 0)
    assert rc == 0, lib.error()
    np.testing.assert_array_equal(g, expected)


def test_a_tme_store_reads_the_tile_at_its_wait_and_checked_mode_names_a_write_before(build, monkeypatch):
    lib = build("tme")
    rc, g, expected = tme_store(lib, 1)
    assert rc == 0, lib.error()
    expected[6, 8] = -1  # the overwrite before the wait is what lands
    np.testing.assert_array_equal(g, expected)
    monkeypatch.setenv("TILELANG_SIM_CHECK", "1")
    rc, _, _ = tme_store(lib, 1)
    assert rc == LAUNCH_FAILURE
    assert (f"write of shared memory at byte 0 of `tile` (line {lib.line_of('the store may still be reading')}) while "
            f"an asynchronous copy (__musa_tme_st_2d) issued at tme.mu:{lib.line_of('__musa_tme_st_2d(tile')} by "
            "thread (0,0,0) has not completed (missing __musa_tme_store_read_wait?)") in lib.error()


def test_a_tme_store_never_waited_for_is_dropped_and_named_in_checked_mode(build, monkeypatch):
    lib = build("tme")
    rc, g, _ = tme_store(lib, 2)
    assert rc == 0, lib.error()
    assert (g == -7).all()
    monkeypatch.setenv("TILELANG_SIM_CHECK", "1")
    rc, _, _ = tme_store(lib, 2)
    assert rc == LAUNCH_FAILURE
    assert ("the thread exits with 1 TME stores not waited for, the first (__musa_tme_st_2d) issued at "
            f"tme.mu:{lib.line_of('__musa_tme_st_2d(tile')}") in lib.error()


@pytest.mark.parametrize("case, status", [
    ("valid", 0), ("rank_6", 1), ("address_not_16_aligned", 1), ("stride_not_16_multiple", 1), ("dim_0", 1),
    ("packed_4_bit_type", 801),
])
def test_the_descriptor_encoder_validates_like_the_driver(build, case, status):
    lib = build("tme")
    base = np.zeros(1024, dtype=np.float32)  # numpy aligns to 64 bytes
    rank, dtype, address = 2, 8, base.ctypes.data  # FLOAT32
    dims, strides = np.array([16, 8, 1, 1, 1, 1], np.uint64), np.array([64, 512, 512, 512, 512], np.uint64)
    if case == "rank_6":
        rank = 6
    elif case == "address_not_16_aligned":
        address += 4
    elif case == "stride_not_16_multiple":
        strides[0] = 68
    elif case == "dim_0":
        dims[1] = 0
    elif case == "packed_4_bit_type":
        dtype = 17
    assert lib.encode(rank, dtype, ctypes.c_void_p(address), ptr(dims), ptr(strides), ctypes.c_ulonglong(0)) == status
