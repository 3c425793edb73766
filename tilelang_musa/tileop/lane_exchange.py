"""Fragment stores to global memory in wide pieces: lanes trade elements through warp shuffles first.

A loop over a fragment (`T.copy(C_local, C[...])`, or a `T.Parallel` store) runs where the fragment's layout puts
each element. Matrix accumulators put consecutive columns on consecutive lanes: the SQMMA accumulator's lane l
holds columns l % 8 + 8 v, so a warp's store instruction writes 8 elements of each of 4 rows, 16 bytes of fp16 per
row, half of every 32-byte sector it touches. Trading lane bit 0 against the slot bit that walks +8 columns
(`tl::exchange_lane_bits`, src/tl_templates/musa/lane_exchange.h: one 32-bit shuffle per two pairs of fp16 slots)
leaves each lane two consecutive columns: 4-byte vector stores, 32 bytes of each row, full sectors.

The choice is made on the fragment's layout evaluated at every thread and slot, bit by bit of the vector: a slot
bit that already walks the next column is taken as it is (a plain vector store, no trade); otherwise the lane bit
that walks it is traded against the slot bit whose trade gives the best sector efficiency, while the store is below
100%. The same evaluation proves what the lowering relies on: every vector is consecutive elements of one row, at a
vector-aligned column. Stores that need no trade are left to the plain vectorized loop over the slots; stores under
control flow that may differ between the lanes of a warp stay as they are (shuffles need the whole warp).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import tvm
from tvm import tirx
from tvm.script.ir_builder import IRBuilder
from tvm.tirx.script import builder as Tb

from ..ir.structural_memo import StructuralMemo
from ..ir.utils import as_int, buffer_size, dtype_bytes, flat_index, scope_of, substitute
from .loop_plan import MAX_VECTOR_BYTES, LoopPlan, provably_aligned

SECTOR_BYTES = 32  # a global memory transaction's granule (docs/PERF_FACTS.md)
MAX_SHUFFLE_LANE_BIT = 5  # shuffles stay within 32 lanes (lane_exchange.h)
EXCHANGE_FUNCTION = "tl::exchange_lane_bits"
# The element tables of the last few plans, by the plan's fragment (structurally), extents and thread count: every
# compile of the same tile shapes plans the same accumulator store, and the searches over its elements (with what
# they found) are most of the planner's time.
_TABLES = StructuralMemo(4)


@dataclass(frozen=True)
class LaneExchange:
    """Vector lane i of each store is slot bit `slot_bits[i]` after trading it against lane bit `lane_bits[i]`
    (-1: no trade, that slot bit already walks the next element)."""

    slot_bits: tuple[int, ...]
    lane_bits: tuple[int, ...]
    efficiency: float  # the store's sector efficiency with it (bytes written / bytes of the sectors touched)
    efficiency_before: float
    # per loop variable, its value at vector lane 0 of (thread, group) as base + bit weights: (base, ((bit of the
    # thread, weight), ...), ((bit of the group, weight), ...)); checked at every thread and group
    first_element: tuple[tuple[int, tuple[tuple[int, int], ...], tuple[tuple[int, int], ...]], ...]

    @property
    def width(self) -> int:
        return 1 << len(self.slot_bits)

    @property
    def trades(self) -> bool:
        return any(b >= 0 for b in self.lane_bits)


class _Elements:
    """Which element (row, column) each (thread, slot) of a plan holds: row = the other loop coordinates, column =
    the innermost one. A function of the plan's fragment, extents and thread count alone (`of` shares one table among
    plans equal in those); its answers are memoized."""

    @classmethod
    def of(cls, plan: LoopPlan, extents: list[int], count: int) -> "_Elements":
        key = (tuple(extents), count, plan.local_size)
        known = _TABLES.get(plan.fragment, key)
        return known if known is not None else _TABLES.put(plan.fragment, cls(plan, extents, count), key)

    def __init__(self, plan: LoopPlan, extents: list[int], count: int):
        thread, slot = plan.fragment.evaluate_all()
        thread, slot = thread[..., 0].reshape(-1), slot[..., 0].reshape(-1)
        flat = np.arange(thread.size)
        self.row = np.full((count, plan.local_size), -1, dtype=np.int64)
        self.col = np.full((count, plan.local_size), -1, dtype=np.int64)
        self.row[thread, slot] = flat // extents[-1]
        self.col[thread, slot] = flat % extents[-1]
        # row * columns + column, by thread/slot; int32 where it fits (the searches below walk every element of it
        # several times, and half the bytes is half the time)
        self.index_dtype = np.int32 if count * plan.local_size < 2**31 else np.int64
        self.element = np.full(count * plan.local_size, -1, dtype=self.index_dtype)
        self.element[thread * plan.local_size + slot] = flat
        self.count, self.slots, self.extents = count, plan.local_size, list(extents)
        self._efficiency: dict[tuple, float | None] = {}
        self._weights: dict[tuple, int | None] = {}
        self._first: dict[tuple, tuple | None] = {}

    def column_weight(self, axis: str, bit: int) -> int | None:
        """What setting `bit` of the thread (axis "thread") or slot index adds to the column, when it is the same for
        every element and keeps the row; else None."""
        key = (axis, bit)
        if key not in self._weights:
            self._weights[key] = self._column_weight(axis, bit)
        return self._weights[key]

    def _column_weight(self, axis: str, bit: int) -> int | None:
        size = self.count if axis == "thread" else self.slots
        index = np.arange(size)
        low = index[(index & (1 << bit)) == 0]
        high = low | (1 << bit)
        if high.max(initial=-1) >= size:
            return None
        take = (lambda a, i: a[i, :]) if axis == "thread" else (lambda a, i: a[:, i])
        if not np.array_equal(take(self.row, low), take(self.row, high)):
            return None
        steps = take(self.col, high) - take(self.col, low)
        return int(steps.flat[0]) if steps.size and steps.min() == steps.max() else None

    def sources(self, slot_bits: list[int], lane_bits: list[int]) -> tuple[np.ndarray, np.ndarray]:
        """The plan's (thread, slot) whose element lands in [thread, group, vector lane] after the trades (the
        lowering's mapping), as arrays that broadcast to [thread, group, vector lane]: the thread depends on the
        thread and vector lane only, so it stays count x width, and only the slot is built at full size."""
        width = 1 << len(slot_bits)
        others = [b for b in range(self.slots.bit_length() - 1) if b not in slot_bits]
        t = np.arange(self.count, dtype=self.index_dtype)[:, None, None]
        g = np.arange(self.slots // width, dtype=self.index_dtype)[None, :, None]
        v = np.arange(width, dtype=self.index_dtype)[None, None, :]
        source_slot = sum(((g >> r) & 1) << o for r, o in enumerate(others)) + \
            sum(((v >> i) & 1) << s for i, s in enumerate(slot_bits))
        source_thread = t
        for i, (s, b) in enumerate(zip(slot_bits, lane_bits)):
            if b < 0:
                continue
            vbit, tbit = (v >> i) & 1, (t >> b) & 1
            source_thread = (source_thread & ~(1 << b)) | (vbit << b)
            source_slot = (source_slot & ~(1 << s)) | (tbit << s)
        return source_thread, source_slot

    def first_element(self, slot_bits: list[int], lane_bits: list[int]) -> tuple | None:
        """Each loop coordinate of vector lane 0's element as a function of the thread's and the group's bits
        (LaneExchange.first_element), or None if one is not such a sum of bit weights."""
        key = (tuple(slot_bits), tuple(lane_bits))
        if key not in self._first:
            self._first[key] = self._first_element(slot_bits, lane_bits)
        return self._first[key]

    def _first_element(self, slot_bits: list[int], lane_bits: list[int]) -> tuple | None:
        threads, slots = self.sources(slot_bits, lane_bits)
        flat = self.row[threads[..., 0], slots[..., 0]] * self.extents[-1] + self.col[threads[..., 0], slots[..., 0]]
        coords = np.unravel_index(flat, self.extents)
        t = np.arange(flat.shape[0])[:, None]
        g = np.arange(flat.shape[1])[None, :]
        out = []
        for coord in coords:
            base = int(coord[0, 0])
            by_thread = tuple((b, int(coord[1 << b, 0]) - base) for b in range(max(1, flat.shape[0] - 1).bit_length())
                              if (1 << b) < flat.shape[0] and coord[1 << b, 0] != base)
            by_group = tuple((r, int(coord[0, 1 << r]) - base) for r in range(max(1, flat.shape[1] - 1).bit_length())
                             if (1 << r) < flat.shape[1] and coord[0, 1 << r] != base)
            rebuilt = base + sum(((t >> b) & 1) * w for b, w in by_thread) + sum(((g >> r) & 1) * w for r, w in by_group)
            if not np.array_equal(rebuilt + 0 * coord, coord):
                return None
            out.append((base, by_thread, by_group))
        return tuple(out)

    def sector_efficiency(self, slot_bits: list[int], lane_bits: list[int], element_bytes: int,
                          warp: int) -> float | None:
        """Bytes stored over bytes of the 32-byte sectors touched, per warp instruction (a vector store of every
        lane); None if some vector is not consecutive columns of one row starting at a multiple of its width.
        Memoized: the planner asks again for the trades it chose."""
        key = (tuple(slot_bits), tuple(lane_bits), element_bytes, warp)
        if key not in self._efficiency:
            self._efficiency[key] = self._sector_efficiency(slot_bits, lane_bits, element_bytes, warp)
        return self._efficiency[key]

    def _sector_efficiency(self, slot_bits: list[int], lane_bits: list[int], element_bytes: int,
                           warp: int) -> float | None:
        threads, slots = self.sources(slot_bits, lane_bits)
        element = self.element.take(threads * self.slots + slots)
        width, columns = element.shape[-1], self.extents[-1]
        first = element[..., :1]
        # Consecutive columns of one row from a multiple of the width (a width that does not divide the row leaves
        # the vectors of the row's last columns short: the plan holds every element, plan_lane_exchange checked).
        if columns % width or first.min() < 0 or width > 1 and (
                not np.array_equal(element, first + np.arange(width, dtype=element.dtype)) or np.any(first % width)):
            return None
        stored = element.size * element_bytes
        if SECTOR_BYTES % (width * element_bytes) == 0:
            element = first  # an aligned vector lies in one sector: its first element's
        rows, cols = np.divmod(element, columns)
        keys = rows * ((columns * element_bytes - 1) // SECTOR_BYTES + 1) + (cols * element_bytes) // SECTOR_BYTES
        groups, per_lane = keys.shape[1], keys.shape[2]
        keys = keys.reshape(self.count // warp, warp, groups, per_lane).transpose(0, 2, 1, 3) \
            .reshape(-1, warp * per_lane)
        keys = np.sort(keys, axis=1)
        sectors = keys.shape[0] + int(np.count_nonzero(keys[:, 1:] != keys[:, :-1]))
        return stored / (sectors * SECTOR_BYTES)


def plan_lane_exchange(loop_vars: list[Any], body: Any, plan: LoopPlan, extents: list[int], count: int, warp: int,
                       analyzer: Any) -> LaneExchange | None:
    """How the fragment loop `body` (over `loop_vars`, run by `plan` on `count` threads of whole warps) stores in
    wide pieces, or None when it cannot or gains nothing."""
    if not (isinstance(body, tirx.BufferStore) and scope_of(body.buffer) == "global"):
        return None
    fragment = plan.fragment
    if (fragment.replicate_size != 1 or as_int(fragment.num_threads) != count or count % warp
            or plan.local_size * count != int(np.prod(extents)) or plan.local_size & (plan.local_size - 1)
            or not fragment.is_bijective()):
        return None
    inner = loop_vars[-1]
    zero = {inner: tirx.const(0, "int32")}
    *outer_indices, last = body.indices
    if any(not substitute(i, zero).same_as(i) for i in outer_indices) \
            or not analyzer.can_prove_equal(last - substitute(last, zero), inner):
        return None
    element_bytes = dtype_bytes(body.buffer.dtype)
    elements = _Elements.of(plan, extents, count)
    before = elements.sector_efficiency([], [], element_bytes, warp)
    slot_bits: list[int] = []
    lane_bits: list[int] = []
    efficiency = before
    slot_weights = {s: elements.column_weight("slot", s) for s in range(plan.local_size.bit_length() - 1)}
    lane_weights = {b: elements.column_weight("thread", b) for b in range(min(warp, 1 << MAX_SHUFFLE_LANE_BIT)
                                                                            .bit_length() - 1)}
    while (element_bytes << (len(slot_bits) + 1)) <= MAX_VECTOR_BYTES:
        weight = 1 << len(slot_bits)
        free = [s for s in slot_weights if s not in slot_bits]
        native = [s for s in free if slot_weights[s] == weight]
        if native:
            candidates = [(native[0], -1)]
        else:
            lanes = [b for b, w in lane_weights.items() if w == weight and b not in lane_bits]
            if not lanes or efficiency is None or efficiency >= 1.0:
                break
            candidates = [(s, lanes[0]) for s in free]
        scored = [(elements.sector_efficiency(slot_bits + [s], lane_bits + [b], element_bytes, warp), s, b)
                  for s, b in candidates]
        scored = [x for x in scored if x[0] is not None]
        if not scored:
            break
        best = max(scored, key=lambda x: x[0])
        if best[2] >= 0 and best[0] <= efficiency:
            break
        efficiency, s, b = best
        slot_bits.append(s)
        lane_bits.append(b)
    while slot_bits and not _vector_aligned(body, inner, 1 << len(slot_bits), analyzer):
        slot_bits, lane_bits = slot_bits[:-1], lane_bits[:-1]  # narrower vectors, as far as alignment is provable
    if not slot_bits:
        return None
    efficiency = elements.sector_efficiency(slot_bits, lane_bits, element_bytes, warp)
    if all(b < 0 for b in lane_bits) or efficiency <= before:
        return None  # no trade pays: a plain vectorized loop over the slots stores as wide (LowerParallelLoop)
    first = elements.first_element(slot_bits, lane_bits)
    if first is None:
        return None
    return LaneExchange(tuple(slot_bits), tuple(lane_bits), efficiency, before, first)


def _vector_aligned(store: Any, inner: Any, width: int, analyzer: Any) -> bool:
    """Whether the store's flat offset is a multiple of `width` wherever the innermost index is (the vectors start
    at columns that are multiples of `width`, which the layout evaluation checked)."""
    size = as_int(buffer_size(store.buffer))
    if size is None or size % width:
        return False
    quotient = tirx.Var("vector", "int32")
    index = flat_index(store.buffer, [substitute(i, {inner: quotient * width}) for i in store.indices])
    return provably_aligned(analyzer.simplify(index), width, analyzer)


def _bit_sum(base: int, terms: list[tuple[Any, Any]]) -> Any:
    """base + for each (value, ((bit, weight), ...)) of `terms` the weights of the set bits of value; a run of bits
    whose weights double is one `value // 2^bit % 2^n * weight` term."""
    out = tirx.const(base, "int32")
    for value, weights in terms:
        weights = sorted(weights)
        while weights:
            bit, weight = weights[0]
            run = 1
            while run < len(weights) and weights[run] == (bit + run, weight << run):
                run += 1
            piece = tirx.floormod(tirx.floordiv(value, 1 << bit) if bit else value, 1 << run)
            out = out + (piece * weight if weight != 1 else piece)
            weights = weights[run:]
    return out


def lower_with_lane_exchange(loop_vars: list[Any], body: Any, plan: LoopPlan, exchange: LaneExchange, thread: Any,
                             lane: Any, analyzer: Any) -> Any:
    """Each thread computes its elements into a local array (in the order of the vector stores), trades slots with
    its partner lanes, and stores `exchange.width` consecutive elements at a time."""
    slots, width = plan.local_size, exchange.width
    slot_bits = list(exchange.slot_bits)
    others = [b for b in range(slots.bit_length() - 1) if b not in slot_bits]
    store = body
    staged = Tb.buffer((slots,), store.value.dtype, scope="local")
    IRBuilder.name(f"{store.buffer.name}_lanes", staged)

    # 1. slot s of this thread's plan, evaluated as the plan's loop would, at position (group, vector lane)
    slot = tirx.Var("it", "int32")
    analyzer.bind(slot, tvm.ir.Range(0, slots))
    xs, _ = plan.inverse(thread, slot)
    order = [(s, 1 << i) for i, s in enumerate(slot_bits)] + [(o, width << r) for r, o in enumerate(others)]
    position = analyzer.simplify(_bit_sum(0, [(slot, order)]))
    fill = tirx.For(slot, 0, slots, tirx.ForKind.SERIAL, tirx.BufferStore(
        staged, substitute(store.value, {v: analyzer.simplify(x) for v, x in zip(loop_vars, xs)}), [position]))

    # 2. the trades
    steps = [tirx.AllocBuffer(staged), fill]
    if exchange.trades:
        name = f"{EXCHANGE_FUNCTION}<{slots}, {', '.join(str(b) for b in exchange.lane_bits)}>"
        steps.append(tirx.Evaluate(tirx.call_extern("void", name, tirx.address_of(staged[0]), lane)))

    # 3. vector stores: vector lane 0 of group g holds the element LaneExchange.first_element describes (written as
    # sums of bit weights, which the bounds analysis reads: each weight of the innermost coordinate is a multiple
    # of the width); lane v the next ones
    group, vec = tirx.Var("it", "int32"), tirx.Var("vec", "int32")
    groups = slots // width
    first = {v: _bit_sum(base, [(thread, by_thread), (group, by_group)])
             for v, (base, by_thread, by_group) in zip(loop_vars, exchange.first_element)}
    indices = [analyzer.simplify(substitute(i, first)) for i in store.indices]
    indices[-1] = indices[-1] + vec
    element = group * width + vec if groups > 1 else vec
    stmt = tirx.For(vec, 0, width, tirx.ForKind.VECTORIZED,
                    tirx.BufferStore(store.buffer, tirx.BufferLoad(staged, [element]), indices))
    if groups > 1:
        stmt = tirx.For(group, 0, groups, tirx.ForKind.SERIAL, stmt)
    else:
        stmt = substitute(stmt, {group: tirx.const(0, "int32")})
    steps.append(stmt)
    return tirx.SeqStmt(steps)
