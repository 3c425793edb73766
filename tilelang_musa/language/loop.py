"""Loops: `T.Parallel`, `T.Pipelined`, `T.serial`, `T.unroll`, `T.vectorized` (and `range` in kernels), and
TVMScript's `with T.While(cond):`.

Each `for` constructor returns a `LoopFrame`; the `for` statement of a kernel iterates it (see
`runtime.iterate`), which opens the TIR loop(s), names the loop variables after the user's names and
yields them once, so the body builds the loop body.
"""

from __future__ import annotations

from typing import Any, Iterator

import tvm
import tvm_ffi
from tvm.script.ir_builder import IRBuilder
from tvm import tirx
from tvm.tirx.script import builder as Tb

from ..ir.attrs import (
    COALESCED_WIDTH, PARALLEL, PARALLEL_LOOP_LAYOUT, PIPELINE_GROUP, PIPELINE_ORDER, PIPELINE_STAGE, PIPELINE_STAGES, PRAGMA_UNROLL,
    PREFER_ASYNC, UNROLL_FACTOR,
)
from ..diagnostics import warn_once
from ..ir.utils import TensorLoad
from .builder import as_expr, current_trace, kernel_trace, static_value, value


class LoopFrame:
    """One or more nested loops created by a `for` statement of the kernel."""

    def __init__(self, construct: str, ranges: list[tuple[Any, Any]], make_frame, annotations=None,
                 scope_attrs: dict | None = None, outer_annotations: dict | None = None, index_map=None):
        self.construct = construct
        self.index_map = index_map  # one-loop frames: the value the body sees for the loop variable (strided loops)
        self.ranges = ranges
        self.make_frame = make_frame
        self.annotations = annotations or {}
        self.outer_annotations = outer_annotations or {}  # on the outermost loop only (a nest's loop_layout)
        self.scope_attrs = scope_attrs or {}  # AttrStmts around the loops (read by TVM passes, e.g. UnrollLoop)

    def build(self, names: tuple[str, ...] | None) -> Iterator[Any]:
        trace = current_trace(self.construct)
        if names is not None and len(names) != len(self.ranges):
            raise trace.error(
                f"{self.construct} has {len(self.ranges)} loop dimension(s) but the for statement binds {len(names)}"
            )
        annotations = dict(self.annotations)
        if annotations and trace.loc is not None:
            annotations["tl.loc"] = str(trace.loc)  # lets a pass point its errors at this loop
        frames = []
        loop_vars = []
        try:
            for key, attr_value in self.scope_attrs.items():
                frame = Tb.attr(tirx.const(0, "int32"), key, attr_value)
                frame.__enter__()
                frames.append(frame)
            # Bounds read once, before the loop, as Python's range reads them: one that loads memory (a T.alloc_var
            # `begin`, `M[0] + 1`) is bound to a variable first, so the loop's bounds are values, not loads of a
            # buffer (which the passes may rewrite under them).
            bounds = []
            for k, (start, stop) in enumerate(self.ranges):
                name = names[k] if names is not None else "i"
                bounds.append((_bound_once(start, f"{name}_begin"), _bound_once(stop, f"{name}_end")))
            for k, (start, stop) in enumerate(bounds):
                level = {**annotations, **self.outer_annotations} if k == 0 else annotations
                frame = self.make_frame(start, stop, dict(level) if level else None)
                var = frame.__enter__()
                frames.append(frame)
                if names is not None:
                    IRBuilder.name(names[k], var)
                loop_vars.append(var)
            if self.index_map is not None:
                loop_vars = [self.index_map(loop_vars[0])]
            yield loop_vars[0] if len(loop_vars) == 1 else tuple(loop_vars)
        finally:
            for frame in reversed(frames):
                frame.__exit__(None, None, None)


def _bound_once(bound: Any, name: str) -> Any:
    """A loop bound as a value: a T.alloc_var reads as its current value; an expression that loads memory is bound
    to a variable here (read once, before the loop)."""
    bound = value(bound)
    if not isinstance(bound, tvm.ir.Expr) or isinstance(bound, (tirx.Var, tirx.IntImm)):
        return bound
    loads: list[Any] = []
    tvm_ffi.structural_walk(bound, [(TensorLoad, loads.append)])
    if not loads:
        return bound
    var = Tb.Bind(bound)
    IRBuilder.name(name, var)
    return var


