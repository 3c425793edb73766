"""Low-level TIR names that upstream TileLang scripts use through `T`: `T.call_extern`, `T.call_pure_extern`,
`T.call_intrin`,
`T.Select`, `T.Ramp`, `T.Broadcast`, `T.reinterpret`, `T.address_of`, `T.evaluate`, `T.let`, and the types `T.PrimExpr` / `T.Var`.

They build the same IR as TVMScript's; `T.call_extern("float32", "my_device_fn", x)` prints as
`my_device_fn(x)` in the MUSA C (the function must be visible to the kernel: a device template or built-in).
"""

from __future__ import annotations

from typing import Any

import tvm
from tvm import tirx
from tvm.tirx.script import builder as Tb

from ..ir.attrs import REDUCERS_ATTR
from ..ir.trace import OPEN_TRACES
from .builder import as_expr, current_trace, kernel_trace, operand_error, static_value
from .builder import value as var_value  # a T.alloc_var operand reads as its element
from .dtypes import canonical_dtype
from .outside_kernel import add_outside_kernel, ir_trace
from .tensor_type import TensorType

PrimExpr = tvm.ir.Expr
Var = tvm.ir.expr.Var


def _dtype_name_operands(construct: str, args: tuple, dtype: Any) -> tuple[str, str, list]:
    """(dtype, name, operands) of `f(dtype, name, *operands)`, or of upstream's other spelling
    `f(name, *operands, dtype=dtype)` (its T.call_extern family moves a `dtype=` keyword to the front)."""
    if dtype is not None:
        args = (dtype, *args)
    if len(args) < 2:
        raise TypeError(f"{construct}(dtype, name, *args) (or {construct}(name, *args, dtype=...)): the result dtype "
                        f"and the function name are both required; got {len(args)} argument(s)")
    return canonical_dtype(args[0]), args[1], [as_expr(var_value(a)) for a in args[2:]]


def call_extern(*args: Any, dtype: Any = None) -> Any:
    """A call of the C function `func_name` returning `dtype` ("handle" or "void"-like "int32" for none):
    `T.call_extern(dtype, func_name, *args)` or `T.call_extern(func_name, *args, dtype=dtype)`."""
    dtype, func_name, operands = _dtype_name_operands("T.call_extern", args, dtype)
    return tirx.call_extern(dtype, func_name, *operands)


def call_pure_extern(*args: Any, dtype: Any = None) -> Any:
    """`call_extern` of a function without side effects (a math function): the compiler may evaluate it once for
    equal operands and, in a vectorized loop, lane by lane (`rsqrtf` over a float4 is four rsqrtf calls).
    `T.call_pure_extern(dtype, func_name, *args)` or `T.call_pure_extern(func_name, *args, dtype=dtype)`."""
    dtype, func_name, operands = _dtype_name_operands("T.call_pure_extern", args, dtype)
    return tirx.call_pure_extern(dtype, func_name, *operands)


def call_intrin(*args: Any, dtype: Any = None) -> Any:
    """A call of the TIR intrinsic `op_name` (e.g. "tirx.exp"): `T.call_intrin(dtype, op_name, *args)` or
    `T.call_intrin(op_name, *args, dtype=dtype)`."""
    dtype, op_name, operands = _dtype_name_operands("T.call_intrin", args, dtype)
    return tirx.call_intrin(dtype, op_name, *operands)


