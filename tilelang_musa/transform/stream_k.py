"""StreamK: a stream-K schedule of a data-parallel GEMM kernel (PassConfig `tl.stream_k`), bit-identical to it.

The pattern: one `T.Kernel` whose grid (bx, by [, bz]) numbers output tiles, with constant extents; in its body an
accumulator fragment cleared (`T.clear(acc)`) right before one `T.Pipelined` K loop of constant extent whose body
only copies into on-chip tiles and `T.gemm`s into `acc`; then an epilogue that reads `acc` (and stores the tile).
Before the clear only allocations (and `T.use_swizzle`). Any other kernel is left as written, with a warning naming
what did not match.

The rewrite: P persistent blocks (one per MP by default) divide the tiles x K-steps pairs evenly and in order: block
p takes pairs [p * total // P, (p + 1) * total // P). Its range cuts at most two tiles: the one it ends in (its
*head*, K-steps 0 .. ke, whose remaining steps the next block computes) and the one it starts in (its *tail*, from
K-step kb > 0, whose head the previous block computed). So that nobody waits in steady state, a block first
computes and publishes its head, then its whole tiles, and last its tail, whose head the previous block published
first. A tail continues from the previous block's float32 partial (loaded into `acc` from a workspace) instead of
from zero, in the same K order, so every tile's float32 sums are exactly the data-parallel kernel's: the outputs are
bit-identical. A block whose whole range lies inside one tile (P > tiles) continues and publishes the same tile.
The block's pairs, in that order, are ONE `T.Pipelined` loop with the user's stages and body (the K index and the
tile's block indices computed from the pair), with a piece's start (clear, or wait and load the partial) and end
(the epilogue, or store and publish the partial) under conditions inside it: so the software pipeline, and on
mp_31 the warp specialization, run across pieces as across K-steps.

The hand-off is per thread: the partial's fragment elements are stored and loaded by the same thread of both
blocks (the same layout), so thread t of block p publishes its elements and arrives on flag (p, t)
(`tl::grid_flag_arrive`: a fence, then an atomic add) and thread t of block p + 1 waits for that flag
(`tl::grid_flag_wait`) before loading them: no block barrier, so warp-specialized kernels need none either. The
flags are a workspace the launcher zeroes for every call (ZEROED_WORKSPACES_ATTR); the partials a workspace of
any content (each is written before it is read).

Runs on the whole program, before it is split into kernels: it adds the two workspace parameters, which the
launcher allocates.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import tvm
import tvm_ffi
from tvm import tirx
from tvm.tirx.script import builder as Tb

from ..diagnostics import warn_once
from ..errors import CompileError
from ..ir.attrs import PIPELINE_STAGES, WORKSPACES_ATTR, ZEROED_WORKSPACES_ATTR
from ..ir.ops import USE_SWIZZLE_OP
from ..ir.options import CompileOptions
from ..ir.pass_config import _truthy
from ..ir.utils import as_int, scope_of, seq, substitute
from ..target import ARCHS
from .rasterize_blocks import _remap

FILL, COPY, GEMM = "tl.tileop.fill", "tl.tileop.copy", "tl.tileop.gemm"
PARTIALS, FLAGS = "stream_k_partials", "stream_k_flags"


@dataclass
class _Match:
    blocks: list[Any]  # the block IterVars, x first
    extents: list[int]
    threads: list[tuple[Any, int]]  # the thread attrs' IterVars and extents, outermost first
    prefix: list[Any]  # the body's statements before the clear (allocations)
    swizzle: tuple[int, str] | None
    clear: Any
    loop: Any
    epilogue: list[Any]
    acc: Any
    loc: Any


def _call(stmt: Any) -> Any:
    if isinstance(stmt, tirx.Evaluate) and isinstance(stmt.value, tvm.ir.Call) and isinstance(stmt.value.op, tvm.ir.Op):
        return stmt.value
    return None


def _op(stmt: Any) -> str:
    call = _call(stmt)
    return str(call.op.name) if call is not None else ""


def _region_buffer(arg: Any) -> Any:
    return arg.source if isinstance(arg, tvm.ir.expr.TensorRegion) else None


def _match(func: tirx.PrimFunc) -> _Match | str:
    """The pattern's parts, or why the kernel does not match."""
    attrs, node = [], func.body
    while isinstance(node, tirx.AttrStmt) and node.attr_key == "thread_extent":
        attrs.append(node)
        node = node.body
    if not attrs:
        return "the program has no T.Kernel at its top"
    nested = []
    tvm_ffi.structural_walk(node, [(tirx.AttrStmt, lambda a: nested.append(a) if a.attr_key == "thread_extent" else None)])
    if nested:
        return "the program has more than one T.Kernel, or thread bindings inside its body"
    blocks, threads = {}, []
    for a in attrs:
        tag, extent = str(a.node.thread_tag), as_int(a.value)
        if extent is None:
            return f"the extent of {tag} is not a constant"
        if tag.startswith("blockIdx."):
            blocks[tag] = (a.node, extent)
        else:
            threads.append((a.node, extent))
    if "blockIdx.x" not in blocks or (("blockIdx.z" in blocks) and "blockIdx.y" not in blocks):
        return "the grid is not (bx[, by[, bz]])"
    tags = [t for t in ("blockIdx.x", "blockIdx.y", "blockIdx.z") if t in blocks]
    stmts = list(node.seq) if isinstance(node, tirx.SeqStmt) else [node]
    loops = [i for i, s in enumerate(stmts) if isinstance(s, tirx.For) and PIPELINE_STAGES in s.annotations]
    if len(loops) != 1:
        return f"the kernel body has {len(loops)} T.Pipelined loops at its top level (one is needed)"
    at = loops[0]
    loop = stmts[at]
    inner = []
    tvm_ffi.structural_walk(loop.body, [(tirx.For, lambda f: inner.append(f) if PIPELINE_STAGES in f.annotations else None)])
    if inner or any(isinstance(s, tirx.For) and PIPELINE_STAGES in s.annotations for s in stmts[at + 1:]):
        return "the kernel has nested or further T.Pipelined loops"
    if at == 0 or _op(stmts[at - 1]) != FILL:
        return "the T.Pipelined loop is not right after a T.clear of its accumulator"
    clear = _call(stmts[at - 1])
    acc = _region_buffer(clear.args[0])
    value = clear.args[1]
    if acc is None or scope_of(acc) != "local.fragment" or not isinstance(value, (tirx.FloatImm, tirx.IntImm)) \
            or float(value.value) != 0.0:
        return "the statement before the T.Pipelined loop is not a T.clear of a fragment"
    if as_int(loop.min) is None or as_int(loop.extent) is None:
        return "the T.Pipelined loop's bounds are not constants"
    swizzle = None
    for s in stmts[:at - 1]:
        if isinstance(s, (tirx.AllocBuffer, tirx.DeclBuffer)):
            continue
        if _op(s) == USE_SWIZZLE_OP:
            call = _call(s)
            swizzle = (int(call.args[0].value), str(call.args[1].value))
            continue
        return "a statement other than an allocation comes before T.clear"
    why = _loop_body_reason(loop.body, acc)
    if why:
        return why
    locs = [c.attrs["tl.loc"] for c in [clear] if c.attrs is not None and "tl.loc" in c.attrs]
    return _Match([blocks[t][0] for t in tags], [blocks[t][1] for t in tags], threads,
                  stmts[:at - 1], swizzle, stmts[at - 1], loop, stmts[at + 1:], acc, locs[0] if locs else None)


