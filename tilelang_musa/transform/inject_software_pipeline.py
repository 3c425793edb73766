"""InjectSoftwarePipeline: a planned `T.Pipelined` loop (PipelinePlanning's stage and order per unit) becomes a
prologue, a steady-state loop and an epilogue, with its shared tiles multi-buffered and its loads asynchronous.

Pipeline iteration p runs each unit u, in the planned order, for loop iteration p - stage(u) when that lies in
[0, n): the prologue is p < max_stage, the loop p in [max_stage, n), the epilogue the last max_stage values of p
(guarded by the iteration's range, so any n >= 0 works, n dynamic included).

Buffers: a buffer written in one stage and read in a later one is given versions (a leading dimension), each
access going to version `iteration % V`; V = the largest stage distance + 1, or the distance itself when every
reader at that distance comes before the writer in the order (it reads the old contents before they are replaced).
Only shared and per-thread local buffers can be versioned (a fragment's layout has no room for versions). A view of
a tile as another dtype (ir/tile_views.py) is the tile's bytes: the units' dependences are the tile's, and a versioned
tile's views are versioned with it (view version k over the bytes of tile version k).

Loads (a global-to-shared `T.copy` in a stage before the last one) are asynchronous. With a TME (ArchInfo.has_tme:
mp_31), where the copy meets the TME rules (tileop/tme_copy.py; not with TL_DISABLE_TMA_LOWER), it is a TME load
onto a ring of async barriers, one ring per run of consecutive loads: a block barrier, the loads, every thread
arrives on `full[i % R]`; readers wait on it with parity `i / R & 1` (docs/ASYNC_MODEL.md section 5). Otherwise an
LDLMS copy (ArchInfo.has_async_copy: mp_22 and later; TL_ENABLE_ASYNC_COPY=False keeps it synchronous) issued
without waiting (tileop/async_copy.py, mode "issue"). Each run of consecutive async copies in the order is one
commit group, committed every pipeline iteration (also where its copies are guarded off, so that group counts are
the same in every iteration); a unit reading what an async copy wrote is preceded by `wait_group(N)`, N the number
of groups committed after the one it needs, and a block barrier (pieces land for the thread that issued them). A
block barrier also precedes each run of TME loads: the versions it overwrites were read by other threads. (An LDLMS
copy's destination is marked as written, tileop/access_ptr.py: ThreadSync places that barrier where an earlier read
needs it, none in the prologue.) The epilogue ends with wait_group(0).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import tvm
import tvm_ffi
from tvm import tirx
from tvm.script.ir_builder import IRBuilder
from tvm.tirx.script import builder as Tb

from ..diagnostics import warn_once
from ..errors import CompileError, TileLangError
from ..ir.attrs import (
    ANNOTATIONS_ATTR, ARRIVE_COUNTS, ASYNC_ATTR, BARRIER_SCOPE, DISABLE_TMA_ATTR, PIPELINED_ATTR, TEMPORARY_ANNOTATION,
    WS_ATTR,
)
from ..ir.ops import BARRIER_ARRIVE_OP, BARRIER_WAIT_OP
from ..ir.large_bindings import as_bindings
from ..ir.options import CompileOptions
from ..ir.source_lines import keep_span
from ..ir.tile_views import shared_tile_views
from ..ir.utils import (
    TensorLoad, as_int, declare_buffers, loc_of, scope_of, seq, substitute, thread_info, with_fresh_bindings,
)
from ..target import arch_of
from ..tileop.async_copy import ASYNC_ISSUE, ASYNC_PIECE_BYTES, commit_group, piece_elements, wait_group
from ..tileop.region import TensorRegion, common_extents
from ..tileop.tme_copy import NotTme, TmeCopy
from .lower_global_layout import global_layouts, keeps_rows
from .pass_base import tl_pass
from .pipeline_planning import SCHEDULE_ORDER, SCHEDULE_STAGE
from .pipeline_units import SHARED_SCOPES, Unit, pipeline_units, replay_bindings, version_count
from .thread_guard import thread_conditions

_VERSIONABLE = (*SHARED_SCOPES, "local")
_PIPELINE_KEYS = (SCHEDULE_STAGE, SCHEDULE_ORDER, "tl.pipeline.group")


def block_barrier() -> Any:
    return tirx.Evaluate(tirx.call_intrin("int32", "tirx.tvm_storage_sync", "shared"))


def barrier_call(op: str, *args: Any) -> Any:
    """A barrier op as T.barrier_arrive / T.barrier_wait write it."""
    return tirx.Evaluate(tvm.ir.Call(tvm.ir.Op.get(op), list(args), attrs={}, ret_ty="int32"))


def versioned_buffer(buffer: Any, versions: int) -> Any:
    ty = buffer.ty
    return Tb.buffer([versions, *ty.shape], str(ty.dtype.dtype), scope=scope_of(buffer), buffer_name=buffer.name)


def without_temporary_mark(annotations: Any) -> dict:
    """A versioned tile's annotations: its versions carry values from one iteration to another, so it is no
    temporary (TEMPORARY_ANNOTATION) any more."""
    return {str(k): v for k, v in (annotations or {}).items() if str(k) != TEMPORARY_ANNOTATION}


def to_versions(stmt: Any, versions: dict, iteration: Any) -> Any:
    """`stmt` with every access to a versioned buffer going to version `iteration % V`."""
    def version(buf):
        new, count = versions[buf]
        return new, tirx.floormod(iteration, count) if count > 1 else tirx.const(0, iteration.ty.dtype)

    def on_region(node, mutator):
        if node.source not in versions:
            return node
        new, v = version(node.source)
        return tirx.BufferRegion(new, [tvm.ir.Range.from_min_extent(v, 1), *node.region])

    def on_load(node, mutator):
        node = mutator.default_mutate(node)
        if node.source not in versions:
            return node
        new, v = version(node.source)
        return new[(v, *node.indices)]

    def on_store(node, mutator):
        node = mutator.default_mutate(node)
        if node.buffer not in versions:
            return node
        new, v = version(node.buffer)
        return tirx.BufferStore(new, node.value, [v, *node.indices])

    return tvm_ffi.structural_mutate(stmt, [(TensorRegion, on_region), (TensorLoad, on_load),
                                            (tirx.BufferStore, on_store)])


TME, LDLMS = "tme", "ldlms"


@dataclass(frozen=True)
class LoadModes:
    """Which asynchronous forms the kernel's target and pass configs allow for pipelined loads."""
    tme: bool
    ldlms: bool
    params: tuple = ()  # the kernel's tensors (a TME descriptor is built for a parameter)
    renumbered: frozenset = frozenset()  # global tensors accessed through a T.annotate_layout layout
    scattered: frozenset = frozenset()  # those of them whose layout breaks the runs of a row (not keeps_rows)
    threads: int = 0  # the block's threads: all of them arrive on a TME ring's barrier