def Select(cond: Any, true_value: Any, false_value: Any) -> Any:  # noqa: N802 - TVMScript's name
    """`cond ? true_value : false_value`, both sides evaluated (T.if_then_else evaluates one). A Python number on
    one side takes the other side's dtype (`T.Select(c, x, 2)` with x float32 selects 2.0f); two numbers are
    float32 if either is a float."""
    cond, true_value, false_value = (var_value(x) for x in (cond, true_value, false_value))  # T.alloc_var reads
    # Python bools are bool constants (`T.Select(True, False, True)`, as upstream's tests write).
    cond, true_value, false_value = (tirx.const(x, "bool") if isinstance(x, bool) else x
                                     for x in (cond, true_value, false_value))
    values = [true_value, false_value]
    numbers = [isinstance(v, (int, float)) and not isinstance(v, bool) for v in values]
    if numbers[0] != numbers[1]:
        dtype = str(as_expr(values[numbers.index(False)]).ty.dtype)
        values = [tirx.const(v, dtype) if n else v for v, n in zip(values, numbers)]
    elif all(numbers):
        dtype = "float32" if any(isinstance(v, float) for v in values) else "int32"
        values = [tirx.const(v, dtype) for v in values]
    true_expr, false_expr = as_expr(values[0]), as_expr(values[1])
    if true_expr.ty.dtype != false_expr.ty.dtype:
        raise current_trace("T.Select").error(
            f"T.Select: the two values have different dtypes ({true_expr.ty.dtype} and {false_expr.ty.dtype}); "
            "cast one to the other's")
    return tirx.Select(as_expr(cond), true_expr, false_expr)


def Ramp(base: Any, stride: Any, lanes: int) -> Any:  # noqa: N802 - TVMScript's name
    """The vector base, base + stride, ..., (lanes values): as an index, `A[T.Ramp(2 * i, 1, 2)]` loads or stores
    `lanes` elements at once."""
    base, stride = (as_expr(var_value(x)) for x in (base, stride))
    if isinstance(stride, int):
        stride = tirx.const(stride, base.ty.dtype if isinstance(base, tvm.ir.Expr) else "int32")
    if isinstance(base, int):
        base = tirx.const(base, stride.ty.dtype)
    return tirx.Ramp(base, stride, int(lanes))


def Broadcast(value: Any, lanes: int) -> Any:  # noqa: N802 - TVMScript's name
    """The vector of `lanes` copies of `value`."""
    value = as_expr(var_value(value))
    if isinstance(value, (int, float)):
        value = tirx.const(value)
    return tirx.Broadcast(value, int(lanes))


def Shuffle(vectors: Any, indices: Any) -> Any:  # noqa: N802 - TVMScript's name
    """The vector whose lane k is lane `indices[k]` of the concatenated `vectors` (scalars are one lane each): as an
    index, `A[T.Shuffle([i, j, k, l], [0, 1, 2, 3])]` loads or stores those elements (a gather or scatter)."""
    vectors = [as_expr(var_value(v)) for v in vectors]
    vectors = [tirx.const(v, "int32") if isinstance(v, int) else v for v in vectors]
    if not vectors or not all(isinstance(v, tvm.ir.Expr) for v in vectors):
        raise operand_error("T.Shuffle", f"T.Shuffle: the vectors must be expressions; got {vectors}")
    total = sum(int(v.ty.dtype.lanes) for v in vectors)
    if len(indices) > total:  # TVM's Shuffle picks at most as many lanes as it is given
        raise operand_error("T.Shuffle", f"T.Shuffle: {len(indices)} lane indices for {total} lanes; pick at most "
                                         f"{total}")
    picked = []
    for index in indices:
        lane = static_value(index)
        if lane is None or not 0 <= lane < total:
            raise operand_error("T.Shuffle", f"T.Shuffle: lane index {index} must be a compile-time int in [0, {total})")
        picked.append(tirx.const(lane, "int32"))
    return tirx.Shuffle(vectors, picked)


def reinterpret(value: Any, dtype: Any) -> Any:
    """The bits of `value` read as `dtype` (same width). Upstream's order is (value, dtype); the older
    (dtype, value) is accepted too, as upstream still does."""
    if isinstance(value, str) or (isinstance(dtype, tvm.ir.Expr) and not isinstance(value, tvm.ir.Expr)):
        value, dtype = dtype, value
    return tirx.reinterpret(canonical_dtype(dtype), as_expr(var_value(value)))


