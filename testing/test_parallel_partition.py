"""Who runs the iterations of a `T.Parallel` nest: a nest writing only thread-private buffers runs in full in every
thread; a nest under `if`s on the thread index is split among exactly the threads that reach it; a guard that does
not admit a contiguous range of threads is an error at the loop's line; a nest over a fragment placed by a tile op
runs where the fragment's elements live, also through an affine index or over a box of it."""

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
    """A nest writing only a thread-private buffer, at an index no parallel variable reaches (upstream rejects one
    indexed by them: test_parallel_local_index.py), runs all its iterations in every thread."""
    @T.prim_func
    def row_sum(A: T.Tensor((256, 8), "float32"), B: T.Tensor((256,), "float32")):
        with T.Kernel(2, threads=128) as bx:
            tx = T.get_thread_binding()
            total = T.alloc_local((1,), "float32")
            total[0] = 0.0
            for j in T.Parallel(8):
                total[0] = total[0] + A[bx * 128 + tx, j] * 2.0
            B[bx * 128 + tx] = total[0]

    kernel = tilelang.compile(row_sum, target=f"musa -arch={arch}")
    source = kernel.get_kernel_source()
    # every thread adds its whole row: a serial loop over the 8 elements, under no thread guard
    assert re.search(r"for \(int j = 0; j < 8; \+\+j\) \{\n\s+total\[0\] = total\[0\] \+ \(A\[", source), source
    a = rand((256, 8), torch.float32, 11)
    b = poison((256,), torch.float32)
    kernel(a, b)
    torch.testing.assert_close(b, (a * 2.0).sum(1))


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


@pytest.mark.parametrize("arch", ARCHS)
def test_elif_branches_run_on_the_ranges_their_negated_guards_leave(arch):
    """An `elif` is guarded by the negation of the `if`s before it (`not tx < 128 and not (tx >= 128 and tx < 256)`):
    negations move onto the comparisons, so each branch is a contiguous range (threads 128..255, then 256..383),
    its loops split among those threads and its barrier covers them."""
    @T.prim_func
    def roles(A: T.Tensor((384,), "float32"), B: T.Tensor((384,), "float32")):
        with T.Kernel(1, threads=384):
            tx = T.get_thread_binding()
            S = T.alloc_shared((128,), "float32")
            f = T.alloc_fragment((128,), "float32")
            if tx < 128:
                for i in T.Parallel(128):
                    B[i] = A[i] + 1.0
            elif tx >= 128 and tx < 256:
                for i in T.Parallel(128):
                    B[128 + i] = A[128 + i] * 2.0
            elif not tx < 256:
                T.copy(A[256:384], S)  # a tile op and a barrier on threads 256..383
                T.copy(S, f)
                for i in T.Parallel(128):
                    B[256 + i] = f[i] - 1.0

    if arch == "mp_22":  # the range is found; mp_22 just has no barrier over part of a block
        with pytest.raises(tilelang.CompileError, match=r"needs a barrier among its threads 256\.\.383"):
            tilelang.compile(roles, target=f"musa -arch={arch}")
        return
    kernel = tilelang.compile(roles, target=f"musa -arch={arch}")
    source = kernel.get_kernel_source()
    third = source.split("} else {")[-1]
    # threads 256..383: a barrier over them alone, the tile's 4-wide pieces numbered from thread 256
    assert "tl::barrier_sync(1);" in third and "__syncthreads" not in third, source
    assert "S + ((((int)threadIdx.x) * 4) - 1024)" in third, source
    a = rand((384,), torch.float32, 13)
    b = poison((384,), torch.float32)
    kernel(a, b)
    torch.testing.assert_close(b, torch.cat([a[:128] + 1.0, a[128:256] * 2.0, a[256:] - 1.0]))


