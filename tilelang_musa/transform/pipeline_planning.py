"""PipelinePlanning: a stage and an emission order for each unit of a `T.Pipelined` loop (pipeline_units.py).

`T.Pipelined(n, num_stages=s)` (upstream TileLang's rules):
  - a copy stage is a `T.copy` from global to shared memory; it goes to stage 0, together with the statements
    before it that write what it reads (an index loaded into a local buffer: `producer for copy`);
  - every other unit goes to stage s, in source order, each copy stage emitted right after the last unit that
    reads what it wrote (so its next write waits as little as possible);
  - if then every copy stage sits at the end of the order (the GEMM: copies, then the gemm), they move to the
    front and the compute drops to stage s - 1: the loads of iteration k + s - 1 are issued before the compute of
    iteration k, and the shared tiles get s buffers.
  A body without a copy stage, or num_stages=0, is not pipelined.
`stage=[...]` and `order=[...]` (one entry per unit; `group=` forms units of several statements) give the schedule
by hand; `num_stages` is then max(stage) + 1. Either way each dependency must go forward: a unit writing a buffer
a later unit (in source order) reads or writes runs in an earlier stage, or in the same stage earlier in the order.

The result is the loop's SCHEDULE_STAGE / SCHEDULE_ORDER annotations, which InjectSoftwarePipeline reads.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import tvm_ffi
from tvm import tirx

from ..errors import CompileError
from ..ir.attrs import PIPELINE_GROUP, PIPELINE_ORDER, PIPELINE_STAGE, PIPELINE_STAGES
from ..ir.tile_views import shared_tile_views
from ..ir.utils import as_int, dtype_bytes, loc_of, scope_of
from .pass_base import tl_pass
from .pipeline_units import SHARED_SCOPES, Unit, pipeline_units, version_count
from .shared_memory_lifetimes import tile_lifetimes

SCHEDULE_STAGE = "software_pipeline_stage"
SCHEDULE_ORDER = "software_pipeline_order"
_USER_KEYS = (PIPELINE_STAGES, PIPELINE_STAGE, PIPELINE_ORDER)


def depends(earlier: Unit, later: Unit) -> set:
    """Buffers through which `later` (after `earlier` in source order) depends on `earlier`."""
    return set(earlier.writes & (later.reads | later.writes)) | set(earlier.reads & later.writes)


def check_dependencies(units: list[Unit], stages: list[int], orders: list[int], loop: tirx.For) -> None:
    for a in units:
        for b in units[a.index + 1:]:
            shared = depends(a, b)
            if not shared:
                continue
            sa, sb, oa, ob = stages[a.index], stages[b.index], orders[a.index], orders[b.index]
            if sa > sb or (sa == sb and oa > ob):
                name = sorted(buf.name for buf in shared)[0]
                raise CompileError(
                    f"T.Pipelined: {b.describe()} uses `{name}` from {a.describe()}, but is scheduled before it "
                    f"(stage {sb}, order {ob} vs stage {sa}, order {oa}); a unit must come in a later stage than "
                    "those it depends on, or later in the order within the same stage", loc_of(loop))


def default_schedule(units: list[Unit], num_stages: int) -> tuple[list[int], list[int]] | None:
    """Upstream's inferred schedule (module docstring); None when nothing is a copy stage."""
    first = [u.is_global_to_shared_copy() for u in units]
    if not any(first):
        return None
    # Producers for copy: earlier units writing a buffer a first-stage unit reads (transitively).
    feeds: dict[int, set[int]] = {u.index: {u.index} for u in units if first[u.index]}
    changed = True
    while changed:
        changed = False
        for u in units:
            if first[u.index]:
                continue
            fed = {c for v in units[u.index + 1:] if first[v.index] and u.writes & v.reads for c in feeds[v.index]}
            if fed:
                if not first[u.index]:
                    first[u.index] = True
                    feeds[u.index] = set()
                    changed = True
                if not fed <= feeds[u.index]:
                    feeds[u.index] |= fed
                    changed = True
    # The last later unit outside the first stage reading what a copy wrote; producers follow their copies.
    last_use: dict[int, int] = {}
    for u in units:
        if first[u.index] and u.is_global_to_shared_copy():
            users = [v.index for v in units[u.index + 1:] if not first[v.index] and u.writes & v.reads]
            if users:
                last_use[u.index] = max(users)
    for u in units:
        if first[u.index] and not u.is_global_to_shared_copy():
            uses = [last_use[c] for c in feeds[u.index] if c in last_use]
            if uses:
                last_use[u.index] = max(uses)

    stages = [0] * len(units)
    orders = [0] * len(units)
    next_order = 0
    for u in units:
        if first[u.index] and u.index in last_use:
            continue
        stages[u.index], orders[u.index] = num_stages, next_order
        next_order += 1
        for v in units:
            if first[v.index] and last_use.get(v.index) == u.index:
                stages[v.index], orders[v.index] = 0, next_order
                next_order += 1
    attached = [u.index for u in units if first[u.index] and u.index in last_use]
    if attached and num_stages >= 2 and min(orders[i] for i in attached) > max(
            (orders[u.index] for u in units if u.index not in attached), default=-1):
        for u in units:
            orders[u.index] = (orders[u.index] + len(attached)) % len(units)
            if u.index not in attached:
                stages[u.index] -= 1
    if len(set(stages)) == 1:
        return None
    return stages, orders


