"""GEMM implementations in priority order; the first whose `accepts` holds lowers the op.

Priority (the user's guide): both operands in shared memory: SQMMA (mp_31) -> WMMA (mp_31) -> FMA;
fragment operands: WMMA -> FMA; mp_22: warp MMA -> FMA. FMA accepts every shape and arch. A path that
cannot do a shape exactly declines it (with its reason), and the next one is tried: never a miscompile.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from ...errors import CompileError


@dataclass(frozen=True)
class GemmImpl:
    name: str
    # (gemm, target, configs) -> None if it can lower the gemm, else the reason it cannot
    declines: Callable[[Any, Any, dict], str | None]
    lower: Callable[[Any, Any], Any]  # (gemm, LowerArgs) -> Stmt


GEMM_IMPLEMENTATIONS: list[GemmImpl] = []


def register_gemm_impl(impl: GemmImpl) -> GemmImpl:
    GEMM_IMPLEMENTATIONS.append(impl)
    return impl


def select_implementation(gemm: Any, target: Any, configs: dict) -> GemmImpl:
    reasons = []
    for impl in GEMM_IMPLEMENTATIONS:
        reason = impl.declines(gemm, target, configs)
        if reason is None:
            return impl
        reasons.append(f"{impl.name}: {reason}")
    raise CompileError("T.gemm: no implementation can compute this GEMM exactly:\n  " + "\n  ".join(reasons), gemm.loc)