def _loop_body_reason(body: Any, acc: Any) -> str:
    """Why the K loop's body is not only copies into on-chip tiles and T.gemm into `acc` ('' if it is)."""
    reasons = []
    gemms = []

    def on_call(call: Any) -> None:
        if not isinstance(call.op, tvm.ir.Op) or not str(call.op.name).startswith("tl.tileop."):
            return
        name = str(call.op.name)
        if name == GEMM:
            c = _region_buffer(call.args[2])
            clear = call.attrs is not None and "clear_accum" in call.attrs and bool(call.attrs["clear_accum"])
            if c is None or not c.same_as(acc) or clear:
                reasons.append("a T.gemm in the K loop does not accumulate into the cleared fragment")
            gemms.append(call)
        elif name == COPY:
            dst = _region_buffer(call.args[1])
            if dst is None or scope_of(dst) == "global" or dst.same_as(acc):
                reasons.append("a T.copy in the K loop writes global memory or the accumulator")
        else:
            reasons.append(f"the K loop holds {name.split('.')[-1]}, not only copies and gemms")

    def on_store(store: Any) -> None:
        reasons.append("the K loop stores to a buffer outside T.copy / T.gemm")

    tvm_ffi.structural_walk(body, [(tvm.ir.Call, on_call), (tirx.BufferStore, on_store)])
    if not gemms:
        reasons.append("the K loop has no T.gemm")
    return reasons[0] if reasons else ""


