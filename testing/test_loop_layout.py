"""`T.Parallel(..., loop_layout=F)` and `T.copy(..., loop_layout=F)`: the user's T.Fragment F over the loop's extents
decides which thread runs each iteration (once per replica) and in which slot order, instead of the plan layout
inference would choose. The fragments the loop touches are laid out from F (or exchanged, if something else placed
them), and the vector width follows F's runs of consecutive slots holding consecutive innermost iterations. A
layout whose shape is not the extents, that puts two iterations on one (thread, slot), or that uses more threads
than run the loop is an error at the loop's line."""

import inspect
import re
import warnings

import pytest
import torch

import tilelang
import tilelang.language as T
from conftest import poison, rand
from tilelang_musa import diagnostics

ARCHS = ["mp_31", "mp_22"]


def target(arch):
    return f"musa -arch={arch}"


def copy_loop(M, N, layout, threads=128, scale=2.0):
    @T.prim_func
    def main(A: T.Tensor((M, N), "float32"), B: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=threads):
            for i, j in T.Parallel(M, N, loop_layout=layout):
                B[i, j] = A[i, j] * scale

    return main


def run_copy(kernel, M, N, seed, scale=2.0):
    a = rand((M, N), torch.float32, seed)
    b = poison((M, N), torch.float32)
    kernel(a, b)
    torch.testing.assert_close(b, a * scale)


# Row i on thread i, its 32 columns in slots 0..31: each thread walks its own row, 4 floats at a time.
ROW_PER_THREAD = T.Fragment((128, 32), forward_fn=lambda i, j: (i, j))


@pytest.mark.parametrize("arch", ARCHS)
def test_row_per_thread_layout_gives_each_thread_its_row_in_16_byte_pieces(arch):
    kernel = tilelang.compile(copy_loop(128, 32, ROW_PER_THREAD), target=target(arch))
    source = kernel.get_kernel_source()
    # thread t's slots 4s..4s+3 are row t, columns 4s..4s+3: one float4 per slot group, 8 groups
    assert "for (int it = 0; it < 8; ++it)" in source, source
    assert re.search(r"float4\*>\(B \+ \(\(\(\(int\)threadIdx\.x\) \* 32\) \+ \(it \* 4\)\)\)", source), source
    run_copy(kernel, 128, 32, 1)


