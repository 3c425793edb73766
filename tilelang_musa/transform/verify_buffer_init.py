"""VerifyBufferInit: warn when a kernel reads a shared, fragment or local buffer that nothing has written (upstream
main's check of the same name, on by default; `TL_DISABLE_BUFFER_INIT_CHECK` turns it off). Such a read sees what
the memory last held: right by luck on one device, NaN on another (upstream issue 2936: a T.gemm accumulating into
a fragment nobody cleared). It changes nothing and never fails a compile.

The question is "does anything write it", nothing finer, so that false reports stay rare:
- a parameter is the caller's to fill, whatever its scope; global memory is never reported, nor a T.alloc_var
  (it starts at zero);
- shared memory is written by some threads and read by others, ordered by barriers (a warp-specialized producer
  may come after its consumer in the body): a read is fine when any other statement or tile op writes the buffer;
- per-thread storage (fragments, locals) follows source order: a write before the read, even under a condition the
  read is not under, counts; one after it (a loop-carried value on the first iteration) does not;
- a store reads its right-hand side before it writes (`x[i] = x[i] + 1` alone reports x), and a tile op its inputs
  (T.gemm reads C unless `clear_accum=True`; a reduction without `clear` reads its destination);
- a buffer whose address escapes into a call that may write memory (`T.call_extern(..., T.address_of(s[0]))`,
  an intrinsic taking a pointer) counts as written by it.
Views (T.view / T.reshape, a dtype view) are their buffer. All findings of a kernel go in one warning.
"""

from __future__ import annotations

import logging
from typing import Any

import tvm
import tvm_ffi
from tvm import tirx

from ..ir.attrs import VIEWS_ATTR
from ..ir.options import CompileOptions
from ..ir.source_lines import user_line
from ..ir.utils import TensorLoad, may_write_memory, scope_of
from ..tileop import is_tile_op, parse_tile_op
from ..tileop.atomic import Atomic
from ..tileop.copy import Copy
from ..tileop.fill import Fill
from ..tileop.finalize_reducer import FinalizeReducer
from ..tileop.gemm import Gemm
from ..tileop.im2col import Im2Col
from ..tileop.reduce import Reduce
from ..tileop.region import Region
from ..tileop.scan import Scan
from ..tileop.tme_copy import TmeCopy
from ..tileop.transpose import Transpose
from .pass_base import tl_pass

logger = logging.getLogger("tilelang")
MESSAGE = "Buffer read before initialization"
# Global memory is the caller's; barriers hold state their intrinsics set; a T.alloc_var starts at zero.
EXEMPT_SCOPES = ("global", "shared.barrier", "shared.cluster_barrier", "local.var")
GEMM_HINT = ("T.gemm accumulates into C, so an uninitialized accumulator adds into stale contents. Add `T.clear(C)` "
             "before the gemm, or pass `clear_accum=True`.")


def tile_op_accesses(op: Any) -> tuple[list, list]:
    """(regions the op reads before writing anything, regions it writes); None for an op this check does not know
    (its buffers count as written)."""
    if isinstance(op, Copy | TmeCopy | Transpose):
        return [op.src], [op.dst]
    if isinstance(op, Fill):
        return [], [op.dst]
    if isinstance(op, Gemm):
        return [op.A, op.B] + ([] if op.clear_accum else [op.C]), [op.C]
    if isinstance(op, Reduce):
        return [op.src] + ([] if op.clear else [op.dst]), [op.dst]
    if isinstance(op, Scan):
        return [op.src], [op.dst]
    if isinstance(op, Atomic):
        value = [op.value] if isinstance(op.value, Region) else []
        return value + [op.dst], [op.dst]
    if isinstance(op, Im2Col):
        return [op.img], [op.col]
    if isinstance(op, FinalizeReducer):
        return [op.reducer], [op.reducer]
    return None


