"""GEMM implementations in priority order; the first that does not decline lowers the op.

Priority (the user's guide): both operands in shared memory: SQMMA (mp_31) -> WMMA (mp_31) -> FMA;
both operands fragments: WMMA -> FMA; mp_22: warp MMA -> FMA. FMA accepts every shape and arch. A path
that cannot do a shape exactly declines it (with its reason), and the next one is tried: never a
miscompile.

A path that reads its operands from shared memory may still take a fragment operand *staged*: the
StageGemmOperands pass copies the fragment into a shared tile first and the path runs on that tile. That
is how a gemm with a fragment operand runs on FMA, and on mp_22's MMA when the fragment is filled from
another gemm's accumulator (_preferred_staging; a fragment filled otherwise takes the operand layout and stays
in registers). With
exactly one fragment operand (the guide leaves that case open), staged SQMMA comes before WMMA: MUSA's
WMMA accumulator layout is not its A-operand layout, so a `P = softmax(S)` fed from one gemm's
accumulator into the next must move between threads anyway; staging makes that one shared-memory store,
and both gemms of the attention then run on SQMMA with accumulators in agreeing layouts.

Gemms that accumulate into one fragment (`S = Q @ K^T` over two parts of the head dimension, each its own
T.gemm) must leave it in one layout, so they choose together (`choose_implementation`): the first matrix path
that takes every one of them, each with the warp partition of the first gemm's policy. If no matrix path takes
them all, C keeps the layout of the first one's own path and a gemm that path declines runs on FMA, which
computes into whatever layout C has (with a warning: it is slow, but no per-iteration relayout is needed).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from ...diagnostics import warn_once
from ...errors import CompileError
from ...ir.options import CompileOptions


@dataclass(frozen=True)
class GemmContext:
    """What implementation choice depends on; identical at layout inference and at lowering."""

    target: Any
    options: CompileOptions
    num_threads: int
    annotated: frozenset  # shared buffers stored in an annotated (swizzled) layout
    views: frozenset = frozenset()  # T.view / T.reshape views: their storage cannot take a swizzled layout
    unswizzled: frozenset = frozenset()  # tiles no gemm may swizzle (layout_inference.unswizzled_tiles)
    # accumulator fragment -> the gemms into it, in program order (transform/gemm_groups.py); they choose together
    accumulators: Any = field(default_factory=dict)
    # fragments filled from a gemm's accumulator (transform/gemm_groups.py): staged where the path can stage them
    accumulator_fed: frozenset = frozenset()


@dataclass(frozen=True)
class GemmImpl:
    name: str
    declines: Callable[[Any, GemmContext], str | None]  # None if it can lower the gemm, else why not
    infer_layout: Callable[[Any, GemmContext, dict], dict]  # (gemm, ctx, known layouts) -> required layouts
    lower: Callable[[Any, Any, GemmContext], Any]  # (gemm, LowerArgs, ctx) -> Stmt
    # Computes into whatever layout C already has (FMA), so it never constrains a shared accumulator
    adapts_accumulator: bool = False
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


def group_of(gemm: Any, ctx: GemmContext) -> tuple:
    """The gemms accumulating into `gemm`'s C, in program order (just `gemm` if C is its alone)."""
    return tuple(ctx.accumulators.get(gemm.C.buffer, ())) or (gemm,)


def partition_policy(gemm: Any, ctx: GemmContext) -> int:
    """The warp policy that splits C among instruction groups: the first gemm's into C, so that gemms sharing C
    on one path partition it alike whatever policies the later ones name."""
    return group_of(gemm, ctx)[0].policy


def choose_implementation(gemm: Any, ctx: GemmContext) -> tuple[GemmImpl, tuple[str, ...]]:
    """The path that lowers `gemm`, and which of its fragment operands it needs staged in shared memory."""
    group = group_of(gemm, ctx)
    if len(group) == 1:
        return _own_choice(gemm, ctx)
    for impl in GEMM_IMPLEMENTATIONS:  # the first matrix path that takes every gemm into C
        if not impl.adapts_accumulator and all(_takes(impl, member, ctx) is not None for member in group):
            return impl, _takes(impl, gemm, ctx)
    owners = [impl for impl, _ in (_own_choice(member, ctx) for member in group) if not impl.adapts_accumulator]
    if not owners:
        return _own_choice(gemm, ctx)
    staged = _takes(owners[0], gemm, ctx)
    if staged is not None:
        return owners[0], staged
    own = _own_choice(gemm, ctx)
    if own[0].adapts_accumulator:  # it computes into C's layout anyway
        return own
    adaptive = next(impl for impl in GEMM_IMPLEMENTATIONS
                    if impl.adapts_accumulator and _takes(impl, gemm, ctx) is not None)
    warn_once(f"gemm group {gemm.loc} {gemm.C.name}",
              f"{gemm.loc}: T.gemm runs on {adaptive.name} (slow) because it accumulates into `{gemm.C.name}` with "
              f"a T.gemm at {group[0].loc} whose {owners[0].name} places `{gemm.C.name}`, and {owners[0].name} "
              f"cannot take this one: {owners[0].declines(gemm, ctx)}")
    return adaptive, _takes(adaptive, gemm, ctx)


def _takes(impl: GemmImpl, gemm: Any, ctx: GemmContext) -> tuple[str, ...] | None:
    """The operands `impl` needs staged to lower `gemm` (() for none), or None if it declines."""
    if impl.declines(gemm, ctx) is None:
        return _preferred_staging(impl, gemm, ctx)
    fragments = _fragment_operands(gemm)
    if fragments and impl.stages(fragments) and impl.declines(gemm.staged(fragments), ctx) is None:
        return fragments
    return None


def _fragment_operands(gemm: Any) -> tuple[str, ...]:
    return tuple(what for what, region in (("A", gemm.A), ("B", gemm.B)) if region.scope == "local.fragment")


def _preferred_staging(impl: GemmImpl, gemm: Any, ctx: GemmContext) -> tuple[str, ...]:
    """The fragment operands to stage although `impl` reads them from registers: those filled from a gemm's
    accumulator. The accumulator's layout is not the operand's on MUSA (MUSA_LAYOUTS.md), so such an operand moves
    between threads anyway; staged, that is one store of the operand's dtype into a tile of its own, where an
    exchange would move the accumulator's (wider) dtype through shared memory."""
    fed = tuple(what for what in _fragment_operands(gemm)
                if (gemm.A if what == "A" else gemm.B).buffer in ctx.accumulator_fed)
    if fed and impl.stages(fed) and impl.declines(gemm.staged(fed), ctx) is None:
        return fed
    return ()


def _own_choice(gemm: Any, ctx: GemmContext) -> tuple[GemmImpl, tuple[str, ...]]:
    """The first path that takes `gemm` on its own, and which of its fragment operands it needs staged."""
    fragments = _fragment_operands(gemm)
    reasons = []
    for impl in GEMM_IMPLEMENTATIONS:
        reason = impl.declines(gemm, ctx)
        if reason is None:
            return impl, _preferred_staging(impl, gemm, ctx)
        if fragments and impl.stages(fragments):
            staged_reason = impl.declines(gemm.staged(fragments), ctx)
            if staged_reason is None:
                return impl, fragments
            reason = f"{staged_reason} (with {' and '.join(fragments)} staged in shared memory)"
        reasons.append(f"{impl.name}: {reason}")
    raise CompileError("T.gemm: no implementation can compute this GEMM exactly:\n  " + "\n  ".join(reasons), gemm.loc)
