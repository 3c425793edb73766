"""The piecewise forms of `T.copy`: LDLMS asynchronous copies (`force_async_copy=True`, `T.async_copy`) and
robust-descriptor copies (`src_robust_desc=`).

The copy is cut into pieces of 4, 8 or 16 bytes (the widest whose every piece is contiguous and aligned in both
operands), each copied by one thread: a `T.Parallel` nest over the pieces (PartitionParallelLoop deals them to the
threads, consecutive threads taking consecutive pieces) whose body calls one template of
tl_templates/musa/async_copy.h:
  tl::cp_async_gs<B>(dst, src)                  LDLMS (`_conditional`, with in_bounds: out of bounds zero-filled)
  tl::cp_async_gs_robust<B>(dst, src, desc)     LDLMS through a robust descriptor (`_conditional` likewise)
  tl::robust_copy<B>(dst, src, desc[, in_bounds])  synchronous robust load, then a store
(upstream TileLang's and Moore Threads' names of the same copies: cp_async_gs, cp_async_commit, cp_async_wait)
Bytes outside the descriptor read as zero. `in_bounds` (the piece lies in its tensor; safe-copy predication) is
left out with TL_DISABLE_SAFE_COPY_PREDICATION, and for robust copies with TL_DISABLE_SAFE_ROBUST_COPY_PREDICATION
(the descriptor alone then protects the reads). The calls take `&dst[...]` marked as written (access_ptr.py): the
barrier analysis orders the copy after earlier readers of dst and the later readers after it (an asynchronous
copy's later readers also wait for its group first). `force_async_copy` completes the copy (commit and wait for every
group), as T.copy does; `T.async_copy` only commits its group.
"""

from __future__ import annotations

import re
from typing import Any

import tvm
import tvm_ffi
from tvm import tirx

from ..errors import CompileError
from ..ir.attrs import NO_SAFE_ACCESS
from ..ir.large_bindings import teach
from ..ir.ops import register_intrinsic
from ..ir.utils import as_int, dtype_bytes, flat_index
from ..layout import Fragment
from ..target import arch_of, archs_with
from .access_ptr import WRITE, access_ptr
from .base import LowerArgs
from .loop_plan import contiguous_width
from .parallel import parallel_nest, thread_local_nest
from .region import Region, common_extents, paired_indices

ASYNC_WAIT = "wait"  # force_async_copy=True: the copy completes before the next statement
ASYNC_COMMIT = "commit"  # T.async_copy: the copy's group is committed; the user waits (T.ptx_wait_group)
ASYNC_ISSUE = "issue"  # a pipelined load (inject_software_pipeline.py): the pass commits and waits
ASYNC_PIECE_BYTES = (16, 8, 4)
ROBUST_PIECE_BYTES = (16, 8, 4, 2, 1)
_SHARED = ("shared", "shared.dyn")
# `&A[i]` where A[i] may lie outside A: a robust copy's source, which its descriptor bounds (the simulator's
# sanitizer build leaves it unchecked; src/codegen/call_rules_tirx.cc).
UNCHECKED_ADDRESS_OF_OP = "tl.unchecked_address_of"
register_intrinsic(UNCHECKED_ADDRESS_OF_OP, "the address of an element that may lie outside its buffer")


_PIECE_CALLS = re.compile(r"tl::(cp_async_gs|cp_async_gs_robust|robust_copy)(_conditional)?<(\d+)>")


def global_piece_alignment(call: Any) -> tuple[Any, int] | None:
    """(the global buffer, the bytes its address must be a multiple of) for a copy piece this module prints (the
    piece's width: LDLMS and the robust loads move naturally aligned pieces); None for any other call."""
    if call.op.name != "tirx.call_extern" or len(call.args) < 3 or not isinstance(call.args[0], tvm.ir.StringImm):
        return None
    match = _PIECE_CALLS.fullmatch(call.args[0].value)
    source = call.args[2]
    if match is None or not isinstance(source, tvm.ir.expr.Call) or not source.args or \
            not isinstance(source.args[0], tvm.ir.expr.TensorLoad):
        return None
    return source.args[0].source, int(match.group(3))


def commit_group() -> Any:
    return tirx.Evaluate(tirx.call_extern("int32", "tl::cp_async_commit"))


def wait_group(pending: int) -> Any:
    return tirx.Evaluate(tirx.call_extern("int32", f"tl::cp_async_wait<{pending}>"))


class AsyncCopyScopeError(CompileError, tvm.error.InternalError):
    """`T.async_copy` between anything but global memory and a shared tile, raised when the program is lowered: an
    InternalError too, as upstream's lowering (and Moore Threads' tests) raise it."""


