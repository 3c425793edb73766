"""GEMM implementations in priority order; the first that does not decline lowers the op.

Priority (the user's guide): both operands in shared memory: SQMMA (mp_31) -> WMMA (mp_31) -> FMA;
fragment operands: WMMA -> FMA; mp_22: warp MMA -> FMA. FMA accepts every shape and arch. A path that
cannot do a shape exactly declines it (with its reason), and the next one is tried: never a miscompile.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from ...errors import CompileError


@dataclass(frozen=True)
class GemmContext:
    """What implementation choice depends on; identical at layout inference and at lowering."""

    target: Any
    configs: dict
    num_threads: int
    annotated: frozenset  # shared buffers stored in an annotated (swizzled) layout


@dataclass(frozen=True)
class GemmImpl:
    name: str
    declines: Callable[[Any, GemmContext], str | None]  # None if it can lower the gemm, else why not
    infer_layout: Callable[[Any, GemmContext, dict], dict]  # (gemm, ctx, known layouts) -> required layouts
    lower: Callable[[Any, Any, GemmContext], Any]  # (gemm, LowerArgs, ctx) -> Stmt


GEMM_IMPLEMENTATIONS: list[GemmImpl] = []


def thread_analyzer(args: Any) -> Any:
    """An analyzer that knows the range of the block's (1-D) thread index, for simplifying fragment maps."""
    import tvm

    ana = tvm.sym.Analyzer()
    if isinstance(args.thread_var, tvm.ir.expr.Var):
        ana.bind(args.thread_var, tvm.ir.Range(0, args.num_threads))
    return ana


def register_gemm_impl(impl: GemmImpl) -> GemmImpl:
    GEMM_IMPLEMENTATIONS.append(impl)
    return impl


def select_implementation(gemm: Any, ctx: GemmContext) -> GemmImpl:
    reasons = []
    for impl in GEMM_IMPLEMENTATIONS:
        reason = impl.declines(gemm, ctx)
        if reason is None:
            return impl
        reasons.append(f"{impl.name}: {reason}")
    raise CompileError("T.gemm: no implementation can compute this GEMM exactly:\n  " + "\n  ".join(reasons), gemm.loc)
