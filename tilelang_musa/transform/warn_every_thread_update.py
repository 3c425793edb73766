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

import linecache
import warnings
from typing import Any

import tvm
import tvm_ffi
from tvm import tirx

from ..diagnostics import TileLangWarning
from ..ir.source_lines import user_line
from ..ir.utils import TensorLoad, Var, scope_of, thread_info
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
    def __init__(self):
        self.thread_vars: set = set()  # vars whose value can differ between the threads of a block
        self.findings: list[tuple[Any, Any]] = []

    def depends_on_thread(self, expr: Any) -> bool:
        found = False

        def on_var(var: Any) -> None:
            nonlocal found
            if var in self.thread_vars:
                found = True

        def on_load(load: Any) -> None:
            nonlocal found
            if scope_of(load.source) not in UNIFORM_LOAD_SCOPES:
                found = True  # a local / fragment value: per thread

        def on_call(call: Any) -> None:
            nonlocal found
            if not isinstance(call.op, tvm.ir.Op) or str(call.op.name) in PER_THREAD_CALLS:
                found = True  # a lane / warp index, or an extern call that may return a per-thread value

        tvm_ffi.structural_walk(expr, [(Var, on_var), (TensorLoad, on_load), (tvm.ir.Call, on_call)])
        return found

    def bind(self, var: Any, value: Any) -> None:
        if self.depends_on_thread(value):
            self.thread_vars.add(var)

    def store(self, store: Any) -> None:
        if scope_of(store.buffer) not in SHARED_SCOPES:
            return
        if any(self.depends_on_thread(i) for i in store.indices):
            return  # each thread its own element (or one we cannot tell)
        if _reads_element(store.value, store) and not self.idempotent_update(store):
            self.findings.append((store, user_line(store.span)))

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

    def stmt(self, node: Any) -> None:
        if isinstance(node, tirx.SeqStmt):
            for s in node.seq:
                self.stmt(s)
        elif isinstance(node, tirx.AttrStmt):
            if node.attr_key == "thread_extent" and str(node.node.thread_tag).startswith("threadIdx"):
                self.thread_vars.add(node.node.var)
            self.stmt(node.body)
        elif isinstance(node, tirx.For):
            if node.kind != tirx.ForKind.SERIAL and node.kind != tirx.ForKind.UNROLLED:
                return  # T.Parallel (each thread its share), vectorized, thread-bound: not every thread's
            if self.depends_on_thread(node.min) or self.depends_on_thread(node.extent):
                self.thread_vars.add(node.loop_var)
            self.stmt(node.body)
        elif isinstance(node, tirx.IfThenElse):
            if self.depends_on_thread(node.condition):
                return  # `if tx == 0:`, T.ws regions: some threads only
            self.stmt(node.then_case)
            if node.else_case is not None:
                self.stmt(node.else_case)
        elif isinstance(node, tirx.While):
            if not self.depends_on_thread(node.condition):
                self.stmt(node.body)
        elif isinstance(node, tirx.Bind):
            self.bind(node.var, node.value)
        elif isinstance(node, tirx.BufferStore):
            self.store(node)


def every_thread_updates(func: tirx.PrimFunc) -> list[tuple[Any, Any]]:
    """(store, (file, line) or None) for each read-modify-write of one shared element that every thread runs."""
    extents = [e for tag, e in thread_info(func).extents.items() if tag.startswith("threadIdx")]
    if all(isinstance(e, tirx.IntImm) and e.value == 1 for e in extents):
        return []  # a block of one thread: its updates are in program order
    walker = _Walker()
    walker.stmt(func.body)
    return walker.findings


def _describe(store: Any, where: Any) -> str:
    index = ", ".join(str(i) for i in store.indices)
    text = linecache.getline(where[0], where[1]).strip() if where is not None else ""
    statement = f"`{text}`" if text else f"the store to `{store.buffer.name}[{index}]`"
    loc = f" at {where[0]}:{where[1]}" if where is not None else ""
    return (f"{statement}{loc} reads and writes one element of shared `{store.buffer.name}` on every thread of the "
            f"block (it is outside any T.Parallel and any branch on the thread index): a data race, the result "
            f"depends on the threads' order. Run it on one thread (`if tx == 0:`) between barriers, or use "
            f"T.atomic_add")


def WarnEveryThreadUpdate():  # noqa: N802 - a pass
    def run(func: tirx.PrimFunc) -> tirx.PrimFunc:
        for store, where in every_thread_updates(func):
            message = _describe(store, where)
            if where is not None:  # reported at the user's line, as a warning of that file
                warnings.warn_explicit(message, TileLangWarning, where[0], where[1])
            else:
                warnings.warn(message, TileLangWarning, stacklevel=2)
        return func

    return tl_pass("WarnEveryThreadUpdate", run)