def load_kind(unit: Unit, stage: int, max_stage: int, modes: LoadModes) -> str | None:
    """How a unit of an earlier stage than the last loads: TME, LDLMS, or synchronously (None). A unit of several
    copies (group=) takes the form all of them allow."""
    if stage >= max_stage or not unit.is_global_to_shared_copy():
        return None
    bindings = as_bindings(unit.binds)
    kinds = {_copy_kind(copy, stmt.value, modes, bindings) for copy, stmt in zip(unit.copies(), unit.stmts)}
    if kinds == {TME}:
        return TME
    return LDLMS if kinds <= {TME, LDLMS} and modes.ldlms and all(
        _ldlms_pieces(copy, bindings) for copy in unit.copies()) else None


def _copy_kind(copy: Any, call: Any, modes: LoadModes, bindings: dict) -> str | None:
    if copy.async_mode is not None or copy.robust_desc is not None or copy.src.dtype != copy.dst.dtype:
        return None
    if call.attrs is not None and any("cache" in str(k) for k in call.attrs.keys()):
        return None  # a copy with cache hints is a TME copy of its own (lower_tme_copy.py)
    if copy.src.buffer in modes.scattered:
        # Read through a layout that breaks a row's runs (LowerGlobalLayout, later): the LDLMS pieces, planned on
        # the logical indices, would be neither runs of memory nor aligned. A synchronous load gathers.
        return None
    if modes.tme and copy.src.buffer not in modes.renumbered and DISABLE_TMA_ATTR not in call.attrs:
        try:
            TmeCopy(copy.src, copy.dst, explicit=False, loc=copy.loc).box(list(modes.params))
            return TME
        except NotTme:
            pass
    return LDLMS if modes.ldlms and _ldlms_pieces(copy, bindings) else None


