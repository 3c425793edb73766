"""A plain T.copy from global to shared memory that one thread runs (`if tx == 768: T.copy(q[...], q_shared)`, as
Moore Threads' GDN prefill producers copy their tiles) is one TME load on mp_31, waited for by that thread on a
barrier of the compiler's; mp_22 has no TME and keeps the thread's loop. Copies of several threads, copies that ask
for another instruction and copies the TME cannot do stay element copies. Stores from shared memory in one thread
are TME stores already (every T.copy store is a TME candidate): covered here on both arches too."""

import pytest
import torch
import tvm

import tilelang
import tilelang.language as T
from conftest import poison, rand, without_locations
from tilelang_musa.ir.options import CompileOptions
from tilelang_musa.transform.one_thread_tme_loads import one_thread_tme_loads

ARCHS = ["mp_31", "mp_22"]
# Rows of a block's tile. 16 rows take the same paths as more (the TME box, the element loop, its tails); g++'s
# build time of the element-copy kernels grows with the rows (a 64-row tile took ~10 s to build, 16 rows ~3 s).
ROWS = 16


def one_thread_load(threads_in_region=1, cols=64, rows=ROWS, **copy_args):
    """Thread 32 (or threads 32.. of a range) copies a block's rows x cols tile in and writes it back doubled."""

    @T.prim_func
    def main(A: T.Tensor((2 * rows, cols), "float16"), B: T.Tensor((2 * rows, cols), "float16")):
        with T.Kernel(2, threads=128) as bx:
            tx = T.get_thread_binding()
            s = T.alloc_shared((rows, cols), "float16")
            if tx >= 32 and tx < 32 + threads_in_region:
                T.copy(A[bx * rows:bx * rows + rows, :], s, **copy_args)
                for i in T.serial(rows // threads_in_region):
                    for j in T.serial(cols):
                        r = i * threads_in_region + tx - 32
                        B[bx * rows + r, j] = s[r, j] * 2

    return main


def run_doubled(kernel, cols=64, rows=ROWS):
    a, b = rand((2 * rows, cols), torch.float16, 5), poison((2 * rows, cols), torch.float16)
    kernel(a, b)
    torch.testing.assert_close(b, a * 2)


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("checked", [False, True])
def test_a_load_one_thread_runs_is_one_tme_load(arch, checked, monkeypatch):
    kernel = tilelang.compile(one_thread_load(), target=f"musa -arch={arch}")
    src = kernel.get_kernel_source()
    if arch == "mp_31":
        assert src.count("tl::tma_load<") == 1, src
        assert f"tl::barrier_expect_tx(1, {ROWS * 64 * 2});" in src and "tl::barrier_sync(1);" in src, src
        assert "tl::barrier_init(1, 1);" in src, src  # one warp's arrival: the issuing thread's
        assert "for (int it" not in src, src  # no element loop left
    else:  # no TME: the thread's own 16-byte loop
        assert "tma_load" not in src and "barrier" not in src, src
        assert f"for (int it = 0; it < {ROWS * 64 // 8}; ++it)" in src, src
    if checked:  # missing waits, races and uninitialised reads are reported in checked mode
        monkeypatch.setenv("TILELANG_SIM_CHECK", "1")
    run_doubled(kernel)


@pytest.mark.parametrize("args", [dict(threads_in_region=32, rows=32), dict(disable_tma=True),
                                  dict(prefer_instruction="sync"), dict(force_async_copy=True),
                                  dict(cols=4)])  # 8-byte rows: the TME moves multiples of 16 bytes
def test_other_copies_stay_element_copies(args):
    kernel = tilelang.compile(one_thread_load(**args), target="musa -arch=mp_31")
    src = kernel.get_kernel_source()
    assert "tma_load" not in src, src
    run_doubled(kernel, args.get("cols", 64), args.get("rows", ROWS))


def test_tme_lowering_off_keeps_the_loop():
    kernel = tilelang.compile(one_thread_load(), target="musa -arch=mp_31",
                              pass_configs={tilelang.PassConfigKey.TL_DISABLE_TMA_LOWER: True})
    assert "tma_load" not in kernel.get_kernel_source()
    run_doubled(kernel)


def producer_consumer(rows=16, steps=6):
    """Moore Threads' GDN prefill form: a producer warp waits for a free slot, its thread 128 copies the step's tile
    into it, and the warp arrives on the slot's `ready` barrier (32 arrivals); 128 consumers wait on it, read the
    tile and arrive on `free`. Two slots."""

    @T.prim_func
    def main(x: T.Tensor((rows * steps, 64), "bfloat16"), y: T.Tensor((rows * steps, 64), "float32")):
        with T.Kernel(1, threads=160):
            tx = T.get_thread_binding()
            s = T.alloc_shared((2, rows, 64), "bfloat16")
            ready = T.alloc_barrier(arrive_count=[32] * 2)
            free = T.alloc_barrier(arrive_count=[128] * 2)
            if tx < 128:
                for i in T.serial(steps):
                    T.barrier_wait(ready[i % 2], (i // 2) % 2)
                    for r, c in T.Parallel(rows, 64):
                        y[i * rows + r, c] = T.cast(s[i % 2, r, c], "float32") * 3.0
                    T.barrier_arrive(free[i % 2])
            else:
                for i in T.serial(steps):
                    T.barrier_wait(free[i % 2], T.bitwise_xor((i // 2) % 2, 1))
                    if tx == 128:
                        T.copy(x[i * rows:(i + 1) * rows, :], s[i % 2, :, :])
                    T.barrier_arrive(ready[i % 2])

    return main


@pytest.mark.parametrize("checked", [False, True])
def test_producer_warp_with_a_one_thread_copy_feeds_its_consumers(checked, monkeypatch):
    kernel = tilelang.compile(producer_consumer(), target="musa -arch=mp_31",
                              pass_configs={tilelang.PassConfigKey.TL_DISABLE_THREAD_STORAGE_SYNC: True})
    src = kernel.get_kernel_source()
    assert src.count("tl::tma_load<") == 1, src
    if checked:
        monkeypatch.setenv("TILELANG_SIM_CHECK", "1")
    x, y = rand((16 * 6, 64), torch.bfloat16, 7), poison((16 * 6, 64), torch.float32)
    kernel(x, y)
    torch.testing.assert_close(y, x.float() * 3.0)


def one_thread_store():
    @T.prim_func
    def main(A: T.Tensor((2 * ROWS, 64), "float16"), B: T.Tensor((2 * ROWS, 64), "float16")):
        with T.Kernel(2, threads=128) as bx:
            tx = T.get_thread_binding()
            s = T.alloc_shared((ROWS, 64), "float16")
            for i, j in T.Parallel(ROWS, 64):
                s[i, j] = A[bx * ROWS + i, j] * 2
            if tx == 32:
                T.copy(s, B[bx * ROWS:bx * ROWS + ROWS, :])

    return main


@pytest.mark.parametrize("arch", ARCHS)
def test_a_store_one_thread_runs(arch, monkeypatch):
    kernel = tilelang.compile(one_thread_store(), target=f"musa -arch={arch}")
    src = kernel.get_kernel_source()
    assert ("tl::tma_store<" in src) == (arch == "mp_31"), src
    if arch == "mp_31":
        assert "tl::tma_store_wait<0>();" in src, src
    monkeypatch.setenv("TILELANG_SIM_CHECK", "1")
    run_doubled(kernel)


def _with_target(func, arch):
    return func.with_attr("target", tvm.target.Target({"kind": "musa", "arch": arch}))


@pytest.mark.parametrize("arch", ARCHS)
def test_the_pass_makes_the_one_thread_copy_a_tme_copy_that_waits(arch):
    """Before/expected IR: the plain copy under `if tx == 32` becomes the TME copy tile op a T.copy(...,
    prefer_instruction="tma") makes (it waits for itself; LowerTmeCopy lowers it or falls back) on mp_31; mp_22 and
    a 32-thread region keep the plain copy."""
    options = CompileOptions.of({})
    before = _with_target(one_thread_load(), arch)
    expected = _with_target(one_thread_load(prefer_instruction="tma") if arch == "mp_31" else one_thread_load(), arch)
    after = one_thread_tme_loads(before, options)
    tvm.ir.assert_structural_equal(without_locations(after), without_locations(expected))
    several = _with_target(one_thread_load(threads_in_region=32, rows=32), arch)
    assert one_thread_tme_loads(several, options).same_as(several)


def one_thread_block():
    @T.prim_func
    def main(A: T.Tensor((2 * ROWS, 64), "float16"), B: T.Tensor((2 * ROWS, 64), "float16")):
        with T.Kernel(2, threads=1) as bx:
            s = T.alloc_shared((ROWS, 64), "float16")
            T.copy(A[bx * ROWS:bx * ROWS + ROWS, :], s)
            for i, j in T.grid(ROWS, 64):
                B[bx * ROWS + i, j] = s[i, j] * 2

    return main


def one_thread_load_under_a_data_condition():
    """A data condition inside the one-thread region: the copy stays the plain copy (LowerTmeCopy's rule for a T.copy
    under a condition it cannot see through), and still copies the whole tile in that thread."""

    @T.prim_func
    def main(A: T.Tensor((2 * ROWS, 64), "float16"), B: T.Tensor((2 * ROWS, 64), "float16")):
        with T.Kernel(2, threads=128) as bx:
            tx = T.get_thread_binding()
            s = T.alloc_shared((ROWS, 64), "float16")
            if tx == 32:
                if A[bx * ROWS, 0] == A[bx * ROWS, 0]:  # always true for the inputs (no NaN), unknown to the compiler
                    T.copy(A[bx * ROWS:bx * ROWS + ROWS, :], s)
                    for i, j in T.grid(ROWS, 64):
                        B[bx * ROWS + i, j] = s[i, j] * 2

    return main


@pytest.mark.parametrize("arch", ARCHS)
def test_a_one_thread_block_loads_by_tme(arch, monkeypatch):
    kernel = tilelang.compile(one_thread_block(), target=f"musa -arch={arch}")
    assert ("tl::tma_load<" in kernel.get_kernel_source()) == (arch == "mp_31"), kernel.get_kernel_source()
    monkeypatch.setenv("TILELANG_SIM_CHECK", "1")
    run_doubled(kernel)


def test_a_data_condition_inside_the_region_keeps_the_plain_copy(monkeypatch):
    kernel = tilelang.compile(one_thread_load_under_a_data_condition(), target="musa -arch=mp_31")
    assert "tma_load" not in kernel.get_kernel_source(), kernel.get_kernel_source()
    monkeypatch.setenv("TILELANG_SIM_CHECK", "1")
    run_doubled(kernel)