def _int_list(loop: tirx.For, key: str) -> list[int] | None:
    ann = loop.annotations
    return [int(x) for x in ann[key]] if key in ann and len(ann[key]) else None


def _annotated(loop: tirx.For, annotations: dict) -> tirx.For:
    return tirx.For(loop.loop_var, loop.min, loop.extent, loop.kind, loop.body, loop.thread_binding, annotations,
                    loop.step)


@dataclass(frozen=True)
class SharedBudget:
    """The kernel's shared tiles (bytes of one copy each), the groups of them in use at the same time, and the
    target's shared memory per block."""
    tiles: dict
    live_together: tuple  # tuples of tiles, one per statement of the kernel's block (shared_memory_lifetimes.py)
    limit: int

    def needed(self, units: list[Unit], stages: list[int], orders: list[int]) -> int:
        """The most bytes in use at once, the loop's tiles counted with the copies the schedule gives them: tiles
        in use at different times share bytes (PlanDynamicSharedMemory places them so)."""
        def nbytes(buf):
            copies = version_count(buf, units, stages, orders) if any(buf in u.writes for u in units) else 1
            return -(-self.tiles[buf] * copies // SMEM_ROUNDING) * SMEM_ROUNDING

        return max((sum(nbytes(buf) for buf in group) for group in self.live_together), default=0)


SMEM_ROUNDING = 1024  # tiles are placed at (at least) this alignment in the dynamic arena


def shared_budget(func: tirx.PrimFunc) -> SharedBudget | None:
    target = func.attrs["target"] if func.attrs is not None and "target" in func.attrs else None
    if target is None or "max_shared_memory_per_block" not in target.attrs:
        return None
    tiles, allocs = {}, []

    def visit(node):
        buf = node.buffer
        if scope_of(buf) in SHARED_SCOPES and all(as_int(e) is not None for e in buf.ty.shape):
            count = 1
            for e in buf.ty.shape:
                count *= as_int(e)
            tiles[buf] = count * dtype_bytes(buf.ty.dtype.dtype)
            allocs.append(node)

    tvm_ffi.structural_walk(func.body, [(tirx.AllocBuffer, visit)], order="pre")
    lifetimes = tile_lifetimes(func.body, allocs) if allocs else None
    if lifetimes is None:  # no statement order to go by: every tile in use throughout
        live_together = (tuple(tiles),)
    else:
        live_together = tuple(tuple(buf for buf in tiles if _covers(lifetimes.spans[buf], index))
                              for index in range(len(lifetimes.seq.seq)))
    return SharedBudget(tiles, live_together, int(target.attrs["max_shared_memory_per_block"]))


def _covers(span: tuple[int, int], index: int) -> bool:
    return span[0] <= index <= span[1]


@dataclass(frozen=True)
class StageCap:
    """At most `stages` stages for a default schedule: a lowering with the requested ones planned `needed` bytes of
    shared memory, past the target's `limit` (fit_pipeline_stages.py, which warns once the lowering fits)."""
    stages: int
    needed: int
    limit: int
    lowered: list = field(default_factory=list)  # (loop's location, its num_stages) for each loop given fewer


def _capped(units: list[Unit], num_stages: int, schedule: tuple, cap: StageCap | None, loop: tirx.For) -> tuple:
    """`num_stages` as given unless a lowering with them did not fit shared memory: then `cap.stages` (noted in
    `cap.lowered`). Upstream's num_stages is a request, and the user's GEMM (256x256x64, three stages: 192 KB) must
    still run on mp_22's 72 KB. At `cap.stages` 0 the loop is not pipelined (None): its copies then complete in the
    iteration that reads them, so tiles each iteration rewrites whole can share bytes (MarkRewrittenTiles)."""
    if cap is None or num_stages <= cap.stages:
        return schedule
    fewer = default_schedule(units, cap.stages) if cap.stages > 0 else None  # 0: the loop runs in order
    if fewer is None and cap.stages > 0:
        return schedule
    cap.lowered.append((loc_of(loop), num_stages))
    return fewer


def plan_loop(loop: tirx.For, cap: StageCap | None = None, views: dict | None = None) -> tirx.For:
    ann = loop.annotations
    stage, order = _int_list(loop, PIPELINE_STAGE), _int_list(loop, PIPELINE_ORDER)
    num_stages = int(ann[PIPELINE_STAGES]) if PIPELINE_STAGES in ann else 0
    kept = {str(k): v for k, v in ann.items() if str(k) not in _USER_KEYS and str(k) != PIPELINE_GROUP}
    if stage is None and order is None and num_stages <= 0:
        return _annotated(loop, kept)
    body = pipeline_units(loop, views)
    units = body.units
    if (stage is None) != (order is None):
        raise CompileError("T.Pipelined: give both stage= and order= (one entry per statement), or neither",
                           loc_of(loop))
    if stage is not None:
        if len(stage) != len(units) or len(order) != len(units):
            raise CompileError(
                f"T.Pipelined: stage= and order= need one entry per statement of the loop body ({len(units)}, "
                f"scalar bindings not counted); got {len(stage)} and {len(order)}", loc_of(loop))
        if min(stage) < 0 or sorted(order) != list(range(len(units))):
            raise CompileError(f"T.Pipelined: stage={stage} must be non-negative and order={order} a permutation "
                               f"of 0..{len(units) - 1}", loc_of(loop))
        schedule = (stage, order)
    else:
        schedule = default_schedule(units, num_stages)
        if schedule is not None:
            schedule = _capped(units, num_stages, schedule, cap, loop)
    if schedule is None:
        return _annotated(loop, kept)
    check_dependencies(units, *schedule, loop)
    kept[SCHEDULE_STAGE] = list(schedule[0])
    kept[SCHEDULE_ORDER] = list(schedule[1])
    if PIPELINE_GROUP in ann:
        kept[PIPELINE_GROUP] = ann[PIPELINE_GROUP]
    return _annotated(loop, kept)


def pipeline_planning(func: tirx.PrimFunc, cap: StageCap | None = None) -> tirx.PrimFunc:
    views = shared_tile_views(func.body)

    def on_for(node: Any, mutator: Any) -> Any:
        node = mutator.default_mutate(node)
        ann = node.annotations
        if not any(k in ann for k in _USER_KEYS):
            return node
        return plan_loop(node, cap, views)

    return tvm_ffi.structural_mutate(func, [(tirx.For, on_for)])


def PipelinePlanning(cap: StageCap | None = None):  # noqa: N802 - a pass, named as TVM names passes
    return tl_pass("PipelinePlanning", lambda func: pipeline_planning(func, cap))


def requested_stages(func: tirx.PrimFunc) -> int:
    """The most num_stages a `T.Pipelined` loop of `func` asks for with the default schedule (0: none)."""
    found = [0]

    def visit(node):
        ann = node.annotations
        if PIPELINE_STAGES in ann and PIPELINE_STAGE not in ann and PIPELINE_ORDER not in ann:
            found[0] = max(found[0], int(ann[PIPELINE_STAGES]))

    tvm_ffi.structural_walk(func.body, [(tirx.For, visit)], order="pre")
    return found[0]