def _ldlms_pieces(copy: Any, bindings: dict) -> bool:
    try:
        dims = copy.copy_dims()
        piece_elements(copy, dims, list(common_extents(copy.src, copy.dst, dims)), ASYNC_PIECE_BYTES, "T.copy",
                       bindings)
        return True
    except TileLangError:
        return False  # no 4/8/16-byte pieces


def _with_attrs(stmt: Any, op: Any, extra_args: list, attrs: dict) -> Any:
    call = stmt.value
    merged = {str(k): call.attrs[k] for k in call.attrs.keys()} if call.attrs is not None else {}
    merged.update(attrs)
    return tirx.Evaluate(tvm.ir.Call(op, [*list(call.args), *extra_args], attrs=merged, ret_ty="int32"), stmt.span)


@dataclass
class _Group:
    kind: str
    units: list  # unit indices, in emission order
    end: int  # position of its last unit
    ring: int = 1  # TME: barriers in its ring (the versions of what it writes)
    barrier: Any = None  # TME: the ring's barrier buffer


class _Schedule:
    """The per-iteration emission plan of one loop: units in order, async groups, waits."""

    def __init__(self, units: list[Unit], stages: list[int], orders: list[int], kinds: dict[int, str]):
        self.stages = stages
        self.emitted = sorted(units, key=lambda u: orders[u.index])
        self.position = {u.index: p for p, u in enumerate(self.emitted)}
        self.kinds = kinds
        # Maximal runs of consecutive async units of one kind and stage: one commit group (LDLMS) or barrier ring
        # (TME) each.
        self.groups: list[_Group] = []
        self.group_of: dict[int, _Group] = {}
        for pos, u in enumerate(self.emitted):
            kind = kinds.get(u.index)
            if kind is None:
                continue
            previous = self.emitted[pos - 1].index if pos else None
            if previous is None or kinds.get(previous) != kind or stages[previous] != stages[u.index]:
                self.groups.append(_Group(kind, [], pos))
            group = self.groups[-1]
            group.units.append(u.index)
            group.end = pos
            self.group_of[u.index] = group
        self.writes = {u.index: u.writes for u in units}
        self.ldlms = [g for g in self.groups if g.kind == LDLMS]

    def producers(self, consumer: Unit) -> list[tuple[int, int]]:
        """(async unit, stage distance) for each async unit whose result `consumer` reads."""
        out = []
        for producer in self.group_of:
            if producer == consumer.index or not self.writes[producer] & consumer.reads:
                continue
            distance = self.stages[consumer.index] - self.stages[producer]
            if distance > 0 or (distance == 0 and self.position[producer] < self.position[consumer.index]):
                out.append((producer, distance))
        return out

    def wait_count(self, consumer: Unit) -> int | None:
        """LDLMS groups that may stay in flight before `consumer` runs (None: it reads no LDLMS copy's result)."""
        pos_c = self.position[consumer.index]
        committed_before = sum(1 for g in self.ldlms if g.end < pos_c)
        counts = []
        for producer, distance in self.producers(consumer):
            group = self.group_of[producer]
            if group.kind != LDLMS:
                continue
            index = self.ldlms.index(group)
            if distance == 0:
                counts.append(committed_before - index - 1)
            else:
                counts.append(len(self.ldlms) - 1 - index + len(self.ldlms) * (distance - 1) + committed_before)
        return min(counts) if counts else None

    def barriers(self, consumer: Unit) -> list[_Group]:
        """The TME rings whose loads `consumer` reads (waited for at the consumer's own iteration)."""
        out = []
        for producer, _ in self.producers(consumer):
            group = self.group_of[producer]
            if group.kind == TME and group not in out:
                out.append(group)
        return out