def check_async_operands(construct: str, src: Region, dst: Region, error, lowering: bool = False,
                         loc: Any = None) -> None:
    """The guide's conditions of an LDLMS copy, other than the piece size (checked when lowering). T.async_copy's
    scopes are checked only when lowering (an AsyncCopyScopeError at the copy's line `loc`)."""
    scopes = (src.scope, dst.scope)
    if construct == "T.async_copy" and (src.scope != "global" or dst.scope not in _SHARED):
        if not lowering:
            return None  # the frontend: lowering raises it, where upstream does
        raise AsyncCopyScopeError(f"T.async_copy only supports global->shared/shared.dyn copies: `{src.name}` "
                                  f"({scopes[0]}) -> `{dst.name}` ({scopes[1]}); an asynchronous (LDLMS) copy reads "
                                  "global memory into a shared tile (copy other memories with T.copy)", loc)
    if src.scope != "global":
        raise error(f"{construct}: an asynchronous (LDLMS) copy reads global memory; the source `{src.name}` is "
                    f"{src.scope}")
    if dst.scope not in _SHARED:
        raise error(f"{construct}: an asynchronous (LDLMS) copy writes shared memory; the destination `{dst.name}` is "
                    f"{dst.scope}")
    if src.dtype != dst.dtype:
        raise error(f"{construct}: an asynchronous (LDLMS) copy moves bytes unchanged; source `{src.name}` is "
                    f"{src.dtype} but destination `{dst.name}` is {dst.dtype}")
    return None


def check_robust_operands(construct: str, src: Region, dst: Region, error) -> None:
    if src.scope != "global":
        raise error(f"{construct}: src_robust_desc= guards reads of global memory; the source `{src.name}` is "
                    f"{src.scope}")
    if dst.scope not in (*_SHARED, "global", "local"):
        raise error(f"{construct}: a robust copy writes whole pieces to contiguous memory (shared, global or "
                    f"local); the destination `{dst.name}` is {dst.scope}")
    if src.dtype != dst.dtype:
        raise error(f"{construct}: a robust copy moves bytes unchanged; source `{src.name}` is {src.dtype} but "
                    f"destination `{dst.name}` is {dst.dtype}")


def _innermost_contiguous(region: Region, dim: int | None) -> bool:
    """Whether copy dimension `dim` (None: a single element) is the buffer's last, unit-stride dimension."""
    if dim is None:
        return True
    strides = list(region.buffer.ty.strides or [])
    if dim != region.ndim - 1:
        return False
    return not strides or (isinstance(strides[-1], tirx.IntImm) and int(strides[-1].value) == 1)


def piece_elements(copy: Any, dims: tuple[list[int], list[int]], extents: list[Any], allowed: tuple[int, ...],
                   construct: str, bindings: dict | None = None) -> int:
    """Elements per piece: the widest allowed byte size whose pieces are contiguous and aligned in both operands
    (`bindings`: the large bindings the indices may read, ir/large_bindings.py)."""
    src, dst = copy.src, copy.dst
    elem = dtype_bytes(src.dtype)
    elem_bits = _element_bits(src.dtype)  # fp4 / int4: two elements a byte, 32 of them a 16-byte piece
    inner_src = dims[0][-1] if dims[0] else None
    inner_dst = dims[1][-1] if dims[1] else None
    # A strided operand (`g[b, t0:t1, h]`) still takes one-element pieces where an element is an allowed size.
    strided = [(name, region) for name, region, dim in (("source", src, inner_src), ("destination", dst, inner_dst))
               if not _innermost_contiguous(region, dim)]
    if strided and elem not in allowed:
        name, region = strided[0]
        raise copy.error(f"{construct}: the {name} `{region.name}` is not contiguous along the copy's innermost "
                         f"dimension, so the copy's pieces are single {elem}-byte elements, not "
                         f"{'/'.join(map(str, sorted(allowed)))} bytes; copy whole rows of the tensor's last dimension")
    inner_extent = extents[-1] if extents else tirx.const(1, "int32")
    ana = tvm.sym.Analyzer()
    piece = tirx.Var("piece", "int32")
    for nbytes in allowed:
        if nbytes * 8 % elem_bits:
            continue
        lanes = nbytes * 8 // elem_bits
        if lanes > 1 and strided:
            continue
        if lanes > 1 and (not isinstance(inner_extent, tirx.IntImm) or int(inner_extent.value) % lanes):
            continue
        idx = [tirx.Var(f"i{k}", "int32") for k in range(len(extents))]
        if idx:
            idx[-1] = piece * lanes
        src_index, dst_index = paired_indices(src, dst, dims, idx)
        flat = [flat_index(r.buffer, index) for r, index in ((src, src_index), (dst, dst_index))]
        teach(ana, flat, bindings or {})
        if all(_aligned(ana, index, lanes) for index in flat):
            return lanes
    sizes = "/".join(str(b) for b in sorted(allowed))
    raise copy.error(
        f"{construct}: the copy cannot be cut into {sizes}-byte pieces: a piece must be contiguous and aligned in "
        f"both {src.name} ({src.dtype}, {elem} bytes an element) and {dst.name}, and the innermost extent "
        f"{inner_extent} must hold a whole number of pieces (widen the innermost run, or align its start and the "
        "rows' length)")


