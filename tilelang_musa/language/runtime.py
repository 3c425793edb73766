"""Runtime helpers that a rewritten kernel calls (bound as `__tl__`, see `parser.py`).

The parser rewrites the statements of a kernel function that may carry IR values (assignments, stores, `for`,
`if`, `while`, boolean operators) into calls of these helpers. Static values (Python ints, bools, lists) keep
Python semantics everywhere; IR values become TIR statements of the open trace (`builder.py`).
"""

from __future__ import annotations

import functools
import types
from typing import Any, Callable, Iterator

import tvm
from tvm import tirx
from tvm.script.ir_builder import IRBuilder
from tvm.script.ir_builder import _ffi_api as _ir_builder_ffi
from tvm.tirx.script import builder as Tb

from ..errors import EndlessLoopError, SliceStepError, SourceLoc
from .builder import (_TRACES, _UNBOUND, ControlScope, KernelTrace, as_expr, current_loc, current_trace, is_buffer,
                      is_var_buffer, kernel_trace, static_value, value)
from .dtypes import FP4_DTYPE, SUB_BYTE_INT_HINT, DType, fp4_arithmetic, sub_byte_int_value
from .loop import LoopFrame, serial
from .reducer_epoch import check_reads, note_legacy_access
from .proxy import declare_param

class at:  # noqa: N801 - used as `with __tl__.at(...)`, like a keyword
    """The scope of one user statement: the trace's current location (errors name it), and the source span that
    the IRBuilder attaches to every TIR node built inside (nested statements give a SequentialSpan whose last
    element is the innermost statement's line; `ir/source_lines.py` reads it)."""

    __slots__ = ("pushed",)

    def __init__(self, filename: str, lineno: int, col: int):
        self.pushed = None
        if _TRACES:
            _TRACES[-1].loc = SourceLoc(filename, lineno, col)
            if IRBuilder.is_in_scope():
                self.pushed = IRBuilder.current()
                _ir_builder_ffi.IRBuilderPushSourceSpan(self.pushed, _span(filename, lineno, col))

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: Any) -> None:
        if self.pushed is not None:
            _ir_builder_ffi.IRBuilderPopSourceSpan(self.pushed)


def at_iter(filename: str, lineno: int, col: int, make_iter: Callable[[], Any]) -> Iterator[Any]:
    """A loop's iterator inside the scope of the loop's line: the scope ends when the loop does, however it is
    left (a `break` or `return` closes the generator). Opens no Python block, unlike a wrapping `with`."""
    scope = at(filename, lineno, col)
    try:
        iterator = iter(make_iter())
    except BaseException:
        scope.__exit__(None, None, None)
        raise
    return _scoped_iteration(scope, iterator)


def _scoped_iteration(scope: at, iterator: Iterator[Any]) -> Iterator[Any]:
    try:
        yield from iterator
    finally:
        scope.__exit__(None, None, None)


class at_with:  # noqa: N801 - used as a `with` item
    """A `with` statement's first item inside the scope of the statement's line, as one item (one block)."""

    __slots__ = ("scope", "inner")

    def __init__(self, filename: str, lineno: int, col: int, make_manager: Callable[[], Any]):
        self.scope = at(filename, lineno, col)
        try:
            self.inner = make_manager()
        except BaseException:
            self.scope.__exit__(None, None, None)
            raise

    def __enter__(self) -> Any:
        try:
            return type(self.inner).__enter__(self.inner)
        except BaseException:
            self.scope.__exit__(None, None, None)
            raise

    def __exit__(self, *exc: Any) -> Any:
        try:
            return type(self.inner).__exit__(self.inner, *exc)
        finally:
            self.scope.__exit__(*exc)


@functools.lru_cache(maxsize=4096)
def _span(filename: str, lineno: int, col: int) -> tvm.ir.Span:
    return tvm.ir.Span(tvm.ir.SourceName(filename), lineno, lineno, col, col)


