"""InjectSoftwarePipeline: a planned `T.Pipelined` loop (PipelinePlanning's stage and order per unit) becomes a
prologue, a steady-state loop and an epilogue, with its shared tiles multi-buffered and its loads asynchronous.

Pipeline iteration p runs each unit u, in the planned order, for loop iteration p - stage(u) when that lies in
[0, n): the prologue is p < max_stage, the loop p in [max_stage, n), the epilogue the last max_stage values of p
(guarded by the iteration's range, so any n >= 0 works, n dynamic included).

Buffers: a buffer written in one stage and read in a later one is given versions (a leading dimension), each
access going to version `iteration % V`; V = the largest stage distance + 1, or the distance itself when every
reader at that distance comes before the writer in the order (it reads the old contents before they are replaced).
Only shared and per-thread local buffers can be versioned (a fragment's layout has no room for versions).

Asynchronous copies (LDLMS, mp_22 and later; TL_ENABLE_ASYNC_COPY=False keeps them synchronous): a global-to-shared
`T.copy` in a stage before the last one is issued without waiting (tileop/async_copy.py, mode "issue"). Each run of
consecutive async copies in the order is one commit group, committed every pipeline iteration (also where its
copies are guarded off, so that group counts are the same in every iteration); a unit reading what an async copy
wrote is preceded by `wait_group(N)`, N the number of groups committed after the one it needs, and a block barrier
(pieces land for the thread that issued them). A block barrier also precedes each run of async copies: the
versions it overwrites were read by other threads. The epilogue ends with wait_group(0).
"""

from __future__ import annotations

from typing import Any

import tvm
import tvm_ffi
from tvm import tirx
from tvm.tirx.script import builder as Tb

from ..errors import CompileError, TileLangError
from ..language.annotate import ANNOTATIONS_ATTR
from ..target import arch_of
from ..tileop.async_copy import ASYNC_ISSUE, ASYNC_PIECE_BYTES, commit_group, piece_elements, wait_group
from ..tileop.copy import ASYNC_ATTR
from ..tileop.region import TensorRegion, common_extents
from .ir_utils import TensorLoad, as_int, loc_of, scope_of
from .pass_base import tl_pass
from .pass_config import PassConfigKey, enabled
from .pipeline_planning import SCHEDULE_ORDER, SCHEDULE_STAGE
from .pipeline_units import SHARED_SCOPES, Unit, pipeline_units

_VERSIONABLE = (*SHARED_SCOPES, "local")
_PIPELINE_KEYS = (SCHEDULE_STAGE, SCHEDULE_ORDER, "tl.pipeline.group")


def block_barrier() -> Any:
    return tirx.Evaluate(tirx.call_intrin("int32", "tirx.tvm_storage_sync", "shared"))


def version_count(buffer: Any, units: list[Unit], stages: list[int], orders: list[int]) -> int:
    count = 1
    for w in units:
        if buffer not in w.writes:
            continue
        for r in units:
            if r is w or buffer not in r.reads:
                continue
            distance = stages[r.index] - stages[w.index]
            if distance >= 1:
                count = max(count, distance + (0 if orders[r.index] < orders[w.index] else 1))
    return count


def versioned_buffer(buffer: Any, versions: int) -> Any:
    ty = buffer.ty
    return Tb.buffer([versions, *ty.shape], str(ty.dtype.dtype), scope=scope_of(buffer), buffer_name=buffer.name)


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


def issues_async(unit: Unit, stage: int, max_stage: int, use_async: bool) -> bool:
    """Whether the unit is a load the pipeline can issue asynchronously (LDLMS)."""
    if not use_async or stage >= max_stage or not unit.is_global_to_shared_copy():
        return False
    copy = unit.copy()
    if copy.async_mode is not None or copy.robust_desc is not None or copy.src.dtype != copy.dst.dtype:
        return False
    call = unit.stmts[0].value
    if call.attrs is not None and any("cache" in str(k) for k in call.attrs.keys()):
        return False  # a copy with cache hints is a TME copy (lower_tme_copy.py)
    try:
        dims = copy.copy_dims()
        piece_elements(copy, dims, list(common_extents(copy.src, copy.dst, dims)), ASYNC_PIECE_BYTES, "T.copy")
    except TileLangError:
        return False  # no 4/8/16-byte pieces: a synchronous copy
    return True


