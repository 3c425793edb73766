"""LowerAsyncBarriers: T.alloc_barrier buffers and named barriers become MUSA's integer async-barrier ids.

MUSA barriers are ids 1..63, not shared-memory objects (docs/ASYNC_MODEL.md section 1). Each `shared.barrier`
allocation gets consecutive ids (in allocation order, from 1); every load `b[i]` of one, in any expression (the
barrier ops, a TME load's barrier argument), becomes the integer `base + i`, and the allocation goes. A named
barrier `tvm_storage_sync(scope, id, count)` (the user's T.sync_threads(id, count) over part of the block, or a
barrier the compiler placed in a region only some threads reach) gets one id per distinct barrier, initialised
for `count` threads, and becomes `tl.async_barrier_sync(id)`: arrive, then wait for the phase arrived in; a
`T.named_barrier_arrive(id, count)` on it becomes `tl.barrier_arrive(id)`, the arrival alone. User
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
from ..ir.ops import BARRIER_ARRIVE_OP, BARRIER_OPS, NAMED_BARRIER_ARRIVE_OP, register_intrinsic as _register
from ..ir.utils import TensorLoad, loc_of, scope_of, seq, thread_info
from ..target import ArchInfo, arch_of, archs_with
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
    """One T.alloc_barrier buffer: an arrive count per barrier, and the first of its consecutive ids."""
    buffer: Any
    counts: list[int]
    loc: SourceLoc | None
    base: int = 0


@dataclass
class _NamedBarrier:
    """One named barrier (user's or compiler's id): its thread count, first use, and the async id it gets."""
    count: int
    loc: SourceLoc | None
    async_id: int = 0


@dataclass
class _KernelBarriers:
    """Every barrier construct of one kernel, in the order first met."""
    allocations: list[_Barriers]
    named: dict[tuple[bool, int], _NamedBarrier]  # (the user's?, id) -> barrier
    ops: list[tuple[str, SourceLoc | None]]  # the barrier ops (T.barrier_arrive, ...) and their lines

    def __bool__(self) -> bool:
        return bool(self.allocations or self.named or self.ops)


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


def _named_key(call: Any) -> tuple[bool, int | None]:
    """(whether the user wrote it, its id) of a named barrier call."""
    barrier_id = call.args[0] if _op_name(call) == NAMED_BARRIER_ARRIVE_OP else call.args[1]  # (id, count) there
    return call.attrs is not None and USER_NAMED_BARRIER in call.attrs, _const(barrier_id)


def _const(expr: Any) -> int | None:
    return int(expr.value) if isinstance(expr, tirx.IntImm) else None


def lower_async_barriers(func: tirx.PrimFunc) -> tirx.PrimFunc:
    target = func.attrs["target"] if func.attrs is not None and "target" in func.attrs else None
    arch = arch_of(target) if target is not None else None
    func, allocations = _take_allocations(func)
    barriers = _collect_barriers(func, allocations)
    if not barriers:
        return func
    _check_supported(barriers, arch, func)
    warp = arch.warp_size if arch is not None else 32
    inits = _assign_ids(barriers, warp)
    func = _replace_barriers(func, barriers)
    return _add_prologue(func, inits)


def _take_allocations(func: tirx.PrimFunc) -> tuple[tirx.PrimFunc, list[_Barriers]]:
    """`func` without its `shared.barrier` allocations, and those allocations in order. An allocation inside a
    loop or branch is an error: barriers are initialised once, when the kernel starts."""
    allocations: list[_Barriers] = []
    depth = 0  # loops and branches around the node

    def nested(node, mutator):
        nonlocal depth
        depth += 1
        try:
            return mutator.default_mutate(node)
        finally:
            depth -= 1

    def on_alloc(node, mutator):
        if scope_of(node.buffer) != BARRIER_SCOPE:
            return node
        loc = loc_of(node)
        if depth:
            raise CompileError(f"T.alloc_barrier: `{node.buffer.name}` is allocated inside a loop or branch; allocate "
                               "barriers at the top of the kernel (they are initialised once, when it starts)",
                               loc, STAGE)
        ann = node.annotations
        counts = [int(c.value) if hasattr(c, "value") else int(c) for c in ann[ARRIVE_COUNTS]] \
            if ann is not None and ARRIVE_COUNTS in ann else [int(node.buffer.ty.shape[0].value)]
        allocations.append(_Barriers(node.buffer, counts, loc))
        return tirx.Evaluate(tirx.const(0, "int32"))

    func = tvm_ffi.structural_mutate(func, [(tirx.For, nested), (tirx.IfThenElse, nested), (tirx.While, nested),
                                            (tirx.AllocBuffer, on_alloc)])
    return func, allocations


def _collect_barriers(func: tirx.PrimFunc, allocations: list[_Barriers]) -> _KernelBarriers:
    """The kernel's barrier ops and named barriers (one thread count per id, constant ids and counts)."""
    barriers = _KernelBarriers(allocations, {}, [])

    def on_call(call):
        name = _op_name(call)
        if name in BARRIER_OPS:
            barriers.ops.append((name, _call_loc(call)))
        elif _named_barrier(call) or name == NAMED_BARRIER_ARRIVE_OP:
            loc = _call_loc(call)
            (user, barrier_id), count = _named_key(call), _const(call.args[-1])
            if barrier_id is None or count is None:
                raise CompileError(f"a named barrier (T.sync_threads) needs a constant id and thread count; got "
                                   f"id {call.args[1]}, count {call.args[2]}", loc, STAGE)
            entry = barriers.named.setdefault((user, barrier_id), _NamedBarrier(count, loc))
            if entry.count != count:
                raise CompileError(f"T.sync_threads: barrier {barrier_id} is used with {entry.count} threads and "
                                   f"with {count}; one barrier id has one thread count", loc, STAGE)

    tvm_ffi.structural_walk(func.body, [(tvm.ir.Call, on_call)])
    return barriers