def persistent_blocks(setting: Any, arch: str) -> int | None:
    """The number of persistent blocks `tl.stream_k` asks for on `arch` (None: off)."""
    if isinstance(setting, str):
        setting = int(setting.strip()) if setting.strip().isdigit() else _truthy(setting)
    if setting is None or setting is False:
        return None
    if setting is True:
        mps = ARCHS[arch].multiprocessors if arch in ARCHS else None
        if mps is None:
            raise CompileError(f"tl.stream_k=True: the number of multiprocessors of {arch} is not known; give the "
                               "number of persistent blocks instead (tl.stream_k=<n>)")
        return mps
    if isinstance(setting, int) and not isinstance(setting, bool):
        if setting == 0:
            return None
        if setting < 0:
            raise CompileError(f"tl.stream_k: the number of persistent blocks must be positive; got {setting}")
        return setting
    raise CompileError(f"tl.stream_k: expected True, False or a number of persistent blocks; got {setting!r}")


def stream_k(func: tirx.PrimFunc, options: CompileOptions, arch: str) -> tirx.PrimFunc:
    """`func` on a stream-K schedule where `tl.stream_k` asks for one and the kernel matches; else `func`."""
    blocks = persistent_blocks(options.stream_k, arch)
    if blocks is None:
        return func
    match = _match(func)
    name = str(func.attrs["global_symbol"]) if func.attrs is not None and "global_symbol" in func.attrs else "main"
    if isinstance(match, str):
        warn_once(f"stream_k.{name}.{match}", f"tl.stream_k: kernel `{name}` keeps its grid as written: {match} "
                  "(the stream-K schedule applies to a data-parallel GEMM: T.clear(acc), one T.Pipelined K loop of "
                  "copies and T.gemm into acc, then the epilogue)")
        return func
    return _rewrite(func, match, blocks)


def _global(name: str, shape: list[int], dtype: str) -> Any:
    return tvm.ir.expr.Var(name, Tb.buffer(shape, dtype).ty)


def _region(buffer: Any, first: Any, rest: list[int]) -> Any:
    return tirx.BufferRegion(buffer, [tvm.ir.Range.from_min_extent(first, 1),
                                      *[tvm.ir.Range.from_min_extent(0, n) for n in rest]])


def _full(buffer: Any) -> Any:
    return tirx.BufferRegion(buffer, [tvm.ir.Range.from_min_extent(0, n) for n in buffer.ty.shape])


def _tile_op(name: str, args: list[Any], loc: Any) -> Any:
    attrs = {"tl.loc": loc} if loc is not None else {}
    return tirx.Evaluate(tvm.ir.Call(tvm.ir.Op.get(name), args, attrs=attrs, ret_ty="int32"))


def _assume(cond: Any) -> Any:
    return tirx.Evaluate(tirx.assume(cond))


