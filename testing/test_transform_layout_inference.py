"""LayoutInference: chooses each fragment's layout (element -> thread, slot) and records, on the outer loop of every
T.Parallel nest over fragments, the plan it runs by (`parallel_loop_layout`, `tl.loop_plan`); it changes no loop.
What is open after the fixed requirements (tile ops, T.annotate_layout) is the free choice, the coalesced vectorized
partition of the first nest over the fragment; the nests after it follow the fragment's layout. The layouts go to
`tl.fragment_layouts`. A fragment used by two different thread ranges is an error naming it."""

import pytest
import tvm
import tvm_ffi
from tvm import tirx

import tilelang.language as T
from conftest import without_locations
from tilelang_musa.errors import CompileError
from tilelang_musa.ir.attrs import ANNOTATIONS_ATTR, LAYOUTS_ATTR, LOOP_PLAN, PARALLEL, PARALLEL_LOOP_LAYOUT
from tilelang_musa.layout import Fragment
from tilelang_musa.target import determine_target
from tilelang_musa.transform.layout_inference import LayoutInference, layout_inference
from tilelang_musa.transform.pass_base import run_pass

MP31 = determine_target("musa -arch=mp_31")
# The free partition of a 16 x 32 float32 nest over 32 threads, 4-wide pieces: f = ((slot // 4) * 32 + t) * 4 +
# slot % 4, element (f // 32, f % 32).
FREE = Fragment([16, 32], forward_thread_fn=lambda i, j: i % 4 * 8 + j // 4,
                forward_index_fn=lambda i, j: i // 4 * 4 + j % 4)
# Column j on thread j, its 16 rows in the thread's slots.
COLUMNS = Fragment([16, 32], forward_thread_fn=lambda i, j: j, forward_index_fn=lambda i, j: i)


def free_plan(width):
    return {PARALLEL: 1, PARALLEL_LOOP_LAYOUT: FREE,
            LOOP_PLAN: {"kind": "free", "width": width, "threads": [0, 32]}}


def fragment_plan(fragment):
    return {PARALLEL: 1, PARALLEL_LOOP_LAYOUT: fragment,
            LOOP_PLAN: {"kind": "fragment", "fragment": fragment, "threads": [0, 32]}}


def buffers(func) -> dict:
    found = {}

    def on_alloc(node):
        found[node.buffer.name] = node.buffer

    tvm_ffi.structural_walk(func.body, [(tirx.AllocBuffer, on_alloc)])
    return found


def _assert_infers(before, expected, layouts: dict, kept=()):
    """`before` becomes `expected` (its loops annotated), with the fragments' layouts `layouts` (by name); the
    function attributes `kept` stay as they are. (The attributes keyed by buffers are compared apart: structural
    equality does not map a dict's buffer keys.)"""
    after = layout_inference(before, {})
    chosen = {buf.name: layout for buf, layout in after.attrs[LAYOUTS_ATTR].items()}
    assert chosen.keys() == layouts.keys()
    for name, layout in layouts.items():
        tvm.ir.assert_structural_equal(chosen[name], layout)
    for key in kept:
        assert after.attrs[key].same_as(before.attrs[key])
    for key in (LAYOUTS_ATTR, *kept):
        after, expected = after.without_attr(key), expected.without_attr(key)
    tvm.ir.assert_structural_equal(without_locations(after), without_locations(expected).with_attr(
        "global_symbol", before.attrs["global_symbol"]))


@T.prim_func
def fill_then_scale(A: T.Buffer((16, 32), "float32"), B: T.Buffer((16, 32), "float32")):
    T.func_attr({"target": MP31})
    for tx in T.thread_binding(32, thread="threadIdx.x"):
        F = T.alloc_buffer((16, 32), "float32", scope="local.fragment")
        for i in T.serial(16, annotations={PARALLEL: 1}):
            for j in T.serial(32, annotations={PARALLEL: 1}):
                F[i, j] = A[i, j]
        for i in T.serial(16, annotations={PARALLEL: 1}):
            for j in T.serial(32, annotations={PARALLEL: 1}):
                B[i, j] = F[i, j] * 2.0


@T.prim_func
def fill_then_scale_expected(A: T.Buffer((16, 32), "float32"), B: T.Buffer((16, 32), "float32")):
    T.func_attr({"target": MP31})
    for tx in T.thread_binding(32, thread="threadIdx.x"):
        F = T.alloc_buffer((16, 32), "float32", scope="local.fragment")
        for i in T.serial(16, annotations=free_plan(width=4)):
            for j in T.serial(32, annotations={PARALLEL: 1}):
                F[i, j] = A[i, j]
        for i in T.serial(16, annotations=fragment_plan(FREE)):
            for j in T.serial(32, annotations={PARALLEL: 1}):
                B[i, j] = F[i, j] * 2.0


def test_the_first_nest_is_partitioned_freely_and_the_next_follows_the_fragment():
    _assert_infers(fill_then_scale, fill_then_scale_expected, {"F": FREE})


def test_an_annotated_fragment_layout_is_followed_by_every_nest():
    """T.annotate_layout({F: COLUMNS}): no free choice, both nests run where F's elements live."""
    annotate = {ANNOTATIONS_ATTR: {buffers(fill_then_scale)["F"]: COLUMNS}}
    before = fill_then_scale.with_attrs(annotate)

    @T.prim_func
    def expected(A: T.Buffer((16, 32), "float32"), B: T.Buffer((16, 32), "float32")):
        T.func_attr({"target": MP31})
        for tx in T.thread_binding(32, thread="threadIdx.x"):
            F = T.alloc_buffer((16, 32), "float32", scope="local.fragment")
            for i in T.serial(16, annotations=fragment_plan(COLUMNS)):
                for j in T.serial(32, annotations={PARALLEL: 1}):
                    F[i, j] = A[i, j]
            for i in T.serial(16, annotations=fragment_plan(COLUMNS)):
                for j in T.serial(32, annotations={PARALLEL: 1}):
                    B[i, j] = F[i, j] * 2.0

    _assert_infers(before, expected, {"F": COLUMNS}, kept=[ANNOTATIONS_ATTR])


def test_a_kernel_without_fragments_is_unchanged():
    @T.prim_func
    def shared_only(A: T.Buffer((16, 32), "float32")):
        T.func_attr({"target": MP31})
        for tx in T.thread_binding(32, thread="threadIdx.x"):
            S = T.alloc_buffer((16, 32), "float32", scope="shared.dyn")
            for i in T.serial(16, annotations={PARALLEL: 1}):
                for j in T.serial(32, annotations={PARALLEL: 1}):
                    S[i, j] = A[i, j]

    assert layout_inference(shared_only, {}).same_as(shared_only)


def test_a_fragment_used_by_two_thread_ranges_is_an_error_naming_it():
    @T.prim_func
    def split(A: T.Buffer((16, 32), "float32")):
        T.func_attr({"target": MP31})
        for tx in T.thread_binding(64, thread="threadIdx.x"):
            F = T.alloc_buffer((16, 32), "float32", scope="local.fragment")
            if tx < 32:
                for i in T.serial(16, annotations={PARALLEL: 1}):
                    for j in T.serial(32, annotations={PARALLEL: 1}):
                        F[i, j] = A[i, j]
            if tx >= 32:
                for i in T.serial(16, annotations={PARALLEL: 1}):
                    for j in T.serial(32, annotations={PARALLEL: 1}):
                        A[i, j] = F[i, j]

    with pytest.raises(CompileError, match=r"fragment `F` is used by threads 32..63 \(the T.Parallel loop at .*\) "
                                           r"and by threads 0..31 \(the T.Parallel loop at .*\): a fragment lives on "
                                           "the threads of one range"):
        run_pass(LayoutInference({}), tvm.IRModule({"main": split}))
