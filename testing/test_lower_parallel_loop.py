"""LowerParallelLoop: a T.Parallel nest that LayoutInference planned (`tl.loop_plan` on its outer loop) becomes one
per-thread loop over the plan's slots, each slot running the iteration the plan's inverse maps (thread, slot) to;
threads count from the first thread of the range that runs the nest. LayoutInference itself only records: the
nests over fragments stay T.Parallel loops, annotated with the plan's Fragment (`parallel_loop_layout`)."""

import tvm
import tvm_ffi
from tvm import tirx

import tilelang.language as T
from conftest import without_locations
from tilelang_musa.ir.attrs import LAYOUTS_ATTR, LOOP_PLAN, PARALLEL, PARALLEL_LOOP_LAYOUT
from tilelang_musa.layout import Fragment
from tilelang_musa.transform.layout_inference import layout_inference
from tilelang_musa.transform.lower_parallel_loop import lower_parallel_loop

def _assert_lowers_to(before, expected):
    after = without_locations(lower_parallel_loop(before))
    tvm.ir.assert_structural_equal(after, without_locations(expected).with_attr("global_symbol",
                                                                                 before.attrs["global_symbol"]))


ROWS_ON_SLOTS = Fragment([4, 32], forward_thread_fn=lambda i, j: j, forward_index_fn=lambda i, j: i)


@T.prim_func
def fragment_plan_before(A: T.Buffer((4, 32), "float32"), B: T.Buffer((4, 32), "float32")):
    for tx in T.thread_binding(32, thread="threadIdx.x"):
        for i in T.serial(4, annotations={PARALLEL: 1, LOOP_PLAN: {"kind": "fragment", "fragment": ROWS_ON_SLOTS,
                                                                   "threads": [0, 32]}}):
            for j in T.serial(32, annotations={PARALLEL: 1}):
                B[i, j] = A[i, j] + 1.0


@T.prim_func
def fragment_plan_expected(A: T.Buffer((4, 32), "float32"), B: T.Buffer((4, 32), "float32")):
    for tx in T.thread_binding(32, thread="threadIdx.x"):
        for slot in T.serial(4):
            B[slot, tx] = A[slot, tx] + 1.0


def test_a_nest_planned_on_a_fragment_runs_over_the_fragments_slots():
    """Column j on thread j, row i in slot i: thread tx runs iterations (slot, tx) for its 4 slots."""
    _assert_lowers_to(fragment_plan_before, fragment_plan_expected)


@T.prim_func
def free_plan_before(A: T.Buffer((64,), "float32"), B: T.Buffer((64,), "float32")):
    for tx in T.thread_binding(64, thread="threadIdx.x"):
        for i in T.serial(64, annotations={PARALLEL: 1, LOOP_PLAN: {"kind": "free", "width": 1, "threads": [32, 32]}}):
            B[i] = A[i] * 2.0


@T.prim_func
def free_plan_expected(A: T.Buffer((64,), "float32"), B: T.Buffer((64,), "float32")):
    for tx in T.thread_binding(64, thread="threadIdx.x"):
        for slot in T.serial(2):
            B[slot * 32 + tx - 32] = A[slot * 32 + tx - 32] * 2.0


def test_a_free_plan_on_a_thread_range_counts_threads_from_the_ranges_first():
    """Threads 32..63 run the nest (a T.ws region): 64 iterations over 32 threads, iteration slot * 32 + (tx - 32)."""
    _assert_lowers_to(free_plan_before, free_plan_expected)


@T.prim_func
def fill_then_read(A: T.Tensor((4, 32), "float32"), B: T.Tensor((4, 32), "float32")):
    with T.Kernel(1, threads=32):
        F = T.alloc_fragment((4, 32), "float32")
        for i, j in T.Parallel(4, 32):
            F[i, j] = A[i, j]
        for i, j in T.Parallel(4, 32):
            B[i, j] = F[i, j] + 1.0


def _planned_loops(func) -> list:
    """The loops that carry a plan, outermost first."""
    found = []

    def on_for(node):
        if node.annotations is not None and LOOP_PLAN in node.annotations:
            found.append(node)

    tvm_ffi.structural_walk(func.body, [(tirx.For, on_for)], order="pre")
    return found


def test_layout_inference_records_each_nests_plan_and_leaves_the_loops():
    """The first nest gets the free partition (4-wide pieces) and places F; the second follows F's layout."""
    inferred = layout_inference(fill_then_read, {})
    first, second = _planned_loops(inferred)
    assert PARALLEL in first.body.annotations and PARALLEL in second.body.annotations  # still T.Parallel nests
    assert str(first.annotations[LOOP_PLAN]["kind"]) == "free" and int(first.annotations[LOOP_PLAN]["width"]) == 4
    (layout,) = inferred.attrs[LAYOUTS_ATTR].values()
    assert str(second.annotations[LOOP_PLAN]["kind"]) == "fragment"
    assert second.annotations[LOOP_PLAN]["fragment"].same_as(layout)
    assert first.annotations[PARALLEL_LOOP_LAYOUT].is_equal(layout)
    assert [int(x) for x in second.annotations[LOOP_PLAN]["threads"]] == [0, 32]
    assert _planned_loops(lower_parallel_loop(inferred)) == []
