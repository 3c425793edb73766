"""WidenWalkedFragments: a fragment that T.Parallel nests index past its declared shape is widened to what they reach.

    sinks = T.alloc_fragment([heads], dtype)        # declared (heads,), but walked over block_M rows:
    for i in T.Parallel(block_M):
        sinks[i] = Sinks[by]                        # -> sinks is (max(heads, block_M),)

Upstream TileLang sizes a fragment's registers from the loops that walk it (its layout comes from theirs), not
from the declared shape, so such a program runs there and reads back what it wrote; upstream's attention-sink
backward examples rely on it. Here the fragment is redeclared with the extents its nests reach, with a warning,
since the declared shape is most likely a slip. Only indices the nests bound by their own extents are widened
for; a fragment that a tile op also takes as a region keeps its shape and the access is an error, as widening
would change what the op covers. Runs right before LayoutInference, when every copy into a fragment is a nest.
"""

from __future__ import annotations

import tvm
import tvm_ffi
from tvm import tirx
from tvm.script.ir_builder import IRBuilder
from tvm.tirx.script import builder as Tb

from ..diagnostics import warn_once
from ..errors import CompileError
from ..ir.utils import as_int, collect_accesses, loc_of, replace_buffer, scope_of
from ..tileop import is_tile_op, parse_tile_op
from ..tileop.region import Region
from .partition_parallel_loop import collect_nest, is_parallel
from .pass_base import tl_pass

STAGE = "WidenWalkedFragments"


def _reach(index, bounds: dict) -> int | None:
    """One past the largest value `index` takes over the nest, if only the nest's loop variables move it."""
    free = []
    tvm_ffi.structural_walk(index, [(tirx.Var, lambda v: free.append(v))])
    if any(not any(v.same_as(loop_var) for loop_var in bounds) for v in free):
        return None
    ana = tvm.sym.Analyzer()
    for var, extent in bounds.items():
        ana.bind(var, tvm.ir.Range(0, extent))
    bound = ana.const_int_bound(index)
    return int(bound.max_value) + 1 if int(bound.min_value) >= 0 else None


def widen_walked_fragments(func: tirx.PrimFunc) -> tirx.PrimFunc:
    reached: dict = {}  # fragment -> (extents its nests reach, the first access past its shape)
    in_ops: set = set()

    def on_for(node):
        if not is_parallel(node):
            return None
        nest, body = collect_nest(node)
        bounds = {level.loop_var: as_int(level.extent) for level in nest}
        if any(e is None or as_int(level.min) != 0 for level, e in zip(nest, bounds.values())):
            return None
        for access in collect_accesses(body):
            buf = access.buffer
            if scope_of(buf) != "local.fragment":
                continue
            shape = [as_int(e) for e in buf.ty.shape]
            ends = [_reach(index, bounds) for index in access.indices]
            extents, first = reached.get(buf, (shape, None))
            grown = [max(e, r) if r is not None else e for e, r in zip(extents, ends)]
            if grown != shape and first is None:
                first = (access, loc_of(node))
            reached[buf] = (grown, first)
        return tvm_ffi.WalkResult.SKIP

    def on_eval(node):
        if is_tile_op(node.value):
            op = parse_tile_op(node.value)
            in_ops.update(value.buffer for value in vars(op).values() if isinstance(value, Region))

    tvm_ffi.structural_walk(func.body, [(tirx.For, on_for), (tirx.Evaluate, on_eval)], order="pre")
    wider = {buf: found for buf, found in reached.items() if found[1] is not None}
    if not wider:
        return func
    replacement = {}
    for buf, (extents, (access, loc)) in wider.items():
        declared = tuple(as_int(e) for e in buf.ty.shape)
        text = f"`{buf.name}[{', '.join(map(str, access.indices))}]`"
        if buf in in_ops:
            raise CompileError(f"fragment `{buf.name}` is declared {declared} but this T.Parallel loop indexes it as "
                               f"{text}, up to {tuple(e - 1 for e in extents)}; declare it with the extents the loop "
                               "walks", loc, STAGE)
        warn_once(f"widened fragment {loc} {buf.name}",
                  f"{loc}: fragment `{buf.name}` is declared {declared} but a T.Parallel loop indexes it as {text}; "
                  f"it is laid out as {tuple(extents)}, the extents its loops walk (as upstream TileLang does)")
        new = Tb.buffer(extents, str(buf.ty.dtype.dtype), scope="local.fragment")
        IRBuilder.name(buf.name, new)
        replacement[buf] = new

    def on_alloc(node, mutator):
        new = replacement.get(node.buffer)
        return node if new is None else tirx.AllocBuffer(new, node.annotations)

    body = tvm_ffi.structural_mutate(func.body, [(tirx.AllocBuffer, on_alloc)])
    for old, new in replacement.items():
        body = replace_buffer(body, old, new)
    return func.with_body(body)


def WidenWalkedFragments():  # noqa: N802
    return tl_pass(STAGE, widen_walked_fragments)
