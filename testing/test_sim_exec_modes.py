"""Loop and fiber execution of simulated blocks, and kernel libraries linked to the prebuilt simulator runtime
(docs/SIMULATOR.md).

A library holding no code that can make a thread wait runs each block as a loop over its threads; any other runs
each thread on a fiber. TILELANG_SIM_EXEC=fibers forces fibers everywhere, so the same kernels run both ways here
and must give the same outputs, the same thread order (default and checked mode) and the same error messages.
Kernel libraries link `libtilelang_musa_sim_<arch>.so` and read threadIdx without a __tls_get_addr call;
TILELANG_SIM_NO_RUNTIME=1 builds the old self-contained form, which must behave the same.
"""

from __future__ import annotations

import ctypes
import re
import subprocess
from pathlib import Path

import numpy as np
import pytest
import torch

import tilelang
import tilelang.language as T
from conftest import rand
from sim_build import SimLibrary, build_shared, sim_compile_command
from tilelang_musa.launcher import KernelLaunchError

KERNELS = Path(__file__).resolve().parent / "sim_kernels"
LAUNCH_FAILURE = 719
INVALID_VALUE = 1
ARCHS = [220, 310]
ARCH_NAMES = {220: "mp_22", 310: "mp_31"}


def ptr(array: np.ndarray) -> ctypes.c_void_p:
    return array.ctypes.data_as(ctypes.c_void_p)


@pytest.fixture(scope="module")
def build(session_dir):
    """Build a `.mu` of sim_kernels/ for an arch, linked to the runtime or (self_contained) not; once per test
    session (sim_build.build_shared)."""
    built: dict[tuple, SimLibrary] = {}

    def _build(name: str = "exec_modes", arch: int = 310, self_contained: bool = False) -> SimLibrary:
        key = (name, arch, self_contained)
        if key not in built:
            source = KERNELS / f"{name}.mu"
            with pytest.MonkeyPatch.context() as mp:
                if self_contained:
                    mp.setenv("TILELANG_SIM_NO_RUNTIME", "1")
                output, stderr = build_shared(session_dir / "sim_kernels",
                                              f"{name}_{arch}_{'own' if self_contained else 'linked'}",
                                              lambda out: sim_compile_command(source, out, arch))
            if output is None:
                pytest.fail(f"compiling {source.name} for arch {arch} failed:\n{stderr}")
            built[key] = SimLibrary(output, source)
        return built[key]

    return _build


def sections(library: Path) -> str:
    return subprocess.run(["readelf", "-SW", str(library)], capture_output=True, text=True, check=True).stdout


def dynamic(library: Path) -> str:
    return subprocess.run(["readelf", "-dW", str(library)], capture_output=True, text=True, check=True).stdout


def disassembly(library: Path, symbol: str) -> str:
    proc = subprocess.run(["objdump", "-d", f"--disassemble={symbol}", str(library)], capture_output=True, text=True,
                          check=True)
    assert f"<{symbol}>:" in proc.stdout, proc.stdout[-2000:]
    return proc.stdout


def library_path(lib: SimLibrary) -> Path:
    return Path(lib._lib._name)


def record_order(lib: SimLibrary, blocks: int, dims: tuple[int, int, int]) -> np.ndarray:
    threads = dims[0] * dims[1] * dims[2]
    out = np.full(2 * blocks * threads, 0xDEADBEEF, dtype=np.uint32)
    assert lib.call_record_order(blocks, *dims, ptr(out)) == 0, lib.error()
    return out.reshape(blocks, threads, 2)


# ---- which mode runs -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("arch", ARCHS)
def test_only_a_library_with_code_that_waits_is_marked_as_such(build, arch):
    assert "tl_sim_blocking" not in sections(library_path(build("exec_modes", arch)))
    assert "tl_sim_blocking" in sections(library_path(build("runtime_checks", arch)))  # barriers, __syncwarp