def _as_issue(stmt: Any) -> Any:
    call = stmt.value
    attrs = {str(k): call.attrs[k] for k in call.attrs.keys()} if call.attrs is not None else {}
    attrs[ASYNC_ATTR] = ASYNC_ISSUE
    return tirx.Evaluate(tvm.ir.Call(call.op, list(call.args), attrs=attrs, ret_ty="int32"))


class _Schedule:
    """The per-iteration emission plan of one loop: units in order, async groups, waits."""

    def __init__(self, units: list[Unit], stages: list[int], orders: list[int], async_units: set[int]):
        self.stages = stages
        self.emitted = sorted(units, key=lambda u: orders[u.index])
        self.position = {u.index: p for p, u in enumerate(self.emitted)}
        self.async_units = async_units
        # Maximal runs of consecutive async units: one commit group each.
        self.group_of: dict[int, int] = {}
        self.group_end: list[int] = []  # position of each group's last unit
        for pos, u in enumerate(self.emitted):
            if u.index not in async_units:
                continue
            if pos == 0 or self.emitted[pos - 1].index not in async_units:
                self.group_end.append(pos)
            self.group_of[u.index] = len(self.group_end) - 1
            self.group_end[-1] = pos
        self.async_writes = {u.index: u.writes for u in units if u.index in async_units}

    @property
    def groups(self) -> int:
        return len(self.group_end)

    def wait_count(self, consumer: Unit) -> int | None:
        """Groups that may stay in flight before `consumer` runs (None: it reads no async copy's result)."""
        pos_c = self.position[consumer.index]
        committed_before = sum(1 for end in self.group_end if end < pos_c)
        counts = []
        for producer, writes in self.async_writes.items():
            if producer == consumer.index or not writes & consumer.reads:
                continue
            distance = self.stages[consumer.index] - self.stages[producer]
            group = self.group_of[producer]
            if distance == 0:
                if self.position[producer] > pos_c:
                    continue  # reads the previous iteration's version, which an earlier wait covered
                counts.append(committed_before - group - 1)
            elif distance > 0:
                counts.append(self.groups - 1 - group + self.groups * (distance - 1) + committed_before)
        return min(counts) if counts else None