def _operand(x: Any) -> Any:
    """A condition or logical operand as an expression (a `T.alloc_var` scalar reads as its value)."""
    return as_expr(value(x))


def lookup(thunk: Callable[[], Any]) -> Any:
    try:
        return thunk()
    except NameError:  # includes UnboundLocalError
        return _UNBOUND


def _has_side_effect_or_load(expr: Any) -> bool:
    """True if evaluating `expr` twice could differ from evaluating it once (reads memory or calls)."""
    import tvm_ffi

    found = []

    def on_load(node, *args):
        found.append(node)

    tvm_ffi.structural_walk(expr, [(tvm.ir.expr.TensorLoad, on_load), (tvm.ir.Call, on_load)])
    return bool(found)


HELPER = "__tl__"  # the name the parser's rewritten code reaches this module by (bound in each kernel's globals)


def call_target(fn: Any) -> Any:
    """The function a kernel calls with a name among its arguments. A plain Python function of the user's (a helper
    module's `align(x, y)`: not kernel code, which the parser rewrote, and not TileLang's) gets each `T.alloc_var`
    argument as its value, as upstream reads every use of a variable's name: it can only compute with it. Kernel
    code (a @T.macro, a def nested in the kernel) and TileLang's functions get the variable itself (a macro may
    assign it)."""
    module = getattr(fn, "__module__", None) or ""
    if not isinstance(fn, types.FunctionType) or HELPER in fn.__globals__ or module.split(".")[0] in (
            "tilelang", "tilelang_musa", "tvm", "tvm_ffi"):
        return fn

    @functools.wraps(fn)
    def reading_values(*args: Any, **kwargs: Any) -> Any:
        return fn(*(value(a) for a in args), **{k: value(v) for k, v in kwargs.items()})

    return reading_values


def assign(name: str, thunk: Callable[[], Any], current: Any) -> Any:
    """`name = value`. Stores into a `T.alloc_var` scalar; binds a value that reads memory to a new
    variable (so it is read once, here); otherwise plain Python assignment."""
    trace = _TRACES[-1] if _TRACES else None
    if trace is not None:
        trace.naming_hint = name
    try:
        value = thunk()
    finally:
        if trace is not None:
            trace.naming_hint = None
    if trace is None:
        return value
    if hasattr(value, "bind_as_statement"):  # `tx = T.thread_binding(n, thread=...)`: the axis from here on
        return value.bind_as_statement(name)
    if current is not _UNBOUND and is_var_buffer(current) and not is_buffer(value):
        store(current, 0, value)
        return current
    if isinstance(value, tvm.ir.expr.TensorRegion):
        return _bind_vector_slice(trace, name, value)
    if isinstance(value, tvm.ir.Expr) and not is_buffer(value) and _needs_bind(value):
        _check_storable(trace, value)
        var = Tb.Bind(value)
        IRBuilder.name(name, var)
        return var
    return value


def _bind_vector_slice(trace: KernelTrace, name: str, region: Any) -> Any:
    """`b = A[0, 0:4]`: as upstream, a vector value bound to `b` (one load, here), where the slice is one: a
    constant run of the last dimension of a buffer outside fragments (their elements live in other threads).
    A tile op given `b` (`T.copy(b, ...)`) still sees the slice (trace.let_regions). Any other slice stays one."""
    vector = _region_as_vector(region)
    last = len(region.region) - 1
    if (not isinstance(vector, tvm.ir.expr.TensorLoad) or not isinstance(vector.indices[last], tirx.Ramp)
            or str(region.source.ty.storage_scope) == "local.fragment"):
        return region
    var = Tb.Bind(vector)
    IRBuilder.name(name, var)
    trace.let_regions.append((var, region))
    return var


def _needs_bind(value: Any) -> bool:
    if isinstance(value, (tvm.ir.expr.Var, tirx.IntImm, tirx.FloatImm, tvm.ir.expr.StringImm)):
        return False
    if not isinstance(value.ty, tvm.ir.PrimType):
        return False
    return _has_side_effect_or_load(value)