def unscheduled_annotations(loop: tirx.For) -> dict:
    """The loop's annotations without PipelinePlanning's schedule."""
    return {str(k): v for k, v in loop.annotations.items() if str(k) not in _PIPELINE_KEYS}


def in_order(loop: tirx.For) -> tirx.For:
    """The loop without its pipeline schedule: it runs in order."""
    return tirx.For(loop.loop_var, loop.min, loop.extent, loop.kind, loop.body, loop.thread_binding,
                    unscheduled_annotations(loop), loop.step)


def pipeline_loop(loop: tirx.For, versions: dict, modes: LoadModes, barriers: list, used_outside: set,
                  counters: list | None = None, views: dict | None = None) -> Any:
    """The loop pipelined. With `counters` (the loop runs again and again: it is inside another loop), a TME
    ring's slots and parities follow a count of the iterations of every run so far (a barrier's phases do not
    restart with the loop), kept in a per-thread counter appended to `counters` and to `barriers`."""
    if loop.step is not None and as_int(loop.step) != 1:
        raise CompileError("T.Pipelined: a loop with a step cannot be pipelined", loc_of(loop))
    body = pipeline_units(loop, views)
    units = body.units
    stages = [int(x) for x in loop.annotations[SCHEDULE_STAGE]]
    orders = [int(x) for x in loop.annotations[SCHEDULE_ORDER]]
    max_stage = max(stages)

    needs = {b: version_count(b, units, stages, orders) for b in {b for u in units for b in u.writes}}
    if _must_run_in_order(loop, needs, used_outside):
        return in_order(loop)
    _add_versions(loop, needs, versions)
    for view, tile in (views or {}).items():  # the tile's names, versioned alike
        if tile in versions and view not in versions:
            versions[view] = (versioned_buffer(view, versions[tile][1]), versions[tile][1])
    kinds = {u.index: kind for u in units if (kind := load_kind(u, stages[u.index], max_stage, modes))}
    schedule = _Schedule(units, stages, orders, kinds)
    _allocate_rings(schedule, units, versions, modes.threads, barriers)
    done = _iterations_done_counter(loop, schedule, counters, barriers)
    return _PipelineEmitter(loop, schedule, versions, done).emit(list(body.hoisted), max_stage)


def _must_run_in_order(loop: tirx.For, needs: dict, used_outside: set) -> bool:
    """Whether a buffer that needs versions is also used outside the loop (then the loop runs in order, with a
    warning): no version would be the current one there."""
    outside = sorted((b.name for b, count in needs.items() if count > 1 and b in used_outside))
    if outside:
        warn_once(f"T.Pipelined in order {loc_of(loop)}",
                  f"{loc_of(loop)}: T.Pipelined runs in order: `{outside[0]}` would need one copy per stage, but is "
                  "also used outside the loop, where no copy is the current one (copy it to another buffer inside "
                  "the loop to pipeline it)")
    return bool(outside)


def _add_versions(loop: tirx.For, needs: dict, versions: dict) -> None:
    """Adds to `versions` (buffer -> (versioned buffer, count)) each buffer that needs more than one version."""
    for buffer in sorted(needs, key=lambda b: b.name):
        count = needs[buffer]
        if count == 1:
            continue
        if scope_of(buffer) not in _VERSIONABLE:
            raise CompileError(
                f"T.Pipelined: `{buffer.name}` ({scope_of(buffer)}) is written in one pipeline stage and read in a "
                f"later one, so it needs {count} versions; only shared and local buffers can be versioned. Keep "
                "its writer and readers in one stage (stage=/order=)", loc_of(loop))
        if buffer in versions and versions[buffer][1] != count:
            raise CompileError(f"T.Pipelined: `{buffer.name}` is multi-buffered by two pipelined loops with "
                               f"different depths ({versions[buffer][1]} and {count})", loc_of(loop))
        versions.setdefault(buffer, (versioned_buffer(buffer, count), count))


