"""T.sync_grid: the grid barrier (`cooperative_groups::this_grid().sync()`) and the cooperative launch it needs
(musaLaunchCooperativeKernel), from the frontend to the simulator's model of both (sim/grid_barrier.h): every block
resident at once, writes before the barrier visible after it in every block, a grid larger than the device holds
resident refused as the driver refuses it, and a block that never arrives a deadlock error, never a hang."""

from __future__ import annotations

import ctypes
from pathlib import Path

import numpy as np
import pytest
import torch
import tvm
from tvm.script import tirx as S

import tilelang
import tilelang.language as T
from conftest import rand
from sim_build import SimLibrary, build_shared, sim_compile_command
from tilelang_musa.errors import CompileError
from tilelang_musa.launcher import KernelLaunchError
from tilelang_musa.transform.grid_barriers import SplitGuardsAtGridBarriers

ARCHS = ["mp_31", "mp_22"]
KERNELS = Path(__file__).resolve().parent / "sim_kernels"
LAUNCH_FAILURE = 719
COOPERATIVE_LAUNCH_TOO_LARGE = 720


def reversal_add(N=1024, block=64, threads=128):
    """Moore Threads' test kernel: the barrier sits inside a T.Parallel loop of 64 iterations on 128 threads."""
    @T.prim_func
    def kernel(A: T.Tensor((N,), T.float32)):
        with T.Kernel(T.ceildiv(N, block), threads=threads) as bx:
            A_local = T.alloc_fragment((block,), dtype=T.float32)
            n_idx = bx * block
            for i in T.Parallel(block):
                A[n_idx + i] = n_idx + i
            T.sync_grid()
            for i in T.Parallel(block):
                A_local[i] = A[N - n_idx - i - 1]
                T.sync_grid()
                A[n_idx + i] = A[n_idx + i] + A_local[i]

    return kernel


def normalize(blocks, block):
    """Y = X / sum(X): each block sums its slice into Partial[bx]; after the barrier every block reads all partials."""
    N = blocks * block

    @T.prim_func
    def kernel(X: T.Tensor((N,), "float32"), Partial: T.Tensor((blocks,), "float32"), Y: T.Tensor((N,), "float32")):
        with T.Kernel(blocks, threads=128) as bx:
            x = T.alloc_fragment((1, block), "float32")
            s = T.alloc_fragment((1,), "float32")
            for i, j in T.Parallel(1, block):
                x[i, j] = X[bx * block + j]
            T.reduce_sum(x, s, dim=1)
            Partial[bx] = s[0]
            T.sync_grid()
            total = T.alloc_var("float32")
            total = 0.0
            for g in T.serial(blocks):
                total += Partial[g]
            for j in T.Parallel(block):
                Y[bx * block + j] = X[bx * block + j] / total

    return kernel


def compile_for(program, arch):
    return tilelang.compile(program, target=f"musa -arch={arch}")


@pytest.mark.parametrize("arch", ARCHS)
def test_moore_threads_reversal_add_reaches_every_barrier_with_every_thread(arch):
    kernel = compile_for(reversal_add(), arch)
    src = kernel.get_kernel_source()
    assert "#include <cooperative_groups.h>" in src
    assert src.count("cooperative_groups::this_grid().sync();") == 2
    # the partition guard of the 64-iteration loop on 128 threads is split around the barrier: threads 64..127
    # arrive too (a guarded barrier would leave them out, a deadlock on a card)
    body = src[src.index("kernel_kernel("):]
    for line in body.splitlines():
        if "this_grid().sync()" in line:
            assert line == "  cooperative_groups::this_grid().sync();", line  # at the kernel's top level
    assert "musaLaunchCooperativeKernel(kernel_kernel, grid, block, args, smem, stream)" in kernel.get_host_source()
    a = rand((1024,), torch.float32, 7)
    kernel(a)
    torch.testing.assert_close(a, torch.full_like(a, 1023.0), rtol=0, atol=0)