def unpack_for_store(values: Any, targets: list, names: list) -> tuple[bool, Any]:
    """Phase one of `a, b = b, a + b` (parser.py `_unpacking_assign`): (True, values read now) where a target
    stores (True for an element target, or a name bound to a T.alloc_var scalar): each value that reads memory is
    bound to a new variable, a T.alloc_var's value read, before any target is assigned. (False, values) otherwise:
    the statement is plain Python unpacking, as before."""
    try:
        items = list(values)
    except TypeError:
        return False, values  # Python's own unpacking error follows
    if not _TRACES or not any(t is True or (t is not _UNBOUND and is_var_buffer(t)) for t in targets):
        return False, items
    if len(items) != len(targets):
        raise ValueError(f"cannot unpack {len(items)} values into {len(targets)} targets")
    read = []
    for name, item in zip(names, items):
        item = value(item)
        if isinstance(item, tvm.ir.Expr) and not is_buffer(item) and _needs_bind(item):
            _check_storable(current_trace("assignment"), item)
            bound = Tb.Bind(item)
            IRBuilder.name(f"{name}_new", bound)
            item = bound
        read.append(item)
    return True, read


def assign_ref(name: str, current: Any, thunk: Callable[[], Any]) -> Any:
    """`x = value` for a parameter `x: T.Ref`: the element the caller passed (`f(buf[i])`, or a T.alloc_var) is
    stored to; `x` stays that element, so later reads load the new value."""
    value = thunk()
    if is_var_buffer(current):
        store(current, 0, value)
        return current
    if isinstance(current, tvm.ir.expr.TensorLoad):
        store(current.source, tuple(current.indices), value)
        return current
    raise current_trace().error(f"`{name}` is a T.Ref parameter: pass it a buffer element (`buf[i]`) or a "
                                f"T.alloc_var; got {current!r}")


def aug_assign(name: str, current: Any, op: str, value: Any) -> Any:
    if is_var_buffer(current):
        aug_store(current, 0, op, value)
        return current
    return assign(name, lambda: _BINOPS[op](current, value), _UNBOUND)


_BINOPS: dict[str, Callable[[Any, Any], Any]] = {
    "Add": lambda a, b: a + b,
    "Sub": lambda a, b: a - b,
    "Mult": lambda a, b: a * b,
    "Div": lambda a, b: a / b,
    "FloorDiv": lambda a, b: a // b,
    "Mod": lambda a, b: a % b,
    "BitAnd": lambda a, b: a & b,
    "BitOr": lambda a, b: a | b,
    "BitXor": lambda a, b: a ^ b,
    "LShift": lambda a, b: a << b,
    "RShift": lambda a, b: a >> b,
    "Pow": lambda a, b: a**b,
}


def _indices(buffer: Any, index: Any) -> list[Any]:
    if isinstance(index, tuple):
        return list(index)
    return [index]


def expr_statement(value: Any) -> Any:
    """A bare expression statement of the kernel: an IR call is evaluated (it is there for its effect); anything
    else (None from a construct that emitted its own IR, a docstring) is left alone."""
    if _TRACES and _TRACES[-1].kernel is not None and isinstance(value, tvm.ir.Call):
        Tb.evaluate(value)
    return value


def unit_step_index(target: Any, index: Any) -> Any:
    """The index of `target[a:b:s]`, unchanged; a buffer slice whose step is not 1 is an error at the user's line
    (the IR's buffer regions have no step). Python sequences keep their stepped slices."""
    if not is_buffer(target):
        return index
    for part in index if isinstance(index, tuple) else (index,):
        if isinstance(part, slice) and part.step is not None:
            step = static_value(part.step) if isinstance(part.step, tvm.ir.Expr) else part.step
            if step != 1:
                trace = current_trace("buffer slice")
                raise SliceStepError(f"buffer slice `{target.name}[{part.start}:{part.stop}:{part.step}]`: a step "
                                     "other than 1 is not supported (the IR's buffer regions are contiguous ranges); "
                                     "index the elements in a T.Parallel loop instead", trace.loc)
    return index