def _rewrite(func: tirx.PrimFunc, m: _Match, requested: int) -> tirx.PrimFunc:
    ks = as_int(m.loop.extent)
    k0 = as_int(m.loop.min)
    tiles = 1
    for e in m.extents:
        tiles *= e
    total = tiles * ks
    P = max(1, min(requested, total))
    wide = "int64" if (total * (P + 1)) >= 2**31 else "int32"
    nthreads = 1
    for _, e in m.threads:
        nthreads *= e
    acc_shape = [as_int(d) for d in m.acc.ty.shape]
    if any(d is None for d in acc_shape):
        raise CompileError("tl.stream_k: the accumulator's shape is not constant")
    partials = _global(PARTIALS, [P, *acc_shape], str(m.acc.ty.dtype))
    flags = _global(FLAGS, [P, nthreads], "int32")

    def c(v: int) -> Any:
        return tirx.const(v, wide)

    pid = tirx.Var("pid", "int32")
    pw = tirx.Cast(wide, pid) if wide != "int32" else pid
    start = tirx.floordiv(pw * c(total), c(P))
    end = tirx.floordiv((pw + c(1)) * c(total), c(P))
    ana = tvm.sym.Analyzer()
    ana.bind(pid, tvm.ir.Range(0, P))
    last = tirx.Var("last_tile", wide)
    rotate = tirx.Var("head_start", wide)
    tail_end = tirx.Var("tail_end", wide)
    pair = tirx.Var("pair", wide)
    tile = tirx.Var("tile", wide)
    kk = tirx.Var("k_step", wide)

    coords = _tile_block_indices(m, tirx.Cast("int32", tile) if wide != "int32" else tile)
    names = ["bx", "by", "bz"]
    block_vars = [tirx.Var(names[i] if i < 3 else f"b{i}", "int32") for i in range(len(coords))]
    vmap = {iv.var: v for iv, v in zip(m.blocks, block_vars)}
    tid = _linear_thread_index(m, ana)

    wait, load, store, arrive = _handoff(m, pid, tid, partials, flags, acc_shape)
    # One T.Pipelined loop over the block's pairs, so that the pipeline (and on mp_31 warp specialization) runs
    # across its pieces: the head piece [rotate, end) first, then the whole tiles [tail_end, rotate), last the tail
    # piece [start, tail_end), whose head the previous block published first.
    k = m.loop
    j = tirx.Var("j", "int32")
    jw = tirx.Cast(wide, j) if wide != "int32" else j
    head = end - rotate
    whole = rotate - tail_end
    pair_value = tirx.Select(jw < head, rotate + jw,
                             tirx.Select(jw < head + whole, tail_end + jw - head, start + jw - head - whole))
    kk32 = tirx.Cast("int32", kk) if wide != "int32" else kk
    body = seq([
        tirx.Bind(pair, pair_value),
        tirx.Bind(tile, tirx.floordiv(pair, c(ks))),
        tirx.Bind(kk, tirx.floormod(pair, c(ks))),
        *[tirx.Bind(v, ana.simplify(e)) for v, e in zip(block_vars, coords)],
        # facts the bounds guards of the epilogue's stores cannot derive through the pair's rotation and the swizzle
        *[_assume(tirx.And(v >= 0, v < e)) for v, e in zip(block_vars, m.extents)],
        # a piece starts: a tail continues the previous block's partial, any other piece starts from zero
        tirx.IfThenElse(tirx.Or(kk == c(0), pair == start),
                        tirx.IfThenElse(kk > c(0), seq([_assume(pid >= 1), wait, load]), m.clear), None),
        substitute(substitute(k.body, {k.loop_var: kk32 + k0}), vmap),
        # a piece ends: a tile's last K-step runs the epilogue; a head cut by the range's end is published
        tirx.IfThenElse(kk == c(ks - 1), substitute(seq(m.epilogue), vmap) if m.epilogue else
                        tirx.Evaluate(tirx.const(0, "int32")),
                        tirx.IfThenElse(pair == end - c(1), seq([store, arrive]), None)),
    ])
    pairs = tirx.Cast("int32", end - start) if wide != "int32" else end - start
    pieces = tirx.For(j, tirx.const(0, "int32"), pairs, k.kind, body, k.thread_binding, k.annotations)
    kernel = seq([
        *[substitute(s, vmap) for s in m.prefix],
        tirx.Bind(last, tirx.floordiv(end - c(1), c(ks))),
        tirx.Bind(rotate, tirx.Max(start, last * c(ks))),
        tirx.Bind(tail_end, tirx.Min(tirx.floordiv(start + c(ks - 1), c(ks)) * c(ks), rotate)),
        pieces,
    ])
    return _persistent_func(func, m, kernel, pid, P, partials, flags)


