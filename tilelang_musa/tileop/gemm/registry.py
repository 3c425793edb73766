"""GEMM implementations in priority order; the first that does not decline lowers the op.

Priority (the user's guide): both operands in shared memory: SQMMA (mp_31) -> WMMA (mp_31) -> FMA;
both operands fragments: WMMA -> FMA; mp_22: warp MMA -> FMA. FMA accepts every shape and arch. A path
that cannot do a shape exactly declines it (with its reason), and the next one is tried: never a
miscompile.

A path that reads its operands from shared memory may still take a fragment operand *staged*: the
StageGemmOperands pass copies the fragment into a shared tile first and the path runs on that tile. That
is how a gemm with a fragment operand runs on mp_22 (no register-operand instruction) and on FMA. With
exactly one fragment operand (the guide leaves that case open), staged SQMMA comes before WMMA: MUSA's
WMMA accumulator layout is not its A-operand layout, so a `P = softmax(S)` fed from one gemm's
accumulator into the next must move between threads anyway; staging makes that one shared-memory store,
and both gemms of the attention then run on SQMMA with accumulators in agreeing layouts.
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
    views: frozenset = frozenset()  # T.view / T.reshape views: their storage cannot take a swizzled layout
    unswizzled: frozenset = frozenset()  # tiles no gemm may swizzle (layout_inference.unswizzled_tiles)


@dataclass(frozen=True)
class GemmImpl:
    name: str
    declines: Callable[[Any, GemmContext], str | None]  # None if it can lower the gemm, else why not
    infer_layout: Callable[[Any, GemmContext, dict], dict]  # (gemm, ctx, known layouts) -> required layouts
    lower: Callable[[Any, Any, GemmContext], Any]  # (gemm, LowerArgs, ctx) -> Stmt
    # May fragment operands be staged through shared memory for this path? (the staged operand names)
    stages: Callable[[tuple[str, ...]], bool] = lambda operands: False


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
    """The path that lowers `gemm` as it stands (operands where they are)."""
    impl, staged = choose_implementation(gemm, ctx)
    if staged:
        raise CompileError(f"T.gemm: operand(s) {', '.join(staged)} must be staged through shared memory for "
                           f"{impl.name} (StageGemmOperands did not run)", gemm.loc)
    return impl


def choose_implementation(gemm: Any, ctx: GemmContext) -> tuple[GemmImpl, tuple[str, ...]]:
    """The first path that takes `gemm`, and which of its fragment operands it needs staged in shared memory."""
    fragments = tuple(what for what, region in (("A", gemm.A), ("B", gemm.B)) if region.scope == "local.fragment")
    reasons = []
    for impl in GEMM_IMPLEMENTATIONS:
        reason = impl.declines(gemm, ctx)
        if reason is None:
            return impl, ()
        if fragments and impl.stages(fragments):
            staged_reason = impl.declines(gemm.staged(fragments), ctx)
            if staged_reason is None:
                return impl, fragments
            reason = f"{staged_reason} (with {' and '.join(fragments)} staged in shared memory)"
        reasons.append(f"{impl.name}: {reason}")
    raise CompileError("T.gemm: no implementation can compute this GEMM exactly:\n  " + "\n  ".join(reasons), gemm.loc)