def _allocate_rings(schedule: _Schedule, units: list[Unit], versions: dict, threads: int, barriers: list) -> None:
    """Gives each TME group its ring of barriers (one per version of what it loads), allocated in `barriers`."""
    for group in schedule.groups:
        if group.kind != TME:
            continue
        written = {b for i in group.units for b in units[i].writes}
        group.ring = max(versions[b][1] if b in versions else 1 for b in written)
        group.barrier = Tb.buffer([group.ring], "uint64", scope=BARRIER_SCOPE)
        IRBuilder.name(f"{sorted(b.name for b in written)[0]}_full", group.barrier)
        # Every thread arrives after the group's loads (the leader's expect-tx comes first in its program order).
        barriers.append(tirx.AllocBuffer(group.barrier, {ARRIVE_COUNTS: [tirx.const(threads, "int32")]
                                                         * group.ring}))


def _iterations_done_counter(loop: tirx.For, schedule: _Schedule, counters: list | None, barriers: list) -> Any:
    """For a loop that runs again and again and loads through TME rings: the per-thread count of the iterations
    its earlier runs took (the rings' phases went on with them), added to `counters` and allocated in `barriers`.
    Else None."""
    if counters is None or not any(g.kind == TME for g in schedule.groups):
        return None
    done = Tb.buffer([1], loop.extent.ty.dtype, scope="local")
    IRBuilder.name("pipeline_iterations_done", done)
    counters.append(done)
    barriers.append(tirx.AllocBuffer(done))
    return done


@dataclass
class _Placed:
    """A unit as one pipeline iteration runs it."""
    unit: Unit
    iteration: Any  # the loop iteration it runs for
    cond: Any  # the guard on that iteration's range, or None
    runs: bool  # False: the iteration is out of range at compile time


@dataclass
class _Waits:
    """What one pipeline iteration has waited for so far."""
    last: tuple[int, int] | None = None  # (wait_group count, LDLMS groups committed since)
    rings: set = dataclasses.field(default_factory=set)  # (id of a TME group, stage) waited for


def _guarded(cond: Any, stmt: Any) -> Any:
    return stmt if cond is None else tirx.IfThenElse(cond, stmt, None)