def _element_bits(dtype: Any) -> int:
    dt = tvm.runtime.DataType(str(dtype))
    return dt.bits * dt.lanes


def _aligned(ana: Any, index: Any, lanes: int) -> bool:
    if lanes == 1:
        return True
    mod = ana.modular_set(ana.simplify(index))
    return mod.coeff % lanes == 0 and mod.base % lanes == 0


def _in_bounds(region: Region, index: list[Any], lanes: int, ana: Any) -> Any:
    """The piece starting at `index` (lanes elements along the last dimension) lies inside its tensor; None when
    `ana` (which knows the pieces' loop ranges) proves it."""
    conds = []
    shape = list(region.buffer.ty.shape)
    for d, (i, extent) in enumerate(zip(index, shape)):
        last = i + (lanes - 1) if d == len(shape) - 1 and lanes > 1 else i
        for cond in (i >= 0, last < extent):
            cond = ana.simplify(cond)
            if not (isinstance(cond, tirx.IntImm) and int(cond.value) == 1):
                conds.append(cond)
    out = None
    for cond in conds:
        out = cond if out is None else tirx.And(out, cond)
    return out


def _reads_memory(expr: Any) -> bool:
    """Whether `expr` loads from global or shared memory (a thread's registers are read again for free)."""
    found = []
    tvm_ffi.structural_walk(expr, [(tvm.ir.expr.TensorLoad, lambda n: found.append(n)
                                    if str(n.source.ty.storage_scope) in ("global", *_SHARED) else None)])
    return bool(found)


def _layout_run(copy: Any, extents: list[Any], construct: str) -> int | None:
    """The elements in a row that the copy's `loop_layout=F` gives one thread (contiguous_width), or None without
    one. F maps the copy's element loop, as upstream's: it must have the copy's (constant) extents."""
    if copy.loop_layout is None or copy.per_thread or copy.thread_private or not extents:
        return None
    ints = [as_int(e) for e in extents]
    shape = [as_int(e) for e in copy.loop_layout.input_shape]
    if None in ints or shape != ints:
        raise copy.error(f"{construct}: loop_layout {copy.loop_layout!r} has input shape {shape}, but the copy's "
                         f"extents are {[str(e) for e in extents]}; a loop layout maps the copy's elements, so its "
                         "shape must equal the (constant) extents")
    return contiguous_width(copy.loop_layout, ints)