def _ranges(construct: str, args: tuple) -> list[tuple[Any, Any]]:
    if not args:
        raise current_trace(construct).error(f"{construct} needs at least one extent")
    return [(0, value(a)) for a in args]


def _range(construct: str, start: Any, stop: Any) -> list[tuple[Any, Any]]:
    """A loop's (start, stop); a `T.alloc_var` bound reads as its current value."""
    return [(0, value(start))] if stop is None else [(value(start), value(stop))]


def Parallel(*extents: Any, coalesced_width: Any = None, loop_layout: Any = None, prefer_async: Any = None,  # noqa: N802
             annotations: Any = None) -> LoopFrame:
    """`for i, j in T.Parallel(M, N)`: independent iterations; the compiler maps them onto the block's
    threads (from the layout of the fragments they touch, else a coalesced vectorized mapping).

    `loop_layout=F`, a T.Fragment over the loop's extents ((i, j[, rep]) -> (thread, slot)), fixes the mapping
    instead: thread F.thread(i, j, rep) runs iteration (i, j) (once per replica), in slot order; the fragments
    the loop touches are laid out from it, and its innermost run of consecutive slots sets the vector width.

    `prefer_async=True` (upstream's cp.async hint): the nest's element copies from global memory into a shared tile
    become LDLMS asynchronous copies, committed and waited for after the nest, or by the user with
    `annotations={"parallel_async_without_async_commit_wait": True}` (transform/prefer_async_copies.py). Loop
    `annotations` go on the outermost loop."""
    if prefer_async is not None and not isinstance(prefer_async, bool):
        raise current_trace("T.Parallel").error(
            f"T.Parallel: prefer_async={prefer_async!r} must be True, False or None")
    if annotations is not None and (not isinstance(annotations, dict) or
                                    not all(isinstance(k, str) for k in annotations)):
        raise current_trace("T.Parallel").error(
            f"T.Parallel: annotations={annotations!r} must be a dict of str keys (loop annotations)")
    outer = dict(annotations or {})
    if prefer_async is not None:
        outer[PREFER_ASYNC] = prefer_async
    annotations = {PARALLEL: True}
    if coalesced_width is not None:
        if not isinstance(coalesced_width, int) or coalesced_width <= 0:
            raise current_trace("T.Parallel").error(
                f"T.Parallel: coalesced_width={coalesced_width!r} must be a positive int (elements per access)")
        annotations[COALESCED_WIDTH] = coalesced_width
    if loop_layout is not None:
        check_loop_layout("T.Parallel", loop_layout, extents, current_trace("T.Parallel").error)
        outer[PARALLEL_LOOP_LAYOUT] = loop_layout
    return LoopFrame(
        "T.Parallel", _ranges("T.Parallel", extents),
        lambda lo, hi, ann: Tb.parallel(lo, hi, annotations=ann), annotations, outer_annotations=outer,
    )


def check_loop_layout(construct: str, loop_layout: Any, extents: Any, error) -> None:
    """A `loop_layout=` must be a T.Fragment over the loop's extents (those known now are checked here, at the
    user's line; the passes check the rest: coverage, threads)."""
    from ..layout import Fragment

    if not isinstance(loop_layout, Fragment):
        raise error(f"{construct}: loop_layout must be a T.Fragment over the loop's extents; got "
                    f"{type(loop_layout).__name__}")
    if extents is None:
        return
    shape = [static_value(e) for e in loop_layout.input_shape]
    wanted = [static_value(e) for e in extents]
    if len(shape) != len(wanted) or any(a is not None and b is not None and a != b for a, b in zip(shape, wanted)):
        raise error(f"{construct}: loop_layout {loop_layout!r} has input shape {shape}, but the loop's extents are "
                    f"{[w if w is not None else e for w, e in zip(wanted, extents)]}; a loop layout maps the loop's "
                    "iteration space, so its shape must equal the extents")


