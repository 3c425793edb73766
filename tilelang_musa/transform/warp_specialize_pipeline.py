"""WarpSpecializePipeline: with a TME (ArchInfo.has_tme: mp_31), a planned `T.Pipelined` loop whose early stages are
all TME loads becomes a producer squad and the consumer squads (upstream TileLang's warp specialization; off with
TL_DISABLE_WARP_SPECIALIZED, or TL_DISABLE_TMA_LOWER since the producer's loads are TME copies).

The block grows by one squad (128 threads, `producer_threads` as upstream): threads [T, T + 128) run the producer,
the original T threads everything else. With R slots (the versions of the loaded tiles):

    producer (T.ws(T/128)):  for k: wait empty[k % R] (parity (k // R & 1) ^ 1); TME loads of iteration k into
                             version k % R on full[k % R]; every producer thread arrives on full[k % R]
    consumers (T.ws(0..)):   the statements before the loop; for k: the loop body without its loads, waiting
                             full[k % R] (parity k // R & 1) before the first statement reading a loaded tile and
                             arriving on empty[k % R] after the last; the statements after the loop

so the producer runs up to R iterations ahead, and neither side waits on a block barrier. A loop qualifies when it
is a statement of the kernel's top-level sequence (one pipelined loop per kernel), every unit of an earlier stage
than the last is a TME load (tiles, box and descriptor rules: tileop/tme_copy.py) reading nothing the loop writes,
the block is 1-D with a multiple of 128 threads, and no other unit writes the loaded tiles. Other loops are
pipelined in one squad by InjectSoftwarePipeline.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import tvm
import tvm_ffi
from tvm import tirx
from tvm.script.ir_builder import IRBuilder
from tvm.tirx.script import builder as Tb

from ..ir.attrs import ARRIVE_COUNTS, BARRIER_SCOPE, PIPELINED_ATTR, SQUAD_THREADS, WS_ATTR
from ..ir.ops import BARRIER_ARRIVE_OP, BARRIER_WAIT_OP
from ..ir.options import CompileOptions
from ..ir.tile_views import shared_tile_views
from ..ir.utils import as_int, declare_buffers, scope_of, substitute, thread_info
from ..tileop.registry import is_tile_op
from ..tileop.tme_copy import TmeCopy
from .inject_software_pipeline import (
    TME, BufferUses, _with_attrs, barrier_call, load_kind, load_modes, to_versions, unscheduled_annotations,
    versioned_buffer, without_temporary_mark,
)
from .pass_base import tl_pass
from .pipeline_planning import SCHEDULE_ORDER, SCHEDULE_STAGE, SMEM_ROUNDING, SharedBudget, shared_budget
from .pipeline_units import accesses, flatten, pipeline_units, replay_bindings, version_count

# Buffers a statement copied into the producer may write (each thread's own) and read (no tile of another squad).
_PER_THREAD = ("local", "local.var")
_READABLE = ("global", "local", "local.var")


def _thread_attr(body: Any) -> tuple[list, tirx.AttrStmt] | None:
    """The AttrStmts from the kernel's top down to (and including) the threadIdx.x extent."""
    chain = []
    node = body
    while isinstance(node, tirx.AttrStmt):
        chain.append(node)
        if node.attr_key == "thread_extent" and str(node.node.thread_tag) == "threadIdx.x":
            return chain, node
        node = node.body
    return None


def warp_specialize_pipeline(func: tirx.PrimFunc, options: CompileOptions | dict) -> tirx.PrimFunc:
    options = CompileOptions.of(options)
    modes = load_modes(func, options)
    if not modes.tme or options.disable_warp_specialized:
        return func
    site = _find_site(func)
    if site is None:
        return func
    plan = _plan(site.loop, modes, shared_tile_views(func.body))
    if plan is None or not _fits(func, site, plan):
        return func
    rings = _Rings(plan.ring)
    top, rest, late = _hoist_declarations(site.stmts)
    prologue = rest[:[i for i, s in enumerate(rest) if s.same_as(site.loop)][0]]
    # the producer needs the loads' addresses and the loop's trip count (`n = T.ceildiv(lens[b], bn)` before it)
    trip_count = tirx.Evaluate(site.loop.extent)
    setup = _producer_setup(prologue, [trip_count, *(s for i in plan.loads
                                                     for s in [*plan.units[i].binds, *plan.units[i].stmts])], late)
    if setup is None:
        return func  # the loads' addresses come from statements only the consumers can run: one squad
    body = _squad_regions(site, plan, rings, top, rest, setup)
    return func.with_body(_grown_block(site, body))


@dataclass(frozen=True)
class _Site:
    """Where the loop is: the kernel's launch attributes down to the threadIdx.x extent, that attribute's
    statements (flattened), the one pipelined loop among them, and the block's threads."""
    chain: list
    thread_attr: tirx.AttrStmt
    stmts: list
    loop: tirx.For
    block: int


