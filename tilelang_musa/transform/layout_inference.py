"""LayoutInference: choose where every fragment's elements live, and where each loop over fragments runs.

A fragment (`T.alloc_fragment`) is a tile spread over the registers of the block's threads; its layout
(a Fragment: element -> (thread, slot)) is chosen here, in three levels:

1. fixed requirements: tile ops that dictate layouts (gemm accumulators and operands, reductions, user
   annotations) — their `infer_layout`;
2. propagation through the `T.Parallel` nests that walk fragments: a nest that reads or writes a
   fragment with a known layout runs where that fragment's elements live (iteration x on the thread that
   holds element x), and the other fragments it touches get the layout this implies (the same layout, or
   its reduction when they are indexed by a subset of the loop variables);
3. a free choice for what is still open: the coalesced, vectorized partition of the first such nest.

A nest over no fragment is planned later (PartitionParallelLoop), except under TL_DISABLE_THREAD_STORAGE_SYNC when it
reads a shared tile that an earlier nest wrote element for element: it then runs on that nest's threads
(follow_writers_without_barriers).

The pass only decides and records: it adds annotations, no statement. The layouts go to the function attribute
`tl.fragment_layouts` (read by LowerParallelLoop, LowerFragmentAccess and the late tile ops); each nest over
fragments keeps its loops and gets the plan it runs by (tileop/loop_plan.py) on its outer loop:
`parallel_loop_layout`, the plan's Fragment (iteration -> (thread, slot)), and `tl.loop_plan`, how to rebuild the
plan from it and the threads that run it. LowerParallelLoop lowers each annotated nest to a per-thread loop over
slots. Two ops that require different layouts of one fragment are an error naming the buffer, the two layouts and
the source line. A free choice keeps the rows of a fragment that is reduced along them on their own threads.

Two layouts that cannot agree (a loop runs where `acc_s_cast` lives and reads `acc_s`, which a gemm placed
elsewhere) are reconciled through shared memory rather than rejected: the loop works on a copy of the
fragment in the layout it needs, exchanged through a shared tile before it (and back after it, if the loop
writes the fragment), with a TileLangWarning naming the fragments, since it costs a round trip through
shared memory and two barriers each time the loop runs. This pass chooses the copy's layout and records the
exchange on the nest (`tl.layout_exchanges`: fragment, copy, tile, written); ApplyLayoutExchanges, the next pass,
declares the copy and the tile and makes the nest use the copy; LowerParallelLoop writes the copies.
A T.reduce_* whose destination another op laid out otherwise than the reduction leaves its results is reconciled
the same way: it reduces into a scratch fragment in the reduced layout, relaid out to the destination through a
shared tile after it (and, with clear=False, the destination's old values to the scratch before it); this pass
records that on the op (a `tl.reduce_exchange` AttrStmt around it) and ApplyLayoutExchanges writes the copies.

Every decision has its reason (`LayoutDecisions` in layout_decisions.py): TILELANG_DUMP_LAYOUTS=1 prints them.
The pass's parts: layout_collect.py (what the function holds), layout_placement.py and layout_implied.py (the
levels), layout_conflicts.py and layout_owned_accesses.py (the checks and exchanges).

Fragments live on the threads that use them. A tile op or a nest under `if`s on the thread index (a T.ws region)
runs on the contiguous range of threads those allow (thread_guard.py), and a fragment it uses is laid out over
that range: its layout's thread coordinate counts from the range's first thread (the loops and ops over it are
lowered with `thread = tid - first`). All uses of a fragment must be in one range; two are an error naming the
fragment, both ranges and both uses.
"""

from __future__ import annotations

import functools
import sys
from typing import Any

import tvm_ffi
from tvm import tirx

from .. import env
from ..ir.attrs import LAYOUT_EXCHANGES, LAYOUTS_ATTR, LOOP_PLAN, PARALLEL_LOOP_LAYOUT, REDUCE_EXCHANGE
from ..ir.options import CompileOptions
from ..ir.utils import thread_info
from ..layout import Fragment
from ..tileop.gemm import Gemm
from .layout_collect import Collection
from .layout_conflicts import Conflicts
from .layout_decisions import EXCHANGE_SCOPE, FRAGMENT_SCOPE, STAGE, LayoutDecisions, NestDecision, ReduceExchange
from .layout_implied import ImpliedLayouts
from .layout_owned_accesses import check_owned_accesses
from .layout_placement import Placement
from .partition_parallel_loop import thread_analyzer
from .pass_base import tl_pass
from .thread_guard import ThreadRange

__all__ = ["EXCHANGE_SCOPE", "FRAGMENT_SCOPE", "STAGE", "LayoutInference", "decide_layouts", "layout_inference"]


