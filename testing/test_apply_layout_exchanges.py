"""Layout inference in two passes: LayoutInference only decides (a layout per fragment and a plan per T.Parallel nest,
each with its reason, and the exchanges through shared memory that reconcile two layouts that cannot agree), and
records the decisions as annotations; ApplyLayoutExchanges rewrites the IR by them. Each half on its own
(before/expected), the decisions' dump (TILELANG_DUMP_LAYOUTS), and a relaid reduction end to end."""

import pytest
import torch
import tvm
import tvm_ffi
from tvm import tirx

import tilelang
import tilelang.language as T
from conftest import marked_temporary, poison, rand, without_locations
from tilelang_musa import diagnostics
from tilelang_musa.diagnostics import TileLangWarning
from tilelang_musa.ir.attrs import (
    ANNOTATIONS_ATTR, LAYOUT_EXCHANGES, LAYOUTS_ATTR, LOOP_PLAN, PARALLEL, PARALLEL_LOOP_LAYOUT, REDUCE_EXCHANGE,
)
from tilelang_musa.layout import Fragment
from tilelang_musa.target import determine_target
from tilelang_musa.tileop import is_tile_op, parse_tile_op
from tilelang_musa.tileop.reduce import Reduce
from tilelang_musa.transform.apply_layout_exchanges import apply_layout_exchanges
from tilelang_musa.transform.layout_inference import decide_layouts, layout_inference
from tilelang_musa.transform.pipeline import lowering_passes
from tilelang_musa.transform.pass_base import run_pass
from tilelang_musa.transform.split_kernels import split_kernels

MP31 = determine_target("musa -arch=mp_31")
# Row i of a 32 x 4 fragment on thread i, and on thread 31 - i.
ROWS = Fragment([32, 4], forward_thread_fn=lambda i, j: i, forward_index_fn=lambda i, j: j)
REVERSED = Fragment([32, 4], forward_thread_fn=lambda i, j: 31 - i, forward_index_fn=lambda i, j: j)


def buffers(func) -> dict:
    found = {}

    def on_alloc(node):
        found[node.buffer.name] = node.buffer

    tvm_ffi.structural_walk(func.body, [(tirx.AllocBuffer, on_alloc)])
    return found


@T.prim_func
def scale_by(A: T.Buffer((32, 4), "float32"), B: T.Buffer((32, 4), "float32")):
    T.func_attr({"target": MP31})
    for tx in T.thread_binding(32, thread="threadIdx.x"):
        F = T.alloc_buffer((32, 4), "float32", scope="local.fragment")
        G = T.alloc_buffer((32, 4), "float32", scope="local.fragment")
        for i in T.serial(32, annotations={PARALLEL: 1}):
            for j in T.serial(4, annotations={PARALLEL: 1}):
                B[i, j] = F[i, j] * G[i, j]


def annotated_scale_by():
    """F laid out by rows, G by reversed rows (T.annotate_layout): the loop runs where F lives and cannot read G."""
    bufs = buffers(scale_by)
    return scale_by.with_attr(ANNOTATIONS_ATTR, {bufs["F"]: ROWS, bufs["G"]: REVERSED})


def test_deciding_records_the_plan_and_the_exchange_and_changes_no_statement(monkeypatch):
    monkeypatch.setattr(diagnostics, "_WARNED", set())
    before = annotated_scale_by()
    with pytest.warns(TileLangWarning, match=r"fragment `G` is exchanged through a 512-byte shared-memory tile"):
        after = layout_inference(before, {})
    loops = []
    tvm_ffi.structural_walk(after.body, [(tirx.For, loops.append)])
    (exchange,) = next(loop for loop in loops if LAYOUT_EXCHANGES in loop.annotations).annotations[LAYOUT_EXCHANGES]
    bufs = buffers(before)
    source, copy, tile, written = exchange
    assert source.same_as(bufs["G"]) and copy.name == "G_relaid" and tile.name == "G_exchange" and int(written) == 0
    assert tile.scope() == "shared.dyn" and copy.scope() == "local.fragment"
    layouts = {buf.name: layout for buf, layout in after.attrs[LAYOUTS_ATTR].items()}
    tvm.ir.assert_structural_equal(layouts["G_relaid"], ROWS)
    tvm.ir.assert_structural_equal(layouts["G"], REVERSED)

    @T.prim_func
    def expected(A: T.Buffer((32, 4), "float32"), B: T.Buffer((32, 4), "float32")):
        T.func_attr({"target": MP31})
        for tx in T.thread_binding(32, thread="threadIdx.x"):
            F = T.alloc_buffer((32, 4), "float32", scope="local.fragment")
            G = T.alloc_buffer((32, 4), "float32", scope="local.fragment")
            for i in T.serial(32, annotations={PARALLEL: 1, PARALLEL_LOOP_LAYOUT: ROWS,
                                               LOOP_PLAN: {"kind": "fragment", "fragment": ROWS, "threads": [0, 32]},
                                               LAYOUT_EXCHANGES: [[G, copy, tile, 0]]}):
                for j in T.serial(4, annotations={PARALLEL: 1}):
                    B[i, j] = F[i, j] * G[i, j]  # still G: the rewriting is the next pass's

    tvm.ir.assert_structural_equal(without_locations(after.without_attr(LAYOUTS_ATTR).without_attr(ANNOTATIONS_ATTR)),
                                   without_locations(expected).with_attr("global_symbol", "scale_by"),
                                   map_free_vars=True)