@dataclass(frozen=True)
class _Plan:
    """A qualifying loop's units, the load units among them, its ring slots and its versioned tiles."""
    units: list
    loads: set
    ring: int
    versions: dict  # loaded tile -> (versioned buffer, ring); empty for one slot

    @property
    def readers(self) -> list[int]:
        """The units other than the loads that read a loaded tile, in order."""
        loaded = {b for i in self.loads for b in self.units[i].writes}
        return [u.index for u in self.units if u.index not in self.loads and u.reads & loaded]


class _Rings:
    """The two barrier rings: `full` (the producer's loads landed), `empty` (the consumers are done with a slot)."""

    def __init__(self, ring: int):
        self.full = Tb.buffer([ring], "uint64", scope=BARRIER_SCOPE)
        self.empty = Tb.buffer([ring], "uint64", scope=BARRIER_SCOPE)
        IRBuilder.name("pipeline_full", self.full)
        IRBuilder.name("pipeline_empty", self.empty)


@dataclass(frozen=True)
class _Iteration:
    """Iteration k of the loop as both squads run it."""
    slot: Any  # k % R: the ring slot, and the version of the loaded tiles
    phase: Any  # (k // R) & 1
    k: Any  # the new loop variable, from 0
    value: Any  # the original loop variable's value at k
    loop_var: Any
    versions: dict

    def here(self, stmt: Any) -> Any:
        """A statement of the loop body at iteration k: the loop variable replaced, loaded tiles versioned."""
        stmt = tvm_ffi.structural_mutate(stmt, [(tvm.ir.expr.Var, lambda v, m: self.value
                                                 if v.same_as(self.loop_var) else v)])
        return to_versions(stmt, self.versions, self.k)


def _find_site(func: tirx.PrimFunc) -> _Site | None:
    """The kernel's one pipelined loop, a statement of its top-level sequence, in a 1-D block of whole squads."""
    threads = thread_info(func)
    block = as_int(threads.extents.get("threadIdx.x"))
    if set(threads.extents) - {"threadIdx.x", "blockIdx.x", "blockIdx.y", "blockIdx.z"} or block is None \
            or block % SQUAD_THREADS:
        return None
    found = _thread_attr(func.body)
    if found is None:
        return None
    chain, thread_attr = found
    stmts = flatten(thread_attr.body)
    loops = [s for s in stmts if isinstance(s, tirx.For) and SCHEDULE_STAGE in s.annotations]
    nested = []
    tvm_ffi.structural_walk(thread_attr.body, [(tirx.For, lambda f: nested.append(f)
                                                 if SCHEDULE_STAGE in f.annotations else None)], order="pre")
    if len(loops) != 1 or len(nested) != 1:
        return None
    return _Site(chain, thread_attr, stmts, loops[0], block)


def _fits(func: tirx.PrimFunc, site: _Site, plan: _Plan) -> bool:
    """Whether the loaded tiles are used in the loop only, and every tile fits in shared memory side by side."""
    if set(plan.versions) & BufferUses(site.thread_attr.body).outside(site.loop):
        return False  # a loaded tile is used outside the loop too: InjectSoftwarePipeline says why that fails
    budget = shared_budget(func)
    if budget is not None and _side_by_side_bytes(budget, plan.versions) > budget.limit:
        # The squads run side by side, so no tile can take another's bytes (PipelinePlanning sized the schedule
        # with tiles used only after the loop in the loop's bytes): pipelined in one squad, where they can.
        return False
    return True


def _serial(loop: tirx.For, plan: _Plan, make_body: Callable[[_Iteration], list]) -> tirx.For:
    """The loop over the iterations, its body made by `make_body(iteration)`."""
    k = tirx.Var(loop.loop_var.name, loop.loop_var.ty.dtype)
    value = tvm.sym.Analyzer().simplify(loop.min + k)
    slot = tirx.floormod(k, plan.ring) if plan.ring > 1 else tirx.const(0, k.ty.dtype)
    phase = tirx.floormod(tirx.floordiv(k, plan.ring), 2)
    body = make_body(_Iteration(slot, phase, k, value, loop.loop_var, plan.versions))
    return tirx.For(k, tirx.const(0, loop.extent.ty.dtype), loop.extent, loop.kind,
                    tirx.SeqStmt(body) if len(body) > 1 else body[0], loop.thread_binding,
                    unscheduled_annotations(loop), span=loop.span)


