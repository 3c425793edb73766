"""Reductions of a fragment along one dimension: `T.reduce_sum / max / min / abssum / absmax`, and of integer
fragments `T.reduce_bitand / bitor / bitxor`."""

from __future__ import annotations

from typing import Any

from ..tileop import emit_tile_op
from ..tileop.reduce import BITWISE_KINDS, KINDS, Reduce
from ..tileop.region import to_region
from .builder import current_trace, kernel_trace


def _reduce(kind: str, src: Any, dst: Any, dim: int, clear: bool) -> None:
    construct = f"T.reduce_{kind}"
    trace = kernel_trace(construct)
    src_r, _ = to_region(src, construct, "src")
    dst_r, _ = to_region(dst, construct, "dst")
    for what, r in (("src", src_r), ("dst", dst_r)):
        if r.scope != "local.fragment":
            raise trace.error(f"{construct}: {what} `{r.name}` must be a fragment (T.alloc_fragment); it is {r.scope}")
    if kind in BITWISE_KINDS and not all(r.dtype.startswith(("int", "uint")) for r in (src_r, dst_r)):
        raise trace.error(f"{construct}: src and dst must be integer fragments; got {src_r.dtype} and {dst_r.dtype}")
    ndim = src_r.ndim
    if not -ndim <= dim < ndim:
        raise trace.error(f"{construct}: dim {dim} is out of range for the {ndim}-d `{src_r.name}`")
    dim %= ndim
    expected = [e for d, e in enumerate(src_r.static_extents()) if d != dim] or [1]
    if dst_r.static_extents() != expected:
        raise trace.error(f"{construct}: dst {dst_r.describe()} must have the shape of {src_r.describe()} without "
                          f"dim {dim}: {tuple(expected)}")
    emit_tile_op(Reduce.op_name, [src_r.to_ir(), dst_r.to_ir()], {"kind": kind, "dim": dim, "clear": bool(clear)})


def reduce_sum(src: Any, dst: Any, dim: int = -1, clear: bool = True) -> None:
    """dst = sum of src along `dim` (clear=False: dst += that sum)."""
    _reduce("sum", src, dst, dim, clear)


def reduce_max(src: Any, dst: Any, dim: int = -1, clear: bool = True) -> None:
    """dst = max of src along `dim` (clear=False: dst = max(dst, that max))."""
    _reduce("max", src, dst, dim, clear)


def reduce_min(src: Any, dst: Any, dim: int = -1, clear: bool = True) -> None:
    """dst = min of src along `dim` (clear=False: dst = min(dst, that min))."""
    _reduce("min", src, dst, dim, clear)


def reduce_abssum(src: Any, dst: Any, dim: int = -1, clear: bool = True) -> None:
    """dst = sum of |src| along `dim`."""
    _reduce("abssum", src, dst, dim, clear)


def reduce_absmax(src: Any, dst: Any, dim: int = -1, clear: bool = True) -> None:
    """dst = max of |src| along `dim`."""
    _reduce("absmax", src, dst, dim, clear)


def reduce_bitand(src: Any, dst: Any, dim: int = -1, clear: bool = True) -> None:
    """dst = bitwise and of the integers of src along `dim` (clear=False: dst &= that)."""
    _reduce("bitand", src, dst, dim, clear)


def reduce_bitor(src: Any, dst: Any, dim: int = -1, clear: bool = True) -> None:
    """dst = bitwise or of the integers of src along `dim` (clear=False: dst |= that)."""
    _reduce("bitor", src, dst, dim, clear)


def reduce_bitxor(src: Any, dst: Any, dim: int = -1, clear: bool = True) -> None:
    """dst = bitwise xor of the integers of src along `dim` (clear=False: dst ^= that)."""
    _reduce("bitxor", src, dst, dim, clear)


def reduce(src: Any, dst: Any, reduce_type: str, dim: int = -1, clear: bool = True) -> None:
    """`T.reduce(src, dst, "sum" | "max" | "min" | "abssum" | "absmax", dim, clear)`."""
    if reduce_type not in KINDS:
        raise current_trace("T.reduce").error(f"T.reduce: unknown reduce_type {reduce_type!r}; one of {sorted(KINDS)}")
    _reduce(reduce_type, src, dst, dim, clear)