class _PipelineEmitter:
    """The statements of one pipelined loop: prologue, steady-state loop and epilogue, each pipeline iteration
    the schedule's units with their waits, barriers, commits and arrivals."""

    def __init__(self, loop: tirx.For, schedule: _Schedule, versions: dict, done: Any):
        self.loop = loop
        self.schedule = schedule
        self.versions = versions
        self.done = done  # the iterations earlier runs took (None: the loop runs once)
        self.ana = tvm.sym.Analyzer()

    def emit(self, hoisted: list, max_stage: int) -> Any:
        loop, ana = self.loop, self.ana
        n = loop.extent
        stmts: list[Any] = hoisted
        for p in range(max_stage):
            stmts += self._iteration(tirx.const(p, n.ty.dtype), guarded=True)
        steady_var = tirx.Var(loop.loop_var.name, loop.loop_var.ty.dtype)
        steady = self._iteration(steady_var + max_stage, guarded=False)
        extent = ana.simplify(tirx.Max(n - max_stage, tirx.const(0, n.ty.dtype)))
        stmts.append(tirx.For(steady_var, tirx.const(0, n.ty.dtype), extent, loop.kind, tirx.SeqStmt(steady)
                              if len(steady) > 1 else steady[0], loop.thread_binding, unscheduled_annotations(loop),
                              span=loop.span))
        if max_stage > 0 and not isinstance(extent, tirx.IntImm) and not ana.can_prove(extent >= 1):
            # The steady loop may run no iteration (a T.dynamic trip count): TVM's ThreadSync takes the barrier
            # inside it as separating the prologue's writes from the epilogue's reads, so one goes here.
            stmts.append(block_barrier())
        start = ana.simplify(tirx.Max(n, tirx.const(max_stage, n.ty.dtype)))
        for e in range(max_stage):
            stmts += self._iteration(start + e, guarded=True)
        if self.schedule.ldlms:
            stmts.append(wait_group(0))
        if self.done is not None:
            stmts.append(tirx.BufferStore(self.done, self.done[0] + n, [0]))
        # The enclosing sequence takes these statements in (the SeqStmt goes): the waits, commits and guards the
        # pipeline adds get the T.Pipelined line (the units' statements keep their own).
        stmts = [keep_span(loop, stmt) for stmt in stmts]
        # every unit in stage 0 (stage=[0, ...]) and nothing hoisted: the steady loop alone, not a SeqStmt of one
        return stmts[0] if len(stmts) == 1 else tirx.SeqStmt(stmts)

    def _ring_index(self, iteration: Any) -> Any:
        return iteration if self.done is None else self.done[0] + iteration

    def _slot(self, group: _Group, iteration: Any) -> Any:
        return group.barrier[tirx.floormod(self._ring_index(iteration), group.ring) if group.ring > 1 else 0]

    def _place(self, p: Any, guarded: bool) -> list[_Placed]:
        """The units of pipeline iteration `p`, in order, each with its loop iteration and guard."""
        placed = []
        for unit in self.schedule.emitted:
            iteration = self.ana.simplify(p - self.schedule.stages[unit.index])
            cond = self.ana.simplify(tirx.And(iteration >= 0, iteration < self.loop.extent)) if guarded else None
            if isinstance(cond, tirx.IntImm):
                placed.append(_Placed(unit, iteration, None, bool(cond.value)))
            else:
                placed.append(_Placed(unit, iteration, cond, True))
        return placed

    def _iteration(self, p: Any, guarded: bool) -> list[Any]:
        """Pipeline iteration `p`; `guarded`: each unit runs only where its loop iteration is in [0, n)."""
        placed = self._place(p, guarded)
        waits = _Waits()
        shared: dict = {}  # the kept bindings emitted unguarded in this iteration, by (variable, stage)
        out: list[Any] = []
        for pos, item in enumerate(placed):
            group = self.schedule.group_of.get(item.unit.index)
            out += self._ldlms_wait(item, waits)
            out += self._ring_waits(item, waits)
            if group is not None and group.kind == TME and group.units[0] == item.unit.index:
                # The versions it overwrites were read by other threads. (An LDLMS copy's destination is marked
                # as written: ThreadSync puts this barrier where a read came before.)
                if any(placed[q].runs for q in range(pos, group.end + 1)):
                    out.append(block_barrier())
            if item.runs and item.cond is None:
                out += self._at_iteration(item.unit, item.iteration, shared)
            elif item.runs:
                out.append(_guarded(item.cond, seq(self._at_iteration(item.unit, item.iteration, {}))))
            if group is not None and pos == group.end:
                out += self._end_group(group, item, waits)
        return out

    def _ldlms_wait(self, item: _Placed, waits: _Waits) -> list[Any]:
        """wait_group(N) and a block barrier before a unit reading LDLMS copies, unless an earlier wait covers it."""
        count = self.schedule.wait_count(item.unit) if item.runs else None
        last = waits.last
        if count is None or (last and last[0] + last[1] <= count):
            return []
        waits.last = (count, 0)
        return [wait_group(count), block_barrier()]

    def _ring_waits(self, item: _Placed, waits: _Waits) -> list[Any]:
        """A wait on the slot of each TME ring the unit reads, once per ring and stage in the iteration."""
        out = []
        stage = self.schedule.stages[item.unit.index]
        for group in self.schedule.barriers(item.unit) if item.runs else []:
            if (id(group), stage) in waits.rings:
                continue
            waits.rings.add((id(group), stage))
            index = self._ring_index(item.iteration)
            parity = tirx.floormod(tirx.floordiv(index, group.ring), 2) if group.ring > 1 else \
                tirx.floormod(index, 2)
            out.append(_guarded(item.cond, barrier_call(BARRIER_WAIT_OP, self._slot(group, item.iteration), parity)))
        return out

    def _end_group(self, group: _Group, item: _Placed, waits: _Waits) -> list[Any]:
        """After a group's last unit: an LDLMS group's commit, a TME group's arrival on its slot."""
        if group.kind == LDLMS:
            if waits.last:
                waits.last = (waits.last[0], waits.last[1] + 1)
            return [commit_group()]  # also when its copies are guarded off: group counts stay uniform
        if group.kind == TME and item.runs:
            return [_guarded(item.cond, barrier_call(BARRIER_ARRIVE_OP, self._slot(group, item.iteration)))]
        return []

    def _at_iteration(self, unit: Unit, iteration: Any, shared: dict) -> list[Any]:
        """The unit's statements for loop iteration `iteration`: loads in their asynchronous form, the loop
        variable replaced, versioned buffers at the iteration's version; first the kept bindings they read that
        `shared` does not hold yet (replay_bindings)."""
        kind = self.schedule.kinds.get(unit.index)
        stmts = list(unit.stmts)
        if kind == LDLMS:
            stmts = [_with_attrs(s, s.value.op, [], {ASYNC_ATTR: ASYNC_ISSUE}) for s in stmts]
        elif kind == TME:
            bar = self._slot(self.schedule.group_of[unit.index], iteration)
            stmts = [_with_attrs(s, tvm.ir.Op.get(TmeCopy.op_name), [bar], {"explicit": False, PIPELINED_ATTR: True})
                     for s in stmts]
        stmt = stmts[0] if len(stmts) == 1 else tirx.SeqStmt(stmts)
        value = self.ana.simplify(self.loop.min + iteration)
        binds, vmap = replay_bindings(unit.binds, self.loop.loop_var, value, shared, self.schedule.stages[unit.index])
        stmt = substitute(stmt, {self.loop.loop_var: value, **vmap})
        # each emitted copy binds its own variables (a unit is emitted once per pipeline iteration it runs in)
        return [*binds, to_versions(with_fresh_bindings(stmt), self.versions, iteration)]


