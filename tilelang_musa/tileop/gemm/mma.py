"""GEMM on MUSA's matrix instructions, through the block-level templates of tl_templates/musa/gemm_*.h.

    mp_31 SQMMA  `tl::gemm_ss_mp31_sqmma`  squads of 128 threads; A and B read from shared memory
    mp_31 WMMA   `tl::gemm_{ss,rs,sr,rr}_mp31_wmma`  m16n8k16 on 32-thread warps; operands shared or fragments
    mp_22 MMA    `tl::gemm_{ss,rs,sr,rr}_mp22_mma`  m32n32k16 on 128-thread warps; operands shared or fragments

Each takes the block's g_m x g_n instruction groups (from the warp policy) and keeps C in the accumulator
fragment of layout/mma_layouts.py, the contract the templates follow. A path declines what it cannot do
exactly (arch, dtypes, tile divisibility, operand storage), and the registry moves on to the next path.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import tvm
from tvm import tirx

from ...ir.ops import fragment_ptr
from ...ir.options import key_of
from ...layout import (
    SWIZZLE_LINE, Fragment, GemmWarpPolicy, LayoutError, canonical_sqmma_granularity, make_gemm_a_fragment,
    make_gemm_accumulator_fragment, make_gemm_b_fragment, make_linear_layout, make_sqmma_swizzled_layout,
)
from ...target import CAPABILITIES, arch_of, archs_with
from ..access_ptr import READ, access_ptr
from .registry import GemmContext, GemmImpl, partition_policy

SHARED = ("shared", "shared.dyn")
FRAGMENT = "local.fragment"
# The shapes of SQMMA in the order the template tries them for a squad tile (gemm_mp31_sqmma.h).
SQMMA_ORDER = ((128, 128), (128, 64), (64, 128), (128, 32), (64, 64), (32, 128), (64, 32), (32, 64), (64, 16),
               (32, 32), (16, 64))


@dataclass(frozen=True)
class Path:
    name: str
    capability: str  # the ArchInfo flag of the archs that have the instruction, e.g. "has_sqmma"
    group: int  # threads per instruction group
    atom: tuple[int, int, int]  # (m, n, k) used to partition; SQMMA picks its shape per squad tile
    template: str  # template name without the operand-scope prefix
    disabled_by: str | None  # the CompileOptions switch that turns the path off
    register_operands: bool  # may A / B be fragments
    swizzled: bool = False  # the operands are stored in the SQMMA swizzled layout (which this path requires)
    staged_operands: int = 0  # how many fragment operands may be staged through shared memory (registry.py)

    def __post_init__(self):
        if self.capability not in CAPABILITIES:
            raise ValueError(f"gemm path {self.name}: unknown arch capability {self.capability!r}")


def k_major(operand: str, gemm) -> bool:
    """Whether the operand's stored rows run along K (A stored M x K, or B stored N x K)."""
    return not gemm.trans_A if operand == "A" else gemm.trans_B


def _swizzled_layout(region, operand: str, gemm):
    shape = [int(e) for e in region.buffer.ty.shape]
    return make_sqmma_swizzled_layout((shape, region.dtype), k_major=k_major(operand, gemm))


# Whether an operand tile of (shape, dtype, major-ness) has an SQMMA swizzled layout, and if not why: the choice of
# a GEMM path asks it of every operand, each time it is asked (the layout itself is built where it is used).
_SWIZZLE_REFUSALS: dict[tuple, str | None] = {}


def _swizzle_refusal(region, operand: str, gemm) -> str | None:
    key = (operand, tuple(int(e) for e in region.buffer.ty.shape), str(region.dtype), k_major(operand, gemm))
    if key not in _SWIZZLE_REFUSALS:
        try:
            _swizzled_layout(region, operand, gemm)
            _SWIZZLE_REFUSALS[key] = None
        except LayoutError as err:
            _SWIZZLE_REFUSALS[key] = f"operand {operand}: {err}"
    return _SWIZZLE_REFUSALS[key]


def _operand_kind(region) -> str | None:
    return "s" if region.scope in SHARED else "r" if region.scope == FRAGMENT else None


def _dense_rows(region) -> bool:
    """The region is whole rows of a dense row-major tile: leading dims of extent 1, full last dimension."""
    shape = [int(e) for e in region.buffer.ty.shape]
    extents = region.static_extents()
    if any(e is None for e in extents) or extents[-1] != shape[-1]:
        return False
    return all(e == 1 for e in extents[:-2])


def _tile_dims(gemm) -> tuple[int, int, int]:
    return gemm.M, gemm.N, gemm.K