def test_loop_execution_is_refused_for_a_library_that_can_wait(build, monkeypatch):
    lib = build("runtime_checks")
    monkeypatch.setenv("TILELANG_SIM_EXEC", "loop")
    assert lib.call_missing_barrier(1, 2, ptr(np.zeros(1, dtype=np.int32))) == INVALID_VALUE
    assert lib.error() == ("kernel missing_barrier: TILELANG_SIM_EXEC=loop: the kernel's library holds code that can "
                           "make a thread wait (a barrier, warp collective or asynchronous wait), which only runs on "
                           "fibers")
    monkeypatch.setenv("TILELANG_SIM_EXEC", "threads")
    assert lib.call_missing_barrier(1, 2, ptr(np.zeros(1, dtype=np.int32))) == INVALID_VALUE
    assert lib.error() == "kernel missing_barrier: TILELANG_SIM_EXEC='threads' is not auto, fibers or loop"


# ---- loop and fibers agree -------------------------------------------------------------------------------------


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("check", ["0", "1"])
def test_thread_order_and_poison_are_the_same_in_loop_and_fibers(build, monkeypatch, arch, check):
    lib = build("exec_modes", arch)
    monkeypatch.setenv("TILELANG_SIM_CHECK", check)
    monkeypatch.setenv("TILELANG_SIM_SEED", "5")
    runs = {}
    for mode in ("auto", "loop", "fibers"):
        monkeypatch.setenv("TILELANG_SIM_EXEC", mode)
        runs[mode] = [record_order(lib, 3, dims) for dims in ((8, 4, 2), (96, 1, 1), (1, 1, 1))]
    for a, b, c in zip(runs["auto"], runs["loop"], runs["fibers"]):
        np.testing.assert_array_equal(a, c)
        np.testing.assert_array_equal(b, c)
    order = runs["fibers"][0][..., 0]
    assert sorted(order[0].tolist()) == list(range(64))  # each block starts from its own poisoned counter
    if check == "0":
        assert order[1].tolist() == list(range(64))  # default mode: thread order
    else:
        assert order[1].tolist() != list(range(64))  # checked mode: the seed's order, the same in both modes


def run_faults(lib: SimLibrary, monkeypatch) -> list[tuple[int, str]]:
    """Each fault of exec_modes.mu once: (return code, message)."""
    results = []
    with monkeypatch.context() as mp:
        mp.setenv("TILELANG_SIM_WATCHDOG_S", "0.4")
        mp.setenv("TILELANG_SIM_WORKERS", "2")
        flag = np.zeros(2, dtype=np.int32)
        results.append((lib.call_spin_forever(4, 2, ptr(flag)), lib.error()))
    with monkeypatch.context() as mp:
        mp.setenv("TILELANG_SIM_STACK_KB", "16")
        results.append((lib.call_deep_recursion(1000, ptr(np.zeros(4, dtype=np.int32))), lib.error()))
    results.append((lib.call_wild_store(ctypes.c_void_p(0x10), ptr(np.zeros(4, dtype=np.int32))), lib.error()))
    out = np.zeros(4, dtype=np.int32)
    assert lib.call_deep_recursion(3, ptr(out)) == 0, lib.error()  # the library still works
    assert out.tolist() == [1, 1, 6, 1]
    return results


def test_faults_read_the_same_in_loop_and_fibers(build, monkeypatch):
    lib = build("exec_modes")
    loop = run_faults(lib, monkeypatch)
    monkeypatch.setenv("TILELANG_SIM_EXEC", "fibers")
    fibers = run_faults(lib, monkeypatch)
    assert loop == fibers
    spin, overflow, wild = loop
    assert spin[0] == LAUNCH_FAILURE
    assert spin[1].startswith("kernel spin_forever: block (2,0,0), thread (3,0,0) made no progress for 0.4 s "
                              "(TILELANG_SIM_WATCHDOG_S)"), spin[1]
    flag_line = lib.line_of('NOTE_CHECKED_ACCESS("flag[0]")')
    assert f"its last checked memory access was flag[0] at line {flag_line} of the generated source" in spin[1]
    assert overflow == (LAUNCH_FAILURE, "kernel deep_recursion: block (0,0,0), thread (2,0,0) overflowed its 16 KiB "
                                        "stack; raise TILELANG_SIM_STACK_KB")
    line = lib.line_of('NOTE_CHECKED_ACCESS("out[2]")')
    assert wild == (LAUNCH_FAILURE, "kernel wild_store: block (0,0,0), thread (2,0,0): invalid memory access at "
                                    "address 0x10 (the kernel touched memory outside its tensors); its last checked "
                                    f"memory access was out[2] at line {line} of the generated source")