@pytest.mark.parametrize("arch", ARCHS)
def test_tile_ops_on_thread_private_buffers_run_under_any_guard(arch):
    """T.clear / T.copy of a thread's own T.alloc_local run whole in each thread that gets there: a guard that is no
    range of threads (`tid // 32 < n`, n read at run time) is fine for them."""
    @T.prim_func
    def main(M: T.Tensor((1,), "int32"), A: T.Tensor((128, 4), "float32"), B: T.Tensor((128, 4), "float32")):
        with T.Kernel(1, threads=128):
            tid = T.get_thread_binding()
            n = M[0]
            if tid // 32 < n:
                r = T.alloc_local([4], "float32")
                x = T.alloc_local([4], "float32")
                T.clear(r)
                T.copy(A[tid, :], x)
                for i in T.unroll(4):
                    r[i] += x[i] * 2.0
                T.copy(r, B[tid, :])

    kernel = tilelang.compile(main, target=f"musa -arch={arch}")
    assert "r[i] = 0.000000e+00f;" in kernel.get_kernel_source(), kernel.get_kernel_source()
    a, b = rand((128, 4), torch.float32, 14), poison((128, 4), torch.float32)
    b[96:] = 0.0
    kernel(torch.tensor([3], dtype=torch.int32), a, b)
    torch.testing.assert_close(b, torch.cat([a[:96] * 2.0, torch.zeros(32, 4)]))


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


@pytest.mark.parametrize("arch", ARCHS)
def test_fragment_indexed_by_an_affine_map_of_the_loop_takes_its_layout_from_the_loop(arch):
    """`acc[i * 8 + j]` in T.Parallel(8, 8) visits each of acc's 64 elements once: acc lives where its iteration
    runs, and a later loop over acc follows it."""

    @T.prim_func
    def scale(A: T.Tensor((64,), "float32"), B: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=128) as bx:
            acc = T.alloc_fragment((64,), "float32")
            for i, j in T.Parallel(8, 8):
                acc[i * 8 + j] = A[i * 8 + j] * 2.0
            for i in T.Parallel(64):
                acc[i] = acc[i] + 1.0
            T.copy(acc, B)

    kernel = tilelang.compile(scale, target=f"musa -arch={arch}")
    assert "float acc[" in kernel.get_kernel_source()
    a = rand((64,), torch.float32, 13)
    b = poison((64,), torch.float32)
    kernel(a, b)
    torch.testing.assert_close(b, a * 2.0 + 1.0)


