"""`T.gemm(A, B, C, transpose_A, transpose_B, policy, clear_accum, k_pack, wg_wait)`: C (+)= op(A) @ op(B).

A is (M, K) [(K, M) with transpose_A], B is (K, N) [(N, K) with transpose_B], C an (M, N) fragment in the
accumulation dtype. `clear_accum=True` overwrites C. The implementation is chosen per arch from the
registry (registry.py).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import tvm
from tvm import tirx
from tvm.tirx.script import builder as Tb

from ...errors import SourceLoc
from ...ir.options import CompileOptions
from ..base import LayoutInferArgs, LowerArgs, TileOp, call_attr, call_loc
from ..region import Region, is_unit
from .registry import GemmContext, choose_implementation, select_implementation

STAGING_SCOPE = "shared.dyn"


def _matrix(region: Region, what: str, error) -> tuple[Any, Any]:
    """The two non-unit trailing extents of an operand region (leading size-1 dims are allowed)."""
    extents = list(region.extents)
    while len(extents) > 2 and is_unit(extents[0]):
        extents.pop(0)
    if len(extents) != 2:
        raise error(f"T.gemm: {what} {region.describe()} must be a 2-D tile")
    return extents[0], extents[1]


@dataclass(frozen=True)
class Gemm(TileOp):
    op_name = "tl.tileop.gemm"
    needs_layout = True  # C's layout is the chosen implementation's
    A: Region
    B: Region
    C: Region
    trans_A: bool
    trans_B: bool
    policy: int
    clear_accum: bool
    k_pack: int
    wg_wait: int
    loc: SourceLoc | None = None

    @classmethod
    def from_call(cls, call: tvm.ir.Call) -> "Gemm":
        a, b, c = (Region.from_ir(x) for x in call.args[:3])
        get = lambda key, default: call_attr(call, key, default)  # noqa: E731
        return cls(a, b, c, bool(get("trans_A", False)), bool(get("trans_B", False)), int(get("policy", 0)),
                   bool(get("clear_accum", False)), int(get("k_pack", 1)), int(get("wg_wait", 0)), call_loc(call))

    @property
    def M(self) -> int:  # noqa: N802
        return self._static(self.C.extents[-2], "M")

    @property
    def N(self) -> int:  # noqa: N802
        return self._static(self.C.extents[-1], "N")

    @property
    def K(self) -> int:  # noqa: N802
        rows, cols = _matrix(self.A, "A", self.error)
        return self._static(rows if self.trans_A else cols, "K")

    def _static(self, extent: Any, what: str) -> int:
        if isinstance(extent, tirx.IntImm):
            return int(extent.value)
        raise self.error(f"T.gemm: {what} = {extent} must be a compile-time constant")

    def staging_shape(self, operand: str) -> tuple[int, int]:
        """The shared tile a fragment operand is staged in: its matrix as stored (transposes kept)."""
        region = self.A if operand == "A" else self.B
        rows, cols = _matrix(region, operand, self.error)
        return self._static(rows, f"{operand}'s rows"), self._static(cols, f"{operand}'s columns")

    def staged(self, operands: tuple[str, ...], tiles: dict | None = None) -> "Gemm":
        """This gemm with the given operands read from shared tiles (`tiles`: operand -> buffer; fresh
        placeholders if omitted, which is enough to ask a path whether it takes the staged gemm)."""
        changes = {}
        for what in operands:
            tile = (tiles or {}).get(what)
            if tile is None:
                tile = Tb.buffer(self.staging_shape(what), (self.A if what == "A" else self.B).dtype,
                                 scope=STAGING_SCOPE)
            zero = tirx.const(0, "int32")
            changes[what] = Region(tile, (zero, zero), tuple(tile.ty.shape))
        return replace(self, **changes)

    def staging(self, ctx: GemmContext) -> tuple[str, ...]:
        """The fragment operands the chosen path needs staged in shared memory (StageGemmOperands)."""
        return choose_implementation(self, ctx)[1]

    def validate(self) -> None:
        if self.C.scope != "local.fragment":
            raise self.error(f"T.gemm: the accumulator C must be a fragment (T.alloc_fragment); `{self.C.name}` is "
                             f"{self.C.scope}")
        for what, region in (("A", self.A), ("B", self.B)):
            if region.scope not in ("shared", "shared.dyn", "local.fragment"):
                raise self.error(f"T.gemm: operand {what} must be in shared memory or a fragment; "
                                 f"`{region.name}` is {region.scope}")
        a_rows, a_cols = _matrix(self.A, "A", self.error)
        b_rows, b_cols = _matrix(self.B, "B", self.error)
        c_rows, c_cols = _matrix(self.C, "C", self.error)
        m, k_a = (a_cols, a_rows) if self.trans_A else (a_rows, a_cols)
        k_b, n = (b_cols, b_rows) if self.trans_B else (b_rows, b_cols)
        ana = tvm.sym.Analyzer()
        for what, x, y in (("M", m, c_rows), ("N", n, c_cols), ("K", k_a, k_b)):
            if not ana.can_prove_equal(x, y):
                raise self.error(f"T.gemm: {what} differs between operands: {x} vs {y} "
                                 f"(A {self.A.describe()}, B {self.B.describe()}, C {self.C.describe()}, "
                                 f"transpose_A={self.trans_A}, transpose_B={self.trans_B})")
        c_shape = [int(e) for e in self.C.buffer.ty.shape]
        if self.C.static_extents() != c_shape:
            raise self.error(f"T.gemm: the accumulator must be the whole fragment `{self.C.name}` {tuple(c_shape)}")
        if self.k_pack != 1:
            raise self.error("T.gemm: k_pack > 1 is not supported on MUSA yet")

    def infer_layout(self, args: LayoutInferArgs, level: int) -> dict:
        ctx = GemmContext(args.target, args.options, args.num_threads, args.annotated, args.views, args.unswizzled,
                          args.accumulators)
        return select_implementation(self, ctx).infer_layout(self, ctx, args.layouts)

    def lower(self, args: LowerArgs) -> Any:
        self.validate()
        ctx = GemmContext(args.target, args.options, args.num_threads, args.annotated, args.views, args.unswizzled,
                          args.accumulators)
        return select_implementation(self, ctx).lower(self, args, ctx)

    def implementation(self, target: Any, configs: CompileOptions | dict, num_threads: int) -> str:
        """The name of the path this gemm lowers to (for tests and diagnostics)."""
        ctx = GemmContext(target, CompileOptions.of(configs), num_threads, frozenset())
        return select_implementation(self, ctx).name