def load_modes(func: tirx.PrimFunc, options: CompileOptions) -> LoadModes:
    target = func.attrs["target"] if func.attrs is not None and "target" in func.attrs else None
    arch = arch_of(target) if target is not None else None
    layouts = global_layouts(func)
    renumbered = frozenset(layouts)
    scattered = frozenset(buf for buf, layout in layouts.items()
                          if not keeps_rows(layout, [as_int(e) for e in buf.ty.shape]))
    return LoadModes(
        tme=arch is not None and arch.has_tme and not options.disable_tma_lower,
        ldlms=arch is not None and arch.has_async_copy
        and options.enable_async_copy,
        params=tuple(func.params), renumbered=renumbered, scattered=scattered, threads=thread_info(func).num_threads)


def inject_software_pipeline(func: tirx.PrimFunc, options: CompileOptions | dict) -> tirx.PrimFunc:
    options = CompileOptions.of(options)
    modes = load_modes(func, options)
    versions: dict = {}
    barriers: list = []

    threads = thread_info(func)
    views = shared_tile_views(func.body)
    uses = BufferUses(func.body, views)
    ranged = [0]  # inside an `if` on the thread index or a T.ws region: not every thread arrives
    depth = [0]  # loops around the node: a pipelined loop among them runs more than once
    counters: list = []  # iteration counters of repeated pipelined loops, zeroed before their outermost loop

    def around_loop(node, mutator):
        depth[0] += 1
        node = mutator.default_mutate(node)
        depth[0] -= 1
        if isinstance(node, tirx.For) and SCHEDULE_STAGE in node.annotations:
            here = modes if not ranged[0] else dataclasses.replace(modes, tme=False)
            node = pipeline_loop(node, versions, here, barriers, uses.outside(node), counters if depth[0] else None,
                                 views)
        if depth[0] == 0 and counters:
            node = tirx.SeqStmt([tirx.BufferStore(c, tirx.const(0, c.ty.dtype), [0]) for c in counters] + [node])
            counters.clear()
        return node

    def on_if(node, mutator):
        on_threads = bool(thread_conditions(node.condition, threads))
        ranged[0] += on_threads
        node = mutator.default_mutate(node)
        ranged[0] -= on_threads
        return node

    def on_attr(node, mutator):
        is_ws = str(node.attr_key) == WS_ATTR
        ranged[0] += is_ws
        node = mutator.default_mutate(node)
        ranged[0] -= is_ws
        return node

    body = tvm_ffi.structural_mutate(func.body, [(tirx.For, around_loop), (tirx.While, around_loop),
                                                 (tirx.IfThenElse, on_if), (tirx.AttrStmt, on_attr)])
    if barriers:
        body = declare_buffers_first(body, barriers)
    if not versions:
        return func.with_body(body)

    def on_alloc(node, mutator):
        if node.buffer in versions:  # its versions hold values across iterations: no temporary any more
            return tirx.AllocBuffer(versions[node.buffer][0], without_temporary_mark(node.annotations))
        return node

    def on_decl(node, mutator):  # a versioned view, over its versioned tile
        if node.buffer in versions:
            return tirx.DeclBuffer(versions[node.buffer][0], data=versions[views[node.buffer]][0].data)
        return node

    body = tvm_ffi.structural_mutate(body, [(tirx.AllocBuffer, on_alloc), (tirx.DeclBuffer, on_decl)])
    func = func.with_body(body)
    if func.attrs is not None and ANNOTATIONS_ATTR in func.attrs:
        layouts = {}
        for buf, layout in func.attrs[ANNOTATIONS_ATTR].items():
            if buf in versions:
                new, count = versions[buf]
                layouts[new] = layout.expand([count])
            else:
                layouts[buf] = layout
        func = func.with_attr(ANNOTATIONS_ATTR, layouts)
    return func