def _partition(path: Path, gemm, ctx: GemmContext) -> tuple[int, int]:
    groups = ctx.num_threads // path.group
    return GemmWarpPolicy(partition_policy(gemm, ctx)).partition(gemm.M, gemm.N, groups, path.atom[0], path.atom[1])


def _instruction(path: Path, gemm, g_m: int, g_n: int) -> str:
    if path.name != "SQMMA":
        return {"WMMA": "mp_31.wmma.m16n8k16", "MMA": "mp_22.mma.m32n32k16"}[path.name]
    tile_m, tile_n = gemm.M // g_m, gemm.N // g_n
    m, n = next((m, n) for m, n in SQMMA_ORDER if tile_m % m == 0 and tile_n % n == 0)
    return f"mp_31.sqmma.m{m}n{n}"


def _declines(path: Path) -> Callable[[Any, GemmContext], str | None]:
    def declines(gemm, ctx: GemmContext) -> str | None:
        if ctx.target is None or not getattr(arch_of(ctx.target), path.capability):
            return f"needs {' or '.join(archs_with(path.capability))}"
        if path.disabled_by is not None and getattr(ctx.options, path.disabled_by):
            return f"disabled by {key_of(path.disabled_by).name}"
        if gemm.A.dtype != gemm.B.dtype or gemm.A.dtype not in ("float16", "bfloat16") or gemm.C.dtype != "float32":
            return f"takes float16/bfloat16 operands into float32 (got {gemm.A.dtype} x {gemm.B.dtype} -> {gemm.C.dtype})"
        for what, region in (("A", gemm.A), ("B", gemm.B)):
            kind = _operand_kind(region)
            if kind == "r" and not path.register_operands:
                return f"operand {what} is a fragment; this instruction reads shared memory"
            if kind == "s" and not _dense_rows(region):
                return f"operand {what} must be whole rows of a shared tile"
            if kind == "s" and not path.swizzled and region.buffer in ctx.annotated:
                return f"operand {what} is stored in an annotated layout; this path reads dense row-major tiles"
        if ctx.num_threads % path.group:
            return f"{ctx.num_threads} threads are not a whole number of {path.group}-thread groups"
        M, N, K = _tile_dims(gemm)
        if K % path.atom[2]:
            return f"K={K} is not a multiple of the instruction's k={path.atom[2]}"
        try:
            g_m, g_n = _partition(path, gemm, ctx)
        except LayoutError as err:
            return str(err)
        if path.name == "SQMMA":
            tile_m, tile_n = M // g_m, N // g_n
            if not any(tile_m % m == 0 and tile_n % n == 0 for m, n in SQMMA_ORDER):
                return f"no SQMMA shape divides the squad tile {tile_m} x {tile_n}"
            for what, region in (("A", gemm.A), ("B", gemm.B)):
                if path.swizzled:
                    if region.buffer in ctx.views:
                        return f"operand {what} is a T.view / T.reshape view, whose storage cannot be swizzled"
                    if region.buffer in ctx.unswizzled:
                        return (f"operand {what} (`{region.name}`) stays unswizzled: it, or a tile it shares a "
                                "T.gemm with, is read K-major by one T.gemm and MN-major by another")
                    refusal = _swizzle_refusal(region, what, gemm)
                    if refusal is not None:
                        return refusal
                    continue
                row_bytes = int(region.buffer.ty.shape[-1]) * 2
                if row_bytes < 8 or row_bytes > 256 or row_bytes & (row_bytes - 1):
                    return (f"the rows of {what} ({row_bytes} B) must be a power of two from 8 to 256 bytes for an "
                            "unswizzled SQMMA descriptor")
        return None

    return declines


def _infer_layout(path: Path):
    def infer(gemm, ctx: GemmContext, layouts: dict) -> dict:
        g_m, g_n = _partition(path, gemm, ctx)
        inst = _instruction(path, gemm, g_m, g_n)
        out = {gemm.C.buffer: make_gemm_accumulator_fragment(inst, gemm.M, gemm.N, g_m, g_n)}
        if gemm.A.scope == FRAGMENT:
            out[gemm.A.buffer] = make_gemm_a_fragment(inst, gemm.M, gemm.K, g_m, g_n, transposed=gemm.trans_A)
        if gemm.B.scope == FRAGMENT:
            out[gemm.B.buffer] = make_gemm_b_fragment(inst, gemm.N, gemm.K, g_m, g_n, transposed=gemm.trans_B)
        if path.swizzled:  # the copies that fill the tiles store them the way SQMMA reads them
            out[gemm.A.buffer] = _swizzled_layout(gemm.A, "A", gemm)
            out[gemm.B.buffer] = _swizzled_layout(gemm.B, "B", gemm)
        return out

    return infer


