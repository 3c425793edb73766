"""LowerAsyncBarriers: T.alloc_barrier buffers and named barriers become MUSA's integer async-barrier ids.

MUSA barriers are ids 1..63, not shared-memory objects (docs/ASYNC_MODEL.md section 1). Each `shared.barrier`
allocation gets consecutive ids (in allocation order, from 1); every load `b[i]` of one, in any expression (the
barrier ops, a TME load's barrier argument), becomes the integer `base + i`, and the allocation goes. A named
barrier `tvm_storage_sync(scope, id, count)` (the user's T.sync_threads(id, count) over part of the block, or a
barrier the compiler placed in a region only some threads reach) gets one id per distinct barrier, initialised
for `count` threads, and becomes `tl.async_barrier_sync(id)`: arrive, then wait for the phase arrived in. User
ids (0..15, marked by the frontend) and compiler ids get distinct async ids.

The kernel then starts with `tl.async_bar_record(N)` (the N ids used), one thread's
`tl.async_bar_init(id, warps)` per barrier (counts are in warps: (threads + warp - 1) // warp), and a block
barrier. Runs after ThreadSync and RangeBarriers (which place the named barriers), before LowerIntrin.
On an arch without async barriers (ArchInfo.has_async_barriers: mp_21, mp_22) any barrier construct is an error at
its line.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import tvm
import tvm_ffi
from tvm import tirx

from ..errors import CompileError, SourceLoc
from ..ir.attrs import ARRIVE_COUNTS, BARRIER_SCOPE, USER_NAMED_BARRIER
from ..ir.ops import BARRIER_OPS, register_intrinsic as _register
from ..ir.utils import TensorLoad, loc_of, scope_of, seq, thread_info
from ..target import arch_of, archs_with
from .pass_base import tl_pass

STAGE = "LowerAsyncBarriers"
MAX_BARRIER_ID = 63
STORAGE_SYNC = "tirx.tvm_storage_sync"
BAR_RECORD_OP = "tl.async_bar_record"  # (count)
BAR_INIT_OP = "tl.async_bar_init"  # (id, warps)
BARRIER_SYNC_OP = "tl.async_barrier_sync"  # (id): arrive, then wait for the phase arrived in
_register(BAR_RECORD_OP, "the number of async barriers the kernel uses (first statement)")
_register(BAR_INIT_OP, "initialise an async barrier for a number of warps (one thread)")
_register(BARRIER_SYNC_OP, "a barrier over part of the block: arrive on an async barrier, wait for its phase")


@dataclass
class _Barriers:
    buffer: Any
    counts: list[int]
    loc: SourceLoc | None
    base: int = 0


def _call_loc(call: Any) -> SourceLoc | None:
    attrs = call.attrs
    if attrs is None or "tl.loc" not in attrs:
        return None
    filename, line, col = str(attrs["tl.loc"]).rsplit(":", 2)
    return SourceLoc(filename, int(line), int(col))


def _op_name(call: Any) -> str | None:
    return str(call.op.name) if isinstance(call, tvm.ir.Call) and isinstance(call.op, tvm.ir.Op) else None


def _named_barrier(call: Any) -> bool:
    return _op_name(call) == STORAGE_SYNC and len(call.args) == 3


def _const(expr: Any) -> int | None:
    return int(expr.value) if isinstance(expr, tirx.IntImm) else None


def lower_async_barriers(func: tirx.PrimFunc) -> tirx.PrimFunc:
    target = func.attrs["target"] if func.attrs is not None and "target" in func.attrs else None
    arch = arch_of(target) if target is not None else None
    allocations: list[_Barriers] = []
    named: dict[tuple[bool, int], list] = {}  # (user's?, id) -> [count, loc, async id]
    uses: list[tuple[str, SourceLoc | None]] = []
    depth = [0]

    def nested(node, mutator):
        depth[0] += 1
        try:
            return mutator.default_mutate(node)
        finally:
            depth[0] -= 1

    def on_alloc(node, mutator):
        if scope_of(node.buffer) != BARRIER_SCOPE:
            return node
        loc = loc_of(node)
        if depth[0]:
            raise CompileError(f"T.alloc_barrier: `{node.buffer.name}` is allocated inside a loop or branch; allocate "
                               "barriers at the top of the kernel (they are initialised once, when it starts)",
                               loc, STAGE)
        ann = node.annotations
        counts = [int(c.value) if hasattr(c, "value") else int(c) for c in ann[ARRIVE_COUNTS]] \
            if ann is not None and ARRIVE_COUNTS in ann else [int(node.buffer.ty.shape[0].value)]
        allocations.append(_Barriers(node.buffer, counts, loc))
        return tirx.Evaluate(tirx.const(0, "int32"))

    def on_call(call):
        name = _op_name(call)
        if name in BARRIER_OPS:
            uses.append((name, _call_loc(call)))
        elif _named_barrier(call):
            user = call.attrs is not None and USER_NAMED_BARRIER in call.attrs
            loc = _call_loc(call)
            barrier_id, count = _const(call.args[1]), _const(call.args[2])
            if barrier_id is None or count is None:
                raise CompileError(f"a named barrier (T.sync_threads) needs a constant id and thread count; got "
                                   f"id {call.args[1]}, count {call.args[2]}", loc, STAGE)
            entry = named.setdefault((user, barrier_id), [count, loc, 0])
            if entry[0] != count:
                raise CompileError(f"T.sync_threads: barrier {barrier_id} is used with {entry[0]} threads and with "
                                   f"{count}; one barrier id has one thread count", loc, STAGE)

    func = tvm_ffi.structural_mutate(func, [(tirx.For, nested), (tirx.IfThenElse, nested), (tirx.While, nested),
                                            (tirx.AllocBuffer, on_alloc)])
    tvm_ffi.structural_walk(func.body, [(tvm.ir.Call, on_call)])
    if not allocations and not named and not uses:
        return func

    if arch is not None and not arch.has_async_barriers:
        since = archs_with("has_async_barriers")[0]
        if allocations:
            first = allocations[0]
            raise CompileError(f"T.alloc_barrier: {arch.name} has no asynchronous barriers (they need {since} or "
                               "newer)", first.loc, STAGE)
        if named:
            (user, barrier_id), (count, loc, _) = next(iter(named.items()))
            raise CompileError(f"T.sync_threads({barrier_id}, {count}): a barrier over {count} of the block's "
                               f"{thread_info(func).num_threads} threads needs an asynchronous barrier, which "
                               f"{arch.name} does not have ({since} or newer); synchronize the whole block",
                               loc, STAGE)
        name, loc = uses[0]
        raise CompileError(f"{name}: {arch.name} has no asynchronous barriers (they need {since} or newer)", loc,
                           STAGE)
    if uses and not allocations:
        raise CompileError(f"{uses[0][0]}: its barrier is not a T.alloc_barrier buffer of this kernel", uses[0][1],
                           STAGE)

    warp = arch.warp_size if arch is not None else 32
    inits: list[tuple[int, int]] = []  # (id, warps)
    next_id = 1
    for alloc in allocations:
        alloc.base = next_id
        next_id += len(alloc.counts)
        if next_id - 1 > MAX_BARRIER_ID:
            raise CompileError(f"T.alloc_barrier: `{alloc.buffer.name}` needs barrier ids up to {next_id - 1}, but a "
                               f"kernel has at most {MAX_BARRIER_ID} asynchronous barriers", alloc.loc, STAGE)
        inits += [(alloc.base + k, (c + warp - 1) // warp) for k, c in enumerate(alloc.counts)]
    for (user, barrier_id), entry in named.items():
        count, loc = entry[0], entry[1]
        if count % warp:
            raise CompileError(f"T.sync_threads({barrier_id}, {count}): a named barrier counts whole warps; {count} "
                               f"threads is not a multiple of the warp size {warp}", loc, STAGE)
        if next_id > MAX_BARRIER_ID:
            raise CompileError(f"named barrier {barrier_id} needs an asynchronous barrier id beyond the "
                               f"{MAX_BARRIER_ID} a kernel has", loc, STAGE)
        entry[2] = next_id
        inits.append((next_id, count // warp))
        next_id += 1

    bases = {a.buffer: a.base for a in allocations}

    def on_load(node, mutator):
        base = bases.get(node.source)
        if base is None:
            return mutator.default_mutate(node)
        index = node.indices[0]
        return tirx.const(base + _const(index), "int32") if _const(index) is not None else index + base

    def on_evaluate(node, mutator):
        if _named_barrier(node.value):
            call = node.value
            user = call.attrs is not None and USER_NAMED_BARRIER in call.attrs
            async_id = named[(user, _const(call.args[1]))][2]
            return tirx.Evaluate(tirx.call_intrin("int32", BARRIER_SYNC_OP, async_id))
        return mutator.default_mutate(node)

    func = tvm_ffi.structural_mutate(func, [(TensorLoad, on_load), (tirx.Evaluate, on_evaluate)])
    threads = thread_info(func)
    leader = threads.linear_thread_id()
    prologue = [tirx.Evaluate(tirx.call_intrin("int32", BAR_RECORD_OP, next_id - 1)),
                tirx.IfThenElse(tirx.EQ(leader, tirx.const(0, leader.ty.dtype)),
                                seq([tirx.Evaluate(tirx.call_intrin("int32", BAR_INIT_OP, i, w)) for i, w in inits]),
                                None),
                tirx.Evaluate(tirx.call_intrin("int32", STORAGE_SYNC, "shared"))]

    def on_attr(node, mutator):
        if node.attr_key != "thread_extent":
            return mutator.default_mutate(node)
        inner = []
        tvm_ffi.structural_walk(node.body, [(tirx.AttrStmt, lambda a: inner.append(a)
                                             if a.attr_key == "thread_extent" else None)])
        if inner:
            return mutator.default_mutate(node)
        return tirx.AttrStmt(node.node, node.attr_key, node.value, seq(prologue + [node.body]))

    return tvm_ffi.structural_mutate(func, [(tirx.AttrStmt, on_attr)])


def LowerAsyncBarriers():  # noqa: N802 - a pass, named as TVM names passes
    return tl_pass(STAGE, lower_async_barriers)