def _may_write(call: Any) -> bool:
    """An address taken (`&buf[i]` handed to an intrinsic) counts as a write, besides what may_write_memory says."""
    return (isinstance(call.op, tvm.ir.Op) and str(call.op.name) == "tirx.address_of") or may_write_memory(call)


def _buffers_in(node: Any) -> list:
    """Every buffer `node` names (loads, `buffer_data(b)`, a buffer passed as itself)."""
    found: list = []

    def on_load(load: Any) -> None:
        found.append(load.source)

    def on_call(call: Any) -> None:
        if isinstance(call.op, tvm.ir.Op) and str(call.op.name) == "tirx.buffer_data":
            found.append(call.args[0])

    def on_var(var: Any) -> None:
        if isinstance(getattr(var, "ty", None), tirx.BufferType):
            found.append(var)

    tvm_ffi.structural_walk(node, [(TensorLoad, on_load), (tvm.ir.Call, on_call), (tvm.ir.expr.Var, on_var)])
    return found


class _Storage:
    """Buffers by the storage they name: a view is the buffer it views."""

    def __init__(self, func: tirx.PrimFunc):
        self.view_of: dict[int, Any] = {}
        if func.attrs is not None and VIEWS_ATTR in func.attrs:
            for view, base in func.attrs[VIEWS_ATTR].items():
                self.view_of[view.__chandle__()] = base

        def on_decl(node: Any) -> None:
            data = node.data
            if isinstance(data, tvm.ir.Call) and str(data.op.name) == "tirx.buffer_data":
                self.view_of[node.buffer.__chandle__()] = data.args[0]

        tvm_ffi.structural_walk(func.body, [(tirx.DeclBuffer, on_decl)])
        self.params = {self.key(p) for p in func.params if isinstance(p.ty, tirx.BufferType)}

    def root(self, buffer: Any) -> Any:
        seen = 0
        while buffer.__chandle__() in self.view_of and seen < 16:
            buffer, seen = self.view_of[buffer.__chandle__()], seen + 1
        return buffer

    def key(self, buffer: Any) -> int:
        return self.root(buffer).__chandle__()


class _Walk:
    """One walk of the body in source order. With `writers` None it records who writes each buffer (the
    statement or tile-op call); given them, it checks every read."""

    def __init__(self, storage: _Storage, writers: dict | None):
        self.storage, self.writers = storage, writers
        self.collected: dict[int, set] = {}
        self.written: set[int] = set()
        self.reported: dict[int, tuple] = {}  # key -> (buffer, where, is a gemm accumulator)
        self.where: Any = None

    def wrote(self, buffer: Any, writer: Any) -> None:
        key = self.storage.key(buffer)
        self.written.add(key)
        self.collected.setdefault(key, set()).add(writer.__chandle__())

    def read(self, buffer: Any, reader: Any, gemm_accumulator: bool = False) -> None:
        if self.writers is None:
            return
        root = self.storage.root(buffer)
        key = root.__chandle__()
        if key in self.reported or key in self.storage.params or scope_of(root) in EXEMPT_SCOPES:
            return
        if scope_of(root).startswith("shared"):
            others = self.writers.get(key, set()) - ({reader.__chandle__()} if reader is not None else set())
            if others:
                return
        elif key in self.written:
            return
        self.reported[key] = (buffer, self.where, gemm_accumulator)

    def expr(self, node: Any, reader: Any) -> None:
        """The reads of an expression; a call that may write memory writes the buffers it is given instead."""
        def on_load(load: Any) -> None:
            self.read(load.source, reader)

        def on_call(call: Any) -> Any:
            if _may_write(call):
                for buffer in _buffers_in(call):
                    self.wrote(buffer, call)
                return tvm_ffi.WalkResult.SKIP
            return None

        tvm_ffi.structural_walk(node, [(TensorLoad, on_load), (tvm.ir.Call, on_call)], order="pre")

    def tile_op(self, call: Any) -> None:
        op = parse_tile_op(call)
        if op.loc is not None:
            self.where = (op.loc.filename, op.loc.lineno)
        accesses = tile_op_accesses(op)
        if accesses is None:
            for buffer in _buffers_in(call):
                self.wrote(buffer, call)
            return
        reads, writes = accesses
        for region in reads:
            self.read(region.buffer, call, isinstance(op, Gemm) and region is op.C)
        for region in writes:
            self.wrote(region.buffer, call)

    def stmt(self, body: Any) -> None:
        def on_store(store: Any) -> Any:
            self.where = user_line(store.span) or self.where
            self.expr(store.value, store)
            for index in store.indices:
                self.expr(index, store)
            self.wrote(store.buffer, store)
            return tvm_ffi.WalkResult.SKIP

        def on_evaluate(node: Any) -> Any:
            self.where = user_line(node.span) or self.where
            if is_tile_op(node.value):
                self.tile_op(node.value)
            else:
                self.expr(node.value, None)
            return tvm_ffi.WalkResult.SKIP

        def on_load(load: Any) -> None:  # a loop bound, a condition, a bound value
            self.read(load.source, None)

        def on_call(call: Any) -> Any:
            if _may_write(call):
                for buffer in _buffers_in(call):
                    self.wrote(buffer, call)
                return tvm_ffi.WalkResult.SKIP
            return None

        def on_stmt(node: Any) -> None:
            self.where = user_line(node.span) or self.where

        tvm_ffi.structural_walk(body, [(tirx.BufferStore, on_store), (tirx.Evaluate, on_evaluate),
                                       (TensorLoad, on_load), (tvm.ir.Call, on_call), (tirx.Stmt, on_stmt)],
                                order="pre")


