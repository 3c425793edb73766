"""The simulator's runtime checks (`src/tl_templates/sim/sim/`): the watchdog that ends a launch which stops making
progress, faults of simulated threads (stack overflow, wild pointers) as launch errors that leave the process
running, checked mode's seeded random order of threads, and the sync epochs the race detector reads.

The kernels are `testing/sim_kernels/runtime_checks.mu`, built once per arch with the simulator toolchain's own
command and called through ctypes. Watchdog tests use a watchdog of 0.4 s, so each hang costs about half a second.
"""

from __future__ import annotations

import ctypes
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import numpy as np
import pytest

KERNELS = Path(__file__).resolve().parent / "sim_kernels"

from sim_build import SimLibrary, build_shared, sim_compile_command  # noqa: E402

LAUNCH_FAILURE = 719
INVALID_VALUE = 1
ARCHS = [220, 310]
WARP_SIZE = {220: 128, 310: 32}
POISON32 = -1  # four 0xFF bytes, as an int32


@pytest.fixture(scope="module")
def build(session_dir):
    """build(arch) -> SimLibrary, built once per test session (sim_build.build_shared)."""
    cache: dict[int, SimLibrary] = {}

    def _build(arch: int = 310) -> SimLibrary:
        if arch not in cache:
            source = KERNELS / "runtime_checks.mu"
            output, stderr = build_shared(session_dir / "sim_kernels", f"runtime_checks_{arch}",
                                          lambda out: sim_compile_command(source, out, arch))
            if output is None:
                pytest.fail(f"compiling {source.name} for arch {arch} failed:\n{stderr}")
            cache[arch] = SimLibrary(output, source)
        return cache[arch]

    return _build


@pytest.fixture
def watchdog(monkeypatch):
    monkeypatch.setenv("TILELANG_SIM_WATCHDOG_S", "0.4")


def ptr(array: np.ndarray) -> ctypes.c_void_p:
    return array.ctypes.data_as(ctypes.c_void_p)


def missing_barrier_results(lib: SimLibrary, blocks: int = 8) -> list[int]:
    out = np.zeros(blocks, dtype=np.int32)
    assert lib.call_missing_barrier(blocks, 32, ptr(out)) == 0, lib.error()
    return out.tolist()


def sigsegv_handler() -> bytes:
    """The address of the process's SIGSEGV handler (the first field of glibc's struct sigaction)."""
    libc = ctypes.CDLL(None, use_errno=True)
    action = ctypes.create_string_buffer(256)
    assert libc.sigaction(signal.SIGSEGV, None, action) == 0
    return action.raw[:8]


# ---- options ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name, value, expected", [
    ("TILELANG_SIM_CHECK", "2", "TILELANG_SIM_CHECK='2' is not 0 or 1"),
    ("TILELANG_SIM_SEED", "-1", "TILELANG_SIM_SEED='-1' is not a whole number in [0, 2^64)"),
    ("TILELANG_SIM_WATCHDOG_S", "0", "TILELANG_SIM_WATCHDOG_S='0' is not a number of seconds in (0, 1e+06]"),
    ("TILELANG_SIM_WATCHDOG_S", "nan", "TILELANG_SIM_WATCHDOG_S='nan' is not a number of seconds in (0, 1e+06]"),
])  # fmt: skip
def test_bad_option_is_a_launch_error_naming_the_variable(build, monkeypatch, name, value, expected):
    lib = build()
    monkeypatch.setenv(name, value)
    out = np.zeros(1, dtype=np.int32)
    assert lib.call_missing_barrier(1, 32, ptr(out)) == INVALID_VALUE
    assert lib.error() == f"kernel missing_barrier: {expected}"


# ---- the watchdog ------------------------------------------------------------------------------------------------


def test_watchdog_names_the_spinning_thread_and_its_last_access(build, monkeypatch, watchdog):
    """Two workers, four blocks: block 2's thread 3 spins on a flag nobody sets."""
    lib = build()
    monkeypatch.setenv("TILELANG_SIM_WORKERS", "2")
    flag = np.zeros(2, dtype=np.int32)
    start = time.monotonic()
    assert lib.call_spin_forever(4, 2, ptr(flag)) == LAUNCH_FAILURE
    assert time.monotonic() - start < 5
    line = lib.line_of('NOTE_CHECKED_ACCESS("flag[0]")')
    message = lib.error()
    assert message.startswith("kernel spin_forever: block (2,0,0), thread (3,0,0) made no progress for 0.4 s "
                              "(TILELANG_SIM_WATCHDOG_S)"), message
    assert f"its last checked memory access was flag[0] at line {line} of the generated source" in message
    assert missing_barrier_results(lib) == [42] * 8  # the library still works