@pytest.mark.parametrize("arch", ARCHS)
def test_loop_follows_a_placed_fragment_through_an_affine_index(arch):
    """The row sums are placed by T.reduce_sum; a loop reading them as `s[j * 4 + i]` runs where they live."""

    @T.prim_func
    def row_sums(A: T.Tensor((16, 64), "float32"), B: T.Tensor((16,), "float32")):
        with T.Kernel(1, threads=128) as bx:
            f = T.alloc_fragment((16, 64), "float32")
            s = T.alloc_fragment((16,), "float32")
            T.copy(A, f)
            T.reduce_sum(f, s, dim=1)
            for i, j in T.Parallel(4, 4):
                s[j * 4 + i] = s[j * 4 + i] * 3.0
            T.copy(s, B)

    kernel = tilelang.compile(row_sums, target=f"musa -arch={arch}")
    a = rand((16, 64), torch.float32, 14)
    b = poison((16,), torch.float32)
    kernel(a, b)
    torch.testing.assert_close(b, a.sum(1) * 3.0, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("arch", ARCHS)
def test_loop_over_a_box_of_a_placed_fragment_runs_where_the_box_lives(arch):
    """A gemm places `acc`; a T.Parallel over part of it (`acc[i + 16, j + 40]`) and a T.clear of a slice (upstream's
    `X_local = C_local[:M, :K]; T.clear(X_local)`) run on the threads holding those elements, each thread
    guarding its slots by the box."""
    M = N = 64
    K = 32

    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((N, K), "float16"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=128):
            a = T.alloc_shared((M, K), "float16")
            b = T.alloc_shared((N, K), "float16")
            acc = T.alloc_fragment((M, N), "float32")
            T.copy(A, a)
            T.copy(B, b)
            T.clear(acc)
            T.gemm(a, b, acc, transpose_B=True)
            for i, j in T.Parallel(32, 16):
                acc[i + 16, j + 40] = acc[i + 16, j + 40] * 2 + 1
            corner = acc[48:64, 0:8]
            T.clear(corner)
            T.copy(acc, C)

    kernel = tilelang.compile(main, target=f"musa -arch={arch}")
    a, b = rand((M, K), torch.float16, 15), rand((N, K), torch.float16, 16)
    c = poison((M, N), torch.float32)
    kernel(a, b, c)
    ref = a.float() @ b.float().T
    ref[16:48, 40:56] = ref[16:48, 40:56] * 2 + 1
    ref[48:64, 0:8] = 0
    torch.testing.assert_close(c, ref, rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("arch", ARCHS)
def test_loop_over_a_reshaped_fragment_follows_the_fragment(arch):
    # T.reshape of a fragment is a name for its elements (row-major): the copy out of the view reads the fragment
    # where it lives, and a reduction of the view stages it through a fragment of the view's shape.
    @T.prim_func
    def main(A: T.Tensor((32, 32), "float32"), B: T.Tensor((1024,), "float32"), S: T.Tensor((16,), "float32")):
        with T.Kernel(1, threads=64):
            frag = T.alloc_fragment((32, 32), "float32")
            sums = T.alloc_fragment((16,), "float32")
            flat_shared = T.alloc_shared((1024,), "float32")
            T.copy(A, frag)
            flat = T.reshape(frag, [1024])
            T.copy(flat, flat_shared)
            T.copy(flat_shared, B)
            T.reduce_sum(T.reshape(frag, [16, 64]), sums, dim=1)
            T.copy(sums, S)

    kernel = tilelang.compile(main, target=f"musa -arch={arch}")
    a = rand((32, 32), torch.float32, 61)
    b, s = poison((1024,), torch.float32), poison((16,), torch.float32)
    kernel(a, b, s)
    torch.testing.assert_close(b, a.reshape(-1))
    torch.testing.assert_close(s, a.reshape(16, 64).sum(1), rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("arch", ARCHS)
def test_a_reduced_value_read_at_a_constant_index_in_a_loop(arch):
    # `lo[0]` in a loop over the row: the reduction places `lo` (replicated on the row's threads) before the loop
    # is planned, so the loop reads it where it lives (upstream's clamp_value_range).
    @T.prim_func
    def main(A: T.Tensor((1, 128), "float32"), B: T.Tensor((1, 128), "float32")):
        with T.Kernel(1, threads=128):
            row = T.alloc_fragment((1, 128), "float32")
            lo = T.alloc_fragment((1,), "float32")
            hi = T.alloc_fragment((1,), "float32")
            T.copy(A, row)
            T.reduce_min(row, lo, dim=1)
            T.reduce_max(row, hi, dim=1)
            for i in T.Parallel(128):
                row[0, i] = T.clamp(row[0, i], min_val=lo[0] * 0.5, max_val=hi[0] * 0.5)
            T.copy(row, B)

    kernel = tilelang.compile(main, target=f"musa -arch={arch}")
    a = rand((1, 128), torch.float32, 62)
    b = poison((1, 128), torch.float32)
    kernel(a, b)
    torch.testing.assert_close(b, a.clamp(a.min().item() * 0.5, a.max().item() * 0.5))


@pytest.mark.parametrize("arch", ARCHS)
def test_loop_binding_a_value_for_an_atomic_is_not_vectorized(arch):
    # The vectorizer would turn `value` into a vector and lose its lanes in the scalar atomic call.
    @T.prim_func
    def main(A: T.Tensor((4, 64, 64), "float32"), B: T.Tensor((64, 64), "float32")):
        with T.Kernel(4, 4, 4, threads=32) as (bx, by, bz):
            tile = T.alloc_shared((16, 16), "float32")
            T.copy(A[bz, bx * 16:(bx + 1) * 16, by * 16:(by + 1) * 16], tile)
            for i, j in T.Parallel(16, 16):
                value = tile[i, j]
                T.atomic_add(B[bx * 16 + i, by * 16 + j], value)

    kernel = tilelang.compile(main, target=f"musa -arch={arch}")
    assert re.search(r"float value = ", kernel.get_kernel_source())
    a = rand((4, 64, 64), torch.float32, 63)
    b = rand((64, 64), torch.float32, 64)
    expected = b + a.sum(0)
    kernel(a, b)
    torch.testing.assert_close(b, expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("arch", ARCHS)
def test_parallel_with_run_time_extents_deals_iterations_to_the_threads(arch):
    # T.fill of x[lo:hi] and a T.Parallel(n, 3) over sizes known only at launch: iterations go round-robin to
    # the threads and each is checked against the run-time total.
    n = T.dynamic("n")

    @T.prim_func
    def main(X: T.Tensor((256,), "float32"), Y: T.Tensor((n, 3), "float32"), lo: T.int32, hi: T.int32):
        with T.Kernel(1, threads=64):
            start = T.alloc_var(T.int32)
            start = lo
            T.fill(X[start:hi], 7.0)  # a T.alloc_var slice bound reads as its value
            for i, j in T.Parallel(n, 3):
                Y[i, j] = i * 3.0 + j

    kernel = tilelang.compile(main, target=f"musa -arch={arch}")
    x = rand((256,), torch.float32, 65)
    expected = x.clone()
    expected[37:201] = 7.0
    y = poison((45, 3), torch.float32)
    kernel(x, y, 37, 201)
    torch.testing.assert_close(x, expected)
    torch.testing.assert_close(y, torch.arange(135, dtype=torch.float32).reshape(45, 3))


@pytest.mark.parametrize("arch", ARCHS)
def test_a_fragment_read_outside_parallel_is_held_by_every_thread(arch):
    # `a = f[i]` in a serial loop runs in every thread: each must hold all of `f` (it was placed on thread 0 by
    # the copy that fills it, and the other threads read registers nobody wrote).
    @T.prim_func
    def main(M: T.Tensor((2,), "int32"), A: T.Tensor((8, 128), "float32"), B: T.Tensor((2, 128), "float32")):
        with T.Kernel(1, threads=128):
            rows = T.alloc_fragment((2,), "int32")
            T.copy(M[0:2], rows)
            tx = T.get_thread_binding()
            for i in T.serial(2):
                row = rows[i]
                B[i, tx] = A[row, tx]

    kernel = tilelang.compile(main, target=f"musa -arch={arch}")
    m = torch.tensor([3, 5], dtype=torch.int32)
    a, b = rand((8, 128), torch.float32, 66), poison((2, 128), torch.float32)
    kernel(m, a, b)
    torch.testing.assert_close(b, a[[3, 5]])


def scalar_var_in_parallel_program(M, threads=64):
    @T.prim_func
    def main(Data: T.Tensor((M,), "int32")):
        with T.Kernel(1, threads=threads):
            idx = T.alloc_var(T.int32)
            for i in T.Parallel(M):
                idx = i * 3
                Data[i] = idx + 1

    return main


@pytest.mark.parametrize("arch", ["mp_31", "mp_22"])
def test_a_parallel_loop_writing_a_scalar_variable_runs_lane_by_lane(arch):
    """Every lane of a vector would write the one `idx` and read it back: such a loop is not vectorized (it was,
    storing one lane's value into all four elements)."""
    M = 2048
    kernel = tilelang.compile(scalar_var_in_parallel_program(M), target=f"musa -arch={arch}")
    source = kernel.get_kernel_source()
    assert "tl::broadcast<int, 4>(idx)" not in source and "(&idx)" not in source, source
    assert "idx = (it * 192) + (((int)threadIdx.x) * 3);" in source, source
    data = torch.full((M,), -7, dtype=torch.int32)
    kernel(data)
    torch.testing.assert_close(data, torch.arange(M, dtype=torch.int32) * 3 + 1)


def broadcast_fragment_program(rows, cols, repeat, threads=128):
    """`A_local[i, j // repeat]`: each element of A_local is read by `repeat` iterations, which the loop's own
    partition spreads over several threads: no register layout of A_local serves them all."""

    @T.prim_func
    def main(A: T.Tensor((rows, cols), "int32"), B: T.Tensor((rows, cols * repeat), "int32")):
        with T.Kernel(1, threads=threads):
            A_local = T.alloc_fragment((rows, cols), "int32")
            T.copy(A, A_local)
            for i, j in T.Parallel(rows, cols * repeat):
                B[i, j] += A_local[i, j // repeat]

    return main


@pytest.mark.parametrize("arch", ARCHS)
def test_a_fragment_read_with_a_many_to_one_index_is_read_from_a_shared_tile(arch, monkeypatch):
    from tilelang_musa import diagnostics

    monkeypatch.setattr(diagnostics, "_WARNED", set())  # the warning is once per process; each arch checks it
    rows, cols, repeat = 16, 14, 32
    with pytest.warns(tilelang.TileLangWarning, match="read from a 896-byte shared-memory tile in this T.Parallel"):
        kernel = tilelang.compile(broadcast_fragment_program(rows, cols, repeat), target=f"musa -arch={arch}")
    source = kernel.get_kernel_source()
    assert re.search(r"A_local_exchange\[.*\] = A_local\[", source), source
    assert "tl::gather(A_local_exchange" in source, source
    a = torch.randint(-100, 100, (rows, cols), dtype=torch.int32)
    b = torch.randint(-100, 100, (rows, cols * repeat), dtype=torch.int32)
    expected = b + a.repeat_interleave(repeat, dim=1)
    kernel(a, b)
    torch.testing.assert_close(b, expected)
