"""LowerFragmentAccess: a fragment with a layout F (`tl.fragment_layouts`, from LayoutInference) becomes each thread's
local array of F's `local_size` slots, and every access `G[x]` becomes `G[F.index(x)]`, simplified under the loop and
thread ranges; `tl.fragment_ptr(G)` (a template's pointer to the slots) becomes `&G[0]`. The layouts attribute goes.
A kernel without fragment layouts is left unchanged."""

import tvm
import tvm_ffi
from tvm import tirx

import tilelang.language as T
from conftest import without_locations
from tilelang_musa.ir.attrs import LAYOUTS_ATTR
from tilelang_musa.ir.ops import fragment_ptr
from tilelang_musa.layout import Fragment
from tilelang_musa.target import determine_target
from tilelang_musa.transform.lower_fragment_access import lower_fragment_access

MP31 = determine_target("musa -arch=mp_31")

# An 8 x 16 fragment over 32 threads: rows 2s and 2s + 1 of a column on threads j and 16 + j, in slot s.
PAIRED_ROWS = Fragment([8, 16], forward_thread_fn=lambda i, j: i % 2 * 16 + j, forward_index_fn=lambda i, j: i // 2)


def with_layouts(func, layouts):
    """`func` with `tl.fragment_layouts` naming its fragments (allocated in its body) by name."""
    allocated = {}

    def on_alloc(node):
        allocated[node.buffer.name] = node.buffer

    tvm_ffi.structural_walk(func.body, [(tirx.AllocBuffer, on_alloc)])
    return func.with_attr(LAYOUTS_ATTR, {allocated[name]: layout for name, layout in layouts.items()})


def _assert_lowers_to(before, expected):
    after = without_locations(lower_fragment_access(before))
    tvm.ir.assert_structural_equal(after, without_locations(expected).with_attr("global_symbol",
                                                                                 before.attrs["global_symbol"]))


@T.prim_func
def paired_rows(A: T.Buffer((8, 16), "float32"), B: T.Buffer((8, 16), "float32")):
    T.func_attr({"target": MP31})
    for tx in T.thread_binding(32, thread="threadIdx.x"):
        F = T.alloc_buffer((8, 16), "float32", scope="local.fragment")
        for s in T.serial(4):
            F[s * 2 + tx // 16, tx % 16] = A[s * 2 + tx // 16, tx % 16]
        for s in T.serial(4):
            B[s * 2 + tx // 16, tx % 16] = F[s * 2 + tx // 16, tx % 16] * 2.0


@T.prim_func
def paired_rows_expected(A: T.Buffer((8, 16), "float32"), B: T.Buffer((8, 16), "float32")):
    T.func_attr({"target": MP31})
    for tx in T.thread_binding(32, thread="threadIdx.x"):
        F = T.alloc_buffer((4,), "float32", scope="local")
        for s in T.serial(4):
            F[s] = A[s * 2 + tx // 16, tx % 16]
        for s in T.serial(4):
            B[s * 2 + tx // 16, tx % 16] = F[s] * 2.0


def test_a_fragment_becomes_the_threads_slots_and_accesses_index_them():
    """F.index(s * 2 + tx // 16, tx % 16) = (s * 2 + tx // 16) // 2, which is s for tx < 32."""
    _assert_lowers_to(with_layouts(paired_rows, {"F": PAIRED_ROWS}), paired_rows_expected)


@T.prim_func
def handed_to_a_template(A: T.Buffer((8, 16), "float32")):
    T.func_attr({"target": MP31})
    for tx in T.thread_binding(32, thread="threadIdx.x"):
        F = T.alloc_buffer((8, 16), "float32", scope="local.fragment")
        F[6 + tx // 16, tx % 16] = A[0, 0]
        T.call_extern("int32", "consume", fragment_ptr(F))


@T.prim_func
def handed_to_a_template_expected(A: T.Buffer((8, 16), "float32")):
    T.func_attr({"target": MP31})
    for tx in T.thread_binding(32, thread="threadIdx.x"):
        F = T.alloc_buffer((4,), "float32", scope="local")
        F[3] = A[0, 0]
        T.call_extern("int32", "consume", T.address_of(F[0]))


def test_a_fixed_row_is_a_fixed_slot_and_the_fragment_pointer_is_its_first_slot():
    _assert_lowers_to(with_layouts(handed_to_a_template, {"F": PAIRED_ROWS}), handed_to_a_template_expected)


def test_a_kernel_without_fragment_layouts_is_unchanged():
    assert lower_fragment_access(paired_rows_expected).same_as(paired_rows_expected)
