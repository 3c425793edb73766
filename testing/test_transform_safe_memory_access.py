"""SafeMemoryAccess: a global access whose bounds the analyzer cannot prove (from the loop ranges, thread extents,
enclosing conditions and preceding `T.assume`s) is guarded: a store is skipped out of bounds, a load reads 0 (a load
the store's guard already covers is not guarded twice). In a vectorized loop whose accesses are contiguous in the lane,
V-aligned, over an extent that is a multiple of V, the guard is on the first lane only (the vector access survives);
otherwise it is per lane. With TL_DISABLE_SAFE_MEMORY_ACCESS only T.copy loops are guarded."""

import tvm
from tvm import tirx

import tilelang
import tilelang.language as T
from tilelang_musa.transform.pass_base import run_pass
from tilelang_musa.transform.safe_memory_access import SafeMemoryAccess, safe_memory_access


def _assert_guards_to(before, expected):
    tvm.ir.assert_structural_equal(safe_memory_access(before),
                                   expected.with_attr("global_symbol", before.attrs["global_symbol"]))


@T.prim_func
def scalar_before(A: T.Buffer((100,), "float32"), B: T.Buffer((128,), "float32"), C: T.Buffer((100,), "float32")):
    for tx in T.thread_binding(128, thread="threadIdx.x"):
        B[tx] = A[tx]
        C[tx] = A[tx] * 2.0


@T.prim_func
def scalar_expected(A: T.Buffer((100,), "float32"), B: T.Buffer((128,), "float32"), C: T.Buffer((100,), "float32")):
    for tx in T.thread_binding(128, thread="threadIdx.x"):
        B[tx] = T.if_then_else(tx < 100, A[tx], T.float32(0))
        if tx < 100:
            C[tx] = A[tx] * 2.0


def test_out_of_bounds_loads_read_zero_and_stores_are_skipped():
    """128 threads over 100 elements: B is in bounds (only its load is guarded); C's store guard covers the load."""
    _assert_guards_to(scalar_before, scalar_expected)


@T.prim_func
def vector_before(A: T.Buffer((100,), "float32"), B: T.Buffer((102,), "float32")):
    for tx in T.thread_binding(32, thread="threadIdx.x"):
        for v in T.vectorized(4):
            A[tx * 4 + v] = 0.0
        for v in T.vectorized(4):
            B[tx * 4 + v] = 0.0


@T.prim_func
def vector_expected(A: T.Buffer((100,), "float32"), B: T.Buffer((102,), "float32")):
    for tx in T.thread_binding(32, thread="threadIdx.x"):
        for v in T.vectorized(4):
            if tirx.Add(tx * 4, T.int32(0)) < 100:  # lane 0's index (the pass leaves the `+ 0` to StmtSimplify)
                A[tx * 4 + v] = 0.0
        for v in T.vectorized(4):
            if tx * 4 + v < 102:
                B[tx * 4 + v] = 0.0


def test_a_vector_guard_is_on_the_first_lane_where_that_is_exact():
    """100 is a multiple of 4 (a piece is wholly in or out); 102 is not, so B's guard is per lane."""
    _assert_guards_to(vector_before, vector_expected)


@T.prim_func
def proven_in_bounds(A: T.Buffer((100,), "float32"), B: T.Buffer((128,), "float32")):
    for tx in T.thread_binding(128, thread="threadIdx.x"):
        if tx < 100:
            B[tx] = A[tx]
        for i in T.serial(4):
            B[i * 32 + tx % 32] = 1.0
        T.assume(tx < 100)
        B[tx] = A[tx]


def test_accesses_the_ranges_conditions_and_assumptions_bound_are_left_alone():
    tvm.ir.assert_structural_equal(safe_memory_access(proven_in_bounds), proven_in_bounds)


def test_disabled_the_pass_leaves_plain_accesses_unguarded():
    mod = tvm.IRModule({"main": scalar_before})
    after = run_pass(SafeMemoryAccess({tilelang.PassConfigKey.TL_DISABLE_SAFE_MEMORY_ACCESS: True}), mod)["main"]
    tvm.ir.assert_structural_equal(after, scalar_before)


@T.prim_func
def assumed_through_a_min(a: T.handle, b: T.handle):
    M, N = T.int32(), T.int32()
    A = T.match_buffer(a, (M, N), "float32")
    B = T.match_buffer(b, (M, N), "float32")
    for tx in T.thread_binding(32, thread="threadIdx.x"):
        for j in T.serial(N):
            T.assume(T.min(j + 233, tx + 2) < M)
            B[tx, j] = A[T.min(j + 233, tx + 2), j]


@T.prim_func
def assumed_as_written(a: T.handle, b: T.handle):
    M, N = T.int32(), T.int32()
    A = T.match_buffer(a, (M, N), "float32")
    B = T.match_buffer(b, (M, N), "float32")
    for tx in T.thread_binding(32, thread="threadIdx.x"):
        for j in T.serial(N):
            T.assume(T.min(j + 233, tx + 2) < M)
            if tx < M:
                B[tx, j] = A[T.min(j + 233, tx + 2), j]


def test_an_assumption_is_simplified_before_it_is_used():
    """Upstream's test_assume_complex_indexing: `min(j + 233, tx + 2) < M` bounds tx once the loop ranges fold the
    min to `tx + 2`; taken as written, the analyzer cannot use it and the store's guard `tx < M` stayed."""
    after = safe_memory_access(assumed_through_a_min)
    tvm.ir.assert_structural_equal(after, assumed_through_a_min)
    assert not tvm.ir.structural_equal(after, assumed_as_written)