def declare_buffers_first(body: Any, allocs: list) -> Any:
    """`body` with `allocs` before the kernel's first allocation."""
    return declare_buffers(body, [a.buffer for a in allocs], [dict(a.annotations) for a in allocs])


def _mentions(node: Any) -> dict:
    """How often each buffer is mentioned in `node`."""
    seen: dict = {}

    def visit(var):
        if isinstance(var.ty, tirx.BufferType):
            seen[var] = seen.get(var, 0) + 1

    tvm_ffi.structural_walk(node, [(tvm.ir.expr.Var, visit)], order="pre")
    return seen


class BufferUses:
    """The buffers a kernel body mentions, counted once, so that each pipelined loop can ask which of them are also
    used outside it (allocations aside) without another walk of the whole body. With `views` (view -> tile,
    ir/tile_views.py), a view's declaration mentions neither name, and a view used outside the loop counts its tile
    too."""

    def __init__(self, body: Any, views: dict | None = None):
        self.total = _mentions(body)
        self.views = views or {}

        def uncount(buffer):
            self.total[buffer] = self.total.get(buffer, 0) - 1

        def on_decl(decl):
            if decl.buffer in self.views:
                uncount(decl.buffer), uncount(self.views[decl.buffer])

        tvm_ffi.structural_walk(body, [(tirx.AllocBuffer, lambda a: uncount(a.buffer)), (tirx.DeclBuffer, on_decl)],
                                order="pre")

    def outside(self, loop: tirx.For) -> set:
        inside = _mentions(loop)
        used = {b for b, n in self.total.items() if n > inside.get(b, 0)}
        return used | {self.views[b] for b in used if b in self.views}


def InjectSoftwarePipeline(configs: CompileOptions | dict):  # noqa: N802 - a pass, named as TVM names passes
    options = CompileOptions.of(configs)
    return tl_pass("InjectSoftwarePipeline", lambda func: inject_software_pipeline(func, options))