def parallel(start: Any, stop: Any = None) -> LoopFrame:
    """TVMScript's one-dimensional `for i in T.parallel(n)` (or `T.parallel(0, n)`): a T.Parallel loop over range(n),
    as upstream lowers TVMScript parallel loops inside a kernel."""
    if stop is not None:
        trace = current_trace("T.parallel")
        if not (isinstance(start, int) and start == 0):
            raise trace.error(f"T.parallel({start}, {stop}): a start other than 0 is not supported; loop over "
                              f"T.Parallel({stop} - {start}) and add {start} to the index")
        start = stop
    return Parallel(start)


def serial(start: Any, stop: Any = None, step: Any = None, *, annotations: dict | None = None) -> LoopFrame:
    """`for i in T.serial(n)` / `T.serial(start, stop, step)` (and a kernel's `range(...)`). A step other than 1 (a
    nonzero compile-time int) becomes a unit-step loop over the trip count, k in [0, ceil((stop - start) / step)),
    and the body sees i = start + k * step: the passes only ever meet unit-step loops."""
    value = static_value(step) if step is not None else 1
    if value is None or value == 0:
        raise current_trace("T.serial").error(f"T.serial: step {step} must be a nonzero compile-time int")
    if value == 1:
        return LoopFrame("T.serial", _range("T.serial", start, stop),
                         lambda lo, hi, ann: Tb.serial(lo, hi, annotations=ann), annotations)
    [(lo, hi)] = _range("T.serial", start, stop)
    trips = _ceildiv(hi - lo, value) if value > 0 else _ceildiv(lo - hi, -value)
    return LoopFrame("T.serial", [(0, trips)], lambda lo_, hi_, ann: Tb.serial(lo_, hi_, annotations=ann),
                     annotations, index_map=lambda k: k * value if isinstance(lo, int) and lo == 0 else lo + k * value)