def two_wide(i, j):
    e = i * 64 + j
    return (e // 2) % 128, e % 2 + (e // 256) * 2


@pytest.mark.parametrize("arch", ARCHS)
def test_vector_width_is_the_layouts_run_of_consecutive_slots(arch):
    """Pairs of columns per thread: the layout allows 2-wide vectors only, although the accesses allow 4."""
    layout = T.Fragment((64, 64), forward_fn=two_wide)
    kernel = tilelang.compile(copy_loop(64, 64, layout), target=target(arch))
    source = kernel.get_kernel_source()
    assert "reinterpret_cast<float2*>" in source and "float4" not in source, source
    assert re.search(r"B \+ \(\(it \* 256\) \+ \(\(\(int\)threadIdx\.x\) \* 2\)\)", source), source
    run_copy(kernel, 64, 64, 2)


@pytest.mark.parametrize("arch", ARCHS)
def test_column_layout_runs_scalar_with_each_thread_on_one_column(arch):
    """Column j on thread j: a thread's consecutive slots are rows apart, so no vectors; B[slot, thread]."""
    layout = T.Fragment((16, 128), forward_fn=lambda i, j: (j, i))
    kernel = tilelang.compile(copy_loop(16, 128, layout), target=target(arch))
    source = kernel.get_kernel_source()
    assert "tl::vec" not in source and "reinterpret_cast<float" not in source, source
    assert "B[(it * 128) + ((int)threadIdx.x)] = A[(it * 128) + ((int)threadIdx.x)]" in source, source
    run_copy(kernel, 16, 128, 3)


def replicated(i, j, rep):
    e = i * 32 + j
    return (e // 4) % 64 + rep * 64, e % 4 + (e // 256) * 4


@pytest.mark.parametrize("arch", ARCHS)
def test_replicated_layout_runs_each_iteration_once_per_replica(arch):
    """Two replicas on threads 0..63 and 64..127: both halves run every iteration (thread & 63)."""
    layout = T.Fragment((128, 32), forward_fn=replicated, replicate=2)
    kernel = tilelang.compile(copy_loop(128, 32, layout), target=target(arch))
    source = kernel.get_kernel_source()
    assert "for (int it = 0; it < 16; ++it)" in source, source
    assert "((((int)threadIdx.x) & 63) * 4)" in source and "reinterpret_cast<float4*>" in source, source
    run_copy(kernel, 128, 32, 4)


@pytest.mark.parametrize("arch", ARCHS)
def test_copy_takes_a_loop_layout(arch):
    layout = T.Fragment((128, 32), forward_fn=replicated, replicate=2)

    @T.prim_func
    def main(A: T.Tensor((128, 32), "float32"), B: T.Tensor((128, 32), "float32")):
        with T.Kernel(1, threads=128):
            T.copy(A, B, loop_layout=layout)

    kernel = tilelang.compile(main, target=target(arch))
    source = kernel.get_kernel_source()
    assert "((((int)threadIdx.x) & 63) * 4)" in source and "it < 16" in source, source
    run_copy(kernel, 128, 32, 5, scale=1.0)


@pytest.mark.parametrize("arch", ARCHS)
def test_fragments_the_loop_touches_are_laid_out_by_its_loop_layout(arch):
    """acc is written by a loop with ROW_PER_THREAD: acc gets that layout (32 slots a thread, row = thread), and
    the free loop that reads it afterwards follows it, with no exchange."""

    @T.prim_func
    def main(A: T.Tensor((128, 32), "float32"), B: T.Tensor((128, 32), "float32")):
        with T.Kernel(1, threads=128):
            acc = T.alloc_fragment((128, 32), "float32")
            for i, j in T.Parallel(128, 32, loop_layout=ROW_PER_THREAD):
                acc[i, j] = A[i, j] + 1.0
            for i, j in T.Parallel(128, 32):
                B[i, j] = acc[i, j] * 3.0

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no layout exchange
        kernel = tilelang.compile(main, target=target(arch))
    source = kernel.get_kernel_source()
    assert re.search(r"float acc\w*\[32\]", source), source
    assert source.count("(((int)threadIdx.x) * 32)") >= 2, source  # both loops: row threadIdx.x
    assert "__shared__" not in source and "exchange" not in source, source
    a = rand((128, 32), torch.float32, 6)
    b = poison((128, 32), torch.float32)
    kernel(a, b)
    torch.testing.assert_close(b, (a + 1.0) * 3.0)


@pytest.mark.parametrize("arch", ARCHS)
def test_loop_layout_against_a_fragment_placed_otherwise_exchanges_it(arch, monkeypatch):
    """acc is placed by the first loop (row per thread); the second loop's layout (column per thread) needs it
    elsewhere: it is relaid through shared memory, with a warning, and the results stay right."""
    column = T.Fragment((128, 32), forward_fn=lambda i, j: (i // 32 * 32 + j, i % 32))

    @T.prim_func
    def main(A: T.Tensor((128, 32), "float32"), B: T.Tensor((128, 32), "float32")):
        with T.Kernel(1, threads=128):
            acc = T.alloc_fragment((128, 32), "float32")
            for i, j in T.Parallel(128, 32, loop_layout=ROW_PER_THREAD):
                acc[i, j] = A[i, j] + 1.0
            for i, j in T.Parallel(128, 32, loop_layout=column):
                B[i, j] = acc[i, j] - 2.0

    monkeypatch.setattr(diagnostics, "_WARNED", set())  # the warning is once per process; each arch checks it
    with pytest.warns(Warning, match=r"fragment `acc` is exchanged .* the T.Parallel loop runs by its loop_layout"):
        kernel = tilelang.compile(main, target=target(arch))
    assert "acc_exchange" in kernel.get_kernel_source()
    a = rand((128, 32), torch.float32, 7)
    b = poison((128, 32), torch.float32)
    kernel(a, b)
    torch.testing.assert_close(b, a - 1.0)


@pytest.mark.parametrize("arch", ARCHS)
def test_exchange_places_its_own_barriers_when_thread_storage_sync_is_off(arch, monkeypatch):
    """TL_DISABLE_THREAD_STORAGE_SYNC leaves the user's tiles to the user, not the compiler's: the exchange tile
    gets a barrier before its stores (earlier readers are done) and one between its stores and its loads."""
    column = T.Fragment((128, 32), forward_fn=lambda i, j: (i // 32 * 32 + j, i % 32))

    @T.prim_func
    def main(A: T.Tensor((128, 32), "float32"), B: T.Tensor((128, 32), "float32")):
        with T.Kernel(1, threads=128):
            acc = T.alloc_fragment((128, 32), "float32")
            for k in T.serial(2):  # the second exchange must wait for the first one's readers
                for i, j in T.Parallel(128, 32, loop_layout=ROW_PER_THREAD):
                    acc[i, j] = A[i, j] + k
                for i, j in T.Parallel(128, 32, loop_layout=column):
                    B[i, j] = acc[i, j] * 2.0

    monkeypatch.setattr(diagnostics, "_WARNED", set())
    with pytest.warns(Warning, match=r"fragment `acc` is exchanged"):
        kernel = tilelang.compile(main, target=target(arch),
                                  pass_configs={tilelang.PassConfigKey.TL_DISABLE_THREAD_STORAGE_SYNC: True})
    source = kernel.get_kernel_source()
    assert re.search(r"__syncthreads\(\);\n(\s+.*\n)*?\s+acc_exchange\[.*\] = acc\[", source), source
    assert re.search(r"acc_exchange\[.*\] = acc\[.*\n(\s+.*\n)*?\s+__syncthreads\(\);\n(\s+.*\n)*?.*= "
                     r"acc_exchange\[", source), source
    a = rand((128, 32), torch.float32, 8)
    b = poison((128, 32), torch.float32)
    kernel(a, b)
    torch.testing.assert_close(b, (a + 1.0) * 2.0)


@pytest.mark.parametrize("arch", ARCHS)
def test_loop_layout_under_a_thread_guard_counts_threads_from_the_range(arch):
    """Threads 64..127 run the loop: the layout's thread t is thread 64 + t."""
    layout = T.Fragment((64, 32), forward_fn=lambda i, j: (i, j))

    @T.prim_func
    def main(A: T.Tensor((64, 32), "float32"), B: T.Tensor((64, 32), "float32")):
        with T.Kernel(1, threads=128):
            tx = T.get_thread_binding()
            if tx >= 64:
                for i, j in T.Parallel(64, 32, loop_layout=layout):
                    B[i, j] = A[i, j] * 2.0

    kernel = tilelang.compile(main, target=target(arch))
    source = kernel.get_kernel_source()
    assert re.search(r"\(\(int\)threadIdx\.x\) \* 32\) \+ \(it \* 4\)\) - 2048\)", source), source
    run_copy(kernel, 64, 32, 8)


@pytest.mark.parametrize("arch", ARCHS)
def test_layout_on_fewer_threads_than_the_block_leaves_the_rest_idle(arch):
    layout = T.Fragment((64, 32), forward_fn=lambda i, j: (i, j))
    kernel = tilelang.compile(copy_loop(64, 32, layout, threads=128), target=target(arch))
    source = kernel.get_kernel_source()
    assert "if (((int)threadIdx.x) < 64)" in source, source
    run_copy(kernel, 64, 32, 9)


def _line_of(fn, text):
    lines, first = inspect.getsourcelines(fn)
    return first + next(k for k, line in enumerate(lines) if text in line)


def _assert_error_at_loop(build, match, text="T.Parallel(M, N, loop_layout"):
    with pytest.raises(tilelang.CompileError, match=match) as info:
        build()
    assert f"test_loop_layout.py:{_line_of(build, text)}" in str(info.value), str(info.value)


def _assert_copy_loop_error(M, N, layout, arch, match):
    """copy_loop with `layout` is a CompileError matching `match`, at copy_loop's T.Parallel line."""
    with pytest.raises(tilelang.CompileError, match=match) as info:
        tilelang.compile(copy_loop(M, N, layout), target=target(arch))
    assert f"test_loop_layout.py:{_line_of(copy_loop, 'T.Parallel(M, N, loop_layout')}" in str(info.value)


def test_layout_of_another_shape_is_an_error_at_the_loop():
    layout = T.Fragment((32, 128), forward_fn=lambda i, j: (j, i))
    _assert_copy_loop_error(128, 32, layout, "mp_31",
                            r"input shape \[32, 128\], but the loop's extents are \[128, 32\]")


def test_layout_that_does_not_cover_each_iteration_once_is_an_error_at_the_loop():
    """Thread i % 128, slot j: rows i and i + 128 share every (thread, slot)."""
    layout = T.Fragment((256, 8), forward_fn=lambda i, j: (i % 128, j))
    _assert_copy_loop_error(256, 8, layout, "mp_22",
                            r"puts iteration \(0, 0\) and iteration \(128, 0\) on the same thread 0 and slot 0")


def test_replicas_on_the_same_threads_are_an_error_at_the_loop():
    layout = T.Fragment((128, 8), forward_fn=lambda i, j, rep: (i, j), replicate=2)
    _assert_copy_loop_error(128, 8, layout, "mp_31",
                            r"\(replica 0\) and iteration \(0, 0\) \(replica 1\) on the same thread")


def test_layout_with_more_threads_than_the_block_is_an_error_at_the_loop():
    layout = T.Fragment((256, 8), forward_fn=lambda i, j: (i, j))
    _assert_copy_loop_error(256, 8, layout, "mp_31",
                            r"on thread 128, but the loop runs on 128 threads \(the block's 128 threads\)")


def test_layout_with_more_threads_than_the_guarded_range_is_an_error_at_the_loop():
    """Over a fragment (planned in LayoutInference), under `if tx < 64`: 128 threads do not fit the range."""
    layout = T.Fragment((128, 8), forward_fn=lambda i, j: (i, j))

    def build():
        M, N = 128, 8

        @T.prim_func
        def main(A: T.Tensor((M, N), "float32"), B: T.Tensor((M, N), "float32")):
            with T.Kernel(1, threads=128):
                tx = T.get_thread_binding()
                acc = T.alloc_fragment((M, N), "float32")
                if tx < 64:
                    for i, j in T.Parallel(M, N, loop_layout=layout):
                        acc[i, j] = A[i, j]
                    T.copy(acc, B)

        return tilelang.compile(main, target=target("mp_31"))

    _assert_error_at_loop(build, r"threads 0\.\.63 of the block")


def test_loop_layout_must_be_a_fragment():
    def build():
        M, N = 128, 8

        @T.prim_func
        def main(A: T.Tensor((M, N), "float32"), B: T.Tensor((M, N), "float32")):
            with T.Kernel(1, threads=128):
                for i, j in T.Parallel(M, N, loop_layout=T.Layout((M, N), lambda i, j: (i * N + j,))):
                    B[i, j] = A[i, j]

        return tilelang.compile(main, target=target("mp_31"))

    _assert_error_at_loop(build, "loop_layout must be a T.Fragment")
