"""Who runs the iterations of a `T.Parallel` nest: a nest writing only thread-private buffers runs in full in every
thread; a nest under `if`s on the thread index is split among exactly the threads that reach it; a guard that does
not admit a contiguous range of threads is an error at the loop's line."""

import inspect
import re

import pytest
import torch

import tilelang
import tilelang.language as T
from conftest import poison, rand

ARCHS = ["mp_31", "mp_22"]


@pytest.mark.parametrize("arch", ARCHS)
def test_parallel_into_a_local_buffer_runs_in_every_thread(arch):
    @T.prim_func
    def row_scale(A: T.Tensor((256, 8), "float32"), B: T.Tensor((256, 8), "float32")):
        with T.Kernel(2, threads=128) as bx:
            tx = T.get_thread_binding()
            row = T.alloc_local((8,), "float32")
            for j in T.Parallel(8):
                row[j] = A[bx * 128 + tx, j] * 2.0
            for j in T.serial(8):
                B[bx * 128 + tx, j] = row[j] + j

    kernel = tilelang.compile(row_scale, target=f"musa -arch={arch}")
    source = kernel.get_kernel_source()
    # every thread fills its whole row: a serial loop over the 8 slots, under no thread guard
    assert re.search(r"for \(int j = 0; j < 8; \+\+j\) \{\n\s+row\[j\] = A\[", source), source
    a = rand((256, 8), torch.float32, 11)
    b = poison((256, 8), torch.float32)
    kernel(a, b)
    torch.testing.assert_close(b, a * 2.0 + torch.arange(8, dtype=torch.float32))


def guarded_fill(guard_first: bool, threads=256, n=1024):
    @T.prim_func
    def fill(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32")):
        with T.Kernel(1, threads=threads) as bx:
            tx = T.get_thread_binding()
            S = T.alloc_shared((n,), "float32")
            if guard_first:
                if tx < 128:
                    for i in T.Parallel(n):
                        S[i] = A[i] + 1.0
            else:
                if tx >= 128:
                    for i in T.Parallel(n):
                        S[i] = A[i] + 1.0
            for i in T.Parallel(n):
                B[i] = S[i]

    return fill


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("guard_first,index", [(True, "S + ((it * 512) + (((int)threadIdx.x) * 4))"),
                                               (False, "S + (((it * 512) + (((int)threadIdx.x) * 4)) - 512)")])
def test_parallel_under_a_thread_guard_is_split_among_the_threads_that_reach_it(arch, guard_first, index):
    """128 of the 256 threads reach the loop: each takes 1024 / 128 = 8 elements (two 4-wide pieces), numbered
    from the first admitted thread."""
    kernel = tilelang.compile(guarded_fill(guard_first), target=f"musa -arch={arch}")
    source = kernel.get_kernel_source()
    assert "for (int it = 0; it < 2; ++it)" in source
    assert index in source, source
    a = rand((1024,), torch.float32, 12)
    b = poison((1024,), torch.float32)
    kernel(a, b)
    torch.testing.assert_close(b, a + 1.0)


def test_parallel_under_a_guard_that_is_not_a_thread_range_is_an_error():
    def build():
        @T.prim_func
        def even(A: T.Tensor((256,), "float32")):
            with T.Kernel(1, threads=256) as bx:
                tx = T.get_thread_binding()
                if tx % 2 == 0:
                    for i in T.Parallel(256):
                        A[i] = 1.0

        return tilelang.compile(even)

    with pytest.raises(tilelang.CompileError, match="contiguous range of thread ids") as info:
        build()
    lines, first = inspect.getsourcelines(build)
    line = first + next(i for i, text in enumerate(lines) if "T.Parallel(256)" in text)
    assert f"test_parallel_partition.py:{line}" in str(info.value)