def _handoff(m: _Match, pid: tirx.Var, tid: Any, partials: Any, flags: Any, acc_shape: list) -> tuple:
    """The statements that hand a split tile's partial from block pid - 1 to block pid: wait for the thread's flag
    of the previous block, load its partial; store this block's partial, raise the thread's flag."""
    wait = tirx.Evaluate(tirx.call_extern("void", "tl::grid_flag_wait",
                                          tirx.address_of(tirx.BufferLoad(flags, [pid - 1, tid])), 1))
    load = _tile_op(COPY, [_region(partials, pid - 1, acc_shape), _full(m.acc)], m.loc)
    store = _tile_op(COPY, [_full(m.acc), _region(partials, pid, acc_shape)], m.loc)
    arrive = tirx.Evaluate(tirx.call_extern("void", "tl::grid_flag_arrive",
                                            tirx.address_of(tirx.BufferLoad(flags, [pid, tid]))))
    return wait, load, store, arrive


def _tile_block_indices(m: _Match, tile: Any) -> list:
    """The block indices of output tile `tile` (int32), as the data-parallel grid numbers its blocks (x fastest),
    then T.use_swizzle's map."""
    coords, rest = [], tile
    for e in m.extents[:-1]:
        coords.append(tirx.floormod(rest, e))
        rest = tirx.floordiv(rest, e)
    # (a tile index is below the tile count: the floormod says so to the swizzle's divisions, which TVM lowers
    # to a plain `/` only where it proves their operands non-negative)
    coords.append(tirx.floormod(rest, m.extents[-1]))
    if m.swizzle is not None and len(coords) >= 2:
        panel, order = m.swizzle
        gx, gy = m.extents[0], m.extents[1]
        if order == "row":
            coords[1], coords[0] = _remap(coords[1], coords[0], gy, gx, panel)
        else:
            coords[0], coords[1] = _remap(coords[0], coords[1], gx, gy, panel)
    # already in range; the floormod says so to the bounds guards (the analyzer sees through neither the rotation
    # of the pairs nor the swizzle's min)
    return [tirx.floormod(v, e) for v, e in zip(coords, m.extents)]


def _linear_thread_index(m: _Match, ana: tvm.sym.Analyzer) -> Any:
    """The thread's linear index, x fastest: the flag of the thread that holds the same fragment elements."""
    tid: Any = tirx.const(0, "int32")
    scale = 1
    by_tag = {str(iv.thread_tag): (iv.var, e) for iv, e in m.threads}
    for tag in ("threadIdx.x", "threadIdx.y", "threadIdx.z"):
        if tag in by_tag:
            var, e = by_tag[tag]
            tid = ana.simplify(tid + var * scale)
            scale *= e
    return tid


def _persistent_func(func: tirx.PrimFunc, m: _Match, kernel: tirx.Stmt, pid: tirx.Var, blocks: int,
                     partials: Any, flags: Any) -> tirx.PrimFunc:
    """`kernel` under the user's thread bindings on a grid of `blocks` persistent blocks, with the partials and the
    flags (zeroed by the launcher) as workspaces after the user's parameters."""
    for iv, e in reversed(m.threads):
        kernel = tirx.AttrStmt(iv, "thread_extent", e, kernel)
    block_iv = tirx.IterVar(tvm.ir.Range(0, blocks), pid, m.blocks[0].iter_type, "blockIdx.x")
    kernel = tirx.AttrStmt(block_iv, "thread_extent", blocks, kernel)
    attrs = dict(func.attrs) if func.attrs is not None else {}
    workspaces = [str(n) for n in attrs.get(WORKSPACES_ATTR, [])]
    zeroed = [str(n) for n in attrs.get(ZEROED_WORKSPACES_ATTR, [])]
    new = tirx.PrimFunc([*func.params, partials, flags], kernel, ret_type=func.ret_type, attrs=func.attrs)
    new = new.with_attr(WORKSPACES_ATTR, [*workspaces, PARTIALS, FLAGS])
    return new.with_attr(ZEROED_WORKSPACES_ATTR, [*zeroed, FLAGS])
