"""`T.ptx_cp_async(dst_ptr, src_ptr, n)` lowered: one LDLMS copy of n elements from a global address to a shared
address, printed as `tl::cp_async_gs<Bytes>(dst, src)` (`tl::cp_async_gs_conditional<Bytes>(dst, src, pred)` with a
predicate: zeros when it is false), the LDLMS copy T.async_copy issues (tl_templates/musa/async_copy.h), under
upstream's and Moore Threads' name. The call carries the `tl.ptx_cp_async` attribute, which tells it from
T.async_copy's pieces, and its element count. A copy of fewer bytes (one element a lane of a T.vectorized loop) is
a lane copy until FoldCpAsyncLanes (transform/fold_cp_async_lanes.py) folds the lanes into one copy or refuses it.

The destination is the address of a shared tile element; when the tile is stored in a layout (a gemm's swizzle),
LowerSharedLayout takes the address of the element under it, and the copy's bytes must be the next n elements of
the row in that layout too: `check_contiguous_run` proves it (evaluated at every thread and loop value; an
error otherwise: the copy would write the wrong elements).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import tvm
import tvm_ffi
from tvm import tirx

from ..errors import CompileError
from ..ir.utils import as_int, loc_from_text
from ..layout._expr import evaluate
from ..target import arch_of, archs_with
from .access_ptr import as_access

CP_ASYNC_GS = "tl::cp_async_gs"
MARK_ATTR = "tl.ptx_cp_async"  # the copy's byte count, once it is 4, 8 or 16
ELEMS_ATTR = "tl.ptx_cp_async_elems"  # the copy's element count (a lane's, in a T.vectorized loop, until folded)
LOC_ATTR = "tl.loc"
LDLMS_BYTES = (4, 8, 16)
UNFOLDED = f"{CP_ASYNC_GS}_lane"  # the callee of a lane copy FoldCpAsyncLanes has not yet folded: never printed


def copy_bytes_of(num_elems: int, dtype: str) -> int | None:
    """The bytes `num_elems` elements of `dtype` span when an LDLMS copy can move them (4, 8 or 16; sub-byte types
    counted in bits: 32 int4 are 16 bytes), else None."""
    bits = num_elems * tvm.runtime.DataType(dtype).bits
    return bits // 8 if bits % 8 == 0 and bits // 8 in LDLMS_BYTES else None


def cp_async_ptr_call(dst: Any, src: Any, num_elems: int, predicate: Any, loc: Any) -> Any:
    """The extern call of one copy of `num_elems` elements (dst and src are tl.access_ptr markers), carrying the
    user's line. A count too small for one LDLMS copy is a lane copy, for FoldCpAsyncLanes to fold or refuse."""
    num_bytes = copy_bytes_of(num_elems, str(as_access(dst).element.source.ty.dtype.dtype))
    if num_bytes is None:
        name = UNFOLDED
    else:
        name = f"{CP_ASYNC_GS}_conditional<{num_bytes}>" if predicate is not None else f"{CP_ASYNC_GS}<{num_bytes}>"
    args = [tvm.ir.expr.StringImm(name), dst, src] + ([predicate] if predicate is not None else [])
    attrs = {ELEMS_ATTR: num_elems, **({MARK_ATTR: num_bytes} if num_bytes is not None else {}),
             **({LOC_ATTR: str(loc)} if loc is not None else {})}
    return tvm.ir.Call(tvm.ir.Op.get("tirx.call_extern"), args, attrs=attrs, ret_ty="int32")


def cp_async_elems(call: Any) -> int | None:
    """The element count of a T.ptx_cp_async copy, else None (any other call)."""
    if not isinstance(call, tvm.ir.Call) or call.attrs is None or ELEMS_ATTR not in call.attrs:
        return None
    return int(call.attrs[ELEMS_ATTR])


def copy_loc(call: Any) -> Any:
    """The user's line of a T.ptx_cp_async copy (a SourceLoc), or None."""
    loc = call.attrs[LOC_ATTR] if call.attrs is not None and LOC_ATTR in call.attrs else None
    return loc_from_text(str(loc)) if loc is not None else None


def _copy_bytes(call: Any) -> int | None:
    """The byte count of a T.ptx_cp_async copy, else None."""
    if call.attrs is None or MARK_ATTR not in call.attrs:
        return None
    return int(call.attrs[MARK_ATTR])


