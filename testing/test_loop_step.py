"""Serial loops with a step (`range(a, b, s)`, `T.serial(a, b, s)`): a unit-step loop over the trip count whose body
sees a + k * s; and loop bounds given by `T.alloc_var` scalars (read at the loop)."""

import pytest
import torch

import tilelang
import tilelang.language as T
from conftest import poison, rand
from tilelang_musa.errors import CompileError

ARCHS = ["mp_31", "mp_22"]


def strided_kernel():
    @T.prim_func
    def main(A: T.Tensor((64,), T.float32), B: T.Tensor((64,), T.float32), n: T.int32):
        with T.Kernel(1, threads=32):
            tx = T.get_thread_binding()
            if tx == 0:
                for i in range(0, 64, 8):  # constant trip count: 0, 8, ..., 56
                    B[i] = A[i] * 2.0
                for i in T.serial(3, n, 5):  # run-time trip count ceil((n - 3) / 5): 3, 8, 13, ...
                    B[i] = A[i] + 1.0
                for i in range(62, 0, -6):  # negative step: 62, 56, ..., 2
                    B[i] = B[i] - A[i]

    return main


def strided_reference(a, n):
    b = torch.full_like(a, float("nan"))
    for i in range(0, 64, 8):
        b[i] = a[i] * 2
    for i in range(3, n, 5):
        b[i] = a[i] + 1
    for i in range(62, 0, -6):
        b[i] = b[i] - a[i]
    return b


@pytest.mark.parametrize("arch", ARCHS)
def test_strided_serial_loops(arch):
    kernel = tilelang.compile(strided_kernel(), target=f"musa -arch={arch}")
    source = kernel.get_kernel_source()
    assert "i < 8; ++i)" in source and "B[i * 8] = A[i * 8]" in source, source  # 64 / 8 trips
    assert "(n + 1) / 5" in source and "B[(i_1 * 5) + 3]" in source, source  # ceil((n - 3) / 5) trips from 3
    assert "i_2 < 11; ++i_2)" in source and "B[62 - (i_2 * 6)]" in source, source  # 11 trips down from 62
    for n in (40, 3, 1):
        a = rand((64,), torch.float32, n)
        b = poison((64,), torch.float32)
        want = strided_reference(a, n)
        kernel(a, b, n)
        touched = ~torch.isnan(want)
        torch.testing.assert_close(b[touched], want[touched])


def test_zero_or_run_time_step_is_an_error_at_the_line():
    def build(step):
        @T.prim_func
        def main(A: T.Tensor((64,), T.float32), s: T.int32):
            with T.Kernel(1, threads=32):
                for i in T.serial(0, 64, step):
                    A[i] = 0.0

    with pytest.raises(CompileError) as err:
        build(0)
    assert "T.serial: step 0 must be a nonzero compile-time int" in str(err.value)
    assert "for i in T.serial(0, 64, step)" in str(err.value)


@pytest.mark.parametrize("arch", ARCHS)
def test_alloc_var_loop_bounds(arch):
    """`m = T.alloc_var(...)`; `m = ...`; `for i in T.serial(m)` loops to m's value (also as T.Parallel's and a strided
    range's bound)."""

    @T.prim_func
    def main(A: T.Tensor((128,), T.float32), B: T.Tensor((128,), T.float32), n: T.int32):
        with T.Kernel(1, threads=128):
            m = T.alloc_var("int32")
            m = T.ceildiv(n, 4)
            tx = T.get_thread_binding()
            if tx == 0:
                for i in T.serial(m):
                    B[i] = A[i] + 1.0
                for i in range(m, n, 2):
                    B[i] = A[i] * 3.0

    kernel = tilelang.compile(main, target=f"musa -arch={arch}")
    for n in (100, 7):
        a, b = rand((128,), torch.float32, n), poison((128,), torch.float32)
        kernel(a, b, n)
        m = -(-n // 4)
        torch.testing.assert_close(b[:m], a[:m] + 1)
        torch.testing.assert_close(b[m:n:2], a[m:n:2] * 3)


@pytest.mark.parametrize("arch", ARCHS)
def test_capitalised_serial_and_unroll_aliases(arch):
    """`T.Serial` / `T.Unroll` (upstream's tile-level spellings, as DeepSeek's TileKernels write them) are
    `T.serial` / `T.unroll`, step and unroll_factor included."""

    @T.prim_func
    def main(A: T.Tensor((4, 64), T.float32), B: T.Tensor((64,), T.float32)):
        with T.Kernel(1, threads=64):
            tx = T.get_thread_binding()
            acc = T.alloc_var(T.float32)
            for r in T.Serial(4):
                acc += A[r, tx]
            for r in T.Unroll(0, 4, 2, unroll_factor=2):
                acc += A[r, tx] * 0.5
            B[tx] = acc

    kernel = tilelang.compile(main, target=f"musa -arch={arch}")
    source = kernel.get_kernel_source()
    assert "for (int r = 0; r < 4; ++r)" in source, source
    assert "#pragma unroll 2\n  for (int r_1 = 0; r_1 < 4; r_1 += 2)" in source, source
    a = rand((4, 64), torch.float32, 7)
    b = poison((64,), torch.float32)
    kernel(a, b)
    torch.testing.assert_close(b, a.sum(0) + 0.5 * (a[0] + a[2]))