def uninitialized_reads(func: tirx.PrimFunc) -> list[tuple]:
    """(buffer, (file, line) or None, is a gemm accumulator) for each buffer `func` reads before anything writes
    it, in the order of the first such read."""
    storage = _Storage(func)
    collect = _Walk(storage, None)
    collect.stmt(func.body)
    check = _Walk(storage, collect.collected)
    check.stmt(func.body)
    return list(check.reported.values())


def report(name: str, findings: list[tuple]) -> str:
    lines = [f"{MESSAGE} in `{name}`: {len(findings)} buffer(s) read before anything writes them"]
    for k, (buffer, where, gemm_accumulator) in enumerate(findings, 1):
        at = f" (at {where[0]}:{where[1]})" if where is not None else ""
        lines.append(f"  [{k}] `{buffer.name}` is read before anything writes it{at}")
        if gemm_accumulator:
            lines.append(f"      {GEMM_HINT}")
    lines.append("Initialize the buffer before its first read (for example with `T.clear`, `T.fill`, or a `T.copy` "
                 "into it). If this is a false report, set `PassConfigKey.TL_DISABLE_BUFFER_INIT_CHECK` in the pass "
                 "configs to turn the check off.")
    return "\n".join(lines)


def verify_buffer_init(func: tirx.PrimFunc) -> tirx.PrimFunc:
    findings = uninitialized_reads(func)
    if findings:
        name = str(func.attrs["global_symbol"]) if func.attrs is not None and "global_symbol" in func.attrs \
            else "kernel"
        logger.warning(report(name, findings))
    return func


def VerifyBufferInit(options: CompileOptions | None = None):  # noqa: N802 - upstream's pass name
    """The check as a pass; off where the options (else the enclosing PassContext's configs) disable it."""
    def run(func: tirx.PrimFunc) -> tirx.PrimFunc:
        settings = options if options is not None else CompileOptions.of(_entered_configs())
        return func if settings.disable_buffer_init_check else verify_buffer_init(func)

    return tl_pass("VerifyBufferInit", run)


def _entered_configs() -> dict:
    from .._wheel_patches import entered_tilelang_configs

    return entered_tilelang_configs()