def extract_lane(vector: Any, lane: Any) -> Any:
    """Lane `lane` (a compile-time int, 0-based) of the vector expression `vector`: `T.extract_lane(v, 1)`."""
    vector = as_expr(var_value(vector))
    if not isinstance(vector, tvm.ir.Expr):
        raise TypeError(f"T.extract_lane expects a PrimExpr vector; got {type(vector).__name__}")
    lanes = tvm.DataType(str(vector.ty.dtype)).lanes
    if lanes <= 1:
        raise ValueError(f"T.extract_lane expects a vector expression; got {vector.ty.dtype}")
    if isinstance(lane, tirx.IntImm):
        lane = int(lane.value)
    if not isinstance(lane, int) or isinstance(lane, bool):
        raise TypeError(f"T.extract_lane: the lane must be a compile-time integer; got {lane!r}")
    if not 0 <= lane < lanes:
        raise IndexError(f"T.extract_lane: lane {lane} is out of bounds for {vector.ty.dtype} ({lanes} lanes)")
    return tirx.Shuffle([vector], [tirx.const(lane, "int32")])


def address_of(element: Any) -> Any:
    """The address of a buffer element, `&A[i]`."""
    return tirx.address_of(element)


def let(var: Any, value: Any, body: Any = None) -> Any:
    """`T.let(v, value)`: bind the existing variable `v` (e.g. `v = T.int32()`) to `value` from here to the end
    of the enclosing scope. `T.let(v, value, body)`: the expression `body` with `v` bound (`T.Let`)."""
    if not isinstance(var, tvm.ir.expr.Var):
        raise current_trace("T.let").error(f"T.let binds a variable (`v = T.int32()`); got {var!r}")
    value = as_expr(value)
    if value.ty.dtype != var.ty.dtype:
        value = tirx.Cast(var.ty.dtype, value)
    if body is not None:
        return tirx.Let(var, value, as_expr(body))
    current_trace("T.let")
    Tb.Bind(value, var=var)
    return None


def Let(expr: Any, where: dict) -> Any:  # noqa: N802 - TVMScript's name
    """`T.Let(expr, where={v: value})`: the expression `expr` with `v` bound to `value`."""
    if len(where) != 1:
        raise current_trace("T.Let").error("T.Let binds exactly one variable: `where={v: value}`")
    (var, value), = where.items()
    return let(var, value, expr)


def evaluate(value: Any) -> None:
    """Evaluate `value` (typically a call) as a statement of the kernel. In a function with no kernel (IR to
    inspect) it is built too, and compiling that function is the error (outside_kernel.py)."""
    trace, outside = ir_trace("T.evaluate")
    if not outside:
        Tb.evaluate(as_expr(value))
        return
    add_outside_kernel(trace, "T.evaluate", tirx.Evaluate(as_expr(value)))


class _Handle:
    """`T.handle`: the annotation of a parameter that `T.match_buffer` turns into a tensor."""

    def __repr__(self) -> str:
        return "T.handle"

    def __call__(self, *args: Any, **kwargs: Any) -> "_Handle":  # `T.handle()` / `T.handle("float32")` too
        return self


handle = _Handle()


def match_buffer(param: Any, shape: Any, dtype: Any = "float32", strides: Any = None, **unused: Any) -> Any:
    """`A = T.match_buffer(a, (M, N), dtype)`: parameter `a` (annotated `T.handle`) is a tensor of that shape."""
    trace = current_trace("T.match_buffer")
    if not (isinstance(param, tvm.ir.expr.Var) and isinstance(param.ty, tvm.ir.PointerType)):
        raise trace.error(f"T.match_buffer: {param!r} must be a parameter annotated T.handle")
    if strides is not None:
        raise trace.error("T.match_buffer: strided tensors are not supported yet; pass a contiguous tensor")
    offset = unused.pop("elem_offset", None)
    if offset not in (None, 0) or unused.get("scope", "global") != "global":
        raise trace.error(f"T.match_buffer: elem_offset / scope {unused.get('scope')!r} are not supported")
    shape = list(shape) if isinstance(shape, (list, tuple)) else [shape]
    if trace.mode == "discover":  # the eager style learning its sizes: the tensor passed for `param` has this shape
        trace.discovered_shapes[param.name] = tuple(shape)
        return TensorType(tuple(shape), canonical_dtype(dtype))
    from tvm.script.ir_builder import IRBuilder

    buffer = Tb.match_buffer(param, shape, canonical_dtype(dtype))
    IRBuilder.name(trace.naming_hint or param.name, buffer)
    for p in trace.params:  # the launcher's parameter list follows the function's
        if p.var.same_as(param):
            p.var = buffer
    return buffer