def store(target: Any, index: Any, value: Any) -> None:
    """`target[index] = value`: a BufferStore for buffers, Python item assignment otherwise."""
    if not is_buffer(target):
        target[index] = value
        return
    trace = current_trace("buffer store")
    note_legacy_access(trace, target, "an ordinary store", store=True)
    indices = _indices(target, index)
    if any(isinstance(i, slice) for i in indices):
        if isinstance(value, tvm.ir.expr.TensorRegion):  # `A[0, 4:8] = A[0, 0:4]`: the region read as a vector
            value = _region_as_vector(value)
        lanes = value.ty.dtype.lanes if isinstance(value, tvm.ir.Expr) and hasattr(value.ty, "dtype") else 1
        indices = vector_indices(trace, target, indices, lanes) if lanes > 1 else None
        if indices is None:
            raise trace.error(
                f"slice assignment to `{target.name}` takes a vector of the slice's length (`C[i:i + 4] = "
                "T.mul_half_float_to_bfloat16_x4(...)`); for tiles use T.copy or a T.Parallel loop")
    dtype = str(target.dtype)
    if is_var_buffer(value):  # `B[i] = x` with x a T.alloc_var scalar stores its value
        value = value[0]
    value = _convert(value, dtype)
    _check_storable(trace, value)
    check_reads(trace, value)
    if isinstance(value, tvm.ir.Expr) and value.ty.dtype != target.ty.dtype.dtype and value.ty.dtype.lanes == 1:
        value = tirx.Cast(dtype, value)
    Tb.buffer_store(target, value, indices)


def _region_as_vector(region: Any) -> Any:
    """A region with one non-unit dimension of constant extent, read as one vector load (else left as it is)."""
    ranges = list(region.region)
    wide = [k for k, r in enumerate(ranges) if not (isinstance(r.extent, tirx.IntImm) and r.extent.value == 1)]
    if len(wide) != 1 or not isinstance(ranges[wide[0]].extent, tirx.IntImm):
        return region
    indices = [r.min for r in ranges]
    indices[wide[0]] = tirx.Ramp(ranges[wide[0]].min, 1, int(ranges[wide[0]].extent.value))
    return region.source[tuple(indices)]


def _check_storable(trace: KernelTrace, value: Any) -> None:
    """A value a kernel statement may hold: no fp4 arithmetic, no sub-byte integers."""
    _check_no_fp4_arithmetic(trace, value)
    node = sub_byte_int_value(value)
    if node is not None:
        from ..errors import UnsupportedError

        dtype = str(node.ty.dtype)
        what = f"has dtype {dtype}, a sub-byte integer," if dtype.startswith(("int", "uint")) else \
            "computes with int4 / uint4 values, sub-byte integers"
        raise UnsupportedError(f"`{node}` {what} which a MUSA kernel cannot hold (no 4- or 2-bit integer type in MUSA "
                               f"C): an int4 / uint4 element of a tensor or shared tile may be loaded, cast "
                               f"(T.cast(x[i], \"int32\")), selected and stored, nothing else; {SUB_BYTE_INT_HINT}",
                               trace.loc)


def _check_no_fp4_arithmetic(trace: KernelTrace, value: Any) -> None:
    node = fp4_arithmetic(value)
    if node is not None:
        raise trace.error(f"`{node}` computes with {FP4_DTYPE} values: fp4 is a storage type (no float4 arithmetic "
                          f"on MUSA); cast the loaded elements first (T.cast(x[i], \"float16\")) and store with "
                          f"T.cast(value, \"{FP4_DTYPE}\")")


