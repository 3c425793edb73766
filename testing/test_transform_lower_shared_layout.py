"""LowerSharedLayout: a shared tile with a Layout (the user's T.annotate_layout, or one LayoutInference recorded in
`tl.fragment_layouts`) is replaced by a tile shaped like the layout's output, every access `S[x]` becoming
`S[layout(x)]`, and its allocation asks for the swizzle alignment (`tl.smem_alignment`). Inside a vectorized loop the
lane is moved out of the swizzle's xor, so the access stays affine in the lane. Tiles without a layout and fragments
are left alone."""

import tvm
import tvm_ffi
from tvm import tirx

import tilelang.language as T
from conftest import without_locations
from tilelang_musa.ir.attrs import ALIGNMENT_ANNOTATION, ANNOTATIONS_ATTR, LAYOUTS_ATTR
from tilelang_musa.layout import Fragment
from tilelang_musa.target import determine_target
from tilelang_musa.transform.lower_shared_layout import SWIZZLE_ALIGNMENT, lower_shared_layout

MP31 = determine_target("musa -arch=mp_31")
# 4-element chunks of row i xor-ed with i (a 16-byte swizzle of float32 rows), and a column-major flattening.
XOR_CHUNKS = T.Layout((8, 32), lambda i, j: (i, (j // 4 ^ i) * 4 + j % 4))
COLUMN_MAJOR = T.Layout((4, 8), lambda i, j: (j * 4 + i,))


def aligned(func, *names):
    """`func` with the allocations of `names` asking for the swizzle alignment."""
    def on_alloc(node, mutator):
        if node.buffer.name not in names:
            return node
        return tirx.AllocBuffer(node.buffer, {**(node.annotations or {}), ALIGNMENT_ANNOTATION: SWIZZLE_ALIGNMENT})

    return tvm_ffi.structural_mutate(func, [(tirx.AllocBuffer, on_alloc)])


def _assert_lowers_to(before, expected, attr):
    """`attr` (the layouts) stays as it is; compared apart, as structural equality does not map a dict's buffer
    keys."""
    after = lower_shared_layout(before)
    assert after.attrs[attr].same_as(before.attrs[attr])
    expected = expected.with_attr("global_symbol", before.attrs["global_symbol"])
    tvm.ir.assert_structural_equal(without_locations(after.without_attr(attr)),
                                   without_locations(expected.without_attr(attr)))


@T.prim_func
def annotated_before(A: T.Tensor((8, 32), "float32"), B: T.Tensor((4, 8), "float32")):
    with T.Kernel(1, threads=8):
        S = T.alloc_shared((8, 32), "float32")
        C = T.alloc_shared((4, 8), "float32")
        T.annotate_layout({S: XOR_CHUNKS, C: COLUMN_MAJOR})
        tx = T.get_thread_binding()
        for i in T.serial(8):
            for v in T.vectorized(4):
                S[i, tx * 4 + v] = A[i, tx * 4 + v]
        for i in T.serial(4):
            C[i, tx] = S[i, tx]
        for i in T.serial(4):
            B[i, tx] = C[i, tx]


@T.prim_func
def annotated_expected(A: T.Tensor((8, 32), "float32"), B: T.Tensor((4, 8), "float32")):
    with T.Kernel(1, threads=8):
        S = T.alloc_shared((8, 32), "float32")
        C = T.alloc_shared((32,), "float32")
        tx = T.get_thread_binding()
        for i in T.serial(8):
            for v in T.vectorized(4):
                S[i, (tx ^ i) * 4 + v] = A[i, tx * 4 + v]  # the lane outside the xor
        for i in T.serial(4):
            C[tx * 4 + i] = S[i, (tx // 4 ^ i) * 4 + tx % 4]
        for i in T.serial(4):
            B[i, tx] = C[tx * 4 + i]


def test_annotated_tiles_are_stored_in_their_layouts():
    """S keeps its shape (the layout's output is (8, 32)), C becomes the 32 elements of its column-major output."""
    _assert_lowers_to(annotated_before, aligned(annotated_expected, "S", "C"), ANNOTATIONS_ATTR)


@T.prim_func
def inferred_before(A: T.Buffer((8, 32), "float32"), B: T.Buffer((8, 32), "float32")):
    T.func_attr({"target": MP31})
    for tx in T.thread_binding(8, thread="threadIdx.x"):
        S = T.alloc_buffer((8, 32), "float32", scope="shared.dyn")
        F = T.alloc_buffer((8, 8), "float32", scope="local.fragment")
        for i in T.serial(8):
            S[i, tx] = A[i, tx]
        for i in T.serial(8):
            F[i, tx] = S[i, tx]
            B[i, tx] = F[i, tx]


@T.prim_func
def inferred_expected(A: T.Buffer((8, 32), "float32"), B: T.Buffer((8, 32), "float32")):
    T.func_attr({"target": MP31})
    for tx in T.thread_binding(8, thread="threadIdx.x"):
        S = T.alloc_buffer((8, 32), "float32", scope="shared.dyn")
        F = T.alloc_buffer((8, 8), "float32", scope="local.fragment")
        for i in T.serial(8):
            S[i, (tx // 4 ^ i) * 4 + tx % 4] = A[i, tx]
        for i in T.serial(8):
            F[i, tx] = S[i, (tx // 4 ^ i) * 4 + tx % 4]
            B[i, tx] = F[i, tx]


def with_layouts(func, layouts):
    allocated = {}

    def on_alloc(node):
        allocated[node.buffer.name] = node.buffer

    tvm_ffi.structural_walk(func.body, [(tirx.AllocBuffer, on_alloc)])
    return func.with_attr(LAYOUTS_ATTR, {allocated[name]: layout for name, layout in layouts.items()})


ROWS = Fragment([8, 8], forward_thread_fn=lambda i, j: j, forward_index_fn=lambda i, j: i)


def test_a_layout_recorded_by_layout_inference_applies_to_the_tile_not_to_the_fragment():
    before = with_layouts(inferred_before, {"S": XOR_CHUNKS, "F": ROWS})
    _assert_lowers_to(before, aligned(inferred_expected, "S"), LAYOUTS_ATTR)


def test_a_kernel_without_shared_layouts_is_unchanged():
    before = with_layouts(inferred_before, {"F": ROWS})
    assert lower_shared_layout(before).same_as(before)