def _ceildiv(a: Any, b: int) -> Any:
    """ceil(a / b) for b > 0, clamped at 0 when a is a Python int (a run-time a <= 0 gives an empty loop anyway)."""
    if isinstance(a, int):
        return max(0, -(-a // b))
    return tirx.floordiv(a + (b - 1), b)




def unroll(start: Any, stop: Any = None, step: Any = None, *, explicit: bool = False,
           unroll_factor: int | None = None, annotations: dict | None = None) -> LoopFrame:
    """`for i in T.unroll(n)` / `T.unroll(start, stop, step=s)`: a loop the device compiler unrolls (`#pragma
    unroll`, or `#pragma unroll k` with `unroll_factor=k`); `explicit=True` unrolls it here, in the IR, instead (a
    constant trip count). Upstream's `annotations` keys `pragma_unroll_explicit` / `pragma_unroll_factor` mean the
    same as the keyword arguments."""
    trace = current_trace("T.unroll")
    annotations = dict(annotations or {})
    explicit = bool(annotations.pop("pragma_unroll_explicit", explicit))
    if unroll_factor is None:
        unroll_factor = annotations.pop("pragma_unroll_factor", None)
    if static_value(unroll_factor) is not None:  # T.int32(4) as well as 4
        unroll_factor = static_value(unroll_factor)
    if step is not None:
        value = static_value(step)
        if value is None or value <= 0:
            raise trace.error(f"T.unroll: step {step} must be a positive compile-time int")
        step = None if value == 1 else value
    if unroll_factor is not None and (not isinstance(unroll_factor, int) or unroll_factor <= 0):
        raise trace.error(f"T.unroll: unroll_factor={unroll_factor!r} must be a positive int")
    if explicit and unroll_factor is not None:
        raise trace.error("T.unroll: explicit=True unrolls the loop completely; it takes no unroll_factor")
    if explicit:  # TVM's UnrollLoop unrolls a kUnrolled loop in the IR under `pragma_unroll_explicit` = 1
        return LoopFrame("T.unroll", _range("T.unroll", start, stop),
                         lambda lo, hi, ann: Tb.unroll(lo, hi, annotations=ann, step=step), annotations or None,
                         scope_attrs={"pragma_unroll_explicit": tirx.const(1, "int32")})
    # Otherwise a serial loop the printer marks `#pragma unroll [k]`: UnrollLoop leaves it alone (it would reject a
    # kUnrolled loop whose trip count is not a constant, e.g. `T.unroll(tid % 32)`).
    annotations[PRAGMA_UNROLL] = True
    if unroll_factor is not None:
        annotations[UNROLL_FACTOR] = unroll_factor
    return LoopFrame("T.unroll", _range("T.unroll", start, stop),
                     lambda lo, hi, ann: Tb.serial(lo, hi, annotations=ann, step=step), annotations)


def Serial(start: Any, stop: Any = None, step: Any = None, *, annotations: dict | None = None) -> LoopFrame:
    """Upstream's capitalised alias of `T.serial` (a tile-level loop by its spelling, the same loop)."""
    return serial(start, stop, step, annotations=annotations)


def Unroll(start: Any, stop: Any = None, step: Any = None, *, explicit: bool = False,
           unroll_factor: int | None = None, annotations: dict | None = None) -> LoopFrame:
    """Upstream's capitalised alias of `T.unroll`."""
    return unroll(start, stop, step, explicit=explicit, unroll_factor=unroll_factor, annotations=annotations)


def vectorized(start: Any, stop: Any = None) -> LoopFrame:
    return LoopFrame(
        "T.vectorized", _range("T.vectorized", start, stop), lambda lo, hi, ann: Tb.vectorized(lo, hi, annotations=ann)
    )


def Pipelined(start: Any, stop: Any = None, num_stages: int = 0, order: Any = None, stage: Any = None,  # noqa: N802
              sync: Any = None, group: Any = None) -> LoopFrame:
    """`for k in T.Pipelined(n, num_stages=s)` (or `T.Pipelined(lo, hi, ...)`): semantically `range(n)`; the
    pipeline planner overlaps the copies of later iterations with the compute of this one."""
    annotations: dict[str, Any] = {PIPELINE_STAGES: int(num_stages)}
    if order is not None:
        annotations[PIPELINE_ORDER] = list(order)
    if stage is not None:
        annotations[PIPELINE_STAGE] = list(stage)
    if group is not None:
        annotations[PIPELINE_GROUP] = [list(g) for g in group]
    if sync:
        warn_once("T.Pipelined sync", "T.Pipelined(sync=...) is ignored: the pipeline planner places its own "
                  "barriers between the stages")
    return LoopFrame("T.Pipelined", _range("T.Pipelined", start, stop), lambda lo, hi, ann: Tb.serial(lo, hi, annotations=ann), annotations)


def While(condition: Any) -> Any:  # noqa: N802
    """TVMScript's while frame, which upstream's `tilelang.language` re-exports: `with T.While(cond):` runs its body
    while `cond` holds, reading `cond` again before each iteration, as `while cond:` in a kernel does (the same
    TIR `While`). `cond` is a boolean or integer expression (nonzero: true); a `T.alloc_var` reads as its value.
    Example: with T.While(state[0] == 0): state[0] = flag[0]"""
    trace = kernel_trace("T.While")
    cond = as_expr(value(condition))
    constant = static_value(cond)
    if constant is not None:
        if constant:  # a kernel has no `break`: such a loop would never end
            raise trace.error(f"T.While({condition!r}): the condition is always true, so the loop never ends; "
                              "give it a condition the body changes (a T.alloc_var or a buffer element)")
        cond = tirx.const(False, "bool")
    else:
        dtype = tvm.DataType(str(cond.ty.dtype)) if isinstance(getattr(cond, "ty", None), tvm.ir.PrimType) else None
        if dtype is None or dtype.lanes != 1 or dtype.type_code not in (tvm.DataTypeCode.BOOL, tvm.DataTypeCode.INT,
                                                                         tvm.DataTypeCode.UINT):
            what = f"dtype {dtype}" if dtype is not None else type(condition).__name__
            raise trace.error(f"T.While: the condition must be a scalar boolean or integer expression; got "
                              f"{condition!r} ({what})")
    return Tb.While(cond)
