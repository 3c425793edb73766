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


@dataclass(frozen=True)
class LowerArgs:
    target: tvm.target.Target
    thread_var: Any  # the linear thread index expression
    num_threads: int
    layouts: dict = field(default_factory=dict)  # fragment buffer Var -> Fragment (from layout inference)
    configs: dict = field(default_factory=dict)  # PassConfigKey -> value
    annotated: frozenset = frozenset()  # shared buffers stored in an annotated layout (T.annotate_layout)
    thread_extents: dict = field(default_factory=dict)  # "threadIdx.x" -> extent, for analyzers
    views: frozenset = frozenset()  # T.view / T.reshape views (their storage is another buffer's)


@dataclass(frozen=True)
class LayoutInferArgs:
    target: tvm.target.Target
    num_threads: int
    layouts: dict  # buffer Var -> Layout/Fragment known so far
    configs: dict = field(default_factory=dict)
    annotated: frozenset = frozenset()
    views: frozenset = frozenset()


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

    def error(self, message: str) -> CompileError:
        return CompileError(message, self.loc)


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
