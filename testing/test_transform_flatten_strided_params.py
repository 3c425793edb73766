"""FlattenStridedParams: a tensor parameter with explicit strides becomes a 1-D buffer over the offsets it reaches
(1 + sum((n_k - 1) * s_k), whatever the order of the strides), its accesses the flat offsets; contiguous tensors
are left alone."""

import tvm

import tilelang.language as T
from conftest import without_locations
from tilelang_musa.transform.flatten_strided_params import flatten_strided_params


def test_a_transposed_view_reaches_past_its_first_dimension():
    """Strides (1, 4) on a 4 x 8 view: the offsets run to 3 + 7 * 4 = 31, not shape[0] * strides[0] = 4."""
    @T.prim_func
    def before(A: T.StridedTensor((4, 8), (1, 4), "float32"), B: T.Tensor((4, 8), "float32")):
        with T.Kernel(1, threads=32):
            for i, j in T.grid(4, 8):
                B[i, j] = A[i, j] + 1.0

    @T.prim_func
    def expected(A: T.Tensor((32,), "float32"), B: T.Tensor((4, 8), "float32")):
        with T.Kernel(1, threads=32):
            for i, j in T.grid(4, 8):
                B[i, j] = A[i + j * 4] + 1.0

    after = flatten_strided_params(before)
    tvm.ir.assert_structural_equal(without_locations(after),
                                   without_locations(expected).with_attr("global_symbol", "before"))


def test_a_row_major_view_with_padding_and_stores():
    """Strides (16, 1) on a 4 x 8 view (rows padded to 16): reached offsets 0 .. 3 * 16 + 7 = 55; stores too."""
    @T.prim_func
    def before(A: T.StridedTensor((4, 8), (16, 1), "float16")):
        with T.Kernel(1, threads=32):
            for i, j in T.grid(4, 8):
                A[i, j] = A[i, j] * T.float16(2)

    @T.prim_func
    def expected(A: T.Tensor((56,), "float16")):
        with T.Kernel(1, threads=32):
            for i, j in T.grid(4, 8):
                A[i * 16 + j] = A[i * 16 + j] * T.float16(2)

    after = flatten_strided_params(before)
    tvm.ir.assert_structural_equal(without_locations(after),
                                   without_locations(expected).with_attr("global_symbol", "before"))


def test_contiguous_tensors_are_left_alone():
    @T.prim_func
    def contiguous(A: T.Tensor((4, 8), "float32")):
        with T.Kernel(1, threads=32):
            for i, j in T.grid(4, 8):
                A[i, j] = A[i, j] + 1.0

    assert flatten_strided_params(contiguous).same_as(contiguous)
