"""FoldCpAsyncLanes: `for v in T.vectorized(L): T.ptx_cp_async(T.access_ptr(S[b + v], "w", 1),
T.access_ptr(A[c + v], "r", 1), 1)` becomes the one copy of L elements from `&S[b]`, `&A[c]` that the user could
have written (`T.ptx_cp_async(..., L)`); lanes that already are copies and would fold misaligned stay as they are.
Numerics and errors: test_async_copy_rules.py."""

import tvm

import tilelang.language as T
from conftest import without_locations
from tilelang_musa.transform.fold_cp_async_lanes import fold_cp_async_lanes


def _assert_folds_to(before, expected):
    after = without_locations(fold_cp_async_lanes(before))
    tvm.ir.assert_structural_equal(after, without_locations(expected).with_attr("global_symbol",
                                                                                 before.attrs["global_symbol"]))


@T.prim_func
def lanes_before(A: T.Tensor((8, 64), "float16")):
    with T.Kernel(1, threads=32):
        S = T.alloc_shared((8, 64), "float16")
        tx = T.get_thread_binding()
        for v in T.vectorized(4):
            T.ptx_cp_async(T.access_ptr(S[tx // 4, tx % 4 * 8 + 4 + v], "w", 1),
                           T.access_ptr(A[tx // 4, tx % 4 * 8 + 4 + v], "r", 1), 1, predicate=tx < 16)


@T.prim_func
def lanes_expected(A: T.Tensor((8, 64), "float16")):
    with T.Kernel(1, threads=32):
        S = T.alloc_shared((8, 64), "float16")
        tx = T.get_thread_binding()
        T.ptx_cp_async(T.access_ptr(S[tx // 4, tx % 4 * 8 + 4], "w"), T.access_ptr(A[tx // 4, tx % 4 * 8 + 4], "r"),
                       4, predicate=tx < 16)


def test_four_half_lanes_become_one_8_byte_copy_of_the_run():
    _assert_folds_to(lanes_before, lanes_expected)


@T.prim_func
def pairs_before(A: T.Tensor((256,), "float16")):
    with T.Kernel(1, threads=32):
        S = T.alloc_shared((256,), "float16")
        tx = T.get_thread_binding()
        for v in T.vectorized(2):
            T.ptx_cp_async(T.access_ptr(S[tx * 8 + 4 + v * 4], "w"), T.access_ptr(A[tx * 8 + 4 + v * 4], "r"), 4)


def test_whole_copies_that_would_fold_misaligned_stay_per_lane():
    """Each lane is an aligned 8-byte copy; the 16-byte pair would start at element 8 tx + 4."""
    tvm.ir.assert_structural_equal(fold_cp_async_lanes(pairs_before), pairs_before)


@T.prim_func
def nested_before(A: T.Tensor((256,), "float16")):
    with T.Kernel(1, threads=32):
        S = T.alloc_shared((256,), "float16")
        tx = T.get_thread_binding()
        for a in T.vectorized(2):
            for b in T.vectorized(4):
                T.ptx_cp_async(T.access_ptr(S[tx * 8 + a * 4 + b], "w"), T.access_ptr(A[tx * 8 + a * 4 + b], "r"), 1)


@T.prim_func
def nested_expected(A: T.Tensor((256,), "float16")):
    with T.Kernel(1, threads=32):
        S = T.alloc_shared((256,), "float16")
        tx = T.get_thread_binding()
        T.ptx_cp_async(T.access_ptr(S[tx * 8], "w"), T.access_ptr(A[tx * 8], "r"), 8)


def test_nested_vectorized_lanes_fold_level_by_level():
    """4 lanes of 1 element are an 8-byte copy; 2 lanes of those, 16 bytes from element 8 tx: one copy."""
    _assert_folds_to(nested_before, nested_expected)
