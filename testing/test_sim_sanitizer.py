"""The simulator as a sanitizer (issue 9): bugs planted in TileLang programs end in a named error or show as NaN,
never as a plausible result or a corrupted process.

The simulator builds the kernels printed with the codegen option `sim_checks`: the same source line for line,
with every global and shared access checked against its buffer's extent (and, in checked mode, seen by the race
detector) and every local array poisoned."""

import re

import pytest
import torch

import tilelang
import tilelang.language as T
from conftest import rand
from tilelang_musa.launcher import KernelLaunchError

ARCHS = ["mp_31", "mp_22"]
UNSAFE = {tilelang.PassConfigKey.TL_DISABLE_SAFE_MEMORY_ACCESS: True,
          tilelang.PassConfigKey.TL_DISABLE_SAFE_COPY_PREDICATION: True}


def shifted_copy(n, threads, shift):
    """B[i] = A[i + shift]: for shift > 0 the last block reads past the end of A."""

    @T.prim_func
    def shifted(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32")):
        with T.Kernel(T.ceildiv(n, threads), threads=threads) as bx:
            for i in T.Parallel(threads):
                B[bx * threads + i] = A[bx * threads + i + shift]

    return shifted


def line_of(source: str, snippet: str) -> int:
    return next(number for number, text in enumerate(source.splitlines(), 1) if snippet in text)


@pytest.mark.parametrize("arch", ARCHS)
def test_a_global_read_past_the_tensor_ends_the_launch_naming_buffer_index_thread_and_line(arch):
    kernel = tilelang.compile(shifted_copy(256, 128, 3), target=f"musa -arch={arch}", pass_configs=UNSAFE)
    source = kernel.get_kernel_source()
    assert "tl_sim::" not in source  # the user's source has no hooks; the simulator builds it checked
    b = torch.full((256,), float("nan"))
    with pytest.raises(KernelLaunchError) as info:
        kernel(rand((256,), torch.float32), b)
    message = str(info.value)
    # Thread 125 of block 1 is the first to read A[256]: blocks run in order, threads in order in default mode.
    assert "block (1,0,0), thread (125,0,0)" in message, message
    assert "global load of `A` at element 256 is outside its elements [0, 256)" in message, message
    assert f"line {line_of(source, 'A[')} of the kernel source" in message, message


@pytest.mark.parametrize("arch", ["mp_22"])  # bounds checks do not depend on the arch: the next tests alternate
def test_a_global_write_past_the_tensor_is_an_error_and_the_process_survives(arch):
    @T.prim_func
    def scatter_past(A: T.Tensor((128,), "float32"), B: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=128) as bx:
            for i in T.Parallel(128):
                B[i * 1000] = A[i]

    kernel = tilelang.compile(scatter_past, target=f"musa -arch={arch}", pass_configs=UNSAFE)
    with pytest.raises(KernelLaunchError, match=r"thread \(1,0,0\).*global store of `B` at element 1000 is outside "
                                                r"its elements \[0, 128\)"):
        kernel(rand((128,), torch.float32), torch.zeros(128))
    # An in-bounds program still runs after the failed launch.
    good = tilelang.compile(shifted_copy(256, 128, 0), target=f"musa -arch={arch}")
    a = rand((256,), torch.float32, 3)
    b = torch.full((256,), float("nan"))
    good(a, b)
    torch.testing.assert_close(b, a)


@pytest.mark.parametrize("arch", ["mp_31"])
def test_a_vector_access_is_checked_over_all_its_lanes(arch):
    n = 1024
    kernel = tilelang.compile(shifted_copy(n, 128, 2), target=f"musa -arch={arch}", pass_configs=UNSAFE)
    # vectorised by 2 (the shift keeps pairs aligned): the first bad pair straddles the end
    with pytest.raises(KernelLaunchError, match=r"thread \(63,0,0\): global load of `A` at elements \[1024, 1026\) is "
                                                r"outside its elements \[0, 1024\)"):
        kernel(rand((n,), torch.float32), torch.zeros(n))


@pytest.mark.parametrize("arch", ["mp_22"])
def test_a_shared_index_past_the_tile_is_an_error(arch):
    @T.prim_func
    def shared_past(A: T.Tensor((128,), "float32"), B: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=128) as bx:
            S = T.alloc_shared((128,), "float32")
            tx = T.get_thread_binding()
            S[tx] = A[tx]
            T.sync_threads()
            B[tx] = S[tx + 1]

    kernel = tilelang.compile(shared_past, target=f"musa -arch={arch}", pass_configs=UNSAFE)
    with pytest.raises(KernelLaunchError, match=r"thread \(127,0,0\).*shared load of `S` at element 128 is outside "
                                                r"its elements \[0, 128\)"):
        kernel(rand((128,), torch.float32), torch.zeros(128))


@pytest.mark.parametrize("arch", ARCHS)
def test_a_fragment_accumulated_without_clear_reads_poison(arch):
    """The accumulator of a tile GEMM is never cleared: on hardware its registers hold garbage; here NaN."""

    @T.prim_func
    def no_clear(A: T.Tensor((64, 32), "float16"), B: T.Tensor((32, 64), "float16"),
                 C: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=128) as bx:
            A_s = T.alloc_shared((64, 32), "float16")
            B_s = T.alloc_shared((32, 64), "float16")
            C_l = T.alloc_fragment((64, 64), "float32")
            T.copy(A, A_s)
            T.copy(B, B_s)
            T.gemm(A_s, B_s, C_l)
            T.copy(C_l, C)

    kernel = tilelang.compile(no_clear, target=f"musa -arch={arch}")
    c = torch.zeros(64, 64)
    kernel(rand((64, 32), torch.float16), rand((32, 64), torch.float16, 1), c)
    assert torch.isnan(c).all()


@pytest.mark.parametrize("arch", ["mp_31"])
def test_a_local_array_read_before_written_is_poison_in_every_block(arch):
    @T.prim_func
    def uninitialised(B: T.Tensor((4, 128), "int32"), F: T.Tensor((4, 128), "float32")):
        with T.Kernel(4, threads=128) as bx:
            tx = T.get_thread_binding()
            x = T.alloc_var("int32")  # starts at zero (as upstream): never poison
            acc = T.alloc_local((2,), "float32")
            if bx == 0:  # only the first block writes them before reading
                x = 7
                acc[0] = 1.5
            B[bx, tx] = x
            F[bx, tx] = acc[0]

    kernel = tilelang.compile(uninitialised, target=f"musa -arch={arch}")
    b, f = torch.zeros(4, 128, dtype=torch.int32), torch.zeros(4, 128)
    kernel(b, f)
    assert (b[0] == 7).all() and (f[0] == 1.5).all()
    assert (b[1:] == 0).all() and torch.isnan(f[1:]).all()


def test_the_checked_build_keeps_the_source_lines():
    """Error messages cite lines of the source users read: the checked print has the same lines."""
    from tilelang_musa.codegen import generate
    from tilelang_musa.target import determine_target
    from tilelang_musa.transform import lower
    from tilelang_musa.transform.split_kernels import split_kernels

    target = determine_target("musa -arch=mp_31")
    funcs = [lower(kernel, target, {}) for kernel in split_kernels(shifted_copy(1000, 128, 0))]
    source = generate(funcs, target, "shifted", sim_checks=True)
    plain, checked = source.text.splitlines(), source.checked_text.splitlines()
    assert len(plain) == len(checked)
    changed = [(p, c) for p, c in zip(plain, checked) if p != c]
    assert changed and all("tl_sim::Check" in c for _, c in changed)
    check = r'tl_sim::CheckGlobal<tl_sim::kLoad>\(A, .*, \d, 0, \(1000\), "A", __LINE__\)'
    assert re.search(check, source.checked_text)


def rotate_through_shared(threads):
    """Each thread stores its element in shared memory and loads its neighbour's: needs a barrier in between."""

    @T.prim_func
    def rotate(A: T.Tensor((threads,), "float32"), B: T.Tensor((threads,), "float32")):
        with T.Kernel(1, threads=threads) as bx:
            S = T.alloc_shared((threads,), "float32")
            tx = T.get_thread_binding()
            S[tx] = A[tx]
            B[tx] = S[(tx + 1) % threads]

    return rotate


@pytest.mark.parametrize("arch", ARCHS)
def test_a_missing_barrier_is_a_named_race_in_checked_mode(arch, monkeypatch):
    no_sync = {tilelang.PassConfigKey.TL_DISABLE_THREAD_STORAGE_SYNC: True}
    racy = tilelang.compile(rotate_through_shared(256), target=f"musa -arch={arch}", pass_configs=no_sync)
    assert "__syncthreads" not in racy.get_kernel_source()
    source = racy.get_kernel_source()
    a = rand((256,), torch.float32)
    # Default mode: thread 0 runs to its end before thread 1 starts, so it loads its neighbour's poison.
    b = _call(racy, a)
    assert torch.isnan(b[0])
    monkeypatch.setenv("TILELANG_SIM_CHECK", "1")
    monkeypatch.setenv("TILELANG_SIM_SEED", "7")
    with pytest.raises(KernelLaunchError) as info:
        _call(racy, a)
    message = str(info.value)
    store, load = line_of(source, "S[(int)threadIdx.x] ="), line_of(source, "= S[")
    assert re.search(rf"data race on byte \d+ of shared `S`: this thread (loads|stores) it at line ({store}|{load})"
                     rf"(?: \([^)]*test_sim_sanitizer.py:\d+\))? "  # the user's line
                     rf"while thread \(\d+,0,0\) (loaded|stored) it at line ({store}|{load})", message), message
    assert message.endswith("(TILELANG_SIM_SEED=7)"), message
    # With the barrier the compiler inserts, the same program is race-free under any seed.
    safe = tilelang.compile(rotate_through_shared(256), target=f"musa -arch={arch}")
    for seed in ("1", "2"):
        monkeypatch.setenv("TILELANG_SIM_SEED", seed)
        torch.testing.assert_close(_call(safe, a), a.roll(-1))


def test_threads_of_a_block_storing_different_values_to_one_global_element_race_in_checked_mode(monkeypatch):
    @T.prim_func
    def last_writer_wins(A: T.Tensor((128,), "float32"), B: T.Tensor((1,), "float32")):
        with T.Kernel(1, threads=128) as bx:
            tx = T.get_thread_binding()
            B[0] = A[tx]

    kernel = tilelang.compile(last_writer_wins, target="musa -arch=mp_31")
    monkeypatch.setenv("TILELANG_SIM_CHECK", "1")
    with pytest.raises(KernelLaunchError, match=r"data race on byte 0 of global `B`: this thread stores it at line \d+(?: \([^)]*\))? "
                                                r"while thread \(\d+,0,0\) stored it"):
        kernel(rand((128,), torch.float32), torch.zeros(1))
    # Every thread storing the value the memory already holds is no race: the replicas of a replicated fragment
    # (a reduction's result) each store their copy.
    same = torch.full((128,), 2.5)
    b = torch.zeros(1)
    kernel(same, b)
    assert b.item() == 2.5


def _call(kernel, a):
    b = torch.full_like(a, float("nan"))
    kernel(a, b)
    return b


def test_a_long_loop_of_one_thread_is_progress_for_the_watchdog(monkeypatch):
    """The watchdog ends spin loops (test_sim_runtime_checks.py); a thread that runs long without meeting another,
    but stores as it goes, is working."""
    n = 1 << 18

    @T.prim_func
    def serial_prefix(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32")):
        with T.Kernel(1, threads=1) as bx:
            for r in T.serial(8):
                B[0] = A[0]
                for i in T.serial(1, n):
                    B[i] = B[i - 1] + A[i]

    kernel = tilelang.compile(serial_prefix, target="musa -arch=mp_31")
    monkeypatch.setenv("TILELANG_SIM_WATCHDOG_S", "0.05")
    a = torch.ones(n)
    b = torch.zeros(n)
    kernel(a, b)
    assert b[-1].item() == n
