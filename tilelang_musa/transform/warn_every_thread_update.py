"""WarnEveryThreadUpdate: warn about a read-modify-write of one shared element that every thread of the block runs.

A statement of the kernel body outside any T.Parallel loop and any branch on the thread index runs on every thread.
`s[i] = s[i] + x` there, with `i` the same on every thread, is a data race: each thread reads the element and
writes it back, so the result depends on the threads' interleaving (TileOPs' GDN backward,
`dg_c[block_C - 1] = dg_c[block_C - 1] + ...`: the term is added anywhere from once to once per thread). The
simulator runs threads in turn and adds it once per thread; a GPU usually adds it about once.

Only the read-modify-write is reported: every thread storing the same value (`s[0] = 0`) is common and benign, and
so is an idempotent update by a value the same on every thread (`s[0] = T.max(s[0], A[0])`, min, `|`, `&`). A
TileLangWarning names the statement and its source line; nothing changes in the program. The check is
conservative: an index or condition that reads a per-thread value (a local, a fragment, anything loaded through
a thread-dependent index) counts as thread-dependent, so it stays silent there.
"""

from __future__ import annotations

import warnings
from typing import Any

import tvm
import tvm_ffi
from tvm import tirx

from ..diagnostics import TileLangWarning
from ..ir.attrs import WS_ATTR
from ..ir.source_lines import statement_source, user_line
from ..ir.utils import TensorLoad, Var, as_int, scope_of
from .pass_base import tl_pass

SHARED_SCOPES = ("shared", "shared.dyn")
UNIFORM_LOAD_SCOPES = ("global", "shared", "shared.dyn")
PER_THREAD_CALLS = ("tl.get_lane_idx", "tl.get_warp_idx", "tl.get_warp_idx_sync", "tl.get_warp_group_idx",
                    "tirx.call_extern", "tirx.call_pure_extern", "tirx.tvm_warp_shuffle", "tl.shfl_sync")
# max(max(x, v), v) == max(x, v), likewise min, | and &: applied by any number of threads in any order
IDEMPOTENT_OPS = (tirx.Max, tirx.Min, tirx.BitwiseOr, tirx.BitwiseAnd)


def _is_element(load: Any, store: Any) -> bool:
    """Whether `load` reads the element that `store` writes (the same buffer, structurally equal indices)."""
    return (load.source.same_as(store.buffer) and len(load.indices) == len(store.indices)
            and all(tvm.ir.structural_equal(a, b) for a, b in zip(load.indices, store.indices)))


def _reads_element(expr: Any, store: Any) -> bool:
    """Whether `expr` loads the element that `store` writes."""
    found = False

    def on_load(load: Any) -> None:
        nonlocal found
        found = found or _is_element(load, store)

    tvm_ffi.structural_walk(expr, [(TensorLoad, on_load)])
    return found


class _Walker:
    """One walk of the statements every thread (or every thread of a T.ws region) runs, noting the shared
    read-modify-writes there with the conditions and bounds they run under; whether those read a per-thread value
    is asked afterwards, of the few candidates only (most functions have none: no expression is walked then)."""

    def __init__(self):
        self.thread_vars: set = set()  # the thread indices
        self.block_threads = 1
        self.defined: dict = {}  # var -> the expressions its value is computed from (a Bind's value, a loop's bounds)
        self.per_thread: dict = {}  # var -> whether its value can differ between threads (asked lazily, memoized)
        self.candidates: list[tuple[Any, tuple, Any]] = []  # (store, conditions around it, its T.ws region)

    def depends_on_thread(self, expr: Any) -> bool:
        found = False
        seen: list = []

        def on_load(load: Any) -> None:
            nonlocal found
            if scope_of(load.source) not in UNIFORM_LOAD_SCOPES:
                found = True  # a local / fragment value: per thread

        def on_call(call: Any) -> None:
            nonlocal found
            if not isinstance(call.op, tvm.ir.Op) or str(call.op.name) in PER_THREAD_CALLS:
                found = True  # a lane / warp index, or an extern call that may return a per-thread value

        tvm_ffi.structural_walk(expr, [(Var, seen.append), (TensorLoad, on_load), (tvm.ir.Call, on_call)])
        return found or any(self.var_per_thread(v) for v in seen)

    def var_per_thread(self, var: Any) -> bool:
        known = self.per_thread.get(var)
        if known is None:
            self.per_thread[var] = False  # (a definition never reads its own variable)
            known = var in self.thread_vars or any(self.depends_on_thread(e) for e in self.defined.get(var, ()))
            self.per_thread[var] = known
        return known

    def stmt(self, node: Any, conditions: tuple, region: Any) -> None:
        if isinstance(node, tirx.SeqStmt):
            for s in node.seq:
                self.stmt(s, conditions, region)
        elif isinstance(node, tirx.AttrStmt):
            if node.attr_key == "thread_extent" and str(node.node.thread_tag).startswith("threadIdx"):
                self.thread_vars.add(node.node.var)
                extent = as_int(node.value)
                self.block_threads = self.block_threads * extent if extent is not None else 0  # 0: not known
            elif node.attr_key == WS_ATTR and isinstance(node.body, tirx.IfThenElse) and node.body.else_case is None:
                # a T.ws region: every thread of its squads runs its body, as every thread of the block runs the
                # kernel's
                self.stmt(node.body.then_case, conditions, (str(node.value.value), node.body.condition))
                return
            self.stmt(node.body, conditions, region)
        elif isinstance(node, tirx.For):
            if node.kind != tirx.ForKind.SERIAL and node.kind != tirx.ForKind.UNROLLED:
                return  # T.Parallel (each thread its share), vectorized, thread-bound: not every thread's
            self.defined[node.loop_var] = (node.min, node.extent)
            self.stmt(node.body, conditions, region)
        elif isinstance(node, tirx.IfThenElse):
            # `if tx == 0:` runs on some threads only: its condition, asked later, must read no per-thread value
            inner = conditions + (node.condition,)
            self.stmt(node.then_case, inner, region)
            if node.else_case is not None:
                self.stmt(node.else_case, inner, region)
        elif isinstance(node, tirx.While):
            self.stmt(node.body, conditions + (node.condition,), region)
        elif isinstance(node, tirx.Bind):
            self.defined[node.var] = (node.value,)
        elif isinstance(node, tirx.BufferStore):
            if scope_of(node.buffer) in SHARED_SCOPES and _reads_element(node.value, node):
                self.candidates.append((node, conditions, region))

    def races(self, store: Any, conditions: tuple) -> bool:
        """Whether every thread that reaches `store` updates the one element it names, in no fixed order."""
        if any(self.depends_on_thread(i) for i in store.indices):
            return False  # each thread its own element (or one we cannot tell)
        if any(self.depends_on_thread(c) for c in conditions):
            return False  # some threads only
        return not self.idempotent_update(store)

    def idempotent_update(self, store: Any) -> bool:
        """`s[i] = T.max(s[i], v)` (min, `|`, `&`) with `v` the same on every thread: whatever the threads' order,
        every thread stores the same value, as a plain store of one value (benign) does."""
        value = store.value
        if not isinstance(value, IDEMPOTENT_OPS):
            return False
        operands = [value.a, value.b]
        own = [o for o in operands if isinstance(o, TensorLoad) and _is_element(o, store)]
        others = [o for o in operands if not (isinstance(o, TensorLoad) and _is_element(o, store))]
        # `T.max(s[i], s[i] + 1)` grows with each thread: not idempotent
        return (len(own) == 1 and len(others) == 1 and not self.depends_on_thread(others[0])
                and not _reads_element(others[0], store))


