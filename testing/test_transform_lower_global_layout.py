"""LowerGlobalLayout: a global tensor annotated with a Layout (`T.annotate_layout({A: layout})`) is read and written
through it, `A[x]` -> `A[layout(x)]`; where the layout's output shape is not the tensor's, its output coordinates are
taken row-major and re-indexed into the tensor's shape. Other tensors, and shared tiles' layouts, are left alone."""

import tvm

import tilelang.language as T
from conftest import without_locations
from tilelang_musa.ir.attrs import ANNOTATIONS_ATTR
from tilelang_musa.transform.lower_global_layout import lower_global_layout


def _assert_lowers_to(before, expected):
    """The annotations stay as they are (compared apart: structural equality does not map a dict's buffer keys)."""
    after = lower_global_layout(before)
    assert after.attrs[ANNOTATIONS_ATTR].same_as(before.attrs[ANNOTATIONS_ATTR])
    expected = expected.with_attr("global_symbol", before.attrs["global_symbol"])
    tvm.ir.assert_structural_equal(without_locations(after.without_attr(ANNOTATIONS_ATTR)),
                                   without_locations(expected.without_attr(ANNOTATIONS_ATTR)))


REVERSED_ROWS = T.Layout((4, 8), lambda i, j: (i, 7 - j))
TRANSPOSED = T.Layout((4, 8), lambda i, j: (j, i))  # output shape (8, 4)


@T.prim_func
def reversed_before(A: T.Tensor((4, 8), "float32"), B: T.Tensor((4, 8), "float32")):
    with T.Kernel(1, threads=8):
        T.annotate_layout({A: REVERSED_ROWS})
        tx = T.get_thread_binding()
        for i in T.serial(4):
            A[i, tx] = B[i, tx] + A[i, tx]


@T.prim_func
def reversed_expected(A: T.Tensor((4, 8), "float32"), B: T.Tensor((4, 8), "float32")):
    with T.Kernel(1, threads=8):
        T.annotate_layout({A: REVERSED_ROWS})
        tx = T.get_thread_binding()
        for i in T.serial(4):
            A[i, 7 - tx] = B[i, tx] + A[i, 7 - tx]


def test_loads_and_stores_of_an_annotated_tensor_go_through_its_layout():
    """The layout's output shape is the tensor's: its coordinates index the tensor directly; B is not annotated."""
    _assert_lowers_to(reversed_before, reversed_expected)


@T.prim_func
def transposed_before(A: T.Tensor((4, 8), "float32"), B: T.Tensor((4, 8), "float32")):
    with T.Kernel(1, threads=8):
        T.annotate_layout({A: TRANSPOSED})
        tx = T.get_thread_binding()
        for i in T.serial(4):
            B[i, tx] = A[i, tx]


@T.prim_func
def transposed_expected(A: T.Tensor((4, 8), "float32"), B: T.Tensor((4, 8), "float32")):
    with T.Kernel(1, threads=8):
        T.annotate_layout({A: TRANSPOSED})
        tx = T.get_thread_binding()
        for i in T.serial(4):
            # (i, tx) -> (tx, i) in an (8, 4) output: element tx * 4 + i of A, row-major over (4, 8)
            B[i, tx] = A[(tx * 4 + i) // 8, (tx * 4 + i) % 8]


def test_an_output_shape_other_than_the_tensors_is_renumbered_row_major():
    _assert_lowers_to(transposed_before, transposed_expected)


@T.prim_func
def shared_annotated(A: T.Tensor((4, 8), "float32"), B: T.Tensor((4, 8), "float32")):
    with T.Kernel(1, threads=8):
        S = T.alloc_shared((4, 8), "float32")
        T.annotate_layout({S: REVERSED_ROWS})
        tx = T.get_thread_binding()
        for i in T.serial(4):
            S[i, tx] = A[i, tx]
        for i in T.serial(4):
            B[i, tx] = S[i, tx]


def test_a_kernel_without_annotated_global_tensors_is_unchanged():
    """A shared tile's layout is LowerSharedLayout's business."""
    assert lower_global_layout(shared_annotated).same_as(shared_annotated)
