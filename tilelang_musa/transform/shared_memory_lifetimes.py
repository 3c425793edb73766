"""When each shared tile is in use, over the statements of the block that allocates the tiles (for
PlanDynamicSharedMemory, which lets tiles whose uses do not overlap share bytes).

The unit is one statement of that block, the innermost SeqStmt holding the tiles' AllocBuffer statements: a loop, a
branch or a nest counts as a whole, so a tile used anywhere inside a loop is live for all of it (values carried from one
iteration to the next stay safe). A statement that leaves shared memory being read after it ends (a TME store, or a
gemm that returns before its reads are done, it does not wait for) leaves its tiles in use to the end of the block.
Every thread runs these statements, so a block-wide barrier placed between two of them orders all accesses before it
against all after it. A view of a tile as another dtype (ir/tile_views.py) is the tile's bytes: a statement that
references the view uses the tile.

Finer, for a kernel that would not fit otherwise (`temporaries_per_statement`): the loops and branches among those
statements that every thread runs alike (a serial loop with bounds the same for all threads, an `if` without else on
a condition the same for all threads, around several statements) are opened, and each statement of an opened body
counts on its own; positions number the statements in order, an opened body in place of its loop or branch. A tile
the compiler made (TEMPORARY_ANNOTATION: a staged gemm operand, a layout exchange, a reduction's scratch) holds
nothing from one use to the next: each of its reads reads what the statements just before it wrote whole. So it is
in use over each run of statements from one that writes it to the last that reads that value: inside an opened body
whose first statement using it writes it (a call handed its address may also read it), the body's own runs, in each
iteration; among the other statements, runs cut where a statement only writes it again after it was read. Finer
still (`rewritten_per_iteration`), a user's tile each iteration of a loop writes whole before reading it
(REWRITTEN_ANNOTATION, MarkRewrittenTiles) is in use from its first to its last statement of that loop's body, in
each iteration. Every other tile is in use over the whole of each opened statement it is used in. Two temporaries of one loop used one after the other alternate: in the next iteration the
earlier one follows the later one, which a barrier must separate too. A barrier inside an opened statement orders two
accesses only where each opened statement around it holds one of them (a loop may run no iteration, a branch may not
be taken).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import tvm
import tvm_ffi
from tvm import tirx

from ..ir.attrs import REWRITTEN_ANNOTATION, TEMPORARY_ANNOTATION
from ..ir.tile_views import shared_tile_views
from ..ir.utils import TensorLoad
from ..tileop.access_ptr import READ, WRITE, as_access
from ..tileop.tme_copy import TME_STORE, TME_STORE_WAIT
from .uniform_conditions import uniform_conditions

STORAGE_SYNC = "tirx.tvm_storage_sync"
UNUSED = (1 << 62, -1)  # the span of a tile nothing references: it overlaps no other span
_OPENED_LOOP_KINDS = (tirx.ForKind.SERIAL, tirx.ForKind.UNROLLED)


@dataclass(frozen=True)
class Use:
    """Positions `first`..`last`, during which a tile is in use. A barrier that separates it from an earlier user of
    its bytes goes before statement `index` of the statements `path` leads to (the indices of the opened statements
    from the block's statements; () for the block's statements themselves)."""
    first: int
    last: int
    path: tuple[int, ...]
    index: int


@dataclass(frozen=True)
class Barrier:
    """A block-wide barrier between the statements at positions below `position` and those above it, inside the
    opened statements at positions `around` (each a (first, last) pair)."""
    position: float
    around: tuple[tuple[int, int], ...]

    def orders(self, before: int, after: int) -> bool:
        """Whether every run from the statement at position `before` to the later one at `after` passes it."""
        return before < self.position < after and self._reached(before, after)

    def orders_around(self, loop: tuple[int, int], before: int, after: int) -> bool:
        """Whether every run from the statement at position `before` in an iteration of the opened `loop` to the
        one at `after`, not after it, in the next iteration passes it."""
        return loop in self.around and (self.position > before or self.position < after) and \
            self._reached(before, after)

    def _reached(self, before: int, after: int) -> bool:
        # each opened statement around it holds one of the two accesses: one around neither may not run at all
        return all(lo <= before <= hi or lo <= after <= hi for lo, hi in self.around)


@dataclass(frozen=True)
class Lifetimes:
    seq: tirx.SeqStmt  # the block's statements (positions are their indices unless one of them is opened)
    spans: dict  # tile -> (first, last) position of the statements that reference it; UNUSED for none
    uses: dict  # tile -> tuple of Use (one for each tile but a temporary, which may have several)
    barriers: tuple[Barrier, ...]  # the block-wide barriers among the statements, opened bodies included
    opened: dict = field(default_factory=dict)  # path of each opened statement -> its (first, last) positions
    loops: frozenset = frozenset()  # the paths of the opened statements that are loops

    def overlap(self, a, b) -> bool:
        return any(u.first <= v.last and v.first <= u.last for u in self.uses[a] for v in self.uses[b])

    def opened_around(self, path: tuple[int, ...]) -> tuple[tuple[int, int], ...]:
        """The (first, last) positions of the opened statements `path` leads through."""
        return tuple(self.opened[path[:depth]] for depth in range(1, len(path) + 1))

    def innermost_loop_around(self, a: Use, b: Use) -> tuple[int, int] | None:
        """The (first, last) positions of the innermost opened loop holding both uses (None: no loop holds both)."""
        holding = [self.opened[path] for path in self.loops
                   if self.opened[path][0] <= min(a.first, b.first) and max(a.last, b.last) <= self.opened[path][1]]
        return min(holding, key=lambda span: span[1] - span[0]) if holding else None


def _async_read_flag(name: str) -> str | None:
    """Which asynchronous read of shared memory a call (intrinsic or extern function name) starts or waits for."""
    if name in (TME_STORE, TME_STORE_WAIT):
        return name
    if name.startswith("tl::gemm_") and "_nowait<" in name:
        return "nowait_gemm"
    return "gemm_wait" if name.startswith("tl::sqmma_wait<") else None


def leaves_shared_memory_read(flags: frozenset) -> bool:
    """Whether a statement whose calls have these _async_read_flag flags leaves shared memory being read after it
    ends: a TME store, or a gemm that returns before its reads are done (`tl::gemm_..._nowait`), it does not wait
    for."""
    return (TME_STORE in flags and TME_STORE_WAIT not in flags) or ("nowait_gemm" in flags
                                                                   and "gemm_wait" not in flags)


def _contents(stmt: tirx.Stmt) -> tuple[set, frozenset]:
    """The variables `stmt` references, and the _async_read_flag flags of its calls."""
    found: set = set()
    flags: set = set()

    def on_call(c):
        name = str(getattr(c.op, "name", ""))
        flag = _async_read_flag(str(c.args[0].value) if name == "tirx.call_extern" else name)
        if flag is not None:
            flags.add(flag)

    tvm_ffi.structural_walk(stmt, [(tvm.ir.expr.Var, lambda v: found.add(v)), (tvm.ir.Call, on_call)])
    return found, frozenset(flags)


def _reads_writes(stmt: tirx.Stmt, tile) -> tuple[bool, bool]:
    """Whether `stmt` reads and whether it writes `tile` (an address handed to a callee: as its tl.access_ptr
    mark says, both without one)."""
    reads = writes = False
    taken: list = []  # the loads whose address a callee takes

    def on_call(c):
        nonlocal reads, writes
        access = as_access(c)
        name = str(getattr(c.op, "name", ""))
        if access is None and name != "tirx.address_of":
            return
        element = access.element if access is not None else c.args[0]
        if any(element.same_as(t) for t in taken) or not isinstance(element, TensorLoad):
            return
        taken.append(element)
        if element.source.same_as(tile):
            rw = access.rw if access is not None else READ | WRITE
            reads, writes = reads or bool(rw & READ), writes or bool(rw & WRITE)

    def on_load(load):
        nonlocal reads
        if load.source.same_as(tile) and not any(load.same_as(t) for t in taken):
            reads = True

    def on_store(store):
        nonlocal writes
        writes = writes or store.buffer.same_as(tile)

    tvm_ffi.structural_walk(stmt, [(tvm.ir.Call, on_call), (TensorLoad, on_load), (tirx.BufferStore, on_store)],
                            order="pre")
    return reads, writes


def is_block_barrier(stmt: tirx.Stmt) -> bool:
    """`tvm_storage_sync("shared"[.dyn])` over the whole block (no barrier id, no thread count)."""
    call = stmt.value if isinstance(stmt, tirx.Evaluate) else None
    return (isinstance(call, tvm.ir.Call) and str(getattr(call.op, "name", "")) == STORAGE_SYNC
            and len(call.args) == 1)


def block_barrier() -> tirx.Stmt:
    return tirx.Evaluate(tirx.call_intrin("int32", STORAGE_SYNC, "shared"))


def opened_body(stmt: tirx.Stmt, uniform) -> tirx.SeqStmt | None:
    """The statements of a loop or branch every thread runs alike (a serial loop whose bounds, an `if` without else
    whose condition, are the same for all threads), if there are several; else None."""
    if isinstance(stmt, tirx.For) and stmt.kind in _OPENED_LOOP_KINDS and stmt.thread_binding is None \
            and uniform(stmt.min) and uniform(stmt.extent):
        body = stmt.body
    elif isinstance(stmt, tirx.IfThenElse) and stmt.else_case is None and uniform(stmt.condition):
        body = stmt.then_case
    else:
        return None
    return body if isinstance(body, tirx.SeqStmt) else None


def with_opened_body(stmt: tirx.Stmt, body: tirx.SeqStmt) -> tirx.Stmt:
    """The loop or branch `stmt` (opened_body's) around `body` instead."""
    if isinstance(stmt, tirx.For):
        return tirx.For(stmt.loop_var, stmt.min, stmt.extent, stmt.kind, body, stmt.thread_binding, stmt.annotations,
                        stmt.step)
    return tirx.IfThenElse(stmt.condition, body, None)


class _Statements:
    """The block's statements numbered in order, each opened body in place of its loop or branch; what each
    statement (an opened one: its body) references and its asynchronous reads, keyed by its path (indices from the
    block's statements down)."""

    def __init__(self, seq: tirx.SeqStmt, opened: Callable[[tirx.Stmt], tirx.SeqStmt | None], views: dict):
        self.opened_body = opened
        self.views = views  # a view of a tile as another dtype -> the tile
        self.bodies: dict = {}  # path of a SeqStmt (() for the block's) -> the SeqStmt
        self.ranges: dict = {}  # path of a statement -> its (first, last) positions
        self.opened: dict = {}  # path of an opened statement -> its (first, last) positions
        self.loops: set = set()  # the paths of the opened loops
        self.refs: dict = {}  # path of a statement -> the variables it references
        self.flags: dict = {}  # path of a statement -> the _async_read_flag flags of its calls
        self.barriers: list = []  # (position, path of the SeqStmt holding it) of each block-wide barrier
        self.count = 0
        self._number(seq, ())

    def _number(self, seq: tirx.SeqStmt, path: tuple) -> tuple[set, frozenset]:
        self.bodies[path] = seq
        referenced, flags = set(), frozenset()
        for index, stmt in enumerate(seq.seq):
            key, first = path + (index,), self.count
            body = self.opened_body(stmt)
            if body is not None:
                refs, stmt_flags = self._number(body, key)
                self.opened[key] = (first, self.count - 1)
                if isinstance(stmt, tirx.For):
                    self.loops.add(key)
            else:
                refs, stmt_flags = (set(), frozenset()) if isinstance(stmt, tirx.AllocBuffer) else _contents(stmt)
                if self.views:
                    refs = {self.views.get(v, v) for v in refs}
                if is_block_barrier(stmt):
                    self.barriers.append((first, path))
                self.count += 1
            self.refs[key], self.flags[key], self.ranges[key] = refs, stmt_flags, (first, self.count - 1)
            referenced |= refs
            flags |= stmt_flags
        return referenced, flags

    def leaves(self) -> list:
        """The paths of the statements not opened."""
        return [key for key in self.refs if key not in self.opened]


def tile_lifetimes(body: tirx.Stmt, allocs: list, within_uniform_branch: bool = False,
                   temporaries_per_statement: bool = False, rewritten_per_iteration: bool = False) -> Lifetimes | None:
    """The lifetimes of the tiles `allocs` allocates (AllocBuffer nodes), over the statements of the innermost SeqStmt
    holding all of them (a tile allocated inside one of its statements, say a reduction's scratch inside a loop, is
    in use during that statement), or None when no SeqStmt holds them all (then no tile may share bytes with another).
    A tile no statement references has span UNUSED. With `within_uniform_branch`, where every use is inside one
    statement that is an `if` without else whose condition all threads evaluate alike, over the statements of its
    body instead (repeatedly): a barrier placed between two of them is still reached by every thread. With
    `temporaries_per_statement`, the compiler's temporaries are in use statement by statement inside the loops and
    branches every thread runs alike (see the module's docstring); with `rewritten_per_iteration` too, a user's tile
    each iteration of a loop writes whole before reading (REWRITTEN_ANNOTATION) from its first to its last
    statement of the loop's body, in each iteration."""
    seq = _innermost_seq_holding(body, allocs)
    if seq is None:
        return None
    tiles = [a.buffer for a in allocs]
    views = shared_tile_views(body)
    uniform = uniform_conditions(body) if within_uniform_branch or temporaries_per_statement else None
    if within_uniform_branch:
        seq = _inside_uniform_branch(seq, tiles, uniform, views)
    temporaries = [a.buffer for a in allocs if temporaries_per_statement and a.annotations is not None
                   and bool(a.annotations.get(TEMPORARY_ANNOTATION, False))]
    rewritten = [a for a in allocs if rewritten_per_iteration and a.annotations is not None
                 and REWRITTEN_ANNOTATION in a.annotations]
    statements = _Statements(seq, lambda stmt: opened_body(stmt, uniform) if temporaries or rewritten else None,
                             views)
    uses = _block_uses(statements, tiles)
    leaves = statements.leaves()
    for tile in temporaries:
        # one of its statements leaves it being read: it stays in use as the block's statements say
        if not any(tile in statements.refs[key] and leaves_shared_memory_read(statements.flags[key])
                   for key in leaves):
            uses[tile] = tuple(_temporary_uses(statements, tile, ()))
    for alloc in rewritten:
        per_iteration = _rewritten_uses(statements, alloc.buffer, str(alloc.annotations[REWRITTEN_ANNOTATION]))
        if per_iteration is not None:
            uses[alloc.buffer] = per_iteration
    spans = {tile: (min(u.first for u in uses[tile]), max(u.last for u in uses[tile])) if uses[tile] else UNUSED
             for tile in tiles}
    opened = dict(statements.opened)
    barriers = tuple(Barrier(position, tuple(opened[path[:d]] for d in range(1, len(path) + 1)))
                     for position, path in statements.barriers)
    return Lifetimes(seq, spans, uses, barriers, opened, frozenset(statements.loops))


def _block_uses(statements: _Statements, tiles: list) -> dict:
    """Each tile's one Use: from the first to the last of the block's statements that reference it (to the end of
    the block past one that leaves shared memory being read)."""
    seq = statements.bodies[()]
    found: dict = {}
    for index, stmt in enumerate(seq.seq):
        if isinstance(stmt, tirx.AllocBuffer):
            continue
        key = (index,)
        last = len(seq.seq) - 1 if leaves_shared_memory_read(statements.flags[key]) else index
        for var in statements.refs[key]:
            if var in found:
                found[var] = (found[var][0], max(found[var][1], last))
            elif any(var.same_as(t) for t in tiles):
                found[var] = (index, last)
    uses = {}
    for tile in tiles:  # referenced by no statement: never accessed, in use nowhere
        if tile not in found:
            uses[tile] = ()
            continue
        first, last = found[tile]
        uses[tile] = (Use(statements.ranges[(first,)][0], statements.ranges[(last,)][1], (), first),)
    return uses


def _temporary_uses(statements: _Statements, tile, path: tuple) -> list[Use]:
    """A temporary's uses among the statements `path` leads to: those inside each opened statement whose body
    writes it first and reads it, and one for each run of the others from a statement that only writes it to the
    last before the next such statement after a read."""
    uses, runs = [], []
    for index, stmt in enumerate(statements.bodies[path].seq):
        key = path + (index,)
        if tile not in statements.refs[key]:
            continue
        if key in statements.opened and _written_then_read(statements.bodies[key], tile):
            uses.extend(_temporary_uses(statements, tile, key))
            continue
        reads, writes = _reads_writes(stmt, tile)
        if not runs or (writes and not reads and runs[-1][2]):
            runs.append([index, index, reads])  # a new value: what the run before held is read no more
        else:
            runs[-1][1:] = [index, runs[-1][2] or reads]
    for first, last, _ in runs:
        uses.append(Use(statements.ranges[path + (first,)][0], statements.ranges[path + (last,)][1], path, first))
    return uses


def _rewritten_uses(statements: _Statements, tile, loop_name: str) -> tuple[Use] | None:
    """A user's tile that each iteration of the loop `loop_name` writes whole before reading (MarkRewrittenTiles):
    one Use over its statements in the loop's body, the innermost opened loop holding all of them. None where that
    loop is not this one, or a statement leaves the tile being read after it ends."""
    using = [key for key in statements.leaves() if tile in statements.refs[key]]
    if not using or any(leaves_shared_memory_read(statements.flags[key]) for key in using):
        return None
    holding = [key for key in statements.loops if all(len(k) > len(key) and k[:len(key)] == key for k in using)]
    if not holding:
        return None
    key = max(holding, key=len)
    if statements.bodies[key[:-1]].seq[key[-1]].loop_var.name != loop_name:
        return None
    found = [i for i in range(len(statements.bodies[key].seq)) if tile in statements.refs[key + (i,)]]
    return (Use(statements.ranges[key + (found[0],)][0], statements.ranges[key + (found[-1],)][1], key, found[0]),)


def _written_then_read(body: tirx.SeqStmt, tile) -> bool:
    """Whether the body's first statement using `tile` writes it (a call handed its address may read it after) and
    the body reads it: each run of the body then reads what it wrote, not what ran before it. A body that only
    writes it or only reads it (a copy's own loop) holds a part of a use."""
    accesses = [rw for rw in (_reads_writes(stmt, tile) for stmt in body.seq) if rw != (False, False)]
    return bool(accesses) and accesses[0][1] and any(reads for reads, _ in accesses)


def _inside_uniform_branch(seq: tirx.SeqStmt, tiles: list, uniform, views: dict) -> tirx.SeqStmt:
    while True:
        using = [stmt for stmt in seq.seq if not isinstance(stmt, tirx.AllocBuffer)
                 and any(any(var.same_as(t) for t in tiles) for var in _referenced_vars(stmt, views))]
        if len(using) != 1:
            return seq
        branch = using[0]
        if not isinstance(branch, tirx.IfThenElse) or branch.else_case is not None or \
                not isinstance(branch.then_case, tirx.SeqStmt) or not uniform(branch.condition):
            return seq
        seq = branch.then_case


def _referenced_vars(stmt: tirx.Stmt, views: dict) -> set:
    """The variables `stmt` references, a view of a tile (in `views`: view -> tile) as the tile."""
    found: set = set()
    tvm_ffi.structural_walk(stmt, [(tvm.ir.expr.Var, lambda v: found.add(v))])
    return {views.get(v, v) for v in found} if views else found


def _innermost_seq_holding(body: tirx.Stmt, allocs: list) -> tirx.SeqStmt | None:
    wanted = [a.buffer for a in allocs]
    best: list = [None]

    def holds_all(seq: tirx.SeqStmt) -> bool:
        found: set = set()
        tvm_ffi.structural_walk(seq, [(tirx.AllocBuffer, lambda a: found.add(a.buffer))])
        return all(any(t.same_as(f) for f in found) for t in wanted)

    def visit(seq):  # the seqs holding them all are nested in one another, and walked outermost first
        if holds_all(seq):
            best[0] = seq

    tvm_ffi.structural_walk(body, [(tirx.SeqStmt, visit)], order="pre")
    return best[0]
