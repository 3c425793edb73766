"""RasterizeBlocks: `T.use_swizzle(panel_size, order)` remaps the block indices at the start of the kernel, so that
consecutive blocks walk panels of `panel_size` rows (order="row") or columns (order="col") of the grid, the last panel
possibly shorter; every use of blockIdx.x / blockIdx.y reads the remapped indices. A 1-D grid has nothing to
remap (the marker goes); a grid of run-time size remaps with its run-time extents; a second T.use_swizzle is an
error."""

import pytest
import tvm

import tilelang.language as T
from conftest import without_locations
from tilelang_musa.errors import CompileError
from tilelang_musa.transform.rasterize_blocks import rasterize_blocks


def _assert_rasterizes_to(before, expected):
    after = without_locations(rasterize_blocks(before))
    tvm.ir.assert_structural_equal(after, without_locations(expected).with_attr("global_symbol",
                                                                                before.attrs["global_symbol"]))


@T.prim_func
def rows_before(A: T.Tensor((6, 6), "float32")):
    with T.Kernel(6, 6, threads=32) as (bx, by):
        T.use_swizzle(panel_size=4)
        if T.get_thread_binding() == 0:
            A[by, bx] = 1.0


@T.prim_func
def rows_expected(A: T.Tensor((6, 6), "float32")):
    with T.Kernel(6, 6, threads=32) as (bx, by):
        # linear id by * 6 + bx; panel by // 4 of min(4, 6 - panel * 4) rows, walked down its rows first
        bx_swizzled = T.int32()
        T.let(bx_swizzled, (by % 4 * 6 + bx) // T.min(4, 6 - by // 4 * 4))
        by_swizzled = T.int32()
        T.let(by_swizzled, by // 4 * 4 + (by % 4 * 6 + bx) % T.min(4, 6 - by // 4 * 4))
        T.evaluate(0)
        if T.get_thread_binding() == 0:
            A[by_swizzled, bx_swizzled] = 1.0


def test_row_panels_remap_both_block_indices_and_the_last_panel_is_shorter():
    """Rows 0-3 form the first panel, rows 4-5 the second (two rows): its blocks go down 2 rows, not 4."""
    _assert_rasterizes_to(rows_before, rows_expected)


_M = T.dynamic("M")


@T.prim_func
def run_time_rows_before(A: T.Tensor((_M, 6), "float32")):
    with T.Kernel(6, T.ceildiv(_M, 2), threads=32) as (bx, by):
        T.use_swizzle(panel_size=4)
        if T.get_thread_binding() == 0:
            A[by, bx] = 1.0


@T.prim_func
def run_time_rows_expected(A: T.Tensor((_M, 6), "float32")):
    with T.Kernel(6, T.ceildiv(_M, 2), threads=32) as (bx, by):
        # the grid's run-time height, (M + 1) // 2, takes the constant's place in the last panel's size
        bx_swizzled = T.int32()
        T.let(bx_swizzled, (by % 4 * 6 + bx) // T.min(4, (_M + 1) // 2 - by // 4 * 4))
        by_swizzled = T.int32()
        T.let(by_swizzled, by // 4 * 4 + (by % 4 * 6 + bx) % T.min(4, (_M + 1) // 2 - by // 4 * 4))
        T.evaluate(0)
        if T.get_thread_binding() == 0:
            A[by_swizzled, bx_swizzled] = 1.0


def test_a_grid_of_run_time_size_rasterizes_with_its_run_time_extent():
    """A symbolic M: the panels are cut from the run-time grid (upstream reads gridDim), not rejected."""
    _assert_rasterizes_to(run_time_rows_before, run_time_rows_expected)


@T.prim_func
def cols_before(A: T.Tensor((3, 6), "float32")):
    with T.Kernel(6, 3, threads=32) as (bx, by):
        T.use_swizzle(panel_size=4, order="col")
        if T.get_thread_binding() == 0:
            A[by, bx] = 1.0


@T.prim_func
def cols_expected(A: T.Tensor((3, 6), "float32")):
    with T.Kernel(6, 3, threads=32) as (bx, by):
        # the transpose: linear id bx * 3 + by, panel bx // 4 of min(4, 6 - panel * 4) columns, walked along
        # its columns first
        bx_swizzled = T.int32()
        T.let(bx_swizzled, bx // 4 * 4 + (bx % 4 * 3 + by) % T.min(4, 6 - bx // 4 * 4))
        by_swizzled = T.int32()
        T.let(by_swizzled, (bx % 4 * 3 + by) // T.min(4, 6 - bx // 4 * 4))
        T.evaluate(0)
        if T.get_thread_binding() == 0:
            A[by_swizzled, bx_swizzled] = 1.0


def test_column_panels_are_the_transpose():
    _assert_rasterizes_to(cols_before, cols_expected)


@T.prim_func
def one_d_before(A: T.Tensor((8,), "float32")):
    with T.Kernel(8, threads=32) as bx:
        T.use_swizzle(panel_size=4)
        A[bx] = 1.0


@T.prim_func
def one_d_expected(A: T.Tensor((8,), "float32")):
    with T.Kernel(8, threads=32) as bx:
        T.evaluate(0)
        A[bx] = 1.0


def test_a_one_d_grid_keeps_its_block_index_and_a_kernel_without_the_marker_is_unchanged():
    _assert_rasterizes_to(one_d_before, one_d_expected)
    assert rasterize_blocks(one_d_expected).same_as(one_d_expected)


def test_use_swizzle_twice_is_an_error():
    @T.prim_func
    def twice(A: T.Tensor((8, 8), "float32")):
        with T.Kernel(8, 8, threads=32) as (bx, by):
            T.use_swizzle(panel_size=2)
            T.use_swizzle(panel_size=4)
            A[by, bx] = 1.0

    with pytest.raises(CompileError, match="T.use_swizzle is used more than once"):
        rasterize_blocks(twice)