def test_each_decision_has_its_reason_and_the_dump_prints_them(monkeypatch, capsys):
    monkeypatch.setattr(diagnostics, "_WARNED", set())
    with pytest.warns(TileLangWarning):
        decisions = decide_layouts(annotated_scale_by(), {})
    reasons = {buf.name: why for buf, why in decisions.reasons.items()}
    assert reasons["F"] == reasons["G"] == "T.annotate_layout"
    assert reasons["G_relaid"].startswith("the T.Parallel loop at")
    (nest,) = decisions.nests
    assert nest.reason == "runs where `F` lives (it walks it whole; T.annotate_layout)"

    monkeypatch.setenv("TILELANG_DUMP_LAYOUTS", "1")
    monkeypatch.setattr(diagnostics, "_WARNED", set())
    with pytest.warns(TileLangWarning):
        layout_inference(annotated_scale_by(), {})
    dump = capsys.readouterr().err
    assert "LayoutInference decisions for `scale_by`:" in dump
    assert "buffer `G_relaid`: " in dump and "because: runs where `F` lives" in dump
    assert "exchange: `G` used as `G_relaid` through `G_exchange`" in dump


def test_a_free_choice_says_so():
    @T.prim_func
    def fill(A: T.Buffer((16, 32), "float32"), B: T.Buffer((16, 32), "float32")):
        T.func_attr({"target": MP31})
        for tx in T.thread_binding(32, thread="threadIdx.x"):
            F = T.alloc_buffer((16, 32), "float32", scope="local.fragment")
            for i in T.serial(16, annotations={PARALLEL: 1}):
                for j in T.serial(32, annotations={PARALLEL: 1}):
                    F[i, j] = A[i, j]

    (nest,) = decide_layouts(fill, {}).nests
    assert nest.reason == "free choice: the coalesced partition over 32 threads, 4-wide pieces"
    assert {b.name: why for b, why in decide_layouts(fill, {}).reasons.items()} == {
        "F": f"the T.Parallel loop at {nest.loc}"}


def test_rewriting_moves_the_nest_onto_the_copy_and_declares_it():
    bufs = buffers(scale_by)
    G = bufs["G"]
    copy = tirx.decl_buffer((32, 4), "float32", "G_relaid", scope="local.fragment")
    tile = tirx.decl_buffer((32, 4), "float32", "G_exchange", scope="shared.dyn")
    plan = {PARALLEL: 1, PARALLEL_LOOP_LAYOUT: ROWS, LAYOUT_EXCHANGES: [[G, copy, tile, 0]]}

    @T.prim_func
    def before(A: T.Buffer((32, 4), "float32"), B: T.Buffer((32, 4), "float32")):
        T.func_attr({"target": MP31})
        for tx in T.thread_binding(32, thread="threadIdx.x"):
            F = T.alloc_buffer((32, 4), "float32", scope="local.fragment")
            G = T.alloc_buffer((32, 4), "float32", scope="local.fragment")
            for i in T.serial(32, annotations={**plan, LAYOUT_EXCHANGES: [[G, copy, tile, 0]]}):
                for j in T.serial(4, annotations={PARALLEL: 1}):
                    B[i, j] = F[i, j] * G[i, j]

    @T.prim_func
    def expected(A: T.Buffer((32, 4), "float32"), B: T.Buffer((32, 4), "float32")):
        T.func_attr({"target": MP31})
        for tx in T.thread_binding(32, thread="threadIdx.x"):
            G_relaid = T.alloc_buffer((32, 4), "float32", scope="local.fragment")
            G_exchange = T.alloc_buffer((32, 4), "float32", scope="shared.dyn")
            F = T.alloc_buffer((32, 4), "float32", scope="local.fragment")
            G = T.alloc_buffer((32, 4), "float32", scope="local.fragment")
            for i in T.serial(32, annotations={**plan, LAYOUT_EXCHANGES: [[G, G_relaid, G_exchange, 0]]}):
                for j in T.serial(4, annotations={PARALLEL: 1}):
                    B[i, j] = F[i, j] * G_relaid[i, j]

    before = before.with_attr(LAYOUTS_ATTR, {})
    after = apply_layout_exchanges(before)
    # the shared tile is the compiler's temporary: PlanDynamicSharedMemory may reuse its bytes between its uses
    tvm.ir.assert_structural_equal(without_locations(after.without_attr(LAYOUTS_ATTR)),
                                   without_locations(marked_temporary(expected, "G_exchange"))
                                   .with_attr("global_symbol", "before"))


