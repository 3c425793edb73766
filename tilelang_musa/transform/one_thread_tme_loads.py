"""OneThreadTmeLoads: a plain `T.copy` from global to shared memory that one thread runs becomes a TME load.

Moore Threads' kernels copy a tile from a single thread (`if tx == 768: T.copy(q[...], q_shared[...])`, the GDN
prefill producers), then signal the readers through their own barrier. As an element loop that thread moves the
whole tile 16 bytes at a time; one TME instruction moves it as a box. So where the TME exists (and TME lowering is
on), such a copy is rewritten into the TME copy tile op that waits for itself (LowerTmeCopy): the thread issues the
load on a barrier of the compiler's, with an arrive count of one, and waits for it before its next statement, so
whatever it does next (arrive on the user's barrier, read the tile) sees the tile landed. A copy the TME cannot do
after all (the shared tile's layout is decided later), or that sits under a condition on data inside the region,
falls back to the plain copy in LowerTmeCopy. A block of one thread (`T.Kernel(..., threads=1)`) is such a region.

Copies many threads run stay element copies spread over them (that is what a T.copy load without cache hints or
`prefer_instruction="tma"` asks for); so do copies that ask for another instruction (`disable_tma=True`,
`prefer_instruction="sync"` / `"cp_async"`, `force_async_copy`, a robust descriptor, `loop_layout=`), and every copy
on an arch without a TME (mp_22), where the one thread's loop is the copy.

Runs before the first LowerTileOp (which would make the copy a loop) and after the pipeline passes (a pipelined
load has already chosen its form).
"""

from __future__ import annotations

import tvm
from tvm import tirx

from ..errors import CompileError
from ..ir.attrs import ASYNC_ATTR, DISABLE_TMA_ATTR, LOOP_LAYOUT_ATTR, PER_THREAD_ATTR
from ..ir.options import CompileOptions
from ..ir.utils import thread_info
from ..target import arch_of
from ..tileop import is_tile_op, parse_tile_op
from ..tileop.copy import Copy
from ..tileop.tme_copy import NotTme, TmeCopy
from .lower_global_layout import global_layouts
from .partition_parallel_loop import thread_analyzer
from .pass_base import tl_pass
from .thread_guard import map_with_guards, reaching_threads

STAGE = "OneThreadTmeLoads"
_SHARED = ("shared", "shared.dyn")
# The attributes a plain T.copy's call may carry; any other (async, robust, per-thread, loop layout, disable_tma)
# asks for a form of its own.
_PLAIN_ATTRS = {"tl.loc", "coalesced_width"}
assert not _PLAIN_ATTRS & {ASYNC_ATTR, DISABLE_TMA_ATTR, LOOP_LAYOUT_ATTR, PER_THREAD_ATTR}


def one_thread_tme_loads(func: tirx.PrimFunc, options: CompileOptions) -> tirx.PrimFunc:
    target = func.attrs["target"] if func.attrs is not None and "target" in func.attrs else None
    if target is None or not arch_of(target).has_tme or options.disable_tma_lower:
        return func
    threads = thread_info(func)
    analyzer = thread_analyzer(threads)
    params = list(func.params)
    renumbered = global_layouts(func)  # a descriptor cannot renumber a tensor with a T.annotate_layout layout

    def on_evaluate(node, mutator, guards):
        call = node.value
        if not is_tile_op(call) or str(call.op.name) != Copy.op_name:
            return node
        attrs = {str(k): call.attrs[k] for k in call.attrs.keys()} if call.attrs is not None else {}
        if set(attrs) - _PLAIN_ATTRS or len(call.args) != 2:
            return node
        copy = parse_tile_op(call)
        if copy.src.scope != "global" or copy.dst.scope not in _SHARED or copy.src.dtype != copy.dst.dtype or \
                copy.src.buffer in renumbered:
            return node
        try:
            reach = reaching_threads(guards, threads, analyzer() if guards else None, None, STAGE)
        except CompileError:
            return node  # not a static range: LowerTileOp names the problem
        if reach.count != 1:
            return node
        try:  # the rules that do not depend on the shared tile's layout (LowerTmeCopy checks that one)
            TmeCopy(copy.src, copy.dst, explicit=False, loc=copy.loc).box(params)
        except NotTme:
            return node
        attrs.update({"wait": 1, "explicit": 0})
        return tirx.Evaluate(tvm.ir.Call(tvm.ir.Op.get(TmeCopy.op_name), list(call.args), attrs=attrs,
                                         ret_ty="int32"))

    body = map_with_guards(func.body, threads, lambda node, mutator, guards: mutator.default_mutate(node),
                           on_evaluate)
    return func if body.same_as(func.body) else func.with_body(body)


def OneThreadTmeLoads(configs):  # noqa: N802
    options = CompileOptions.of(configs)
    return tl_pass(STAGE, lambda func: one_thread_tme_loads(func, options))