@pytest.mark.parametrize("arch", ARCHS)
def test_watchdog_names_the_threads_that_wait(build, watchdog, arch):
    """Thread 0 spins on a flag thread 1 sets, but thread 1 never runs: the message shows who waits where."""
    lib = build(arch)
    warp = WARP_SIZE[arch]
    flag = np.zeros(1, dtype=np.int32)
    assert lib.call_spin_on_neighbour(ptr(flag)) == LAUNCH_FAILURE
    message = lib.error()
    assert message.startswith("kernel spin_on_neighbour: block (0,0,0), thread (0,0,0) made no progress"), message
    assert f"1 of {warp} threads of warp 1 wait at __syncwarp (runtime_checks.mu:{lib.line_of('__syncwarp();')})" \
        in message  # fmt: skip
    assert f"{2 * warp - 2} other threads are ready to run" in message
    assert "its last checked memory access" not in message  # thread 0 recorded none


def test_watchdog_spares_a_long_launch_that_progresses(build, monkeypatch):
    """0.6 s of barriers under a 0.1 s watchdog."""
    lib = build()
    monkeypatch.setenv("TILELANG_SIM_WATCHDOG_S", "0.1")
    iterations = np.zeros(2, dtype=np.int32)
    assert lib.call_barrier_loop(2, ctypes.c_double(0.6), ptr(iterations)) == 0, lib.error()
    assert (iterations > 0).all()


# ---- faults ------------------------------------------------------------------------------------------------------


def test_stack_overflow_is_a_launch_error(build, monkeypatch):
    lib = build()
    monkeypatch.setenv("TILELANG_SIM_STACK_KB", "16")
    out = np.zeros(4, dtype=np.int32)
    assert lib.call_deep_recursion(1000, ptr(out)) == LAUNCH_FAILURE
    assert lib.error() == ("kernel deep_recursion: block (0,0,0), thread (2,0,0) overflowed its 16 KiB stack; "
                           "raise TILELANG_SIM_STACK_KB")
    assert lib.call_deep_recursion(3, ptr(out)) == 0, lib.error()
    assert out.tolist() == [1, 1, 6, 1]


def test_wild_pointer_is_a_launch_error(build):
    lib = build()
    out = np.zeros(4, dtype=np.int32)
    assert lib.call_wild_store(ctypes.c_void_p(0x10), ptr(out)) == LAUNCH_FAILURE
    line = lib.line_of('NOTE_CHECKED_ACCESS("out[2]")')
    assert lib.error() == ("kernel wild_store: block (0,0,0), thread (2,0,0): invalid memory access at address 0x10 "
                           "(the kernel touched memory outside its tensors); its last checked memory access was "
                           f"out[2] at line {line} of the generated source")
    assert lib.call_wild_store(ptr(out), ptr(out)) == 0, lib.error()


def test_concurrent_launches_share_the_fault_handler_and_restore_the_previous_one(build, watchdog):
    """One host thread hangs (until the watchdog) while another faults again and again; pytest's faulthandler is
    the SIGSEGV handler before and after."""
    lib = build()
    before = sigsegv_handler()
    flag = np.zeros(2, dtype=np.int32)
    results = {}

    def spin():
        results["spin"] = (lib.call_spin_forever(1, 0, ptr(flag)), lib.error())

    spinner = threading.Thread(target=spin)
    spinner.start()
    out = np.zeros(4, dtype=np.int32)
    for _ in range(20):
        assert lib.call_wild_store(ctypes.c_void_p(0x10), ptr(out)) == LAUNCH_FAILURE
        assert "invalid memory access at address 0x10" in lib.error()
    spinner.join()
    code, message = results["spin"]
    assert code == LAUNCH_FAILURE and "thread (3,0,0) made no progress" in message
    assert sigsegv_handler() == before


def wait_until_spinning(flag: np.ndarray):
    deadline = time.monotonic() + 30
    while flag[1] == 0:
        assert time.monotonic() < deadline, "the spinning kernel never started"
        time.sleep(0.005)


def test_interleaved_launches_of_two_libraries_each_get_their_signals(build, monkeypatch):
    """Each kernel library installs its own handler over the one it finds. Library A (mp_31) starts a launch, B
    (mp_22) installs over A, and A's launch ends first: A's watchdog ticks and faults reach A's handler through
    B's, and each library keeps handling its own signals afterwards."""
    a, b = build(310), build(220)
    flags = {"a": np.zeros(2, dtype=np.int32), "b": np.zeros(2, dtype=np.int32)}
    results = {}

    def spin(name, lib):
        results[name] = (lib.call_spin_forever(1, 0, ptr(flags[name])), lib.error())

    monkeypatch.setenv("TILELANG_SIM_WATCHDOG_S", "0.4")
    spinners = [threading.Thread(target=spin, args=("a", a))]
    spinners[0].start()
    wait_until_spinning(flags["a"])
    monkeypatch.setenv("TILELANG_SIM_WATCHDOG_S", "1")
    spinners.append(threading.Thread(target=spin, args=("b", b)))
    spinners[1].start()
    wait_until_spinning(flags["b"])
    out = np.zeros(4, dtype=np.int32)
    for lib in (a, b):
        assert lib.call_wild_store(ctypes.c_void_p(0x10), ptr(out)) == LAUNCH_FAILURE
        assert "invalid memory access at address 0x10" in lib.error()
    for spinner in spinners:
        spinner.join()
    assert results["a"][0] == LAUNCH_FAILURE and "made no progress for 0.4 s" in results["a"][1], results["a"]
    assert results["b"][0] == LAUNCH_FAILURE and "made no progress for 1 s" in results["b"][1], results["b"]
    for lib in (a, b):
        assert lib.call_wild_store(ctypes.c_void_p(0x10), ptr(out)) == LAUNCH_FAILURE
        assert "invalid memory access at address 0x10" in lib.error()