def _producer_body(plan: _Plan, rings: _Rings, it: _Iteration) -> list:
    """Wait for the slot to be empty, load into it (TME, on full[slot]), arrive on full[slot]."""
    body = [barrier_call(BARRIER_WAIT_OP, rings.empty[it.slot], tirx.bitwise_xor(it.phase, 1))]
    shared: dict = {}  # the kept bindings emitted in this body
    for u in plan.units:
        if u.index in plan.loads:
            binds, vmap = replay_bindings(u.binds, it.loop_var, it.value, shared)
            body += binds
            body += [it.here(substitute(_with_attrs(s, tvm.ir.Op.get(TmeCopy.op_name), [rings.full[it.slot]],
                                                    {"explicit": False, PIPELINED_ATTR: True}), vmap))
                     for s in u.stmts]
    return body + [barrier_call(BARRIER_ARRIVE_OP, rings.full[it.slot])]


def _consumer_body(plan: _Plan, rings: _Rings, it: _Iteration) -> list:
    """The loop body without its loads: wait on full[slot] before the first reader, arrive on empty[slot] after
    the last."""
    readers = plan.readers
    body = []
    shared: dict = {}  # the kept bindings emitted in this body
    for u in plan.units:
        if u.index in plan.loads:
            continue
        if readers and u.index == readers[0]:
            body.append(barrier_call(BARRIER_WAIT_OP, rings.full[it.slot], it.phase))
        binds, vmap = replay_bindings(u.binds, it.loop_var, it.value, shared)
        body += binds
        body.append(it.here(substitute(u.stmt, vmap)))
        if readers and u.index == readers[-1]:
            body.append(barrier_call(BARRIER_ARRIVE_OP, rings.empty[it.slot]))
    return body


def _squad_regions(site: _Site, plan: _Plan, rings: _Rings, top: list, rest: list, setup: list) -> Any:
    """The block's new body: the hoisted declarations, the producer squad's region and the consumers', the rings
    declared, the loaded tiles allocated with their versions."""
    loop, block = site.loop, site.block
    tid = site.thread_attr.node.var
    consumer = [_serial(loop, plan, lambda it: _consumer_body(plan, rings, it)) if s.same_as(loop) else s
                for s in rest]
    producer_squad = block // SQUAD_THREADS
    regions = [
        _region(f"producer squad T.ws({producer_squad}) of T.Pipelined",
                tirx.LE(tirx.const(block, tid.ty.dtype), tid),
                _renamed_bindings(setup + [_serial(loop, plan, lambda it: _producer_body(plan, rings, it))]), loop.span),
        _region(f"consumer squads T.ws(0..{producer_squad - 1}) of T.Pipelined", tirx.LT(tid, block), consumer,
                loop.span),
    ]
    body = tirx.SeqStmt(top + regions)
    body = declare_buffers(body, [rings.full, rings.empty],
                           [{ARRIVE_COUNTS: [tirx.const(SQUAD_THREADS, "int32")] * plan.ring},
                            {ARRIVE_COUNTS: [tirx.const(block, "int32")] * plan.ring}])

    def on_alloc(node, mutator):
        if node.buffer in plan.versions:  # its versions hold values across iterations: no temporary any more
            return tirx.AllocBuffer(plan.versions[node.buffer][0], without_temporary_mark(node.annotations))
        return node

    return tvm_ffi.structural_mutate(body, [(tirx.AllocBuffer, on_alloc)])


def _grown_block(site: _Site, body: Any) -> Any:
    """The kernel's launch attributes around `body`, the block grown by the producer squad."""
    grown = site.block + SQUAD_THREADS
    thread_attr = site.thread_attr
    iv = thread_attr.node
    new_iv = tirx.IterVar(tvm.ir.Range(0, grown), iv.var, iv.iter_type, str(iv.thread_tag))
    node = tirx.AttrStmt(new_iv, thread_attr.attr_key, tirx.const(grown, str(thread_attr.value.ty.dtype)), body)
    for outer in reversed(site.chain[:-1]):
        node = tirx.AttrStmt(outer.node, outer.attr_key, outer.value, node)
    return node