def pipeline_loop(loop: tirx.For, versions: dict, use_async: bool) -> Any:
    if loop.step is not None and as_int(loop.step) != 1:
        raise CompileError("T.Pipelined: a loop with a step cannot be pipelined", loc_of(loop))
    body = pipeline_units(loop)
    units = body.units
    stages = [int(x) for x in loop.annotations[SCHEDULE_STAGE]]
    orders = [int(x) for x in loop.annotations[SCHEDULE_ORDER]]
    max_stage = max(stages)

    for buffer in sorted({b for u in units for b in u.writes}, key=lambda b: b.name):
        count = version_count(buffer, units, stages, orders)
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

    async_units = {u.index for u in units if issues_async(u, stages[u.index], max_stage, use_async)}
    schedule = _Schedule(units, stages, orders, async_units)
    n, lo = loop.extent, loop.min
    ana = tvm.sym.Analyzer()

    def at_iteration(unit: Unit, iteration: Any) -> Any:
        stmt = unit.stmt if unit.index not in async_units else _as_issue(unit.stmt)
        value = ana.simplify(lo + iteration)
        stmt = tvm_ffi.structural_mutate(stmt, [(tvm.ir.expr.Var, lambda v, m: value
                                                 if v.same_as(loop.loop_var) else v)])
        return to_versions(stmt, versions, iteration)

    def pipeline_iteration(p: Any, guarded: bool) -> list[Any]:
        placed = []  # (unit, its loop iteration, guard or None, whether it can run)
        for unit in schedule.emitted:
            iteration = ana.simplify(p - stages[unit.index])
            cond = ana.simplify(tirx.And(iteration >= 0, iteration < n)) if guarded else None
            if isinstance(cond, tirx.IntImm):
                placed.append((unit, iteration, None, bool(cond.value)))
            else:
                placed.append((unit, iteration, cond, True))
        out: list[Any] = []
        last_wait = None  # (count, groups committed since)
        for pos, (unit, iteration, cond, runs) in enumerate(placed):
            count = schedule.wait_count(unit) if runs else None
            if count is not None and not (last_wait and last_wait[0] + last_wait[1] <= count):
                out += [wait_group(count), block_barrier()]
                last_wait = (count, 0)
            is_async = unit.index in async_units
            if is_async and (pos == 0 or schedule.emitted[pos - 1].index not in async_units):
                end = next(e for e in schedule.group_end if e >= pos)
                if any(placed[q][3] for q in range(pos, end + 1)):
                    out.append(block_barrier())  # the versions it overwrites were read by other threads
            if runs:
                stmt = at_iteration(unit, iteration)
                out.append(stmt if cond is None else tirx.IfThenElse(cond, stmt, None))
            if is_async and pos in schedule.group_end:
                out.append(commit_group())  # also when its copies are guarded off: group counts stay uniform
                if last_wait:
                    last_wait = (last_wait[0], last_wait[1] + 1)
        return out

    stmts: list[Any] = list(body.hoisted)
    for p in range(max_stage):
        stmts += pipeline_iteration(tirx.const(p, n.ty.dtype), guarded=True)
    steady_var = tirx.Var(loop.loop_var.name, loop.loop_var.ty.dtype)
    steady = pipeline_iteration(steady_var + max_stage, guarded=False)
    kept = {str(k): v for k, v in loop.annotations.items() if str(k) not in _PIPELINE_KEYS}
    extent = ana.simplify(tirx.Max(n - max_stage, tirx.const(0, n.ty.dtype)))
    stmts.append(tirx.For(steady_var, tirx.const(0, n.ty.dtype), extent, loop.kind, tirx.SeqStmt(steady)
                          if len(steady) > 1 else steady[0], loop.thread_binding, kept))
    start = ana.simplify(tirx.Max(n, tirx.const(max_stage, n.ty.dtype)))
    for e in range(max_stage):
        stmts += pipeline_iteration(start + e, guarded=True)
    if async_units:
        stmts.append(wait_group(0))
    return tirx.SeqStmt(stmts)


def inject_software_pipeline(func: tirx.PrimFunc, configs: dict) -> tirx.PrimFunc:
    target = func.attrs["target"] if func.attrs is not None and "target" in func.attrs else None
    arch = arch_of(target) if target is not None else None
    use_async = (arch is not None and arch.musa_arch >= 220
                 and enabled(configs, PassConfigKey.TL_ENABLE_ASYNC_COPY, default=True))
    versions: dict = {}

    def on_for(node, mutator):
        node = mutator.default_mutate(node)
        if SCHEDULE_STAGE not in node.annotations:
            return node
        return pipeline_loop(node, versions, use_async)

    body = tvm_ffi.structural_mutate(func.body, [(tirx.For, on_for)])
    if not versions:
        return func.with_body(body)

    def on_alloc(node, mutator):
        if node.buffer in versions:
            return tirx.AllocBuffer(versions[node.buffer][0], node.annotations)
        return node

    body = tvm_ffi.structural_mutate(body, [(tirx.AllocBuffer, on_alloc)])
    still_used = _references(body, set(versions))
    if still_used:
        buf = sorted(still_used, key=lambda b: b.name)[0]
        raise CompileError(f"T.Pipelined: `{buf.name}` is multi-buffered by the pipeline (one version per stage) "
                           "but also used outside the pipelined loop, where no version is current; copy it to "
                           "another buffer inside the loop", None)
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


def _references(body: Any, buffers: set) -> set:
    found: set = set()

    def visit(node):
        if node in buffers:
            found.add(node)

    tvm_ffi.structural_walk(body, [(tvm.ir.expr.Var, visit)], order="pre")
    return found


def InjectSoftwarePipeline(configs: dict):  # noqa: N802 - a pass, named as TVM names passes
    return tl_pass("InjectSoftwarePipeline", lambda func: inject_software_pipeline(func, configs))
