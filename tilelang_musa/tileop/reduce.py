"""`T.reduce_sum / max / min / abssum / absmax(src, dst, dim, clear)` over a fragment.

dst = reduce(src along dim) (with clear=False: dst = op(dst, reduce(src))). dst's layout is src's reduced
along `dim` (layout.reduce_fragment): each result is replicated on exactly the threads that held part of its row.
A dst another op laid out otherwise gets the result through shared memory: LayoutInference reduces into a scratch
fragment in the reduced layout and relays it to dst (and, with clear=False, dst's old values to it first).
Lowering: each thread folds the row elements it holds (its own slots) into per-result partials, then the
threads sharing a row combine them with `tl::AllReduce` (reduce.h: xor butterflies within 32 lanes, shared
memory beyond), one call per thread split of the row. With `batch=B`, B results share one call
(`tl::BatchAllReduce<...>::run_batch`: interleaved shuffles and one pair of barriers for all B). Without
`batch=`, a reduction whose rows pass through shared memory (a row spread over more than 32 threads, as every
FlashAttention row on mp_22) is batched by the lowering itself (`exchange_batch`), with the same results. With
`nan_propagate=True`, max/min/absmax return NaN for a row holding one (`tl::MaxOpNan` / `tl::MinOpNan`).
A src whose rows sit on thread groups with gaps between them (rows on [0, 64) and [128, 192) of 256 threads)
or that leaves slots unused: only the (thread, slot) pairs holding an element fold and store (fragment_owner);
every thread runs the combine, the ones in a gap combining the identity within spans no row shares.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import tvm
from tvm import tirx
from tvm.script.ir_builder import IRBuilder
from tvm.tirx.script import builder as Tb

from ..diagnostics import warn_once
from ..errors import SourceLoc
from ..ir.attrs import TEMPORARY_ANNOTATION
from ..ir.utils import substitute
from ..layout import LayoutError, reduce_fragment, reduce_threads
from ..layout.fragment_reduce import widen_to_aligned_spans
from .base import LayoutInferArgs, LowerArgs, TileOp, call_attr, call_loc
from .fragment_owner import fills_its_threads, holder_guard, owned_element
from .region import Region

# kind -> (the template functor, the identity of the fold, whether inputs are folded as |x|)
KINDS = {
    "sum": ("tl::SumOp", 0.0, False),
    "abssum": ("tl::SumOp", 0.0, True),
    "max": ("tl::MaxOp", float("-inf"), False),
    "absmax": ("tl::MaxOp", 0.0, True),
    "min": ("tl::MinOp", float("inf"), False),
    # integers only (the language checks): all bits set, no bits, no bits
    "bitand": ("tl::BitAndOp", "all ones", False),
    "bitor": ("tl::BitOrOp", 0, False),
    "bitxor": ("tl::BitXorOp", 0, False),
}
BITWISE_KINDS = ("bitand", "bitor", "bitxor")
NAN_FUNCTORS = {"max": "tl::MaxOpNan", "absmax": "tl::MaxOpNan", "min": "tl::MinOpNan"}
TREE_FOLD_KINDS = ("max", "min", "absmax")  # a thread's own elements fold as a pairwise tree (Reduce._tree_fold)


# Float types with infinities: the identity of max/min there is -inf/+inf (upstream's too), so a row of -inf (a
# fully masked attention row) reduces to -inf. The others (float8_e4m3fn, the fnuz types) take their extreme finite
# values, as integers take their limits.
_INFINITE_FLOATS = ("float16", "bfloat16", "float32", "float64", "float8_e5m2")


def _identity(kind: str, dtype: str) -> Any:
    value = KINDS[kind][1]
    if value == "all ones":
        return tirx.max_value(dtype) if dtype.startswith("uint") else tirx.const(-1, dtype)
    if value in (float("-inf"), float("inf")):
        if dtype in _INFINITE_FLOATS:
            return tirx.const(value, dtype)
        return tirx.min_value(dtype) if value < 0 else tirx.max_value(dtype)  # integers: their limits
    return tirx.const(value, dtype)


# The shared memory a reduction's exchange may take when the lowering batches its results on its own: the rows of
# one T.reduce_* then share one pair of barriers instead of a pair each (each value's combine is unchanged, so
# the results are bit-identical to one exchange per row).
AUTO_BATCH_SHARED_BYTES = 8192


def exchange_batch(local_size: int, num_threads: int, element_bytes: int) -> int:
    """How many of a thread's `local_size` results one shared-memory exchange carries when the user asked for no
    batching: the most that divide `local_size` and fit AUTO_BATCH_SHARED_BYTES of exchange buffer (at least 1)."""
    fits = max(1, AUTO_BATCH_SHARED_BYTES // (num_threads * element_bytes))
    return max(d for d in range(1, local_size + 1) if local_size % d == 0 and d <= fits)


def _combine(kind: str, a: Any, b: Any) -> Any:
    if kind in ("sum", "abssum"):
        return a + b
    if kind in ("max", "absmax"):
        return tirx.max(a, b)
    if kind in BITWISE_KINDS:
        return {"bitand": tirx.bitwise_and, "bitor": tirx.bitwise_or, "bitxor": tirx.bitwise_xor}[kind](a, b)
    return tirx.min(a, b)


@dataclass(frozen=True)
class Reduce(TileOp):
    op_name = "tl.tileop.reduce"
    needs_layout = True
    kind: str
    src: Region
    dst: Region
    dim: int
    clear: bool
    batch: int = 1
    nan_propagate: bool = False
    loc: SourceLoc | None = None

    @classmethod
    def from_call(cls, call: tvm.ir.Call) -> "Reduce":
        return cls(str(call_attr(call, "kind")), Region.from_ir(call.args[0]), Region.from_ir(call.args[1]),
                   int(call_attr(call, "dim")), bool(call_attr(call, "clear")), int(call_attr(call, "batch")),
                   bool(call_attr(call, "nan_propagate")), call_loc(call))

    @property
    def functor(self) -> str:
        return NAN_FUNCTORS[self.kind] if self.nan_propagate else KINDS[self.kind][0]

    def combine(self, a: Any, b: Any) -> Any:
        if self.nan_propagate:  # the fold must propagate too: tirx.max/min would drop a NaN operand
            return tirx.call_extern(self.dst.dtype, f"{self.functor}()", a, b)
        return _combine(self.kind, a, b)

    def infer_layout(self, args: LayoutInferArgs, level: int) -> dict:
        src_layout = args.layouts.get(self.src.buffer)
        if src_layout is None:
            return {}
        try:
            reduced = reduce_fragment(src_layout, self.dim)
        except LayoutError as err:
            raise self.error(f"T.reduce_{self.kind}: cannot place the result of reducing `{self.src.name}` along "
                             f"dim {self.dim}: {err}") from None
        if self.dst.buffer in args.layouts:  # another op placed it: LayoutInference relays the result to it
            return {}
        return {self.dst.buffer: reduced}

    def _check_partial(self, args: LowerArgs, splits, warp: int) -> None:
        """A reduction run by part of the block (a T.ws region): its shuffles need whole warps, and its groups of
        threads must line up with the template's (aligned spans of the block's thread ids)."""
        first, count = args.first_thread, args.num_threads
        where = f"T.reduce_{self.kind} on threads {first}..{first + count - 1}"
        if splits and (first % warp or count % warp):
            raise self.error(f"{where}: combining across threads uses whole {warp}-lane warps; run it on a range of "
                             f"whole warps (a T.ws region, or a guard such as `tx < {warp * max(1, count // warp)}`)")
        for split in splits:
            span = split.count * split.scale
            if first % span:
                raise self.error(f"{where}: the threads sharing a row ({span}) must start at a multiple of {span}")

    def _template_splits(self, args: LowerArgs, groups, src_layout) -> tuple:
        """The thread splits the combine template runs, and whether they are wider than the row's groups. The
        template combines aligned spans of the block's threads; a row held off them (threads [32, 96) of 128) is
        combined over the wider aligned group around it, whose other threads add the identity."""
        pow2 = all(not (s.count & (s.count - 1) or s.scale & (s.scale - 1)) for s in groups.splits)
        if groups.butterfly or not pow2:  # aligned already; a non-power-of-two split is reported below
            return groups.splits, False
        widened = widen_to_aligned_spans(groups, args.num_threads) if args.whole_block else None
        if widened is None:
            shown = ", ".join(f"[{g[0]}, {g[-1] + 1})" if len(g) == g[-1] - g[0] + 1 else str(list(g))
                              for g in groups.groups[:3])
            raise self.error(f"T.reduce_{self.kind}: the rows of `{self.src.name}` are held by thread groups "
                             f"{shown}{', ...' if len(groups.groups) > 3 else ''} that do not each fill an aligned "
                             "span of the block's threads (nor fit one alone when widened), which the cross-thread "
                             f"combine needs; lay `{self.src.name}` out on thread ranges starting at a multiple "
                             "of their size")
        return (widened,), True

    @staticmethod
    def _exchange_in_range(args: LowerArgs, splits, functor: str, batch: int, local_size: int, partial, red_buf,
                           warp: int) -> Any:
        """The cross-thread combine of a reduction run by part of the block, in place on `partial`: a split within
        32 threads is the template's shuffles; a wider one passes through `red_buf` between barriers placed here
        (barriers over the range once RangeBarriers has run) instead of the template's __syncthreads."""
        runs = local_size // batch
        first = tirx.Var("batch_start", "int32")
        values = tirx.address_of(partial[first * batch if runs > 1 else 0])
        steps = []
        for split in splits:
            cls = f"tl::BatchAllReduce<{functor}, {split.count}, {split.scale}, {batch}, {warp}>"
            if split.count * split.scale <= 32:
                steps.append(tirx.Evaluate(tirx.call_extern("void", f"{cls}::run_batch", values,
                                                            tirx.address_of(partial[0]))))
                continue
            exchange = (values, tirx.address_of(red_buf[0]), args.thread_var, args.num_threads)
            sync = tirx.Evaluate(tirx.call_intrin("int32", "tirx.tvm_storage_sync", "shared"))
            steps += [sync, tirx.Evaluate(tirx.call_extern("void", f"{cls}::shuffle_and_store", *exchange)), sync,
                      tirx.Evaluate(tirx.call_extern("void", f"{cls}::combine_stored", *exchange))]
        body = tirx.SeqStmt(steps) if len(steps) > 1 else steps[0]
        return tirx.For(first, 0, runs, tirx.ForKind.SERIAL, body) if runs > 1 else body

    def lower(self, args: LowerArgs) -> Any:
        src_layout = args.layouts.get(self.src.buffer)
        dst_layout = args.layouts.get(self.dst.buffer)
        if src_layout is None or dst_layout is None:
            raise self.error(f"T.reduce_{self.kind}: the layouts of `{self.src.name}` and `{self.dst.name}` are "
                             "unknown (both must be fragments)")
        functor = self.functor
        acc_t = self.dst.dtype
        thread = args.thread_var
        try:
            groups = reduce_threads(src_layout, self.dim)
        except LayoutError as err:
            raise self.error(f"T.reduce_{self.kind}: {err}") from None
        splits, widened = self._template_splits(args, groups, src_layout)
        if not dst_layout.is_equal(reduce_fragment(src_layout, self.dim)):  # LayoutInference relays it otherwise
            raise self.error(f"T.reduce_{self.kind}: `{self.dst.name}` is laid out as {dst_layout!r}, not as the "
                             f"reduction of `{self.src.name}` along dim {self.dim} leaves its results")
        partial = Tb.buffer((int(dst_layout.local_size),), acc_t, scope="local")
        IRBuilder.name(f"{self.dst.name}_partial", partial)
        stmts: list[Any] = [tirx.AllocBuffer(partial)]
        slot = tirx.Var("slot", "int32")
        stmts.append(tirx.For(slot, 0, int(dst_layout.local_size), tirx.ForKind.UNROLLED,
                              tirx.BufferStore(partial, _identity(self.kind, acc_t), [slot])))
        # 1. fold the row elements this thread holds
        stmts.append(self._fold(args, src_layout, dst_layout, widened, partial))
        # 2. combine across the threads that share a row, then write dst (every replica holds the result)
        warp = int(args.target.attrs["thread_warp_size"])
        local_size = int(dst_layout.local_size)
        batch, red_buf = self._plan_combine(args, splits, local_size, warp, stmts)
        d = tirx.Var("dst_slot", "int32")
        combined = self._combine(args, splits, functor, batch, local_size, partial, red_buf, warp, d, stmts)
        stmts.append(self._store(args, dst_layout, partial, combined, d))
        return tirx.SeqStmt(stmts)

    def _store(self, args: LowerArgs, dst_layout, partial, combined, d) -> Any:
        """Write each combined result `combined` (of slot `d`) into the slot of dst this thread holds. Where dst
        leaves slots unused (rows on thread groups with a gap between them), every thread still runs the combine
        (the template's barriers and shuffles need the whole block), into `partial`, and only the slots holding
        an element of dst are written."""
        local_size = int(dst_layout.local_size)
        try:
            ys_d, owned = owned_element(dst_layout, args.thread_var, d)
        except LayoutError as err:
            raise self.error(f"T.reduce_{self.kind}: cannot tell which element of `{self.dst.name}` each slot of "
                             f"its threads holds: {err}") from None
        if owned is None:
            value = combined if self.clear else self.combine(self.dst.buffer[tuple(ys_d)], combined)
            return tirx.For(d, 0, local_size, tirx.ForKind.UNROLLED,
                            tirx.BufferStore(self.dst.buffer, value, list(ys_d)))
        steps = []
        if not tvm.ir.structural_equal(combined, partial[d]):  # the combine's calls: run by every thread
            steps.append(tirx.For(d, 0, local_size, tirx.ForKind.UNROLLED, tirx.BufferStore(partial, combined, [d])))
        value = partial[d] if self.clear else self.combine(self.dst.buffer[tuple(ys_d)], partial[d])
        store = tirx.BufferStore(self.dst.buffer, value, list(ys_d))
        if fills_its_threads(dst_layout):
            steps.append(tirx.IfThenElse(holder_guard(dst_layout, args.thread_var),
                                         tirx.For(d, 0, local_size, tirx.ForKind.UNROLLED, store), None))
        else:
            steps.append(tirx.For(d, 0, local_size, tirx.ForKind.UNROLLED, tirx.IfThenElse(owned, store, None)))
        return tirx.SeqStmt(steps) if len(steps) > 1 else steps[0]

    def _fold(self, args: LowerArgs, src_layout, dst_layout, widened: bool, partial) -> Any:
        """Each thread folds the row elements it holds of `src` into its partial results."""
        src_t, acc_t = self.src.dtype, self.dst.dtype
        _, _, absolute = KINDS[self.kind]
        thread = args.thread_var
        s = tirx.Var("src_slot", "int32")
        try:
            xs, owned = owned_element(src_layout, thread, s)
        except LayoutError as err:
            raise self.error(f"T.reduce_{self.kind}: cannot tell which element of `{self.src.name}` each slot of "
                             f"its threads holds: {err}") from None
        ys = [x for d, x in enumerate(xs) if d != self.dim] or [tirx.const(0, "int32")]  # 1-d: the one result
        value = self.src.buffer[tuple(xs)]
        value = value if src_t == acc_t else tirx.Cast(acc_t, value)
        if absolute:
            value = tirx.abs(value)
        target = dst_layout.index(ys)
        # Where src leaves slots unused, a slot folds only if it holds an element: a test of the thread alone when
        # each holder fills all its slots (groups with a gap between them), else of each slot.
        slot_guard = owned if owned is not None and not fills_its_threads(src_layout) else None
        fold_loop = None if slot_guard is not None else \
            self._tree_fold(args, s, int(src_layout.local_size), value, target, partial)
        if fold_loop is None:
            fold = tirx.BufferStore(partial, self.combine(partial[target], value), [target])
            fold = fold if slot_guard is None else tirx.IfThenElse(slot_guard, fold, None)
            fold_loop = tirx.For(s, 0, int(src_layout.local_size), tirx.ForKind.UNROLLED, fold)
        if widened or (owned is not None and slot_guard is None):
            # widened groups (their extra members must hold the identity), or groups with a gap between them
            fold_loop = tirx.IfThenElse(holder_guard(src_layout, thread), fold_loop, None)
        elif owned is None and int(src_layout.num_threads) < args.num_threads:  # threads holding none fold nothing
            fold_loop = tirx.IfThenElse(thread < int(src_layout.num_threads), fold_loop, None)
        return fold_loop

    def _tree_fold(self, args: LowerArgs, s, slots: int, value, target, partial) -> Any:
        """max / min / absmax: each partial folds its slots as a balanced pairwise tree, one statement a result
        (`p = max(p, max(max(x0, x1), max(x2, x3)))`), so the thread's dependent chain is log2(slots) deep instead
        of `slots`. These combines pick one of their operands, so the order does not change the result, but for
        which of two equal zeros of opposite sign, or which operand next to a NaN, `tl::max` / `tl::min` return
        (the NaN-propagating functors are order-free but for NaN payloads). Sums keep the serial order (rounding;
        upstream's fold is serial too), as do the bitwise kinds. None when the slot a value folds into depends on
        the thread even given its range (the serial loop then)."""
        if self.kind not in TREE_FOLD_KINDS or slots < 2:
            return None
        analyzer = tvm.sym.Analyzer()
        if isinstance(args.thread_var, tvm.ir.expr.Var) and args.num_threads:  # a target may need the thread range
            analyzer.bind(args.thread_var, tvm.ir.Range(0, args.num_threads))
        by_target: dict[int, list] = {}
        for slot in range(slots):
            at = {s: tirx.const(slot, "int32")}
            slot_target = analyzer.simplify(substitute(target, at))
            if not isinstance(slot_target, tirx.IntImm):
                return None
            by_target.setdefault(int(slot_target), []).append(analyzer.simplify(substitute(value, at)))

        def tree(values: list) -> Any:
            if len(values) == 1:
                return values[0]
            half = (len(values) + 1) // 2
            return self.combine(tree(values[:half]), tree(values[half:]))

        folds = [tirx.BufferStore(partial, self.combine(partial[t], tree(values)), [tirx.const(t, "int32")])
                 for t, values in sorted(by_target.items())]
        return folds[0] if len(folds) == 1 else tirx.SeqStmt(folds)

    def _plan_combine(self, args: LowerArgs, splits, local_size: int, warp: int, stmts: list) -> tuple:
        """How many results combine at once (`batch`) and the shared buffer of the exchange across warps (or None),
        its allocation put first in `stmts`; the checks of the split."""
        acc_t = self.dst.dtype
        batch = math.gcd(self.batch, local_size)
        if batch != self.batch:  # upstream sizes `batch` for its own layouts; ours may hold fewer results
            warn_once(f"reduce-batch-{self.batch}-{local_size}",
                      f"T.reduce_{self.kind}: batch={self.batch} does not divide the {local_size} results each thread "
                      f"holds of `{self.dst.name}` under its inferred layout; batching {batch} at a time instead")
        if not args.whole_block:
            self._check_partial(args, splits, warp)
        red_buf = None
        if any(split.count * split.scale > 32 for split in splits):
            if self.batch == 1:
                batch = exchange_batch(local_size, args.num_threads, tvm.DataType(acc_t).bits // 8)
            red_buf = Tb.buffer((args.num_threads * batch,), acc_t, scope="shared.dyn")
            IRBuilder.name(f"{self.dst.name}_red_buf", red_buf)
            stmts.insert(0, tirx.AllocBuffer(red_buf, {TEMPORARY_ANNOTATION: True}))
        for split in splits:
            for what, n in (("threads", split.count), ("thread stride", split.scale)):
                if n & (n - 1):
                    raise self.error(
                        f"T.reduce_{self.kind}: a row of `{self.src.name}` spans {split.count} threads {split.scale} "
                        f"apart; the cross-thread combine's {'logical_width' if what == 'threads' else 'scale'} (the "
                        f"{what}) must be a positive power of two, got {n}. Give `{self.src.name}` a row length that "
                        "splits evenly over a power of two of threads")
        return batch, red_buf

    def _combine(self, args: LowerArgs, splits, functor, batch, local_size, partial, red_buf, warp, d, stmts) -> Any:
        """The cross-thread combine of the partial results (appended to `stmts`); the combined value of slot `d`."""
        acc_t = self.dst.dtype
        if red_buf is not None and not args.whole_block:
            stmts.append(self._exchange_in_range(args, splits, functor, batch, local_size, partial, red_buf, warp))
            combined = partial[d]
        elif batch == 1:
            combined = partial[d]
            for split in splits:
                buf_arg = tirx.address_of(red_buf[0]) if red_buf is not None else tirx.address_of(partial[0])
                combined = tirx.call_extern(acc_t, f"tl::AllReduce<{functor}, {split.count}, {split.scale}, {warp}>",
                                            combined, buf_arg)
        else:  # each run of `batch` partials combines in place in one call per split
            first = tirx.Var("batch_start", "int32")
            calls = []
            for split in splits:
                # a split within 32 threads only shuffles: handing it the exchange buffer would make the barrier
                # placement guard an access that never happens
                shared = red_buf is not None and split.count * split.scale > 32
                buf_arg = tirx.address_of(red_buf[0]) if shared else tirx.address_of(partial[0])
                name = f"tl::BatchAllReduce<{functor}, {split.count}, {split.scale}, {batch}, {warp}>::run_batch"
                calls.append(tirx.Evaluate(tirx.call_extern("void", name,
                                                            tirx.address_of(partial[first * batch]), buf_arg)))
            if calls:  # a row held whole by each thread needs no exchange
                stmts.append(tirx.For(first, 0, local_size // batch, tirx.ForKind.SERIAL,
                                      tirx.SeqStmt(calls) if len(calls) > 1 else calls[0]))
            combined = partial[d]
        return combined