MAX_POINTS = 1 << 20  # the most (thread, loop) points the contiguity check evaluates


def _points(exprs: list, ranges: dict) -> dict | None:
    """Each free Var of `exprs` -> an array over its range (axes of a grid), or None if one has no known range."""
    free: list = []
    for expr in exprs:
        tvm_ffi.structural_walk(expr, [(tirx.Var, lambda v: free.append(v) if not any(v.same_as(f) for f in free)
                                        else None)])
    if any(v not in ranges for v in free):
        return None
    if int(np.prod([ranges[v][1] for v in free], dtype=np.int64)) > MAX_POINTS:
        return None
    env = {}
    for axis, var in enumerate(free):
        start, extent = ranges[var]
        env[var] = (start + np.arange(extent, dtype=np.int64)).reshape([-1] + [1] * (len(free) - axis - 1))
    return env


def _flat(outputs: list, shape: list) -> Any:
    offset = np.int64(0)
    for index, extent in zip(outputs, shape):
        offset = offset * extent + index
    return offset


def _describe(call: Any, element: Any, num_bytes: int, why: str) -> CompileError:
    loc = call.attrs[LOC_ATTR] if call.attrs is not None and LOC_ATTR in call.attrs else None
    return CompileError(
        f"T.ptx_cp_async: the {num_bytes} bytes from `{element}` are not the next elements of `{element.source.name}`"
        f" in its shared layout ({why}); an LDLMS copy writes contiguous bytes, so it would store the elements at "
        "the wrong places. Copy whole 16-byte chunks at 16-byte-aligned columns, or leave the tile row-major",
        loc_from_text(str(loc)) if loc is not None else None, stage="LowerSharedLayout")


def _check_one(call: Any, layouts: dict, ranges: dict) -> None:
    num_bytes = _copy_bytes(call)
    access = as_access(call.args[1]) if num_bytes is not None else None
    if access is None or access.element.source not in layouts:
        return
    element, layout = access.element, layouts[access.element.source]
    count = num_bytes * 8 // tvm.runtime.DataType(str(element.source.ty.dtype.dtype)).bits
    env = _points(list(element.indices), ranges)
    if env is None:
        raise _describe(call, element, num_bytes, "its indices depend on values other than the thread index and "
                        "constant-range loops, so the compiler cannot check it")
    coords = [np.asarray(evaluate(i, env)) for i in element.indices]
    if np.any(coords[-1] + count > as_int(element.source.ty.shape[-1])):
        raise _describe(call, element, num_bytes, f"the run of {count} elements crosses the end of a row")
    out_shape = [as_int(e) for e in layout.output_shape]
    start = _flat(layout.evaluate(*coords), out_shape)
    for k in range(1, count):
        moved = _flat(layout.evaluate(*coords[:-1], coords[-1] + k), out_shape)
        if np.any(moved - start != k):
            raise _describe(call, element, num_bytes, f"element +{k} of the run is not stored {k} after the first")


def _refuse_without_ldlms(call: Any, target: Any) -> None:
    arch = arch_of(target) if target is not None else None
    if arch is not None and not arch.has_async_copy:
        loc = call.attrs[LOC_ATTR] if call.attrs is not None and LOC_ATTR in call.attrs else None
        raise CompileError(f"T.ptx_cp_async: {arch.name} has no asynchronous (LDLMS) copies "
                           f"({archs_with('has_async_copy')[0]} and later)",
                           loc_from_text(str(loc)) if loc is not None else None, stage="LowerSharedLayout")


def check_copies(body: Any, layouts: dict, threads: Any, target: Any) -> None:
    """The target has the copies, and every T.ptx_cp_async copy into a laid-out tile writes the next elements of its
    row in the tile's layout: checked at every thread index and every value of the constant-range loops around it
    (conditions not taken into account)."""
    ranges = {var: (0, as_int(threads.extents[tag])) for tag, var in threads.vars.items()}

    def visit(node: Any) -> None:
        if isinstance(node, tirx.For):
            extent, start = as_int(node.extent), as_int(node.min)
            if extent is not None and start is not None and extent > 0:
                ranges[node.loop_var] = (start, extent)
        elif isinstance(node, tvm.ir.Call) and _copy_bytes(node) is not None:
            _refuse_without_ldlms(node, target)
            _check_one(node, layouts, ranges)

    tvm_ffi.structural_walk(body, [(tirx.For, visit), (tvm.ir.Call, visit)], order="pre")
