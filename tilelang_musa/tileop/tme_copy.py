"""TME copies (mp_31's tensor memory engine): `T.tma_copy`, and `T.copy` stores from shared to global memory.

A TME instruction moves a box of a global tensor, described by a host-built descriptor (MUSA_FACTS "TME"), to or
from shared memory, where the box is stored densely (innermost dimension first), then byte-swizzled with the
instruction's (sg, ss, sl). One thread issues it:

    load   if (leader) { tl::barrier_expect_tx(bar, bytes); tl::tma_load<...>(desc_A, bar, smem, box, coord); }
           [tl::barrier_sync(bar);   a T.copy load: every thread arrives, then waits for the phase]
    store  if (leader) { tl::tma_store<...>(desc_A, smem, box, coord); tl::tma_store_arrive(); [tl::tma_store_wait<0>();] }

A T.tma_copy load only issues: the user arrives on and waits for the barrier (the guide's snippet). A T.copy load with
cache hints is a TME load that waits for itself, on a barrier LowerTmeCopy allocates. Out-of-bounds box elements
are zero-filled by the engine on loads and dropped on stores, so nothing is predicated.

Which copies qualify (`qualify`): global <-> shared of one dtype, the global operand a kernel tensor of rank 1..5
with unit innermost stride and 16-byte multiple strides, constant box extents of at most MAX_BOX_EXTENT (a wider
innermost extent in column blocks of at most that many), an innermost box of a multiple of 16 bytes, and a shared
tile whose layout (row-major or a swizzle) is what the engine writes: the box densely, split into column blocks of
`w` elements if the layout stores the tile so (SQMMA tiles wider than 256 bytes), swizzled with one of the engine's
granularities on 256-byte lines. `T.tma_copy` reports the failed rule; a `T.copy` store that does not qualify stays
a plain copy.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np
import tvm
from tvm import tirx

from ..errors import CompileError, SourceLoc
from ..ir.attrs import PIPELINED_ATTR
from ..ir.ops import BARRIER_EXPECT_TX_OP, register_intrinsic
from ..ir.structural_memo import StructuralMemo
from ..layout import Layout
from ..layout._expr import open_grid
from ..layout.swizzle import SWIZZLE_LINE, swizzle_alignment, swizzle_bytes
from .base import LowerArgs, TileOp, call_attr, call_loc
from .region import Region, pair_dims

# Both issue `blocks` instructions, the next one block_bytes further in shared memory and `box[0]` elements further
# along the innermost dimension (column blocks of a swizzled tile wider than 256 bytes).
TME_LOAD = "tl.tme_load"  # (desc, bar, smem_ptr, sg, ss, sl, inner, outer, blocks, block_bytes, box..., coord...)
TME_STORE = "tl.tme_store"  # (desc, smem_ptr, sg, ss, sl, inner, outer, blocks, block_bytes, box..., coord...)
TME_STORE_ARRIVE = "tl.tme_store_arrive"  # commit this thread's TME stores
TME_STORE_WAIT = "tl.tme_store_wait"  # wait until this thread's committed TME stores have read shared memory
# On a tl.tme_store_wait of T.tma_store_wait(read=False): a wait for the stores' global writes, which MUSA lacks; kept
# until LowerTmeCopy rejects it, so the error comes at compile time as for the other per-arch rejections.
TME_STORE_WAIT_WRITES = "tl.tme_store_wait_writes"


GLOBAL_ALIGN = 16  # bytes: a descriptor's global address, its byte strides and an innermost box are multiples of it

MAX_RANK = 5
MAX_BOX_EXTENT = 256  # elements per box dimension [I: CUDA's limit; no MUSA document gives one]
CACHE_POLICIES = {"cache_none": 0, "cache_once": 1, "cache_normal": 2, "cache_persist": 3}
# The port's mapping of the CUDA-style spelling onto both MUSA hints.
EVICTION_POLICIES = {"evict_normal": 2, "evict_first": 1, "evict_last": 3}
DEFAULT_HINT = CACHE_POLICIES["cache_normal"]
_SG_CODE = {0: 0, 16: 1, 32: 2, 64: 3}  # swizzle granularity bytes -> the instruction's sg
_SS_256, _SL_256 = 3, 1  # swizzle stride and line 256 bytes: the SQMMA swizzle (layout/swizzle.py)
# The plans found for the last few shared layouts (structurally) and tiles: every compile of the same tile shapes
# searches them again on the layout evaluated at every element of the buffer.
_PLANS = StructuralMemo(16)

for _name, _doc in ((TME_LOAD, "TME tile load"), (TME_STORE, "TME tile store"),
                    (TME_STORE_ARRIVE, "commit TME stores"), (TME_STORE_WAIT, "wait for committed TME stores")):
    register_intrinsic(_name, _doc)


class NotTme(Exception):
    """A rule the copy breaks (the message names it)."""


@dataclass(frozen=True)
class TmePlan:
    """How one TME copy is issued: `blocks` instructions along the innermost box dim, each `width` elements wide and
    `block_bytes` after the previous one in shared memory, swizzled with granularity `sg` bytes (0: none)."""
    sg: int
    width: int
    blocks: int
    start_coords: list  # logical coordinates of the shared element stored at the first block's start address
    box: list  # innermost first, of one instruction
    bytes_total: int
    block_bytes: int  # from one block's start address to the next's
    # A dense box wider than MAX_BOX_EXTENT: the descriptor splits the tensor's innermost dimension into blocks of
    # `split` elements (one more dimension), so one instruction's box [split, width / split, ...] is the same bytes.
    split: int = 0


@dataclass(frozen=True)
class TmeCopy(TileOp):
    """dst = src through the TME. Load (global -> shared, needs `barrier`) or store (shared -> global)."""

    op_name = "tl.tileop.tme_copy"
    needs_layout = True  # the engine's swizzle must produce the shared tile's layout
    src: Region
    dst: Region
    barrier: Any = None  # a BufferLoad of a "shared.barrier" buffer (loads)
    inner: int = DEFAULT_HINT
    outer: int = DEFAULT_HINT
    leader_scope_threads: int | None = None
    wait: bool = False  # a T.copy store: wait for the store to have read shared memory
    hinted: bool = False  # cache hints were given (a T.copy load becomes a TME copy only then)
    explicit: bool = True  # T.tma_copy (errors) rather than a T.copy store (falls back to a plain copy)
    loc: SourceLoc | None = None
    coalesced_width: int | None = None  # a T.copy store's, for its plain-copy fallback
    # A load of a pipelined loop (InjectSoftwarePipeline), which arrives on `barrier` with every thread after it:
    # its fallback is a plain copy and a block barrier, so that the readers' wait holds either way.
    pipelined: bool = False

    @classmethod
    def from_call(cls, call: tvm.ir.Call) -> "TmeCopy":
        args = list(call.args)
        leader = call_attr(call, "leader_scope_threads")
        return cls(Region.from_ir(args[0]), Region.from_ir(args[1]), args[2] if len(args) > 2 else None,
                   int(call_attr(call, "inner_cache_policy", DEFAULT_HINT)),
                   int(call_attr(call, "outer_cache_policy", DEFAULT_HINT)),
                   None if leader is None else int(leader), bool(call_attr(call, "wait", False)),
                   call_attr(call, "inner_cache_policy") is not None,
                   bool(call_attr(call, "explicit", True)), call_loc(call),
                   None if call_attr(call, "coalesced_width") is None else int(call_attr(call, "coalesced_width")),
                   bool(call_attr(call, PIPELINED_ATTR, False)))

    @property
    def is_load(self) -> bool:
        return self.src.scope == "global"

    @property
    def global_region(self) -> Region:
        return self.src if self.is_load else self.dst

    @property
    def shared_region(self) -> Region:
        return self.dst if self.is_load else self.src

    def lower(self, args: LowerArgs) -> Any:
        raise self.error("T.tma_copy: internal error: TME copies are lowered by the LowerTmeCopy pass")

    # ---- qualification -----------------------------------------------------------------------------------------
    def plan(self, params: list, layout: Layout | None) -> TmePlan:
        """The instructions that perform this copy, or NotTme naming the rule it breaks."""
        box_dims = self.box(params)
        plan = _match_layout(self.shared_region, layout, box_dims, _elem_bytes(self.global_region.dtype))
        if plan.width <= MAX_BOX_EXTENT:
            return plan
        split = _descriptor_split(self.global_region, plan.width)
        return dataclasses.replace(plan, split=split, box=[split, plan.width // split] + plan.box[1:])

    def box(self, params: list) -> list[int]:
        """The box extents (outermost first), or NotTme naming a rule other than the shared layout's it breaks
        (the layout is known after LayoutInference; InjectSoftwarePipeline asks before)."""
        g, s = self.global_region, self.shared_region
        if s.scope != "shared.dyn":
            # A static `__shared__` array is placed and aligned by mcc, not by PlanDynamicSharedMemory; the engine
            # needs 16-byte (swizzled: 1 KiB) aligned tiles, and the simulator gives only the arena shared addresses.
            raise NotTme(f"{s.name} is static shared memory (scope={s.scope!r}); the TME copies to and from the "
                         "dynamic shared memory arena (T.alloc_shared's default scope)")
        if g.dtype != s.dtype:
            raise NotTme(f"the TME copies bytes: {g.name} is {g.dtype} and {s.name} is {s.dtype}")
        if tvm.DataType(g.dtype).bits < 8:
            raise NotTme(f"{g.name} is {g.dtype}, less than a byte an element (element copies take the nibbles)")
        if g.buffer not in params:
            raise NotTme(f"{g.name} is not a tensor parameter of the kernel (a TME descriptor is built on the host "
                         "for each tensor parameter)")
        if not 1 <= g.ndim <= MAX_RANK:
            raise NotTme(f"{g.name} has {g.ndim} dimensions; the TME handles tensors of 1 to {MAX_RANK}")
        elem = _elem_bytes(g.dtype)
        strides = global_strides(g.buffer)
        if not _is_one(strides[-1]):
            raise NotTme(f"the innermost dimension of {g.name} has stride {strides[-1]}; the TME needs it contiguous")
        for d, stride in enumerate(strides[:-1]):
            if isinstance(stride, tirx.IntImm) and (int(stride.value) * elem) % 16:
                raise NotTme(f"dimension {d} of {g.name} has a stride of {int(stride.value) * elem} bytes; TME "
                             "descriptors need strides that are multiples of 16 bytes")
            # A stride known only at launch (a T.dynamic shape): the descriptor would fail at launch for sizes
            # whose rows are not whole 16-byte units, so a copy the compiler chose to move by TME stays an
            # element copy unless the stride provably is a multiple; T.tma_copy keeps the user's choice.
            if not isinstance(stride, tirx.IntImm) and not self.explicit and \
                    not tvm.sym.Analyzer().can_prove(tirx.floormod(stride * elem, 16) == 0):
                raise NotTme(f"dimension {d} of {g.name} has a stride of {stride} elements, known only at launch; "
                             "TME descriptors need strides that are multiples of 16 bytes")
        box_dims = []
        for d, extent in enumerate(g.extents):
            if not isinstance(extent, tirx.IntImm):
                raise NotTme(f"the extent {extent} of dimension {d} of {g.name}'s region is not a constant; a TME box "
                             "has constant extents")
            # The innermost dimension may be wider: it is then issued in column blocks (_match_layout).
            if not 1 <= int(extent.value) <= (int(extent.value) if d == g.ndim - 1 else MAX_BOX_EXTENT):
                raise NotTme(f"the box extent {int(extent.value)} of dimension {d} of {g.name} exceeds the engine's "
                             f"{MAX_BOX_EXTENT} elements per dimension")
            box_dims.append(int(extent.value))
        inner = box_dims[-1]
        if (inner * elem) % 16:
            raise NotTme(f"the innermost box dimension of {g.name} is {inner} x {elem} = {inner * elem} bytes; the "
                         "TME moves multiples of 16 bytes")
        if pair_dims(g, s) is None:
            raise NotTme(f"the extents of {g.describe()} and {s.describe()} differ (after dropping size-1 dimensions)")
        return box_dims


def global_strides(buf) -> list:
    """Element strides of every dimension of a global tensor (row-major products when it declares none)."""
    strides = list(buf.ty.strides)
    if strides:
        return strides
    shape = list(buf.ty.shape)
    out, stride = [], tirx.const(1, "int64")
    for extent in reversed(shape):
        out.append(stride)
        stride = stride * extent if not _is_one(extent) else stride
    return [tvm.sym.Analyzer().simplify(s) for s in reversed(out)]


def _is_one(value: Any) -> bool:
    return isinstance(value, (tirx.IntImm, int)) and int(value) == 1


def _elem_bytes(dtype: str) -> int:
    return tvm.DataType(dtype).bits // 8


def _static(values, what: str) -> list[int]:
    out = []
    for v in values:
        if not isinstance(v, (tirx.IntImm, int)):
            raise NotTme(f"{what} {v} is not a constant")
        out.append(int(v))
    return out


def _match_layout(s: Region, layout: Layout | None, box_dims: list[int], elem: int) -> TmePlan:
    """Find (sg, column block width) for which the engine writes the shared region where `layout` stores it."""
    shape = _static(s.buffer.ty.shape, f"the shape of {s.name}:")
    # The tile: the dims from the region's first non-unit one on; dims before it select a tile (any index).
    first = next((d for d, e in enumerate(s.extents) if not _is_one(e)), s.ndim - 1)
    tile_mins = _static(s.mins[first:], f"the start of {s.name}'s region in dimension")
    tile_ext = _static(s.extents[first:], f"the extent of {s.name}'s region:")
    if layout is None:
        return _search_plan(s, layout, shape, first, tile_mins, tile_ext, box_dims, elem)
    key = (tuple(shape), first, tuple(tile_mins), tuple(tile_ext), tuple(box_dims), elem)
    known = _PLANS.get(layout, key)
    if known is None:  # a refusal is not kept: its message names the buffer
        known = _PLANS.put(layout, _search_plan(s, layout, shape, first, tile_mins, tile_ext, box_dims, elem), key)
    return known


def _search_plan(s: Region, layout: Layout | None, shape: list[int], first: int, tile_mins: list[int],
                 tile_ext: list[int], box_dims: list[int], elem: int) -> TmePlan:
    """_match_layout's search, on the layout evaluated at every element of the shared buffer."""
    grid = open_grid(shape)  # one axis each: the layout's subexpressions of one coordinate cost n_d operations
    if layout is None:
        phys = np.zeros(shape, dtype=np.int64)
        for g_, n in zip(grid, shape):
            phys = phys * n + g_
    else:
        outs = layout.evaluate(*grid)
        out_shape = [int(e) for e in layout.output_shape]
        phys = np.zeros(shape, dtype=np.int64)
        for o, n in zip(outs, out_shape):
            phys = phys * n + o
    # Leading dims: each index must shift the tile by a constant that keeps the swizzle's phase (checked below).
    lead = phys.reshape(int(np.prod(shape[:first], dtype=np.int64)), -1)
    base = lead[0].reshape(shape[first:])
    shifts = lead - lead[0]
    if not (shifts == shifts[:, :1]).all():
        raise NotTme(f"the layout of {s.name} does not store its leading dimensions as whole tiles")
    region = base[tuple(slice(m, m + e) for m, e in zip(tile_mins, tile_ext))].reshape(-1)
    count = region.size
    inner = box_dims[-1]
    rows = count // inner
    index = np.arange(count)
    r, c = index // inner, index % inner
    period_ok = (shifts[:, 0] * elem) % swizzle_alignment(16) == 0  # whole periods of every swizzle
    for width in _widths(inner, elem):
        for sg in (0, 16, 32, 64):
            if sg and (sg < elem or not period_ok.all()):
                continue
            start = int(swizzle_bytes(int(region[0]) * elem, sg)) // elem if sg else int(region[0])
            if (start * elem) % 16:
                continue  # the engine writes shared memory from a 16-byte aligned address [I]
            dense = start + (c // width) * (rows * width) + r * width + c % width
            predicted = swizzle_bytes(dense * elem, sg) // elem if sg else dense
            if np.array_equal(predicted, region):
                where = np.argwhere(base == start)
                if where.size:
                    box = [width] + list(reversed(box_dims[:-1]))
                    return TmePlan(sg, width, inner // width, [int(x) for x in where[0]], box, count * elem,
                                   rows * width * elem)
    if inner > MAX_BOX_EXTENT:
        raise NotTme(f"the box extent {inner} of the innermost dimension of the copy exceeds the engine's "
                     f"{MAX_BOX_EXTENT} elements per dimension, and {s.name}'s layout does not store it in column "
                     "blocks the engine could write one by one")
    described = "row-major" if layout is None else repr(layout)
    raise NotTme(f"the layout of {s.name} ({described}) is not one the TME writes: the box stored densely "
                 "(or in column blocks of 16 to 256 bytes), swizzled with a 16/32/64-byte granularity on "
                 f"{SWIZZLE_LINE}-byte lines")


def _widths(inner: int, elem: int) -> list[int]:
    """Column block widths to try, each at most MAX_BOX_EXTENT elements (one instruction's box): the whole box, the
    widest block the engine allows, then 256, 128, ... 16 bytes' worth of elements; last, a box wider than one
    instruction's stored densely (issued through a split descriptor, TmeCopy.plan)."""
    out = [w for w in (inner, MAX_BOX_EXTENT) if w <= MAX_BOX_EXTENT and inner % w == 0]
    nbytes = SWIZZLE_LINE
    while nbytes >= 16:
        w = nbytes // elem
        if w and w < inner and inner % w == 0 and w not in out:
            out.append(w)
        nbytes //= 2
    if inner > MAX_BOX_EXTENT:
        out.append(inner)
    return out


def _descriptor_split(g: Region, inner: int) -> int:
    """The block width that splits the innermost dimension of g's descriptor so that a dense box `inner` wide is one
    instruction's [split, inner / split] box: at most MAX_BOX_EXTENT elements and a multiple of 16 bytes, dividing
    both `inner` and the dimension's size, with the copy starting at a multiple of it; NotTme if none does."""
    elem = _elem_bytes(g.dtype)
    size = g.buffer.ty.shape[-1]
    start = g.mins[-1]
    analyzer = tvm.sym.Analyzer()
    if g.ndim < MAX_RANK and isinstance(size, tirx.IntImm):
        for w in range(MAX_BOX_EXTENT, 0, -1):
            if inner % w or int(size.value) % w or (w * elem) % GLOBAL_ALIGN or inner // w > MAX_BOX_EXTENT:
                continue
            if analyzer.can_prove(tirx.floormod(start, w) == 0):
                return w
    raise NotTme(f"the box extent {inner} of the innermost dimension of the copy exceeds the engine's "
                 f"{MAX_BOX_EXTENT} elements per dimension; stored densely, it needs a descriptor of {g.name} with its "
                 f"innermost dimension ({size}) split in blocks of at most {MAX_BOX_EXTENT} elements (a multiple of "
                 f"{GLOBAL_ALIGN} bytes) that divide {inner} and it, the copy starting at a multiple of the block, and "
                 f"{g.name} of fewer than {MAX_RANK} dimensions")


def descriptor_name(buffer, split: int = 0) -> str:
    return f"desc_{buffer.name}" + (f"_split{split}" if split else "")


def descriptor_spec(buffer, split: int = 0) -> list:
    """[tensor param name, dtype, dims innermost first, byte strides of dims 1..] for the host wrapper; `split`: the
    innermost dimension as two, blocks of `split` elements (TmePlan.split)."""
    elem = _elem_bytes(str(buffer.ty.dtype.dtype))
    shape = list(buffer.ty.shape)
    strides = global_strides(buffer)
    dims = list(reversed(shape))
    byte_strides = [s * elem for s in reversed(strides[:-1])]
    if split:
        dims = [split, int(dims[0]) // split] + dims[1:]
        byte_strides = [split * elem] + byte_strides
    return [buffer.name, str(buffer.ty.dtype.dtype), dims, byte_strides]


def lower_tme(op: TmeCopy, plan: TmePlan, leader: Any) -> tirx.Stmt:
    """The statements of one planned TME copy, issued by the thread for which `leader` holds."""
    g, s = op.global_region, op.shared_region
    desc = descriptor_name(g.buffer, plan.split)
    coord = [tirx.Cast("int32", m) if str(m.ty.dtype) != "int32" else m for m in reversed(g.mins)]
    if plan.split:  # the innermost coordinate in the split descriptor's two dims (its start is a block's)
        coord = [tirx.const(0, "int32"), tirx.floordiv(coord[0], plan.split)] + coord[1:]
    lead = list(s.mins[: s.ndim - len(plan.start_coords)])
    swz = [_SG_CODE[plan.sg], _SS_256, _SL_256]
    hints = [op.inner, op.outer]
    stmts = []
    if op.is_load:
        stmts.append(tirx.Evaluate(tirx.call_intrin("int32", BARRIER_EXPECT_TX_OP, op.barrier,
                                                    tirx.const(plan.bytes_total, "int32"))))
    # One statement for all column blocks (the wrapper steps through them): barrier placement sees one access.
    ptr = tirx.address_of(s.buffer[tuple(lead + [tirx.const(x, "int32") for x in plan.start_coords])])
    blocks = [tirx.const(plan.blocks, "int32"), tirx.const(plan.block_bytes, "int32")]
    box = [tirx.const(x, "int32") for x in plan.box]
    if op.is_load:
        args = [desc, op.barrier, ptr, *swz, *hints, *blocks, *box, *coord]
        stmts.append(tirx.Evaluate(tirx.call_intrin("void", TME_LOAD, *args)))
    else:
        args = [desc, ptr, *swz, *hints, *blocks, *box, *coord]
        stmts.append(tirx.Evaluate(tirx.call_intrin("void", TME_STORE, *args)))
    if not op.is_load:
        stmts.append(tirx.Evaluate(tirx.call_intrin("void", TME_STORE_ARRIVE)))
        if op.wait:
            stmts.append(tirx.Evaluate(tirx.call_intrin("void", TME_STORE_WAIT)))
    return tirx.IfThenElse(leader, tirx.SeqStmt(stmts) if len(stmts) > 1 else stmts[0], None)


def not_tme_error(op: TmeCopy, reason: str) -> CompileError:
    return CompileError(f"T.tma_copy: {reason}", op.loc, "LowerTmeCopy")
