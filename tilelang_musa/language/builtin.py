"""Thread-level built-ins of the language (`T.sync_threads`, ...)."""

from __future__ import annotations

from tvm import tirx
from tvm.tirx.script import builder as Tb

from .builder import current_trace


def sync_threads() -> None:
    """A block-wide barrier (`__syncthreads()`): every thread's earlier shared-memory writes are visible to
    every thread after it. The compiler inserts the barriers a kernel needs by itself; this is for code
    that needs one the analysis cannot see."""
    trace = current_trace("T.sync_threads")
    if trace.kernel is None:
        raise trace.error("`T.sync_threads` must be used inside `with T.Kernel(...)`")
    Tb.evaluate(tirx.call_intrin("int32", "tirx.tvm_storage_sync", "shared"))