def vector_indices(trace: KernelTrace, buffer: Any, indices: list[Any], lanes: int) -> list[Any] | None:
    """The indices of a `lanes`-element vector access `buffer[i, j:j + lanes]`: one unit-step slice of exactly
    `lanes` elements (a Ramp), every other index a scalar; None if `indices` is not that."""
    sliced = [k for k, i in enumerate(indices) if isinstance(i, slice)]
    if len(sliced) != 1:
        return None
    s = indices[sliced[0]]
    start = 0 if s.start is None else s.start
    stop = buffer.ty.shape[sliced[0]] if s.stop is None else s.stop
    if s.step not in (None, 1) or not tvm.sym.Analyzer().can_prove_equal(as_expr(stop) - as_expr(start), lanes):
        raise trace.error(f"`{buffer.name}[...]`: a vector access needs a unit-step slice of exactly {lanes} elements")
    out = list(indices)
    out[sliced[0]] = tirx.Ramp(as_expr(tirx.const(start, "int32") if isinstance(start, int) else start), 1, lanes)
    return out


def _convert(value: Any, dtype: str) -> Any:
    if isinstance(value, bool):
        return tirx.const(value, dtype)
    if isinstance(value, (int, float)):
        return tirx.const(value, dtype)
    return value


def aug_store(target: Any, index: Any, op: str, value: Any) -> None:
    if not is_buffer(target):
        target[index] = _BINOPS[op](target[index], value)
        return
    indices = _indices(target, index)
    store(target, index, _BINOPS[op](target[tuple(indices)] if len(indices) > 1 else target[indices[0]], value))


def annotate(name: str, annotation: Any, current: Any) -> Any:
    """`name: annotation` without a value: in the eager style this declares a tensor parameter."""
    trace = current_trace(f"{name}: {annotation!r}")
    return declare_param(trace, name, annotation, current)


def declare(name: str, annotation: Any, thunk: Callable[[], Any]) -> Any:
    """`name: T.int32 = value`: a typed local value."""
    value = thunk()
    if isinstance(annotation, DType):
        value = annotation(value) if not isinstance(value, tvm.ir.Expr) else tirx.Cast(str(annotation), value)
    return assign(name, lambda: value, _UNBOUND)


def named(frame: Any, names: tuple[str, ...], unpacks: bool = False) -> Any:
    """`with frame as names`: frames that define IR variables (T.Kernel) name them after the user's names;
    `unpacks` when the target is a tuple (`as (bx,)` takes a 1-D kernel's block index as a 1-tuple)."""
    if hasattr(frame, "bind_names"):
        frame.bind_names(names, unpacks)
    return frame


# -- control flow


def iterate(iterable: Any, names: tuple[str, ...] | None) -> Iterator[Any]:
    """`for ... in iterable`: IR loops for loop frames, Python iteration for everything else."""
    if isinstance(iterable, LoopFrame):
        with _traced_loop(iterable):
            yield from iterable.build(names)
        return
    if _TRACES and isinstance(iterable, tvm.ir.Expr):
        raise _TRACES[-1].error(f"cannot iterate over the IR value {iterable}; use T.serial(n) or range(n)")
    with _traced_loop(None):
        # An iterator may never end (itertools.count()), nor may a container the body keeps growing.
        loc, bound = current_loc(), max(STATIC_LOOP_LIMIT, _length(iterable))
        for count, item in enumerate(iterable, 1):
            if count > bound:
                raise _endless("this `for` loop over a Python iterable", loc)
            yield item


class _traced_loop:  # noqa: N801 - a context manager used like a function
    """Marks a `for`/`while` statement of the kernel as being traced (the trace's loop stack), so that a `break` or
    `continue` in its body knows whether it leaves an IR loop or a Python iteration (loop_exit)."""

    def __init__(self, loop: LoopFrame | None):
        self.loops = _TRACES[-1].loops if _TRACES else None
        self.loop = loop

    def __enter__(self) -> None:
        if self.loops is not None:
            self.loops.append(self.loop)
            if self.loop is not None:
                _TRACES[-1].scopes.append(ControlScope(conditional=False))

    def __exit__(self, *exc: Any) -> None:
        if self.loops is not None:
            self.loops.pop()
            if self.loop is not None:
                _TRACES[-1].scopes.pop()


