"""What role a function gives its buffers, as the layout passes need to know: T.view / T.reshape views, shared tiles
stored in a user-annotated layout, and shared tiles no gemm may store swizzled."""

from __future__ import annotations

import tvm_ffi
from tvm import tirx

from ..ir.attrs import ANNOTATIONS_ATTR, VIEWS_ATTR
from ..ir.utils import scope_of
from ..layout import Fragment
from ..tileop import is_tile_op, parse_tile_op
from ..tileop.gemm import Gemm
from ..tileop.gemm.mma import k_major

FRAGMENT_SCOPE = "local.fragment"


def view_buffers(func: tirx.PrimFunc) -> frozenset:
    """T.view / T.reshape views (their storage is another buffer's: no layout of their own)."""
    return frozenset(func.attrs[VIEWS_ATTR].keys()) if func.attrs is not None and VIEWS_ATTR in func.attrs \
        else frozenset()


def annotated_buffers(func: tirx.PrimFunc) -> frozenset:
    """Shared buffers stored in a user-annotated layout (a swizzle): templates that assume dense row-major
    tiles must not take them."""
    attrs = func.attrs
    if attrs is None or ANNOTATIONS_ATTR not in attrs:
        return frozenset()
    return frozenset(buf for buf, layout in attrs[ANNOTATIONS_ATTR].items() if not isinstance(layout, Fragment))


def unswizzled_tiles(func: tirx.PrimFunc) -> frozenset:
    """Shared tiles no T.gemm may store swizzled: those one gemm reads K-major and another MN-major (`dO` in an
    attention backward: B of `V @ dO^T` and of `P^T @ dO`; no single operand swizzle serves both), and, as a gemm
    reads both its shared operands one way (swizzled SQMMA, or the dense-row paths), every tile sharing a gemm
    with one of those (`q` of linear attention's `q @ k^T` when `k` is also read as `k^T @ v`)."""
    majors: dict = {}
    pairs = []

    def on_eval(node):
        if is_tile_op(node.value):
            op = parse_tile_op(node.value)
            if isinstance(op, Gemm):
                for what, region in (("A", op.A), ("B", op.B)):
                    majors.setdefault(region.buffer, set()).add(k_major(what, op))
                if scope_of(op.A.buffer) != FRAGMENT_SCOPE and scope_of(op.B.buffer) != FRAGMENT_SCOPE:
                    pairs.append((op.A.buffer, op.B.buffer))

    tvm_ffi.structural_walk(func.body, [(tirx.Evaluate, on_eval)])
    found = {buf for buf, seen in majors.items() if len(seen) > 1}
    grew = bool(found)
    while grew:
        grew = False
        for a, b in pairs:
            if (a in found) != (b in found):
                found.update((a, b))
                grew = True
    return frozenset(found)
