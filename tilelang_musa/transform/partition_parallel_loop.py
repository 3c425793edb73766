"""PartitionParallelLoop: distribute each `T.Parallel` nest over the block's threads, vectorized.

A nest `for i0, ..., ik in T.Parallel(e0, ..., ek)` is a set of independent iterations. Its fused index
`f` (row-major over the nest) is split as

    f = ((it * num_threads) + tid) * V + v        it: serial, tid: the thread, v: vectorized (V lanes)

so consecutive threads touch consecutive V-element pieces: coalesced global accesses, V-wide vector
loads and stores. V is the widest power of two (up to 16 bytes per access) for which every global or
shared access of the body is contiguous in `v`, starts V-aligned, and stays inside one V-aligned piece
of its buffer (so that a bounds guard on the piece's first element is exact). When the iterations do not
fill the threads evenly a guard `f < total` keeps the extra threads idle.

Loops over fragments get their thread mapping from layout inference instead (a later pass); this pass
only handles nests whose body touches global, shared and per-thread memory.
"""

from __future__ import annotations

from typing import Any

import tvm
import tvm_ffi
from tvm import tirx

from ..errors import CompileError
from ..language.loop import PARALLEL
from .ir_utils import (
    ThreadInfo, as_int, buffer_size, collect_accesses, dtype_bytes, flat_index, loc_of, scope_of, substitute,
    thread_info,
)
from .pass_base import tl_pass
from .pass_config import PassConfigKey, enabled

MAX_VECTOR_BYTES = 16  # the widest MUSA global/shared load/store (128 bits)


def _is_parallel(node: Any) -> bool:
    return isinstance(node, tirx.For) and node.annotations is not None and PARALLEL in node.annotations


def _collect_nest(loop: tirx.For) -> tuple[list[tirx.For], Any]:
    nest = [loop]
    body = loop.body
    while _is_parallel(body):
        nest.append(body)
        body = body.body
    return nest, body


class _Planner:
    def __init__(self, threads: ThreadInfo, disable_vectorize: bool):
        self.threads = threads
        self.disable_vectorize = disable_vectorize

    def _analyzer(self):
        ana = tvm.sym.Analyzer()
        for tag, var in self.threads.vars.items():
            ana.bind(var, tvm.ir.Range(0, self.threads.extents[tag]))
        return ana

    def lower(self, loop: tirx.For) -> Any:
        nest, body = _collect_nest(loop)
        loc = loc_of(loop)
        extents = []
        for level in nest:
            extent = as_int(level.extent)
            if extent is None or as_int(level.min) != 0:
                raise CompileError(
                    f"T.Parallel: loop `{level.loop_var.name}` has extent {level.extent}; T.Parallel extents must "
                    "be compile-time constants", loc, "PartitionParallelLoop")
            extents.append(extent)
        for access in collect_accesses(body):
            if scope_of(access.buffer) == "local.fragment":
                raise CompileError(
                    f"T.Parallel over fragment `{access.buffer.name}` needs layout inference, which this build does "
                    "not have yet", loc, "PartitionParallelLoop")
        total = 1
        for e in extents:
            total *= e
        num_threads = self.threads.num_threads
        width = self._vector_width(nest, extents, body)
        pieces = total // width
        iters = -(-pieces // num_threads)

        it = tirx.Var("it", "int32")
        v = tirx.Var("vec", "int32")
        tid = self.threads.linear_thread_id()
        piece = tid if iters == 1 else it * num_threads + tid
        fused = piece * width + (v if width > 1 else 0)
        vmap = {}
        stride = total
        for level, extent in zip(nest, extents):
            stride //= extent
            vmap[level.loop_var] = tirx.floormod(tirx.floordiv(fused, stride), extent)
        ana = self._analyzer()
        if width > 1:
            ana.bind(v, tvm.ir.Range(0, width))
        if iters > 1:
            ana.bind(it, tvm.ir.Range(0, iters))
        vmap = {k: ana.simplify(e) for k, e in vmap.items()}
        new_body = substitute(body, vmap)
        if width > 1:
            new_body = tirx.For(v, 0, width, tirx.ForKind.VECTORIZED, new_body)
        if pieces % num_threads != 0:
            new_body = tirx.IfThenElse(piece < pieces, new_body, None)
        if iters > 1:
            new_body = tirx.For(it, 0, iters, tirx.ForKind.SERIAL, new_body)
        return new_body

    def _vector_width(self, nest: list[tirx.For], extents: list[int], body: Any) -> int:
        if self.disable_vectorize:
            return 1
        accesses = [a for a in collect_accesses(body) if scope_of(a.buffer) in ("global", "shared", "shared.dyn")]
        if not accesses:
            return 1
        widest = max(dtype_bytes(a.buffer.dtype) for a in accesses)
        width = max(1, MAX_VECTOR_BYTES // widest)
        inner = nest[-1].loop_var
        while width > 1:
            if extents[-1] % width == 0 and all(self._vectorizable(a, inner, width) for a in accesses):
                return width
            width //= 2
        return 1

    def _vectorizable(self, access, inner, width: int) -> bool:
        """The access is `base + lane` for lanes of `inner` within a V-aligned piece, base % V == 0, and the
        buffer's size is a multiple of V (so a guard on the piece's first element covers all its lanes)."""
        size = as_int(buffer_size(access.buffer))
        if size is None or size % width != 0:
            return False
        ana = self._analyzer()
        lane = tirx.Var("lane", "int32")
        group = tirx.Var("group", "int32")
        ana.bind(lane, tvm.ir.Range(0, width))
        index = flat_index(access.buffer, access.indices)
        at_lane = substitute(index, {inner: group * width + lane})
        at_zero = substitute(index, {inner: group * width})
        if not ana.can_prove_equal(at_lane - at_zero, lane):
            return False
        mod = ana.modular_set(ana.simplify(at_zero))
        return mod.coeff % width == 0 and mod.base % width == 0


def partition_parallel_loop(func: tirx.PrimFunc, disable_vectorize: bool = False) -> tirx.PrimFunc:
    planner = _Planner(thread_info(func), disable_vectorize)

    def on_for(node, mutator):
        if _is_parallel(node):
            return planner.lower(node)
        return mutator.default_mutate(node)

    return tvm_ffi.structural_mutate(func, [(tirx.For, on_for)])


def PartitionParallelLoop(configs):  # noqa: N802 - a pass constructor, named like TVM's
    disable = enabled(configs, PassConfigKey.TL_DISABLE_VECTORIZE)
    return tl_pass("PartitionParallelLoop", lambda func: partition_parallel_loop(func, disable))