# ---- the runtime library ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("arch", ARCHS)
def test_kernel_libraries_link_the_runtime_and_read_thread_identity_without_a_tls_call(build, arch):
    linked = library_path(build("exec_modes", arch))
    assert f"[libtilelang_musa_sim_{ARCH_NAMES[arch]}.so]" in dynamic(linked)
    assert "__tls_get_addr" not in disassembly(linked, "wild_store")  # threadIdx: one load off the thread pointer
    own = library_path(build("exec_modes", arch, self_contained=True))
    assert "libtilelang_musa_sim" not in dynamic(own)
    assert "__tls_get_addr" in disassembly(own, "wild_store")
    # The linked library carries none of the scheduler: much smaller.
    assert linked.stat().st_size * 2 < own.stat().st_size


def test_self_contained_and_linked_libraries_agree(build, monkeypatch):
    linked, own = build("exec_modes"), build("exec_modes", self_contained=True)
    assert run_faults(linked, monkeypatch) == run_faults(own, monkeypatch)
    monkeypatch.setenv("TILELANG_SIM_CHECK", "1")
    np.testing.assert_array_equal(record_order(linked, 2, (64, 2, 1)), record_order(own, 2, (64, 2, 1)))


# ---- generated kernels -----------------------------------------------------------------------------------------


def rotate_through_shared(threads):
    @T.prim_func
    def rotate(A: T.Tensor((threads,), "float32"), B: T.Tensor((threads,), "float32")):
        with T.Kernel(1, threads=threads) as bx:
            S = T.alloc_shared((threads,), "float32")
            tx = T.get_thread_binding()
            S[tx] = A[tx]
            B[tx] = S[(tx + 1) % threads]

    return rotate


def call_rotate(kernel, a):
    b = torch.full_like(a, float("nan"))
    kernel(a, b)
    return b


@pytest.mark.parametrize("arch", ["mp_31", "mp_22"])
def test_generated_kernels_give_the_same_results_and_race_reports_in_both_modes(arch, monkeypatch):
    no_sync = {tilelang.PassConfigKey.TL_DISABLE_THREAD_STORAGE_SYNC: True}
    racy = tilelang.compile(rotate_through_shared(256), target=f"musa -arch={arch}", pass_configs=no_sync)
    safe = tilelang.compile(rotate_through_shared(256), target=f"musa -arch={arch}")
    assert "__syncthreads" not in racy.get_kernel_source() and "__syncthreads" in safe.get_kernel_source()
    assert "tl_sim_blocking" not in sections(Path(racy.library_path))
    assert "tl_sim_blocking" in sections(Path(safe.library_path))
    a = rand((256,), torch.float32)
    results = {}
    for mode in ("auto", "fibers"):
        monkeypatch.setenv("TILELANG_SIM_EXEC", mode)
        monkeypatch.delenv("TILELANG_SIM_CHECK", raising=False)
        unsynced = call_rotate(racy, a)  # each thread loads its neighbour's poison, but the last reads thread 0's
        torch.testing.assert_close(call_rotate(safe, a), a.roll(-1))
        monkeypatch.setenv("TILELANG_SIM_CHECK", "1")
        monkeypatch.setenv("TILELANG_SIM_SEED", "7")
        with pytest.raises(KernelLaunchError) as info:
            call_rotate(racy, a)
        results[mode] = (unsynced, str(info.value))
    (loop_b, loop_message), (fiber_b, fiber_message) = results["auto"], results["fibers"]
    torch.testing.assert_close(loop_b, fiber_b, equal_nan=True)
    assert torch.isnan(loop_b[:255]).all() and loop_b[255] == a[0]
    assert loop_message == fiber_message
    assert re.search(r"data race on byte \d+ of shared `S`", loop_message), loop_message