def test_rewriting_leaves_a_function_without_decided_exchanges_alone():
    decided = layout_inference(scale_by.with_attr(ANNOTATIONS_ATTR, {buffers(scale_by)["G"]: ROWS}), {})
    assert apply_layout_exchanges(decided).same_as(decided)


def row_sums_into_a_laid_out_destination():
    """`s` is laid out by T.annotate_layout (element i on thread i), which is not where the reduction of `a`'s rows
    leaves them: the reduction writes a scratch fragment, relaid out to `s` through a shared tile."""
    @T.prim_func
    def row_sums(A: T.Tensor((32, 4), "float32"), S: T.Tensor((32,), "float32")):
        with T.Kernel(1, threads=32):
            a = T.alloc_fragment((32, 4), "float32")
            s = T.alloc_fragment((32,), "float32")
            T.annotate_layout({a: T.Fragment((32, 4), forward_thread_fn=lambda i, j: 31 - i,
                                             forward_index_fn=lambda i, j: j),
                               s: T.Fragment((32,), forward_thread_fn=lambda i: i, forward_index_fn=lambda i: 0)})
            T.copy(A, a)
            T.reduce_sum(a, s, dim=1)
            T.copy(s, S)

    return row_sums


def reduce_exchanges(func) -> list:
    found = []

    def on_attr(node):
        if node.attr_key == REDUCE_EXCHANGE:
            found.append(node)

    tvm_ffi.structural_walk(func.body, [(tirx.AttrStmt, on_attr)])
    return found


def tile_ops(func) -> list:
    found = []

    def on_eval(node):
        if is_tile_op(node.value):
            found.append(parse_tile_op(node.value))

    tvm_ffi.structural_walk(func.body, [(tirx.Evaluate, on_eval)])
    return found


def before_layout_inference(program):
    (kernel,) = split_kernels(program)
    mod = tvm.IRModule({"main": kernel.with_attr("target", MP31)})
    with tvm.transform.PassContext(opt_level=3), MP31:
        for p in lowering_passes({}):
            if p.info.name == "tl.LayoutInference":
                return mod["main"]
            mod = run_pass(p, mod)
    raise AssertionError("no LayoutInference in the pipeline")


def test_a_relaid_reduction_is_recorded_then_rewritten(monkeypatch):
    monkeypatch.setattr(diagnostics, "_WARNED", set())
    before = before_layout_inference(row_sums_into_a_laid_out_destination())
    with pytest.warns(TileLangWarning, match=r"the result of T.reduce_sum reaches `s` through a 128-byte"):
        decided = layout_inference(before, {})
    (record,) = reduce_exchanges(decided)
    scratch, tile, first, count = record.node
    assert (scratch.name, tile.name, int(first), int(count)) == ("s_reduced", "s_exchange", 0, 32)
    assert "s_reduced" not in buffers(decided)  # declared by the rewriting pass

    after = apply_layout_exchanges(decided)
    assert not reduce_exchanges(after) and {"s_reduced", "s_exchange"} <= buffers(after).keys()
    (reduce,) = [op for op in tile_ops(after) if isinstance(op, Reduce)]
    assert reduce.dst.buffer.name == "s_reduced" and reduce.src.buffer.name == "a"


@pytest.mark.parametrize("arch", ["mp_31", "mp_22"])
def test_a_relaid_reduction_matches_torch(arch, monkeypatch):
    monkeypatch.setattr(diagnostics, "_WARNED", set())
    with pytest.warns(TileLangWarning, match=r"through a 128-byte shared-memory tile"):
        kernel = tilelang.compile(row_sums_into_a_laid_out_destination(), target=f"musa -arch={arch}")
    src = kernel.get_kernel_source()
    assert "s_exchange" in src and "s_reduced" in src, src
    a, s = rand((32, 4), torch.float32, 7), poison((32,), torch.float32)
    kernel(a, s)
    torch.testing.assert_close(s, a.sum(dim=1))