class _Inference(Collection, Placement, ImpliedLayouts, Conflicts):
    """The state of one function's inference; each part (a base class, in its own file) works on it."""

    def __init__(self, func: tirx.PrimFunc, options: CompileOptions):
        self.func = func
        self.threads = thread_info(func)
        self.analyzer = thread_analyzer(self.threads)
        self.options = options
        self.disable_vectorize = options.disable_vectorize
        self.layouts: dict[Any, Fragment] = {}
        self.origin: dict[Any, str] = {}  # buffer -> what fixed its layout (the dump's reasons, error messages)
        self.fragments: list[Any] = []
        self.nests: list[NestDecision] = []
        self.ops: list[Any] = []
        self.op_reach: list[ThreadRange] = []  # the threads that run each op
        self.op_nodes: list[Any] = []  # the Evaluate of each op, by handle
        self.reduce_exchanges: list[ReduceExchange] = []  # see Conflicts._exchange_reduce
        self.reach: dict[Any, tuple[ThreadRange, str]] = {}  # fragment -> its threads, and the use that set them
        self.reducers: set = set()  # T.alloc_reducer fragments
        self.rowwise: set = set()  # fragments whose free placement should keep rows apart (_reduced_along_rows)
        self.serial: list = []  # fragments accessed element-wise outside T.Parallel nests and tile ops
        self.user_barriers = options.disable_thread_storage_sync
        self.plain_nests: list[NestDecision] = []  # T.Parallel nests over no fragment (follow_writers_without_barriers)
        self.walk_order: dict = {}  # nest loop handle -> its place in program order
        self._asked: dict[int, tuple] = {}  # op index -> which of its operands were placed when last asked

    @functools.cached_property
    def _gemm_accumulators(self) -> set:
        return {op.C.buffer for op in self.ops if isinstance(op, Gemm)}

    def run(self) -> None:
        self.collect()
        self.rowwise = self._reduced_along_rows()
        self.fix_reducers()
        self.fix_from_annotations()
        self.fix_serial_accesses()
        self.fix_from_ops()
        while True:
            if self.fix_from_ops() or self.propagate(defer_waiting=True) or self.choose_free(preferred_only=True):
                continue
            if not (self.propagate() or self.choose_free()):
                break
        self.follow_writers_without_barriers()
        self.check()
        check_owned_accesses(self, [buf for buf in self.serial
                                    if buf in self._gemm_accumulators and buf not in self.reducers])


def decide_layouts(func: tirx.PrimFunc, configs: CompileOptions | dict) -> LayoutDecisions:
    """Every layout and plan of `func`'s fragments and nests, with the reasons; the IR is not changed."""
    inference = _Inference(func, CompileOptions.of(configs))
    inference.run()
    return LayoutDecisions(inference.layouts, inference.origin, inference.fragments, inference.nests,
                           inference.reduce_exchanges)


def record_decisions(func: tirx.PrimFunc, decisions: LayoutDecisions) -> tirx.PrimFunc:
    """`func` with the decisions on it: each nest's plan (and exchanges) annotated on its outer loop, each relaid
    reduction under a `tl.reduce_exchange` AttrStmt, the layouts in `tl.fragment_layouts`."""
    nests = {n.loop.__chandle__(): n for n in decisions.nests}
    reduces = {found.node: found for found in decisions.reduce_exchanges}

    def on_for(node, mutator):
        nest = nests.get(node.__chandle__())
        if nest is None:
            return mutator.default_mutate(node)
        annotations = dict(node.annotations)
        annotations[PARALLEL_LOOP_LAYOUT] = nest.plan.fragment
        annotations[LOOP_PLAN] = {**nest.recipe, "threads": [nest.reach.first, nest.reach.count]}
        if nest.exchanges:
            annotations[LAYOUT_EXCHANGES] = [[buf, x.copy, x.tile, int(x.written)] for buf, x in nest.exchanges.items()]
        return tirx.For(node.loop_var, node.min, node.extent, node.kind, node.body, node.thread_binding, annotations,
                        node.step)

    def on_eval(node, mutator):
        found = reduces.get(node.__chandle__())
        if found is None:
            return node
        record = [found.scratch, found.tile, found.reach.first, found.reach.count]
        return tirx.AttrStmt(record, REDUCE_EXCHANGE, tirx.const(0, "int32"), node)

    func = tvm_ffi.structural_mutate(func, [(tirx.For, on_for), (tirx.Evaluate, on_eval)])
    return func.with_attr(LAYOUTS_ATTR, dict(decisions.layouts))


def layout_inference(func: tirx.PrimFunc, configs: CompileOptions | dict) -> tirx.PrimFunc:
    decisions = decide_layouts(func, configs)
    if env.DUMP_LAYOUTS.flag():
        name = func.attrs["global_symbol"] if func.attrs is not None and "global_symbol" in func.attrs else "main"
        print(decisions.describe(str(name)), file=sys.stderr)
    if not decisions.fragments:
        return func
    return record_decisions(func, decisions)


def LayoutInference(configs):  # noqa: N802
    options = CompileOptions.of(configs)
    return tl_pass("LayoutInference", lambda func: layout_inference(func, options))