def _region_runs(condition: Any, block: int) -> list[tuple[int, int]] | None:
    """The [lo, hi) runs of linear thread ids of a T.ws region's condition (`lo <= tid and tid < hi`, or-ed, as
    language/warp_specialize.py builds it); None for another shape."""
    if isinstance(condition, tirx.Or):
        a, b = _region_runs(condition.a, block), _region_runs(condition.b, block)
        return None if a is None or b is None else a + b
    if isinstance(condition, tirx.And):
        a, b = _region_runs(condition.a, block), _region_runs(condition.b, block)
        if a is None or b is None or len(a) != 1 or len(b) != 1:
            return None
        return [(max(a[0][0], b[0][0]), min(a[0][1], b[0][1]))]
    if isinstance(condition, tirx.LE) and as_int(condition.a) is not None:
        return [(as_int(condition.a), block)]
    if isinstance(condition, tirx.LT) and as_int(condition.b) is not None:
        return [(0, as_int(condition.b))]
    return None


def every_thread_updates(func: tirx.PrimFunc) -> list[tuple[Any, Any, Any]]:
    """(store, (file, line) or None, region) for each read-modify-write of one shared element that every thread of
    the block, or of a T.ws region (region: (label, [(lo, hi) thread runs] or None)), runs."""
    walker = _Walker()
    walker.stmt(func.body, (), None)
    if not walker.candidates or walker.block_threads == 1:
        return []  # a block of one thread: its updates are in program order
    found = []
    for store, conditions, region in walker.candidates:
        runs = None
        if region is not None:
            runs = _region_runs(region[1], walker.block_threads) if walker.block_threads else None
            if runs is not None and sum(hi - lo for lo, hi in runs) <= 1:
                continue  # a region of one thread
        if walker.races(store, conditions):
            found.append((store, user_line(store.span), None if region is None else (region[0], runs)))
    return found


def _describe(store: Any, where: Any, region: Any = None) -> str:
    index = ", ".join(str(i) for i in store.indices)
    text = statement_source(where[0], where[1]) if where is not None else ""
    statement = f"`{text}`" if text else f"the store to `{store.buffer.name}[{index}]`"
    loc = f" at {where[0]}:{where[1]}" if where is not None else ""
    if region is None:
        threads = "the block (it is outside any T.Parallel and any branch on the thread index)"
    else:
        label, runs = region
        ids = "" if runs is None else " (threads " + ", ".join(f"{lo}..{hi - 1}" for lo, hi in runs) + ")"
        threads = (f"the region {label}{ids} (it is outside any T.Parallel and any other branch on the thread "
                   f"index)")
    return (f"{statement}{loc} reads and writes one element of shared `{store.buffer.name}` on every thread of "
            f"{threads}: a data race, the result depends on the threads' order. Run it on one thread "
            f"(`if tx == 0:`) between barriers, or use T.atomic_add")


def WarnEveryThreadUpdate():  # noqa: N802 - a pass
    def run(func: tirx.PrimFunc) -> tirx.PrimFunc:
        for store, where, region in every_thread_updates(func):
            message = _describe(store, where, region)
            if where is not None:  # reported at the user's line, as a warning of that file
                warnings.warn_explicit(message, TileLangWarning, where[0], where[1])
            else:
                warnings.warn(message, TileLangWarning, stacklevel=2)
        return func

    return tl_pass("WarnEveryThreadUpdate", run)