# Loops a `break` / `continue` may leave: one thread runs them in order, so leaving one early is plain C. The other
# constructs spread iterations over threads or slots (T.Parallel, T.vectorized), run them in stages (T.Pipelined) or
# copy the body per iteration (T.unroll), where no iteration can stop the rest.
_EXITABLE_LOOPS = ("T.serial", "T.While")


def loop_exit(kind: str, filename: str, lineno: int, col: int, conditional: bool = False) -> bool:
    """`break` / `continue` (`kind`) of a kernel: True where it leaves a Python iteration (the statement then runs
    as in Python, at trace time); for an IR loop it adds TIR's Break / Continue to the loop body being built and
    returns False, so tracing goes on (what follows it in its block is never reached at run time). `conditional`:
    the statement sits under an `if` over a run-time condition (parser.py), which cannot leave a Python iteration."""
    loops = _TRACES[-1].loops if _TRACES else []
    loop = loops[-1] if loops else None
    with at(filename, lineno, col):
        if loop is None and conditional:
            raise current_trace().error(
                f"`{kind}` under a run-time condition leaves a Python loop, which runs while the kernel is built; "
                "iterate with T.serial(...) or range(...) for a loop of the kernel")
        if loop is None:
            return True
        if loop.construct not in _EXITABLE_LOOPS or len(loop.ranges) != 1:
            raise current_trace().error(
                f"`{kind}` inside {loop.construct}: only a sequential loop (T.serial, range, a `while` with a run-time "
                f"condition) can be left early; {loop.construct} spreads or reorders its iterations")
        Tb.Break() if kind == "break" else Tb.Continue()
    return False


def loop_break() -> None:
    """Upstream's `T.loop_break()`: leave the innermost loop of the kernel, as `break` does there (a sequential
    loop: T.serial, range, a `while` over a run-time condition), also under an `if` over a run-time condition."""
    trace = kernel_trace("T.loop_break")
    if not trace.loops:
        raise trace.error("T.loop_break() outside a loop of the kernel: it leaves the innermost T.serial, range or "
                          "run-time `while` loop around it")
    loc = trace.loc
    loop_exit("break", loc.filename, loc.lineno, loc.col, conditional=True)


def _length(iterable: Any) -> int:
    try:
        return len(iterable)
    except TypeError:  # an iterator, or an object whose __len__ does not apply (a 0-d array)
        return 0


def range_(*args: Any):
    """The kernel's `range(...)` in a for statement: a serial TIR loop, as in TVMScript (see parser.py)."""
    return serial(*args)


def static_condition(cond: Any) -> bool:
    cond = _operand(cond)
    value = static_value(cond)
    if value is None and isinstance(cond, tvm.ir.Expr):
        raise current_trace().error(
            "this `if` contains break/continue/return, so its condition must be known at compile time; "
            f"got the run-time condition `{cond}`"
        )
    return bool(cond) if value is None else bool(value)


class _IfBuilder:
    """`if` over a static condition keeps Python semantics; over an IR condition it builds IfThenElse.

    Used flat (see parser.py): `then()` / `orelse()` say whether to run a branch (and open its IR frame),
    `end_then()` / `end_orelse()` close it, `end()` closes the statement and its line's scope."""

    def __init__(self, filename: str, lineno: int, col: int, cond: Any):
        self.scope = at(filename, lineno, col)
        try:
            cond = _operand(cond() if isinstance(cond, types.FunctionType) else cond)
            self.static = static_value(cond)
            if self.static is None and not isinstance(cond, tvm.ir.Expr):
                self.static = bool(cond)
            self.cond = cond
            self._frame = self._branch = None
            if self.static is None:
                if _TRACES:  # a condition computes with its operands: no fp4 or sub-byte integer arithmetic
                    _check_storable(_TRACES[-1], cond)
                self._frame = Tb.If(cond)
                self._frame.__enter__()
        except BaseException:
            self.scope.__exit__(None, None, None)
            raise

    def _open(self, branch: Any) -> bool:
        self._branch = branch
        branch.__enter__()
        if _TRACES:
            _TRACES[-1].scopes.append(ControlScope(conditional=True))
        return True

    def _close(self) -> None:
        if self._branch is not None:
            branch, self._branch = self._branch, None
            if _TRACES:
                _TRACES[-1].scopes.pop()
            branch.__exit__(None, None, None)

    def then(self) -> bool:
        return bool(self.static) if self.static is not None else self._open(Tb.Then())

    def orelse(self) -> bool:
        return not self.static if self.static is not None else self._open(Tb.Else())

    end_then = end_orelse = _close

    def end(self) -> None:
        try:
            if self._frame is not None:
                self._frame.__exit__(None, None, None)
        finally:
            self.scope.__exit__(None, None, None)