@pytest.mark.parametrize("arch", ARCHS)
def test_blocks_read_the_partials_other_blocks_wrote_before_the_barrier(arch):
    blocks, block = 24, 128
    kernel = compile_for(normalize(blocks, block), arch)
    assert "musaLaunchCooperativeKernel" in kernel.get_host_source()
    x = rand((blocks * block,), torch.float32, 11).abs() + 0.5
    partial = torch.full((blocks,), float("nan"))
    y = torch.full_like(x, float("nan"))
    kernel(x, partial, y)
    torch.testing.assert_close(partial, x.view(blocks, block).sum(dim=1), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(y, x / x.sum(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("arch", ARCHS)
def test_bounds_guard_of_a_multi_iteration_loop_is_split_at_the_barrier(arch):
    N, block = 1000, 256  # 2 iterations per thread, the last block partly out of bounds

    @T.prim_func
    def kernel(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32"), C: T.Tensor((N,), "float32")):
        with T.Kernel(T.ceildiv(N, block), threads=128) as bx:
            for i in T.Parallel(block):
                B[bx * block + i] = A[bx * block + i] * 2.0
                T.sync_grid()
                C[bx * block + i] = B[bx * block + i] + B[0]  # B[0]: block 0's, written before the first barrier

    compiled = compile_for(kernel, arch)
    src = compiled.get_kernel_source()
    assert src.count("cooperative_groups::this_grid().sync();") == 1
    assert "for (int it = 0; it < " in src  # the per-thread loop runs the barrier every iteration, in every thread
    a, b, c = rand((N,), torch.float32, 4), torch.full((N,), float("nan")), torch.full((N,), float("nan"))
    compiled(a, b, c)
    torch.testing.assert_close(b, a * 2.0, rtol=0, atol=0)
    torch.testing.assert_close(c, a * 2.0 + a[0] * 2.0, rtol=0, atol=0)


def test_split_pass_moves_the_partition_guard_past_the_barrier_inside_the_loop():
    @S.prim_func(private=True)
    def before(A: S.handle("float32", "global")):
        Ag = S.decl_buffer((256,), "float32", data=A)
        tx = S.launch_thread("threadIdx.x", 128)
        a = S.alloc_buffer((2,), "float32", scope="local")
        for j in range(2):
            if tx < 100 - j * 64:
                a[j] = Ag[255 - tx - j * 128]
                S.evaluate(S.call_intrin("int32", "tl.sync_grid"))
                Ag[tx + j * 128] = Ag[tx + j * 128] + a[j]

    @S.prim_func(private=True)
    def expected(A: S.handle("float32", "global")):
        Ag = S.decl_buffer((256,), "float32", data=A)
        tx = S.launch_thread("threadIdx.x", 128)
        a = S.alloc_buffer((2,), "float32", scope="local")
        for j in range(2):
            if tx < 100 - j * 64:
                a[j] = Ag[255 - tx - j * 128]
            S.evaluate(S.call_intrin("int32", "tl.sync_grid"))
            if tx < 100 - j * 64:
                Ag[tx + j * 128] = Ag[tx + j * 128] + a[j]

    got = SplitGuardsAtGridBarriers()(tvm.IRModule({"main": before}))["main"]
    tvm.ir.assert_structural_equal(got, expected, map_free_vars=True)


def test_checked_mode_runs_the_grid_barrier(monkeypatch):
    monkeypatch.setenv("TILELANG_SIM_CHECK", "1")
    monkeypatch.setenv("TILELANG_SIM_SEED", "5")
    blocks, block = 8, 128
    kernel = compile_for(normalize(blocks, block), "mp_31")
    x = rand((blocks * block,), torch.float32, 3).abs() + 0.5
    partial, y = torch.empty(blocks), torch.empty_like(x)
    kernel(x, partial, y)
    torch.testing.assert_close(y, x / x.sum(), rtol=1e-5, atol=1e-6)


def test_profiling_runs_a_cooperative_launch_whole():
    blocks, block = 24, 128
    kernel = compile_for(normalize(blocks, block), "mp_31")
    counters = kernel.get_profiler().counters(sample_blocks=4)  # a sample would wait at the barrier forever
    assert counters.blocks == blocks and counters.grid_blocks == blocks
    assert counters.barrier_stall_cycles > 0  # the blocks leave the grid barrier at the latest one's clock


def test_kernel_without_grid_barrier_keeps_the_plain_launch():
    @T.prim_func
    def kernel(A: T.Tensor((256,), "float32")):
        with T.Kernel(2, threads=128) as bx:
            for i in T.Parallel(128):
                A[bx * 128 + i] = 1.0

    compiled = compile_for(kernel, "mp_31")
    assert "musaLaunchKernel(kernel_kernel" in compiled.get_host_source()
    assert "cooperative_groups" not in compiled.get_kernel_source()


def test_grid_larger_than_the_device_holds_is_the_drivers_launch_error():
    # mp_31: 56 MPs x 16 blocks of 128 threads (profiler/arch_figures.py); one block more cannot be resident
    kernel = compile_for(reversal_add(N=897 * 64, block=64), "mp_31")
    a = rand((897 * 64,), torch.float32, 1)
    with pytest.raises(KernelLaunchError, match=r"cooperative launch of 897 blocks \(musaLaunchCooperativeKernel\): "
                                                r"mp_31 holds at most 896 blocks of 128 threads"):
        kernel(a)


def test_user_condition_on_the_thread_index_around_the_barrier_is_a_compile_error():
    @T.prim_func
    def kernel(A: T.Tensor((256,), "float32")):
        with T.Kernel(2, threads=128) as bx:
            tx = T.get_thread_binding()
            if tx < 64:
                T.sync_grid()
            A[bx * 128 + tx] = 1.0

    with pytest.raises(CompileError, match=r"T.sync_grid\(\) sits under `if .*`, a condition on the thread or block "
                                           r"index") as info:
        compile_for(kernel, "mp_31")
    assert "T.sync_grid()" in str(info.value)  # the barrier's own line


def test_block_that_leaves_before_the_barrier_is_a_deadlock_error_naming_the_line():
    @T.prim_func
    def kernel(A: T.Tensor((512,), "float32"), Flag: T.Tensor((4,), "int32")):
        with T.Kernel(4, threads=128) as bx:
            tx = T.get_thread_binding()
            if Flag[bx] != 0:  # read from memory: may be uniform, so compiled; block 2's is 0 below
                T.sync_grid()
            A[bx * 128 + tx] = 1.0

    compiled = compile_for(kernel, "mp_31")
    a = rand((512,), torch.float32, 2)
    with pytest.raises(KernelLaunchError, match=r"deadlock at the grid barrier cooperative_groups::this_grid\(\)"
                                                r"\.sync\(\) \(.*:\d+\): 3 of 4 blocks wait there and 1 ended without "
                                                r"reaching it, block \(2,0,0\) first"):
        compiled(a, torch.tensor([1, 1, 0, 1], dtype=torch.int32))


# ---- the simulator's cooperative launch, driven by a handwritten kernel library (sim_kernels/grid_sync.mu) ----------

@pytest.fixture(scope="module")
def grid_sync_lib(session_dir):
    def build(arch: int) -> SimLibrary:
        source = KERNELS / "grid_sync.mu"
        output, stderr = build_shared(session_dir / "sim_kernels", f"grid_sync_{arch}",
                                      lambda out: sim_compile_command(source, out, arch))
        if output is None:
            pytest.fail(f"compiling {source.name} for arch {arch} failed:\n{stderr}")
        return SimLibrary(output, source)

    return build


def run(lib, which, cooperative, blocks, threads, smem=0):
    a = np.full(blocks * threads, np.nan, dtype=np.float32)
    code = lib.call(which, int(cooperative), a.ctypes.data_as(ctypes.c_void_p), blocks, threads, smem)
    return code, (lib.error() if code else ""), a


@pytest.mark.parametrize("arch", [310, 220])
def test_every_block_sees_the_writes_of_every_other_block_after_the_barrier(grid_sync_lib, arch):
    lib = grid_sync_lib(arch)
    code, message, a = run(lib, 0, True, 32, 128)
    assert code == 0, message
    np.testing.assert_array_equal(a, np.full_like(a, 32 * 128 - 1))


@pytest.mark.parametrize("arch,threads,smem,resident", [(310, 128, 0, 896), (310, 128, 40960, 224),
                                                        (220, 128, 0, 512), (220, 128, 40960, 32)])
def test_residency_limit_per_arch(grid_sync_lib, arch, threads, smem, resident):
    lib = grid_sync_lib(arch)
    code, message, _ = run(lib, 0, True, resident + 1, threads, smem)
    assert code == COOPERATIVE_LAUNCH_TOO_LARGE
    assert f"cooperative launch of {resident + 1} blocks (musaLaunchCooperativeKernel): " in message
    assert f"holds at most {resident} blocks of {threads} threads and {smem} bytes of shared memory" in message


def test_largest_resident_grid_runs(grid_sync_lib):
    # mp_22 with 40 KiB of shared memory a block: one block per MP, 32 MPs
    code, message, a = run(grid_sync_lib(220), 0, True, 32, 128, 40960)
    assert code == 0, message
    np.testing.assert_array_equal(a, np.full_like(a, 32 * 128 - 1))


def test_block_ending_before_the_barrier_is_a_deadlock_not_a_hang(grid_sync_lib):
    lib = grid_sync_lib(310)
    code, message, _ = run(lib, 1, True, 4, 64)
    line = lib.line_of("if (blockIdx.x == 1) return;") + 1
    assert code == LAUNCH_FAILURE
    assert message.startswith("kernel block_leaves_early: block (0,0,0), thread (")
    assert (f"deadlock at the grid barrier cooperative_groups::this_grid().sync() (grid_sync.mu:{line}): 3 of 4 "
            "blocks wait there and 1 ended without reaching it, block (1,0,0) first") in message


def test_thread_skipping_the_barrier_fails_its_block(grid_sync_lib):
    lib = grid_sync_lib(310)
    code, message, _ = run(lib, 2, True, 3, 64)
    line = lib.line_of("if (threadIdx.x != 5) cooperative_groups::this_grid().sync();")
    assert code == LAUNCH_FAILURE
    assert message.startswith("kernel thread_skips: block (0,0,0), thread (5,0,0): divergent ")
    assert f"wait at cooperative_groups::this_grid().sync() (grid_sync.mu:{line})" in message


def test_failing_block_ends_the_waits_of_the_others(grid_sync_lib):
    lib = grid_sync_lib(310)
    code, message, _ = run(lib, 3, True, 4, 64)
    assert code == LAUNCH_FAILURE
    assert message.startswith("kernel block_traps: block (2,0,0), thread (0,0,0): __trap() was called"), message


def test_block_spinning_while_others_wait_is_the_watchdogs_error(grid_sync_lib, monkeypatch):
    monkeypatch.setenv("TILELANG_SIM_WATCHDOG_S", "0.5")
    lib = grid_sync_lib(310)
    code, message, _ = run(lib, 4, True, 4, 64)
    assert code == LAUNCH_FAILURE
    # the waiting blocks' workers make progress (they wake to check), the spinning one does not: its error is the
    # launch's, and the others give up their waits
    assert message.startswith("kernel block_spins: block (3,0,0), thread (0,0,0) made no progress for 0.5 s"), message


def test_grid_barrier_in_a_plain_launch_is_an_error(grid_sync_lib):
    lib = grid_sync_lib(310)
    code, message, _ = run(lib, 0, False, 2, 64)
    line = lib.line_of("cooperative_groups::this_grid().sync();")
    assert code == LAUNCH_FAILURE
    assert (f"cooperative_groups::this_grid().sync() (grid_sync.mu:{line}) in a kernel not launched cooperatively"
            in message)


def test_library_keeps_working_after_failed_cooperative_launches(grid_sync_lib):
    lib = grid_sync_lib(310)
    for which in (1, 2, 3):
        assert run(lib, which, True, 4, 64)[0] == LAUNCH_FAILURE
    code, message, a = run(lib, 0, True, 4, 64)
    assert code == 0, message
    np.testing.assert_array_equal(a, np.full_like(a, 4 * 64 - 1))