def grid(*extents: Any):
    """`for i, j in T.grid(M, N)`: nested serial loops (TVMScript's name)."""
    from .loop import LoopFrame

    return LoopFrame("T.grid", [(0, e) for e in extents], lambda lo, hi, ann: Tb.serial(lo, hi, annotations=ann))


def func_attr(attrs: dict) -> None:
    """`T.func_attr({"tir.noalias": True})`: attributes of the PrimFunc. The compiler's own are set by the compiler:
    `global_symbol` (the kernel's name) and `target` (the compile target) are superseded, and the attributes that
    carry the kernel's annotations (`tl.layout_annotations`, ...) cannot be set here."""
    from ..ir.attrs import (
        ANNOTATIONS_ATTR, COMPILE_FLAGS_ATTR, IMPORTED_SOURCES_ATTR, MIN_BLOCKS_ATTR, OUTPUTS_ATTR, PASS_CONFIGS_ATTR,
        SAFE_VALUES_ATTR, SIZE_PARAMS_ATTR, VIEWS_ATTR,
    )
    trace = current_trace("T.func_attr")
    if not isinstance(attrs, dict) or not all(isinstance(k, str) for k in attrs):
        raise trace.error(f"T.func_attr takes a dict with str keys; got {attrs!r}")
    owned = {ANNOTATIONS_ATTR, COMPILE_FLAGS_ATTR, MIN_BLOCKS_ATTR, PASS_CONFIGS_ATTR, OUTPUTS_ATTR, SIZE_PARAMS_ATTR,
             REDUCERS_ATTR, VIEWS_ATTR, SAFE_VALUES_ATTR, IMPORTED_SOURCES_ATTR}
    for key in attrs:
        if key in owned:
            raise trace.error(f"T.func_attr: `{key}` is set by the compiler from the kernel's own annotations")
    Tb.func_attr({k: as_expr(v) for k, v in attrs.items()})


def attr(node: Any, attr_key: str, value: Any):
    """`with T.attr(node, key, value):` an AttrStmt around the block (TVMScript's name)."""
    current_trace("T.attr")
    return Tb.attr(node, attr_key, as_expr(value))


def assume(condition: Any) -> None:
    """`T.assume(cond)`: the compiler may assume `cond` holds here (it simplifies with it; nothing is checked).
    Before `with T.Kernel(...)` too, as upstream allows (a fact about the parameters, e.g. `stride % 2 == 0`)."""
    if not OPEN_TRACES:  # outside every kernel: the plain expression, as upstream builds it
        return tirx.assume(as_expr(condition))
    current_trace("T.assume")
    Tb.evaluate(tirx.assume(as_expr(condition)))


def comm_reducer(combiner: Any, identity: list) -> Any:
    """`T.comm_reducer(lambda x, y: x + y, [T.Cast(dtype, 0)])`: the combiner of a `T.tvm_thread_allreduce`,
    given to it through `with T.attr(reducer, "reduce_scope", ...)`."""
    return Tb.comm_reducer(combiner, [as_expr(e) for e in identity])


def tvm_thread_allreduce(*args: Any, dtype: Any = "handle") -> Any:
    """TVMScript's cross-thread reduction `(count, value, cond, out, *thread_vars)` (see
    transform/lower_thread_allreduce.py for what is supported)."""
    return Tb.tvm_thread_allreduce(*[as_expr(a) for a in args], dtype=canonical_dtype(dtype) if dtype != "handle"
                                   else "handle")