def if_(filename: str, lineno: int, col: int, cond: Any) -> _IfBuilder:
    """`cond` is a thunk of the condition (so that it is evaluated in the statement's scope), or its value."""
    return _IfBuilder(filename, lineno, col, cond)


_WHILE_LOOP = LoopFrame("T.While", [(0, 0)], None)  # a `while` over a run-time condition, for loop_exit


# A loop whose condition or iterator is Python's runs while the kernel is traced, once per iteration; past this
# many iterations it is taken for one that never ends (`while n > 0:` over a Python `n` the body never changes).
STATIC_LOOP_LIMIT = 1 << 16


def _endless(loop: str, loc: SourceLoc | None) -> EndlessLoopError:
    return EndlessLoopError(f"{loop} has run {STATIC_LOOP_LIMIT} iterations while the kernel was traced: its condition or "
                        "iterator is Python's, known at compile time, so the loop is unrolled, and it does not end. "
                        "A loop that runs in the kernel needs a run-time condition (a T.alloc_var or a buffer "
                        "element) or range(n) / T.serial(n)", loc)


def while_(test: Callable[[], Any]) -> Iterator[None]:
    cond = _operand(test())
    if static_value(cond) is not None or not isinstance(cond, tvm.ir.Expr):
        with _traced_loop(None):
            loc, count = current_loc(), 0
            while static_value(cond) if static_value(cond) is not None else cond:
                count += 1
                if count > STATIC_LOOP_LIMIT:
                    raise _endless("this `while` loop", loc)
                yield
                cond = _operand(test())
        return
    with Tb.While(cond), _traced_loop(_WHILE_LOOP):
        yield


def and_(lhs: Any, rhs: Callable[[], Any]) -> Any:
    lhs = _operand(lhs)
    value = static_value(lhs)
    if value is not None or not isinstance(lhs, tvm.ir.Expr):
        return rhs() if (value if value is not None else lhs) else lhs
    other = _operand(rhs())
    if static_value(other) is not None:
        return lhs if static_value(other) else tirx.const(False, "bool")
    return tirx.And(lhs, other)


def or_(lhs: Any, rhs: Callable[[], Any]) -> Any:
    lhs = _operand(lhs)
    value = static_value(lhs)
    if value is not None or not isinstance(lhs, tvm.ir.Expr):
        return lhs if (value if value is not None else lhs) else rhs()
    other = _operand(rhs())
    if static_value(other) is not None:
        return tirx.const(True, "bool") if static_value(other) else lhs
    return tirx.Or(lhs, other)


def not_(operand: Any) -> Any:
    operand = _operand(operand)
    static = static_value(operand)
    if static is not None or not isinstance(operand, tvm.ir.Expr):
        return not (static if static is not None else operand)
    return tirx.Not(operand)


def select(cond: Any, then: Callable[[], Any], otherwise: Callable[[], Any]) -> Any:
    cond = _operand(cond)
    static = static_value(cond)
    if static is not None or not isinstance(cond, tvm.ir.Expr):
        return then() if (static if static is not None else cond) else otherwise()
    return tirx.if_then_else(cond, then(), otherwise())
