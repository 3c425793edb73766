"""The body of a `T.Pipelined` loop as the pipeline passes see it: a list of scheduled units.

A unit is one statement of the (flattened) loop body, or, with `group=[[...], ...]`, the statements a group lists.
`stage=` and `order=` give one entry per unit. Scalar bindings (`base: T.int32 = k * bk`) are not units: each unit
reads them at its own iteration after the pipeline moves it. A small one is substituted into the units that use
it; a large one (ir/large_bindings.py: a stream-K pair's rotation, a swizzled block index) stays a binding that
the pipeline emits again before the emitted units that read it (`Unit.binds`, replay_bindings; upstream TileLang
replays bindings the same way): substituted, it would be copied into every index of every emitted unit, for
expressions of kilobytes that every later pass walks. Allocations inside the body are hoisted before the loop, and
so are declarations of views (T.view) that read nothing the loop binds.

Both PipelinePlanning and InjectSoftwarePipeline build the units with `pipeline_units`, so the stage/order lists
the planner writes line up with what the injector reads.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import tvm
import tvm_ffi
from tvm import tirx

from ..errors import CompileError, SourceLoc
from ..ir.attrs import PIPELINE_GROUP
from ..ir.large_bindings import is_large
from ..ir.utils import is_buffer, loc_of, substitute
from ..tileop import Copy
from ..tileop.region import TensorRegion
from ..tileop.registry import is_tile_op, parse_tile_op

SHARED_SCOPES = ("shared", "shared.dyn")
GEMM_OP = "tl.tileop.gemm"
# Tile ops whose operands are read (all but the last region, which is written) - every other tile op is taken to
# read and write each region it names.
_READS_ALL_BUT_LAST = ("tl.tileop.copy", "tl.tileop.reduce", "tl.tileop.cumsum", "tl.tileop.transpose",
                       "tl.tileop.im2col")
_WRITES_ONLY = ("tl.tileop.fill",)


@dataclass
class Unit:
    index: int  # position in source order
    stmts: list  # the statements, small bindings substituted
    reads: frozenset = field(default_factory=frozenset)  # buffer Vars
    writes: frozenset = field(default_factory=frozenset)
    loc: SourceLoc | None = None
    binds: list = field(default_factory=list)  # the kept bindings its statements read, in order, to emit first

    @property
    def stmt(self) -> Any:
        return self.stmts[0] if len(self.stmts) == 1 else tirx.SeqStmt(self.stmts)

    def copies(self) -> list[Copy] | None:
        """The T.copys this unit is, if every statement is one (not under a condition)."""
        out = []
        for stmt in self.stmts:
            call = stmt.value if isinstance(stmt, tirx.Evaluate) else None
            if not (isinstance(call, tvm.ir.Call) and isinstance(call.op, tvm.ir.Op)
                    and str(call.op.name) == Copy.op_name):
                return None
            out.append(parse_tile_op(call))  # (a Copy: its op is Copy.op_name)
        return out

    def is_global_to_shared_copy(self) -> bool:
        """Every statement is a T.copy from global to shared memory (a load, a copy stage of the pipeline)."""
        copies = self.copies()
        return bool(copies) and all(c.src.scope == "global" and c.dst.scope in SHARED_SCOPES for c in copies)

    def describe(self) -> str:
        where = f" (line {self.loc.lineno})" if self.loc is not None else ""
        return f"statement {self.index}{where}"


def flatten(stmt: Any) -> list[Any]:
    if isinstance(stmt, tirx.SeqStmt):
        return [s for child in stmt.seq for s in flatten(child)]
    return [stmt]


def _stmt_loc(stmt: Any) -> SourceLoc | None:
    found: list[SourceLoc] = []

    def visit(node):
        if not found:
            loc = loc_of(node.value if isinstance(node, tirx.Evaluate) else node)
            if loc is None and isinstance(node, tvm.ir.Call) and node.attrs is not None and "tl.loc" in node.attrs:
                filename, line, col = str(node.attrs["tl.loc"]).rsplit(":", 2)
                loc = SourceLoc(filename, int(line), int(col))
            if loc is not None:
                found.append(loc)

    tvm_ffi.structural_walk(stmt, [(tirx.Evaluate, visit), (tirx.For, visit), (tvm.ir.Call, visit)], order="pre")
    return found[0] if found else None


def accesses(stmt: Any) -> tuple[frozenset, frozenset]:
    """The buffers `stmt` reads and writes (tile-op operands by the op's meaning, loads, stores, addresses)."""
    reads: set = set()
    writes: set = set()

    def on_call(call):
        if not isinstance(call.op, tvm.ir.Op):
            return
        name = str(call.op.name)
        regions = [a.source for a in call.args if isinstance(a, TensorRegion)]
        if is_tile_op(call):
            if name in _READS_ALL_BUT_LAST and regions:
                reads.update(regions[:-1])
                writes.add(regions[-1])
            elif name in _WRITES_ONLY:
                writes.update(regions)
            elif name == GEMM_OP:
                reads.update(regions)
                writes.add(regions[-1])
            else:
                reads.update(regions)
                writes.update(regions)
        elif name == "tirx.address_of":  # a call reading or writing through the address
            for arg in call.args:
                if hasattr(arg, "source") and is_buffer(arg.source):
                    reads.add(arg.source)
                    writes.add(arg.source)

    def on_load(load):
        if is_buffer(load.source):
            reads.add(load.source)

    def on_store(store):
        writes.add(store.buffer)

    tvm_ffi.structural_walk(stmt, [(tvm.ir.Call, on_call), (tvm.ir.expr.TensorLoad, on_load),
                                   (tirx.BufferStore, on_store)], order="pre")
    return frozenset(reads), frozenset(writes)


@dataclass
class PipelineBody:
    hoisted: list  # allocations and view declarations found in the body, to place before the loop
    units: list[Unit]


def _as_storage(found: tuple[frozenset, frozenset], views: dict | None) -> tuple[frozenset, frozenset]:
    """(reads, writes) with a view of a tile as another dtype (view -> tile in `views`) counted as its tile."""
    if not views:
        return found
    return tuple(frozenset(views.get(b, b) for b in names) for names in found)


def pipeline_units(loop: tirx.For, views: dict | None = None) -> PipelineBody:
    """The loop body's units. With `views` (ir/tile_views.py: view -> tile), a unit that accesses a view of a tile
    as another dtype reads or writes the tile (its bytes): the dependences and the versions are the tile's."""
    stmts = flatten(loop.body)
    hoisted = _declarations(loop, stmts)
    written: set = set()
    for s in stmts:
        if not isinstance(s, (tirx.AllocBuffer, tirx.Bind)):
            written |= _as_storage(accesses(s), views)[1]
    inlined: dict = {}
    kept: list = []
    plain: list = []
    for s in stmts:
        if any(s.same_as(h) for h in hoisted):
            continue
        if isinstance(s, tirx.Bind):
            value = substitute(s.value, inlined)
            _check_not_stale(loop, s.var, value, written, views)
            if is_large(value):
                kept.append(tirx.Bind(s.var, value))
            else:
                inlined[s.var] = value
            continue
        plain.append(substitute(s, inlined))
    groups = _groups(loop, len(plain))
    units = []
    for index, members in enumerate(groups):
        body = [plain[m] for m in members]
        binds = _kept_bindings_read(kept, body)
        reads, writes = _as_storage(accesses(tirx.SeqStmt([*binds, *body]) if len(body) + len(binds) > 1
                                             else body[0]), views)
        units.append(Unit(index, body, reads, writes, _stmt_loc(body[0]) or loc_of(loop), binds))
    return PipelineBody(hoisted, units)


def _declarations(loop: tirx.For, stmts: list) -> list:
    """The body's allocations, and its declarations of views (T.view: a DeclBuffer over a tile's or a tensor's
    storage) that read nothing the loop binds: names, not statements, so no unit of their own (upstream's views are
    no statement either). Emitted as a unit, a view's declaration would be guarded in the prologue and epilogue
    (`if iteration < n: declare`), and would declare the name for nothing after it."""
    bound = {loop.loop_var} | {s.var for s in stmts if isinstance(s, tirx.Bind)}

    def invariant(decl: tirx.DeclBuffer) -> bool:
        found = []
        tvm_ffi.structural_walk(decl, [(tvm.ir.expr.Var, lambda v: found.append(v) if v in bound else None)],
                                order="pre")
        return not found

    return [s for s in stmts if isinstance(s, tirx.AllocBuffer) or (isinstance(s, tirx.DeclBuffer) and invariant(s))]


def replay_bindings(binds: list, loop_var: Any, value: Any, shared: dict, key: Any = None) -> tuple[list, dict]:
    """Kept bindings (`Unit.binds`) emitted for the loop iteration where `loop_var` is `value`: (the Binds to emit,
    each kept variable -> the fresh variable bound to it here). A binding found in `shared` under (its variable,
    `key`) was emitted earlier in the same scope for the same iteration, and is read from there; the new ones are
    added to it."""
    emitted: list = []
    vmap: dict = {}
    for bind in binds:
        slot = (bind.var.__chandle__(), key)
        if slot not in shared:
            var = tvm.ir.expr.Var(bind.var.name, bind.var.ty)
            emitted.append(tirx.Bind(var, substitute(bind.value, {loop_var: value, **vmap})))
            shared[slot] = var
        vmap[bind.var] = shared[slot]
    return emitted, vmap


def _check_not_stale(loop: tirx.For, var: Any, value: Any, written: set, views: dict | None) -> None:
    stale = [b for b in _as_storage(accesses(value), views)[0] if b in written]
    if stale:
        raise CompileError(
            f"T.Pipelined: the binding `{var.name}` reads `{stale[0].name}`, which the pipelined loop writes; a "
            "binding is replayed where it is used, after the pipeline moves its users, so it would read another "
            "iteration's value. Store it in a buffer (T.alloc_local) instead", loc_of(loop))


def _kept_bindings_read(kept: list, body: list) -> list:
    """The kept bindings that `body` reads, directly or through another kept binding, in their order."""
    used: set = set()

    def mention(node):
        tvm_ffi.structural_walk(node, [(tvm.ir.expr.Var, lambda v: used.add(v.__chandle__()))], order="pre")

    for s in body:
        mention(s)
    needed = []
    for bind in reversed(kept):  # a binding reads only earlier ones
        if bind.var.__chandle__() in used:
            needed.append(bind)
            mention(bind.value)
    return needed[::-1]


def _groups(loop: tirx.For, count: int) -> list[list[int]]:
    ann = loop.annotations
    if PIPELINE_GROUP not in ann or not len(ann[PIPELINE_GROUP]):
        return [[i] for i in range(count)]
    groups = [[int(x) for x in g] for g in ann[PIPELINE_GROUP]]
    listed = sorted(x for g in groups for x in g)
    if listed != list(range(count)):
        raise CompileError(f"T.Pipelined: group={groups} must list each of the loop body's {count} statements "
                           f"(0..{count - 1}) exactly once", loc_of(loop))
    return groups


def version_count(buffer: Any, units: list[Unit], stages: list[int], orders: list[int]) -> int:
    """How many copies of `buffer` the schedule needs: the largest stage distance from a writer to a reader, + 1
    unless every reader at that distance comes before the writer in the order (it reads the old contents first)."""
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