def test_fault_outside_simulated_threads_still_kills_the_process(build, tmp_path):
    """While a launch runs (and its handler is installed), a fault of the host program is not the launch's: it
    reaches faulthandler and kills the process as usual."""
    lib = build()
    script = tmp_path / "crash.py"
    script.write_text(textwrap.dedent(f"""
        import ctypes, faulthandler, os, threading, time
        faulthandler.enable()
        os.environ["TILELANG_SIM_WATCHDOG_S"] = "5"
        lib = ctypes.CDLL({str(lib._lib._name)!r})
        flag = (ctypes.c_int * 2)()
        threading.Thread(target=lib.call_spin_forever, args=(1, 0, flag), daemon=True).start()
        while flag[1] == 0:  # until the launch is under way
            time.sleep(0.01)
        ctypes.string_at(16)
    """))
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == -signal.SIGSEGV, proc.stderr
    assert "Fatal Python error: Segmentation fault" in proc.stderr


# ---- checked mode ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("arch", ARCHS)
def test_checked_mode_exposes_a_missing_barrier_and_replays_it(build, monkeypatch, arch):
    """Thread 1 reads what thread 0 wrote with no barrier. FIFO order runs thread 0 first, so it passes by
    default; checked mode's seeded order runs thread 1 first in some blocks, which read the poison, and a seed
    always gives the same blocks."""
    lib = build(arch)
    assert missing_barrier_results(lib) == [42] * 8
    monkeypatch.setenv("TILELANG_SIM_CHECK", "1")
    by_seed = {}
    for seed in range(1, 5):
        monkeypatch.setenv("TILELANG_SIM_SEED", str(seed))
        by_seed[seed] = missing_barrier_results(lib)
        assert set(by_seed[seed]) <= {42, POISON32}
    assert any(POISON32 in results for results in by_seed.values())
    monkeypatch.setenv("TILELANG_SIM_WORKERS", "1")  # the order of a block does not depend on its worker
    for seed in (1, 3):
        monkeypatch.setenv("TILELANG_SIM_SEED", str(seed))
        assert missing_barrier_results(lib) == by_seed[seed]


def test_checked_mode_errors_end_with_the_seed(build, monkeypatch):
    lib = build()
    monkeypatch.setenv("TILELANG_SIM_CHECK", "1")
    monkeypatch.setenv("TILELANG_SIM_SEED", "18446744073709551615")
    out = np.zeros(4, dtype=np.int32)
    assert lib.call_wild_store(ctypes.c_void_p(0x10), ptr(out)) == LAUNCH_FAILURE
    assert lib.error().endswith("of the generated source (TILELANG_SIM_SEED=18446744073709551615)"), lib.error()
    assert lib.call_missing_barrier(1, 2048, ptr(out)) != 0  # a configuration error
    assert lib.error().endswith("(TILELANG_SIM_SEED=18446744073709551615)"), lib.error()


# ---- sync epochs -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("arch", ARCHS)
def test_sync_epochs_count_rendezvous_and_never_go_back(build, monkeypatch, arch):
    """Per thread: the block's epoch before and after __syncthreads, its warp's before and after __syncwarp."""
    lib = build(arch)
    monkeypatch.setenv("TILELANG_SIM_WORKERS", "1")
    warp, blocks = WARP_SIZE[arch], 2
    threads = 2 * warp

    def run() -> np.ndarray:
        out = np.zeros((blocks, threads, 4), dtype=np.uint64)
        assert lib.call_record_epochs(blocks, threads, ptr(out)) == 0, lib.error()
        return out.astype(np.int64)

    first, second = run(), run()
    for epochs in (first, second):
        for b in range(blocks):
            start = epochs[b, 0, 0]
            assert (epochs[b, :, 0] == start).all() and (epochs[b, :, 1] == start + 1).all()
            # a block barrier leaves the warps' epochs alone; each warp's own barrier advances it
            assert (epochs[b, :, 2] == start).all() and (epochs[b, :, 3] == start + 1).all()
        assert epochs[1].min() > epochs[0].max()  # the next block on the worker starts above the last one
    assert second.min() > first.max()  # and so does the next launch on the same OS thread
