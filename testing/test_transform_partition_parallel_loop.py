"""PartitionParallelLoop: a T.Parallel nest over global and shared memory (no fragment: LayoutInference did not
plan it) is dealt to the threads that reach it in the free plan: the fused iteration index
f = ((slot // V) * threads + thread) * V + slot % V, V the widest vector every access allows (up to 16 bytes); under
`if`s on the thread index the thread counts from the first thread of the range. A nest that writes only thread-private
buffers runs whole in every thread; a nest of run-time extent is dealt round-robin, each iteration checked."""

import tvm

import tilelang.language as T
from conftest import without_locations
from tilelang_musa.transform.partition_parallel_loop import partition_parallel_loop


def _assert_partitions_to(before, expected):
    after = without_locations(partition_parallel_loop(before))
    tvm.ir.assert_structural_equal(after, without_locations(expected).with_attr("global_symbol",
                                                                                 before.attrs["global_symbol"]))


@T.prim_func
def copy_before(A: T.Tensor((8, 64), "float32"), B: T.Tensor((8, 64), "float32")):
    with T.Kernel(1, threads=64):
        for i, j in T.Parallel(8, 64):
            B[i, j] = A[i, j]


@T.prim_func
def copy_expected(A: T.Tensor((8, 64), "float32"), B: T.Tensor((8, 64), "float32")):
    with T.Kernel(1, threads=64):
        tx = T.get_thread_binding()
        for it in T.serial(2):
            for vec in T.vectorized(4):
                # f = (it * 64 + tx) * 4 + vec: row f // 64, column f % 64
                B[it * 4 + tx // 16, tx % 16 * 4 + vec] = A[it * 4 + tx // 16, tx % 16 * 4 + vec]


def test_a_nest_over_global_memory_is_dealt_to_the_threads_in_float4_pieces():
    _assert_partitions_to(copy_before, copy_expected)


@T.prim_func
def guarded_before(A: T.Tensor((8, 64), "float32"), B: T.Tensor((8, 64), "float32")):
    with T.Kernel(1, threads=64):
        if T.get_thread_binding() >= 32:
            for i, j in T.Parallel(8, 64):
                B[i, j] = A[i, j] + 1.0


@T.prim_func
def guarded_expected(A: T.Tensor((8, 64), "float32"), B: T.Tensor((8, 64), "float32")):
    with T.Kernel(1, threads=64):
        tx = T.get_thread_binding()
        if tx >= 32:
            for it in T.serial(4):
                for vec in T.vectorized(4):
                    # threads 32..63: thread tx - 32 of 32, f = (it * 32 + tx - 32) * 4 + vec
                    B[it * 2 + tx // 16 - 2, tx % 16 * 4 + vec] = A[it * 2 + tx // 16 - 2, tx % 16 * 4 + vec] + 1.0


def test_a_nest_under_a_thread_guard_is_dealt_to_the_threads_of_the_range():
    _assert_partitions_to(guarded_before, guarded_expected)


@T.prim_func
def private_before(A: T.Tensor((8, 64), "float32"), B: T.Tensor((64,), "float32")):
    with T.Kernel(1, threads=64):
        L = T.alloc_local((8,), "float32")
        for i in T.Parallel(8):
            L[i] = A[i, T.get_thread_binding()]
        B[T.get_thread_binding()] = L[7]


@T.prim_func
def private_expected(A: T.Tensor((8, 64), "float32"), B: T.Tensor((64,), "float32")):
    with T.Kernel(1, threads=64):
        L = T.alloc_local((8,), "float32")
        for i in T.serial(8):
            L[i] = A[i, T.get_thread_binding()]
        B[T.get_thread_binding()] = L[7]


def test_a_nest_writing_only_thread_private_memory_runs_whole_in_every_thread():
    _assert_partitions_to(private_before, private_expected)


N = T.dynamic("N")


@T.prim_func
def dynamic_before(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32")):
    with T.Kernel(1, threads=64):
        for i in T.Parallel(N):
            B[i] = A[i]


@T.prim_func
def dynamic_expected(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32")):
    with T.Kernel(1, threads=64):
        tx = T.get_thread_binding()
        for it in T.serial((N + 63) // 64):
            if it * 64 + tx < N:
                B[it * 64 + tx] = A[it * 64 + tx]


def test_a_nest_of_run_time_extent_is_dealt_round_robin_and_checked():
    _assert_partitions_to(dynamic_before, dynamic_expected)
    assert partition_parallel_loop(dynamic_expected).same_as(dynamic_expected)  # no T.Parallel left: unchanged
