"""The tile-op contract: one class per op with `from_call`, `infer_layout` and `lower`.

A tile op is a TVM Op named `tl.tileop.<name>`; the language builds `Evaluate(Call(op, regions..., attrs))`
and the passes find the class by the op name (registry.py). Inputs to `infer_layout` and `lower` travel in
small frozen dataclasses.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

import tvm

from ..errors import CompileError, SourceLoc
from ..ir.options import CompileOptions
from ..layout.gemm_partition import GemmWarpPolicy  # noqa: F401 - upstream's tilelang.tileop.base.GemmWarpPolicy


@dataclass(frozen=True)
class LowerArgs:
    """What lowering an op needs. Ops run on the threads that reach them (thread_guard.py): `thread_var` is the
    linear thread id minus the first of them, `num_threads` their count (the block's, outside thread guards)."""

    target: tvm.target.Target
    thread_var: Any  # the op's thread index: linear thread id - first_thread
    num_threads: int
    layouts: dict = field(default_factory=dict)  # fragment buffer Var -> Fragment (from layout inference)
    options: CompileOptions = CompileOptions()  # the pass configs, typed
    annotated: frozenset = frozenset()  # shared buffers stored in an annotated layout (T.annotate_layout)
    thread_extents: dict = field(default_factory=dict)  # "threadIdx.x" -> extent, for analyzers
    views: frozenset = frozenset()  # T.view / T.reshape views (their storage is another buffer's)
    first_thread: int = 0  # the lowest linear thread id that runs the op
    block_threads: int = 0  # the block's thread count (0: num_threads)
    unswizzled: frozenset = frozenset()  # shared tiles no T.gemm may swizzle (layout_inference.unswizzled_tiles)
    accumulators: dict = field(default_factory=dict)  # accumulator -> the T.gemm ops into it (gemm_groups.py)
    bindings: dict = field(default_factory=dict)  # the kernel's large bindings, for analyzers (ir/large_bindings.py)

    @property
    def whole_block(self) -> bool:
        return self.first_thread == 0 and self.num_threads == (self.block_threads or self.num_threads)


@dataclass(frozen=True)
class LayoutInferArgs:
    target: tvm.target.Target
    num_threads: int  # the threads that run the op (its range's count)
    layouts: dict  # buffer Var -> Layout/Fragment known so far
    options: CompileOptions = CompileOptions()
    annotated: frozenset = frozenset()
    views: frozenset = frozenset()
    unswizzled: frozenset = frozenset()
    accumulators: dict = field(default_factory=dict)


class TileOp:
    """Base class of tile ops. Subclasses are frozen dataclasses built by `from_call`."""

    op_name: ClassVar[str] = ""
    # Ops whose lowering needs the layouts LayoutInference chooses are lowered after it; the others before.
    needs_layout: ClassVar[bool] = False
    loc: SourceLoc | None

    @classmethod
    def from_call(cls, call: tvm.ir.Call) -> "TileOp":
        raise NotImplementedError

    def infer_layout(self, args: LayoutInferArgs, level: int) -> dict:
        return {}

    def lower(self, args: LowerArgs) -> Any:
        raise NotImplementedError

    @property
    def thread_private(self) -> bool:
        """Whether every thread runs the whole op on its own thread-private buffers (a T.fill of a T.alloc_local):
        it is lowered without the thread index, so any set of threads may reach it (`if lane < n:` included)."""
        return False

    def error(self, message: str) -> CompileError:
        return CompileError(message, self.loc)

    @property
    def construct(self) -> str:
        """How the user wrote the op (`T.gemm`, `T.reduce_max`), for errors."""
        name = self.op_name.rsplit(".", 1)[-1]
        kind = getattr(self, "kind", None)
        return f"T.{name}_{kind}" if name == "reduce" and kind else f"T.{name}"


def call_loc(call: tvm.ir.Call) -> SourceLoc | None:
    attrs = call.attrs
    if attrs is None or "tl.loc" not in attrs:
        return None
    filename, line, col = str(attrs["tl.loc"]).rsplit(":", 2)
    return SourceLoc(filename, int(line), int(col))


def call_attr(call: tvm.ir.Call, key: str, default: Any = None) -> Any:
    attrs = call.attrs
    if attrs is None or key not in attrs:
        return default
    return attrs[key]