def _pointer(region) -> Any:
    """The operand as the template takes it: a fragment's slot array, or the tile's first element, marked as read
    for the barrier analysis (the template reads the whole region through it)."""
    if region.scope == FRAGMENT:
        return fragment_ptr(region.buffer)
    return access_ptr(region.buffer[tuple(region.mins)], READ)


def _lower(path: Path):
    def lower(gemm, args, ctx: GemmContext) -> Any:
        # The template numbers the gemm's threads (tid - first) % num_threads; its instruction groups (warps,
        # squads) must be the hardware's, so the gemm's first thread is a multiple of a group.
        if args.first_thread % path.group:
            raise gemm.error(
                f"T.gemm on threads {args.first_thread}..{args.first_thread + args.num_threads - 1}: a gemm run by "
                f"part of the block must start at a multiple of {path.group} threads (one {path.name} instruction "
                "group), e.g. T.ws(1) for threads 128..255")
        first = [] if args.first_thread % args.num_threads == 0 else [tirx.const(args.first_thread, "int32")]
        if not path.swizzled:
            _require_dense_rows(path, gemm, args.layouts)
        g_m, g_n = _partition(path, gemm, ctx)
        prefix = "gemm_" + "".join(_operand_kind(r) for r in (gemm.A, gemm.B))
        params = (f"{gemm.M}, {gemm.N}, {gemm.K}, {g_m}, {g_n}, {str(gemm.trans_A).lower()}, "
                  f"{str(gemm.trans_B).lower()}, {str(gemm.clear_accum).lower()}")
        if path.swizzled:
            for what, region in (("A", gemm.A), ("B", gemm.B)):
                cols, elem = int(region.buffer.ty.shape[-1]), tvm.runtime.DataType(region.dtype).bits // 8
                continuity = cols if cols * elem <= SWIZZLE_LINE else SWIZZLE_LINE // elem
                granularity = canonical_sqmma_granularity(elem * 8, k_major(what, gemm))
                params += f", {continuity}, {granularity}"
        # wg_wait=-1 on SQMMA: issue without waiting (the kernel calls T.wait_sqmma before using C)
        nowait = "_nowait" if path.name == "SQMMA" and gemm.wg_wait < 0 else ""
        call = tirx.call_extern("int32", f"tl::{prefix}_{path.template}{nowait}<{params}>",
                                _pointer(gemm.A), _pointer(gemm.B), fragment_ptr(gemm.C.buffer), *first)
        # No barriers here: the marked operands show ThreadSync where the tiles' writers and this read meet.
        return tirx.Evaluate(call)

    return lower


def _require_dense_rows(path: Path, gemm, layouts: dict) -> None:
    """This path's template reads its shared operands as dense rows: a tile another gemm (or the user) laid out
    otherwise would be read wrong. unswizzled_tiles keeps SQMMA's choices consistent; this catches the rest."""
    for what, region in (("A", gemm.A), ("B", gemm.B)):
        layout = layouts.get(region.buffer)
        if _operand_kind(region) != "s" or layout is None or isinstance(layout, Fragment):
            continue
        shape = [int(e) for e in region.buffer.ty.shape]
        if not layout.is_equal(make_linear_layout((shape, region.dtype))):
            raise gemm.error(
                f"T.gemm lowers to {path.name}, which reads operand {what} (`{region.name}`) as dense rows, but "
                f"`{region.name}` is stored as {layout!r} (for another T.gemm or T.annotate_layout); give the "
                "gemms that share it the same instruction, or copy it into a tile of its own")


def _impl(path: Path) -> GemmImpl:
    return GemmImpl(path.name, _declines(path), _infer_layout(path), _lower(path),
                    stages=lambda operands: len(operands) <= path.staged_operands)


# SQMMA has no register-operand form: one fragment operand is staged (registry.py says why); two follow the
# user's guide (WMMA first). mp_22's MMA takes fragments in its K-major operand layout, and stages those filled from
# an accumulator (registry._preferred_staging).
SQMMA = _impl(Path("SQMMA", "has_sqmma", 128, (16, 16, 16), "mp31_sqmma", "disable_sqmma",
                   False, staged_operands=1))
SQMMA_SWIZZLED = _impl(Path("SQMMA", "has_sqmma", 128, (16, 16, 16), "mp31_sqmma_swizzled",
                            "disable_sqmma", False, swizzled=True, staged_operands=1))
WMMA = _impl(Path("WMMA", "has_wmma", 32, (16, 8, 16), "mp31_wmma", "disable_ph1_wmma", True))
MMA = _impl(Path("MMA", "has_warp_mma", 128, (32, 32, 16), "mp22_mma", None, True, staged_operands=2))
