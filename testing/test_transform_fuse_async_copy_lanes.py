"""FuseAsyncCopyLanes: `for v in T.vectorized(L): T.copy(src[..., b + v], dst[..., c + v], force_async_copy=True)`
(or `src_robust_desc=d`) becomes one per-thread copy of the L-element run `src[..., b:b + L]` ->
`dst[..., c:c + L]`, so that the lanes form one wide piece. A lane loop whose copies do not move by one element per
lane along the last dimension of both operands stays as it is."""

import pytest
import tvm
import tvm_ffi

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


# A T.Parallel nest of element copies (rows gathered through an index tensor) is cut along its innermost loop into
# runs of the widest piece, issued without committing; the nest then commits once (T.async_copy) or commits and
# waits (force_async_copy). The element copy alone would commit (and wait) after every element.


def issued_copy(src, dst):
    T.evaluate(tvm.ir.Call(COPY, [src, dst], attrs={"tl.async": "issue", "tl.per_thread": 1}, ret_ty="int32"))


@T.prim_func
def gather_before(A: T.Tensor((100, 64), "float16"), idx: T.Tensor((16,), "int32")):
    with T.Kernel(1, threads=64):
        S = T.alloc_shared((16, 64), "float16")
        for i, d in T.Parallel(16, 64):
            T.async_copy(A[idx[i], d], S[i, d])


@T.prim_func
def gather_expected(A: T.Tensor((100, 64), "float16"), idx: T.Tensor((16,), "int32")):
    with T.Kernel(1, threads=64):
        S = T.alloc_shared((16, 64), "float16")
        for i, d in T.Parallel(16, 8):
            issued_copy(A[idx[i], d * 8:d * 8 + 8], S[i, d * 8:d * 8 + 8])
        T.evaluate(T.call_extern("int32", "tl::cp_async_commit"))


@T.prim_func
def gather_wait_before(A: T.Tensor((100, 64), "float32"), idx: T.Tensor((16,), "int32")):
    with T.Kernel(1, threads=64):
        S = T.alloc_shared((16, 64), "float32")
        for i, d in T.Parallel(16, 64):
            T.copy(A[idx[i], d], S[i, d], force_async_copy=True)


@T.prim_func
def gather_wait_expected(A: T.Tensor((100, 64), "float32"), idx: T.Tensor((16,), "int32")):
    with T.Kernel(1, threads=64):
        S = T.alloc_shared((16, 64), "float32")
        for i, d in T.Parallel(16, 16):
            issued_copy(A[idx[i], d * 4:d * 4 + 4], S[i, d * 4:d * 4 + 4])
        T.evaluate(T.call_extern("int32", "tl::cp_async_commit"))
        T.evaluate(T.call_extern("int32", "tl::cp_async_wait<0>"))


def test_a_parallel_nest_of_gathered_element_copies_becomes_one_group_of_16_byte_pieces():
    """Eight float16 (T.async_copy) or four float32 (force_async_copy) elements a piece, one commit a nest."""
    _assert_fuses_to(gather_before, gather_expected)
    _assert_fuses_to(gather_wait_before, gather_wait_expected)


@T.prim_func
def gather_odd_start(A: T.Tensor((100, 64), "float16"), idx: T.Tensor((16,), "int32")):
    with T.Kernel(1, threads=64):
        S = T.alloc_shared((16, 63), "float16")
        for i, d in T.Parallel(16, 63):
            T.async_copy(A[idx[i], d + 1], S[i, d])


def test_a_parallel_nest_whose_runs_are_not_aligned_pieces_stays_as_it_is():
    """63 columns from column 1: no 4-byte piece divides the rows, so the element copies are left (and LowerTileOp
    rejects their 2-byte pieces with its message)."""
    tvm.ir.assert_structural_equal(fuse_async_copy_lanes(gather_odd_start), gather_odd_start)


@T.prim_func
def gather_bound_row_before(A: T.Tensor((100, 64), "float16"), idx: T.Tensor((16,), "int32")):
    with T.Kernel(1, threads=64):
        S = T.alloc_shared((16, 64), "float16")
        for i, d in T.Parallel(16, 64):
            r = idx[i]
            T.async_copy(A[r, d], S[i, d])


def test_a_row_bound_before_the_copy_stays_bound_in_each_piece():
    """`r = idx[i]` does not depend on the innermost variable: the pieces keep the binding and read row r."""
    after = without_locations(fuse_async_copy_lanes(gather_bound_row_before))
    loops = []
    tvm_ffi.structural_walk(after.body, [(tvm.tirx.For, loops.append)], order="pre")
    inner = loops[1]
    assert int(inner.extent) == 8 and isinstance(inner.body, tvm.tirx.SeqStmt), after.script()
    bind, copy = inner.body.seq
    assert isinstance(bind, tvm.tirx.Bind) and copy.value.attrs["tl.async"] == "issue", after.script()
    assert "A[r, d * 8:d * 8 + 8]" in after.script(), after.script()


@T.prim_func
def gather_lane_bound_column(A: T.Tensor((100, 64), "float16"), idx: T.Tensor((16,), "int32")):
    with T.Kernel(1, threads=64):
        S = T.alloc_shared((16, 64), "float16")
        for i, d in T.Parallel(16, 64):
            r = T.min(idx[i] + d, 99)
            T.async_copy(A[r, d], S[i, d])


def test_a_binding_that_moves_with_the_lanes_leaves_the_nest_as_it_is():
    """`r = min(idx[i] + d, 99)`: the row moves with the lanes through the binding, which the run check of `A[r, d]`
    does not see; no pieces are formed."""
    tvm.ir.assert_structural_equal(fuse_async_copy_lanes(gather_lane_bound_column), gather_lane_bound_column)
