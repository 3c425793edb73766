"""FuseAsyncCopyLanes: `for v in T.vectorized(L): T.copy(src[..., b + v], dst[..., c + v], force_async_copy=True)`
(or `src_robust_desc=d`) becomes one per-thread copy of the L-element run `src[..., b:b + L]` ->
`dst[..., c:c + L]`, so that the lanes form one wide piece. A lane loop whose copies do not move by one element per
lane along the last dimension of both operands stays as it is."""

import pytest
import tvm

import tilelang.language as T
from conftest import without_locations
from tilelang_musa.transform.fuse_async_copy_lanes import fuse_async_copy_lanes

COPY = tvm.ir.Op.get("tl.tileop.copy")


def per_thread_copy(src, dst, *desc):
    """The per-thread async copy T.copy(element, element, force_async_copy=True) emits, over regions."""
    T.evaluate(tvm.ir.Call(COPY, [src, dst, *desc], attrs={"tl.async": "wait", "tl.per_thread": 1}, ret_ty="int32"))


def _assert_fuses_to(before, expected):
    after = without_locations(fuse_async_copy_lanes(before))
    tvm.ir.assert_structural_equal(after, without_locations(expected).with_attr("global_symbol",
                                                                                 before.attrs["global_symbol"]))


@T.prim_func
def lanes_before(A: T.Tensor((32, 16), "float16")):
    with T.Kernel(1, threads=32):
        S = T.alloc_shared((32, 8), "float16")
        tx = T.get_thread_binding()
        for v in T.vectorized(8):
            T.copy(A[tx, v], S[tx, v], force_async_copy=True)


@T.prim_func
def lanes_expected(A: T.Tensor((32, 16), "float16")):
    with T.Kernel(1, threads=32):
        S = T.alloc_shared((32, 8), "float16")
        tx = T.get_thread_binding()
        per_thread_copy(A[tx, 0:8], S[tx, 0:8])


def test_eight_half_lanes_become_one_copy_of_the_run():
    """Eight 2-byte lanes: one 16-byte piece of row tx."""
    _assert_fuses_to(lanes_before, lanes_expected)


@T.prim_func
def robust_before(A: T.Tensor((32, 16), "float32")):
    with T.Kernel(1, threads=32):
        S = T.alloc_shared((32, 4), "float32")
        tx = T.get_thread_binding()
        d = T.make_robust_desc(T.address_of(A[0, 0]), 32 * 16 * 4)
        for v in T.vectorized(4):
            T.copy(A[tx, v], S[tx, v], src_robust_desc=d)


@T.prim_func
def robust_expected(A: T.Tensor((32, 16), "float32")):
    with T.Kernel(1, threads=32):
        S = T.alloc_shared((32, 4), "float32")
        tx = T.get_thread_binding()
        d = T.make_robust_desc(T.address_of(A[0, 0]), 32 * 16 * 4)
        T.evaluate(tvm.ir.Call(COPY, [A[tx, 0:4], S[tx, 0:4], d], attrs={"tl.per_thread": 1}, ret_ty="int32"))


def test_a_robust_descriptor_copy_is_fused_and_keeps_its_descriptor():
    _assert_fuses_to(robust_before, robust_expected)


@T.prim_func
def strided_lanes(A: T.Tensor((32, 16), "float16")):
    with T.Kernel(1, threads=32):
        S = T.alloc_shared((32, 8), "float16")
        tx = T.get_thread_binding()
        for v in T.vectorized(8):
            T.copy(A[tx, 2 * v], S[tx, v], force_async_copy=True)


@T.prim_func
def lanes_down_a_column(A: T.Tensor((32, 16), "float16")):
    with T.Kernel(1, threads=32):
        S = T.alloc_shared((8, 32), "float16")
        tx = T.get_thread_binding()
        for v in T.vectorized(8):
            T.copy(A[tx, v], S[v, tx], force_async_copy=True)


@T.prim_func
def serial_lanes(A: T.Tensor((32, 16), "float16")):
    with T.Kernel(1, threads=32):
        S = T.alloc_shared((32, 8), "float16")
        tx = T.get_thread_binding()
        for v in T.serial(8):
            T.copy(A[tx, v], S[tx, v], force_async_copy=True)


@pytest.mark.parametrize("func", [strided_lanes, lanes_down_a_column, serial_lanes],
                         ids=["strided_source", "lane_along_a_row_dimension", "serial_loop"])
def test_lanes_that_are_not_one_contiguous_run_stay_as_they_are(func):
    tvm.ir.assert_structural_equal(fuse_async_copy_lanes(func), func)
