"""RasterizeBlocks: implement `T.use_swizzle(panel_size, order)` by remapping the block indices.

With a grid of gx x gy blocks, launch order (linear id b = by * gx + bx) is remapped so that, for
order="row", consecutive ids walk down the `panel_size` rows of a panel before moving to the next column
(the last panel may be shorter); order="col" is the transpose. The map is a bijection on the grid. The
kernel's uses of blockIdx.x / blockIdx.y are replaced by the remapped indices, bound once at the start. A grid
size known only at run time (`T.ceildiv(M, 128)` with a symbolic M) enters the map as that expression, as
upstream's rasterization reads gridDim at run time.
"""

from __future__ import annotations

import tvm
import tvm_ffi
from tvm import tirx

from ..errors import CompileError
from ..ir.ops import USE_SWIZZLE_OP
from ..ir.utils import seq, substitute, thread_info
from .pass_base import tl_pass


def _is_marker(stmt) -> bool:
    return (isinstance(stmt, tirx.Evaluate) and isinstance(stmt.value, tvm.ir.Call)
            and isinstance(stmt.value.op, tvm.ir.Op) and str(stmt.value.op.name) == USE_SWIZZLE_OP)


def _remap(major, minor, n_major, n_minor, panel):
    """(major, minor) -> remapped (major, minor): panels of `panel` majors, walked minor-first."""
    linear = major * n_minor + minor
    panel_blocks = panel * n_minor
    panel_id = tirx.floordiv(linear, panel_blocks)
    offset = tirx.floormod(linear, panel_blocks)
    rows = tirx.min(panel, n_major - panel_id * panel)
    return panel_id * panel + tirx.floormod(offset, rows), tirx.floordiv(offset, rows)


def rasterize_blocks(func: tirx.PrimFunc) -> tirx.PrimFunc:
    markers = []
    tvm_ffi.structural_walk(func.body, [(tirx.Evaluate, lambda s: markers.append(s) if _is_marker(s) else None)])
    if not markers:
        return func
    if len(markers) > 1:
        raise CompileError("T.use_swizzle is used more than once in the kernel", stage="RasterizeBlocks")
    call = markers[0].value
    panel, order = int(call.args[0].value), str(call.args[1].value)
    info = thread_info(func)
    bx, by = info.vars.get("blockIdx.x"), info.vars.get("blockIdx.y")
    if bx is None or by is None:  # a 1-D grid: nothing to rasterize
        return tvm_ffi.structural_mutate(func, [(tirx.Evaluate, lambda s, m: tirx.Evaluate(tirx.const(0, "int32")) if _is_marker(s) else s)])
    gx, gy = info.extents["blockIdx.x"], info.extents["blockIdx.y"]
    if order == "row":
        new_by, new_bx = _remap(by, bx, gy, gx, panel)
    else:
        new_bx, new_by = _remap(bx, by, gx, gy, panel)
    ana = tvm.sym.Analyzer()
    ana.bind(bx, tvm.ir.Range(0, gx))
    ana.bind(by, tvm.ir.Range(0, gy))
    rbx, rby = tirx.Var("bx_swizzled", "int32"), tirx.Var("by_swizzled", "int32")
    vmap = {bx: rbx, by: rby}
    binds = [tirx.Bind(rbx, ana.simplify(new_bx)), tirx.Bind(rby, ana.simplify(new_by))]

    def drop_marker(node, mutator):
        return tirx.Evaluate(tirx.const(0, "int32")) if _is_marker(node) else node

    def on_attr(node, mutator):
        if node.attr_key != "thread_extent":
            return mutator.default_mutate(node)
        nested = []
        tvm_ffi.structural_walk(node.body, [(tirx.AttrStmt, lambda a: nested.append(a)
                                             if a.attr_key == "thread_extent" else None)])
        if nested:
            return mutator.default_mutate(node)
        # the innermost launch: the kernel body proper starts here
        body = tvm_ffi.structural_mutate(substitute(node.body, vmap), [(tirx.Evaluate, drop_marker)])
        return tirx.AttrStmt(node.node, node.attr_key, node.value, seq(binds + [body]))

    return tvm_ffi.structural_mutate(func, [(tirx.AttrStmt, on_attr)])


def RasterizeBlocks():  # noqa: N802
    return tl_pass("RasterizeBlocks", rasterize_blocks)