def _side_by_side_bytes(budget: SharedBudget, versions: dict) -> int:
    """The shared memory of every tile at once, the loaded tiles in all their versions."""
    total = 0
    for buf, nbytes in budget.tiles.items():
        copies = versions[buf][1] if buf in versions else 1
        total += -(-nbytes * copies // SMEM_ROUNDING) * SMEM_ROUNDING
    return total


def _hoist_declarations(stmts: list) -> tuple[list, list, set]:
    """(the allocations and the bindings both squads see, placed above the regions; the other statements in order;
    the variables of bindings left among them). A binding moves up only when its value reads nothing an earlier
    statement writes (`m_start = bx * bm - offsets[g]` after a loop storing `g` stays where it is)."""
    top, rest, written, late = [], [], set(), set()
    for s in stmts:
        if isinstance(s, tirx.AllocBuffer):
            top.append(s)
            continue
        if isinstance(s, tirx.Bind) and not (_vars_used(s.value) & (written | late)):
            top.append(s)
            continue
        if isinstance(s, tirx.Bind):
            late.add(s.var)
        else:
            written |= accesses(s)[1]
        rest.append(s)
    return top, rest, late


def _producer_setup(prologue: list, loads: list, late: set) -> list | None:
    """The statements before the loop that the producer's loads depend on (a group index found by a loop over an
    offsets table, bindings of it, the loop's trip count), copied for the producer squad with fresh binding variables;
    None when one of them is not a per-thread computation (it fills a tile, reads shared memory, writes a buffer other than a
    `T.alloc_var` / `T.alloc_local`): then only the consumers may run it."""
    need = set().union(*(_vars_used(s) for s in loads)) if loads else set()
    chosen = []
    for s in reversed(prologue):
        if isinstance(s, tirx.Bind):
            if s.var in need:
                if any(scope_of(b) not in _READABLE for b in accesses(tirx.Evaluate(s.value))[0]):
                    return None  # it reads a tile (another squad may fill it): the consumers' alone
                chosen.append(s)
                need |= _vars_used(s.value)
            continue
        reads, writes = accesses(s)
        if not writes & need:
            continue
        if any(scope_of(b) not in _PER_THREAD for b in writes) or any(scope_of(b) not in _READABLE for b in reads) \
                or _has_tile_op(s):
            return None
        chosen.append(s)
        need |= _vars_used(s)
    return chosen[::-1]


def _renamed_bindings(stmts: list) -> list:
    """`stmts` with each binding's variable (its definition and every use) replaced by a fresh one, so a binding
    copied into the producer's region defines a variable of its own."""
    bound = []
    for s in stmts:
        tvm_ffi.structural_walk(s, [(tirx.Bind, lambda b: bound.append(b.var))], order="pre")
    fresh = {v: tirx.Var(v.name, v.ty.dtype) for v in bound}

    def on_bind(node, mutator):
        node = mutator.default_mutate(node)  # the value's uses; the defined variable is a field of its own
        return tirx.Bind(fresh[node.var], node.value) if node.var in fresh else node

    return [tvm_ffi.structural_mutate(s, [(tirx.Bind, on_bind), (tvm.ir.expr.Var, lambda v, m: fresh.get(v, v))])
            for s in stmts]


def _vars_used(node: Any) -> set:
    """The variables (scalars and buffers) `node` mentions."""
    out: set = set()
    tvm_ffi.structural_walk(node, [(tvm.ir.expr.Var, out.add)], order="pre")
    return out


def _has_tile_op(stmt: Any) -> bool:
    found = []
    tvm_ffi.structural_walk(stmt, [(tvm.ir.Call, lambda c: found.append(c) if is_tile_op(c) else None)],
                            order="pre")
    return bool(found)


def _region(label: str, cond: Any, body: list, span: Any) -> Any:
    """A squad's region; `span`, the T.Pipelined loop's, names the line of the barriers and guards it adds."""
    inner = tirx.IfThenElse(cond, tirx.SeqStmt(body) if len(body) > 1 else body[0], None, span)
    return tirx.AttrStmt(tirx.const(0, "int32"), WS_ATTR, tvm.ir.expr.StringImm(label), inner, span)


def _plan(loop: tirx.For, modes, views: dict) -> _Plan | None:
    """The loop's plan when it qualifies (module docstring), else None."""
    if loop.step is not None and as_int(loop.step) != 1:
        return None
    body = pipeline_units(loop, views)
    if body.hoisted:
        return None
    units = body.units
    stages = [int(x) for x in loop.annotations[SCHEDULE_STAGE]]
    orders = [int(x) for x in loop.annotations[SCHEDULE_ORDER]]
    last = max(stages)
    loads = {u.index for u in units if stages[u.index] < last}
    if not loads or any(load_kind(units[i], stages[i], last, modes) != TME for i in loads):
        return None
    written = {b for u in units for b in u.writes}
    loaded = {b for i in loads for b in units[i].writes}
    if any(units[i].reads & written for i in loads):
        return None  # a load's address depends on the loop's own results (a sparse gather): keep it in one squad
    if any(u.writes & loaded for u in units if u.index not in loads):
        return None
    if loaded & set(views.values()):
        return None  # a loaded tile with views of another dtype: InjectSoftwarePipeline versions them together
    ring = max(version_count(b, units, stages, orders) for b in loaded)
    versions = {b: (versioned_buffer(b, ring), ring) for b in loaded} if ring > 1 else {}
    return _Plan(units, loads, ring, versions)


def WarpSpecializePipeline(configs: CompileOptions | dict):  # noqa: N802 - a pass, named as TVM names passes
    options = CompileOptions.of(configs)
    return tl_pass("WarpSpecializePipeline", lambda func: warp_specialize_pipeline(func, options))