def _check_supported(barriers: _KernelBarriers, arch: ArchInfo | None, func: tirx.PrimFunc) -> None:
    """Errors at the first barrier construct when the arch has no asynchronous barriers, and for barrier ops on
    a barrier that is no T.alloc_barrier buffer of this kernel."""
    if arch is not None and not arch.has_async_barriers:
        since = archs_with("has_async_barriers")[0]
        if barriers.allocations:
            first = barriers.allocations[0]
            raise CompileError(f"T.alloc_barrier: {arch.name} has no asynchronous barriers (they need {since} or "
                               "newer)", first.loc, STAGE)
        if barriers.named:
            (user, barrier_id), named = next(iter(barriers.named.items()))
            raise CompileError(f"T.sync_threads({barrier_id}, {named.count}): a barrier over {named.count} of the "
                               f"block's {thread_info(func).num_threads} threads needs an asynchronous barrier, "
                               f"which {arch.name} does not have ({since} or newer); synchronize the whole block",
                               named.loc, STAGE)
        name, loc = barriers.ops[0]
        raise CompileError(f"{name}: {arch.name} has no asynchronous barriers (they need {since} or newer)", loc,
                           STAGE)
    if barriers.ops and not barriers.allocations:
        raise CompileError(f"{barriers.ops[0][0]}: its barrier is not a T.alloc_barrier buffer of this kernel",
                           barriers.ops[0][1], STAGE)


def _assign_ids(barriers: _KernelBarriers, warp: int) -> list[tuple[int, int]]:
    """Numbers the async barriers from 1: each allocation's barriers consecutively (its `base`), then one id per
    named barrier (its `async_id`). Returns (id, warps to arrive) for every id, in order."""
    inits: list[tuple[int, int]] = []
    next_id = 1
    for alloc in barriers.allocations:
        alloc.base = next_id
        next_id += len(alloc.counts)
        if next_id - 1 > MAX_BARRIER_ID:
            raise CompileError(f"T.alloc_barrier: `{alloc.buffer.name}` needs barrier ids up to {next_id - 1}, but a "
                               f"kernel has at most {MAX_BARRIER_ID} asynchronous barriers", alloc.loc, STAGE)
        inits += [(alloc.base + k, (c + warp - 1) // warp) for k, c in enumerate(alloc.counts)]
    for (user, barrier_id), named in barriers.named.items():
        if named.count % warp:
            raise CompileError(f"T.sync_threads({barrier_id}, {named.count}): a named barrier counts whole warps; "
                               f"{named.count} threads is not a multiple of the warp size {warp}", named.loc, STAGE)
        if next_id > MAX_BARRIER_ID:
            raise CompileError(f"named barrier {barrier_id} needs an asynchronous barrier id beyond the "
                               f"{MAX_BARRIER_ID} a kernel has", named.loc, STAGE)
        named.async_id = next_id
        inits.append((next_id, named.count // warp))
        next_id += 1
    return inits


def _replace_barriers(func: tirx.PrimFunc, barriers: _KernelBarriers) -> tirx.PrimFunc:
    """Each load `b[i]` of a barrier buffer becomes the integer id `base + i`; each named barrier
    `tl.async_barrier_sync(id)`."""
    bases = {a.buffer: a.base for a in barriers.allocations}

    def on_load(node, mutator):
        base = bases.get(node.source)
        if base is None:
            return mutator.default_mutate(node)
        index = node.indices[0]
        return tirx.const(base + _const(index), "int32") if _const(index) is not None else index + base

    def on_evaluate(node, mutator):
        if _named_barrier(node.value):
            async_id = barriers.named[_named_key(node.value)].async_id
            return tirx.Evaluate(tirx.call_intrin("int32", BARRIER_SYNC_OP, async_id))
        if _op_name(node.value) == NAMED_BARRIER_ARRIVE_OP:  # T.named_barrier_arrive: the arrival, no wait
            async_id = barriers.named[_named_key(node.value)].async_id
            return tirx.Evaluate(tirx.call_intrin("int32", BARRIER_ARRIVE_OP, async_id))
        return mutator.default_mutate(node)

    return tvm_ffi.structural_mutate(func, [(TensorLoad, on_load), (tirx.Evaluate, on_evaluate)])


def _add_prologue(func: tirx.PrimFunc, inits: list[tuple[int, int]]) -> tirx.PrimFunc:
    """`tl.async_bar_record(N)`, one thread's `tl.async_bar_init(id, warps)` per id, and a block barrier, first in
    the body of the innermost kernel launch attribute."""
    threads = thread_info(func)
    leader = threads.linear_thread_id()
    prologue = [tirx.Evaluate(tirx.call_intrin("int32", BAR_RECORD_OP, len(inits))),
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