def _piece_bytes(copy: Any, extents: list[Any], construct: str) -> tuple[tuple[int, ...], int | None]:
    """The piece sizes the copy may take, and its loop_layout's run (None without one): a piece is copied by one
    thread, so it is no wider than the layout's runs of a thread's consecutive elements."""
    allowed = ASYNC_PIECE_BYTES if copy.async_mode is not None else ROBUST_PIECE_BYTES
    run = _layout_run(copy, extents, construct)
    if run is None:
        return allowed, None
    allowed = tuple(b for b in allowed if b * 8 // _element_bits(copy.src.dtype) <= run)
    if not allowed:
        raise copy.error(f"{construct}: loop_layout {copy.loop_layout!r} gives each thread runs of {run} "
                         f"{copy.src.dtype} element(s), less than the smallest piece of an asynchronous copy "
                         "(4 bytes); give each thread at least 4 contiguous bytes of the innermost dimension")
    return allowed, run


def _piece_layout(layout: Fragment, piece_extents: list[Any], lanes: int) -> Fragment:
    """`layout` (element -> (thread, slot)) over the copy's pieces of `lanes` elements: piece (.., p) goes where its
    first element (.., p * lanes) goes, in slot // lanes (its lanes are one thread's consecutive slots)."""
    def first_element(xs):
        return [*xs[:-1], xs[-1] * lanes]

    dims = len(piece_extents)
    replicas = as_int(layout.replicate_size) or 1
    return Fragment([as_int(e) for e in piece_extents],
                    forward_thread_fn=lambda *v: layout.thread(first_element(v[:dims]), rep=v[dims] if replicas > 1
                                                               else 0),
                    forward_index_fn=lambda *xs: tirx.floordiv(layout.index(first_element(xs)), lanes),
                    replicate=replicas)


def lower_piecewise_copy(copy: Any, args: LowerArgs) -> Any:
    """The async and/or robust lowering of a Copy (see the module docstring)."""
    construct = "T.async_copy" if copy.async_mode == ASYNC_COMMIT else "T.copy"
    robust = copy.robust_desc is not None
    arch = arch_of(args.target) if args.target is not None else None
    what, capability = ("asynchronous (LDLMS) copies", "has_async_copy") if copy.async_mode is not None else \
        ("robust loads", "has_robust_access")
    if arch is not None and not getattr(arch, capability):
        raise copy.error(f"{construct}: {arch.name} has no {what} ({archs_with(capability)[0]} and later)")
    if copy.async_mode is not None:
        check_async_operands(construct, copy.src, copy.dst, copy.error, lowering=True, loc=copy.loc)
    if robust:
        check_robust_operands(construct, copy.src, copy.dst, copy.error)
    dims = copy.copy_dims()  # none for one element; a per-thread run of lanes (FuseAsyncCopyLanes) has one
    extents = list(common_extents(copy.src, copy.dst, dims))
    allowed, run = _piece_bytes(copy, extents, construct)
    lanes = piece_elements(copy, dims, extents, allowed, construct, args.bindings)
    nbytes = lanes * _element_bits(copy.src.dtype) // 8
    predicated = not args.options.disable_safe_copy_predication and not (
        robust and args.options.disable_safe_robust_copy_predication)
    if copy.async_mode is not None:
        base = "tl::cp_async_gs_robust" if robust else "tl::cp_async_gs"
    else:
        base = "tl::robust_copy"

    piece_extents = list(extents[:-1]) + [tirx.const(int(extents[-1].value) // lanes, "int32")] if extents \
        else [tirx.const(1, "int32")]

    def piece(idx):
        ana = tvm.sym.Analyzer()
        for var, extent in zip(idx, piece_extents):
            if isinstance(var, tvm.ir.expr.Var):
                ana.bind(var, tvm.ir.Range(0, extent))
        if isinstance(args.thread_var, tvm.ir.expr.Var) and args.num_threads:  # one thread dim, no guards around:
            ana.bind(args.thread_var, tvm.ir.Range(0, args.num_threads))  # `src[tid]` may be provably in bounds
        idx = list(idx)
        if idx:
            idx[-1] = idx[-1] * lanes
        src_index, dst_index = paired_indices(copy.src, copy.dst, dims, idx)
        teach(ana, src_index, args.bindings)  # `by = tile % 4 // 2` kept as a binding still lies in [0, 2)
        # An index read from memory (a row gathered through an index tensor) is read once: the guard, the clamped
        # address and the bounds all use it.
        binds = []
        for d, index in enumerate(src_index):
            if _reads_memory(index):
                row = tirx.Var(f"{copy.src.name}_row" if d == 0 else f"{copy.src.name}_index{d}", index.ty.dtype)
                binds.append(tirx.Bind(row, index))
                src_index[d] = row
        cond = _in_bounds(copy.src, src_index, lanes, ana) if predicated else None
        if cond is not None:  # a piece out of bounds is not read: its address stays inside the tensor too
            src_index = [tirx.Select(cond, i, tirx.const(0, i.ty.dtype)) for i in src_index]
        source = copy.src.buffer[tuple(src_index)]
        call_args = [access_ptr(copy.dst.buffer[tuple(dst_index)], WRITE),
                     tirx.call_intrin("handle", UNCHECKED_ADDRESS_OF_OP, source) if robust else tirx.address_of(source)]
        if robust:
            call_args.append(copy.robust_desc)
        name = f"{base}<{nbytes}>"
        if cond is not None:
            call_args.append(cond)
            if copy.async_mode is not None:  # the predicated LDLMS forms carry the suffix upstream gives them
                name = f"{base}_conditional<{nbytes}>"
        stmt = tirx.Evaluate(tirx.call_extern("int32", name, *call_args))
        return tirx.SeqStmt([*binds, stmt]) if binds else stmt

    if copy.per_thread or copy.thread_private:  # each thread that runs it copies its own run
        one_piece = all(isinstance(e, tirx.IntImm) and int(e.value) == 1 for e in piece_extents)
        stmt = piece([tirx.const(0, "int32")] * len(extents)) if one_piece else thread_local_nest(piece_extents, piece)
    else:
        layout = _piece_layout(copy.loop_layout, piece_extents, lanes) if run is not None else None
        stmt = parallel_nest(piece_extents, piece if extents else (lambda idx: piece([])), copy.loc,
                             loop_layout=layout)
    # The pieces read global memory through addresses the bounds guards must leave alone (they are predicated here).
    stmt = tirx.AttrStmt(copy.dst.buffer, NO_SAFE_ACCESS, tirx.const(1, "int32"), stmt)
    if copy.async_mode == ASYNC_WAIT:
        return tirx.SeqStmt([stmt, commit_group(), wait_group(0)])
    if copy.async_mode == ASYNC_COMMIT:
        return tirx.SeqStmt([stmt, commit_group()])
    return stmt  # synchronous robust copy, or ASYNC_ISSUE (the pipeline commits and waits)
