"""Turning a kernel function into a TIR PrimFunc: `@T.prim_func`, `@T.macro`, and the eager-style tracer
used by `@tilelang.jit` (`trace_eager`, `discover_consts`)."""

from __future__ import annotations

import ast
import inspect
import linecache
import weakref
from dataclasses import dataclass, field
from typing import Any, Callable

import tvm
import tvm_ffi
from tvm import tirx
from tvm.script.ir_builder import IRBuilder
from tvm.tirx.script import builder as Tb

from ..errors import CompileError, SourceLoc
from ..ir.attrs import (
    ANNOTATIONS_ATTR, COMPILE_FLAGS_ATTR, IMPORTED_SOURCES_ATTR, MIN_BLOCKS_ATTR, NON_RESTRICT_ATTR, OUTPUTS_ATTR,
    PASS_CONFIGS_ATTR, REDUCERS_ATTR, SAFE_VALUES_ATTR, SIZE_PARAMS_ATTR, USER_BARRIER_ID, USER_NAMED_BARRIER,
    DTYPE_VIEWS_ATTR, SCOPED_PARAMS_ATTR, VIEWS_ATTR, WORKSPACES_ATTR,
)
from ..ir.utils import substitute
from .builder import DiscoveryDone, KernelTrace, is_buffer, open_trace
from .early_alloc import check_early_allocations, place_without_kernel
from .kernel import close_raw_kernel
from .outside_kernel import check_no_kernel_follows, record_body
from .parser import ParsedKernel, parse_kernel
from .dtypes import DType, Pointer, canonical_dtype
from .proxy import TensorType, declare_param, make_param
from .reducer_epoch import check_all_closed


# Names visible where a kernel function was defined, kept for evaluating its annotations: a factory's locals that
# only annotations use (`dtype` in `A: T.Tensor((M, N), dtype)`) are not in the function's closure when the
# annotations are text (`from __future__ import annotations`) or are in-body statements Python never evaluates.
_DEFINING_SCOPES: "weakref.WeakKeyDictionary[Callable, dict[str, Any]]" = weakref.WeakKeyDictionary()


def remember_defining_scope(func: Callable) -> None:
    """Record the locals of the first frame outside this package: where `func` was written (a factory's body)."""
    frame = inspect.currentframe()
    while frame is not None and frame.f_globals.get("__name__", "").startswith(__package__.split(".")[0]):
        frame = frame.f_back
    if frame is not None and frame.f_code.co_name != "<module>":  # at module level the globals already serve
        _DEFINING_SCOPES[func] = dict(frame.f_locals)


def _annotation_namespace(parsed: ParsedKernel) -> dict[str, Any]:
    fn = parsed.source_fn
    namespace = dict(fn.__globals__)
    namespace.update(_DEFINING_SCOPES.get(fn, {}))
    namespace.update(zip(fn.__code__.co_freevars, [c.cell_contents for c in fn.__closure__ or ()]))
    return namespace


def _annotation(parsed: ParsedKernel, param: inspect.Parameter) -> Any:
    annotation = param.annotation
    if type(annotation) is str:  # `from __future__ import annotations` (a DType is a str subclass: not text)
        try:
            annotation = eval(annotation, _annotation_namespace(parsed))  # noqa: S307 - the user's own annotation
        except NameError as err:
            raise CompileError(f"the annotation of parameter `{param.name}` of `{parsed.name}` names something not "
                               f"visible where the function was defined: {err}",
                               SourceLoc(parsed.filename, parsed.tree.lineno)) from None
    return annotation


def _with_size_params(func: tirx.PrimFunc) -> tirx.PrimFunc:
    """Sizes declared with T.dynamic (free variables of the body and of the tensor shapes) become trailing
    scalar parameters, in order of first use; the launcher binds them from the tensors' shapes."""
    free = [v for v in tirx.analysis.undefined_vars(func.body, list(func.params))
            if isinstance(v.ty, tvm.ir.PrimType)]
    # A size that appears only in tensor shapes is still needed in the kernel: bounds guards compare against it.
    params = list(func.params)
    for param in params:
        if isinstance(param.ty, tirx.BufferType):
            for extent in list(param.ty.shape) + list(param.ty.strides or []):
                tvm_ffi.structural_walk(extent, [(tvm.ir.expr.Var, lambda v: None if v in free or v in params
                                                  else free.append(v))])
    if not free:
        return func
    func = tirx.PrimFunc(list(func.params) + free, func.body, ret_type=func.ret_type, attrs=func.attrs, span=func.span)
    func = _distinct_size_names(func, free)
    return func.with_attr(SIZE_PARAMS_ATTR, [v.name for v in func.params[len(func.params) - len(free):]])


def _distinct_size_names(func: tirx.PrimFunc, free: list[Any]) -> tirx.PrimFunc:
    """Two `T.dynamic("n")` calls make two distinct sizes, as in upstream (each call is a new variable); the later
    ones are renamed `n_1`, `n_2`, ... so that the kernel's parameters, the host wrapper and the launcher, which
    name sizes by their names, keep them apart."""
    taken = {p.name for p in func.params if not any(p.same_as(v) for v in free)}
    rename = {}
    for size in free:
        name, k = size.name, 0
        while name in taken:
            k += 1
            name = f"{size.name}_{k}"
        taken.add(name)
        if name != size.name:
            rename[size] = tirx.Var(name, size.ty)
    if not rename:
        return func
    renamed_buffers: dict[Any, Any] = {}

    def on_var(var: Any, mutator: Any) -> Any:
        if var in rename:
            return rename[var]
        if not is_buffer(var):
            return var
        if var not in renamed_buffers:  # a buffer whose shape, strides, offset or layout names a renamed size
            ty = var.ty
            old = [ty.shape, ty.strides, ty.elem_offset, ty.layout]
            new = [None if part is None else substitute(part, rename) for part in old]
            same = all(a is None and b is None or a is not None and a.same_as(b) for a, b in zip(old, new))
            renamed_buffers[var] = var if same else tvm.ir.expr.Var(var.name, tirx.BufferType(
                ty.dtype, ty.storage_scope, new[0], new[1], new[2], ty.data_alignment, ty.offset_factor, new[3],
                ty.allocated_addr))
        return renamed_buffers[var]

    return tvm_ffi.structural_mutate(func, [(tvm.ir.expr.Var, on_var)])


def _finish(func: tirx.PrimFunc, name: str, trace: KernelTrace, outputs: list[str] | None = None) -> tirx.PrimFunc:
    check_all_closed(trace)
    func = _with_workspaces(func, trace)
    func = _arrived_barriers_named(func, trace.named_arrive_ids)
    user_params = [p.name for p in func.params if not _is_workspace(func, p)]
    func = _with_size_params(func)
    func = func.with_attr("global_symbol", name)
    if trace.layout_annotations:
        func = func.with_attr(ANNOTATIONS_ATTR, dict(trace.layout_annotations))
    if outputs:  # as upstream records them: indices counted from the end of the user's parameters
        func = func.with_attr(OUTPUTS_ATTR, [user_params.index(o) - len(user_params) for o in outputs])
    if trace.pass_configs:
        func = func.with_attr(PASS_CONFIGS_ATTR, dict(trace.pass_configs))
    if trace.reducers:
        func = func.with_attr(REDUCERS_ATTR, {buf: op for buf, op in trace.reducers.items()})
    if trace.buffer_views:
        func = func.with_attr(VIEWS_ATTR, dict(trace.buffer_views))
    if trace.dtype_views:
        func = func.with_attr(DTYPE_VIEWS_ATTR, dict(trace.dtype_views))
    if trace.scoped_params:
        func = func.with_attr(SCOPED_PARAMS_ATTR, dict(trace.scoped_params))
    if trace.compile_flags:
        func = func.with_attr(COMPILE_FLAGS_ATTR, list(trace.compile_flags))
    if trace.safe_values:
        func = func.with_attr(SAFE_VALUES_ATTR, dict(trace.safe_values))
    if trace.imported_sources:
        func = func.with_attr(IMPORTED_SOURCES_ATTR, list(trace.imported_sources))
    if trace.non_restrict:
        func = func.with_attr(NON_RESTRICT_ATTR, list(trace.non_restrict))
    if any(k.min_blocks_per_sm is not None for k in trace.kernels):
        func = func.with_attr(MIN_BLOCKS_ATTR, [k.min_blocks_per_sm or 1 for k in trace.kernels])
    record_body(func, trace)
    return func


def _arrived_barriers_named(func: tirx.PrimFunc, ids: set) -> tirx.PrimFunc:
    """`T.sync_threads(id, all threads)` on an id some `T.named_barrier_arrive` also uses is that named barrier
    (arrivals of both count toward it), not a block barrier: only then can a one-sided arrive complete it."""
    if not ids:
        return func

    def on_evaluate(node: Any, mutator: Any) -> Any:
        call = node.value
        if not (isinstance(call, tvm.ir.Call) and call.attrs is not None and USER_BARRIER_ID in call.attrs):
            return node
        barrier_id, threads = (int(v) for v in call.attrs[USER_BARRIER_ID])
        if barrier_id not in ids:
            return node
        attrs = {USER_NAMED_BARRIER: 1, **({"tl.loc": call.attrs["tl.loc"]} if "tl.loc" in call.attrs else {})}
        return tirx.Evaluate(tvm.ir.Call(call.op, [call.args[0], tirx.const(barrier_id, "int32"),
                                                   tirx.const(threads, "int32")], attrs=attrs, ret_ty="int32"))

    return tvm_ffi.structural_mutate(func, [(tirx.Evaluate, on_evaluate)])


def _with_workspaces(func: tirx.PrimFunc, trace: KernelTrace) -> tirx.PrimFunc:
    """T.alloc_global buffers become the last of the user's parameters (before T.dynamic sizes), hidden from the
    caller: out_idx counts the parameters before them."""
    workspaces = [p.var for p in trace.params if p.is_workspace]
    if not workspaces:
        return func
    others = [v for v in func.params if not any(v.same_as(w) for w in workspaces)]
    func = tirx.PrimFunc(others + workspaces, func.body, ret_type=func.ret_type, attrs=func.attrs, span=func.span)
    return func.with_attr(WORKSPACES_ATTR, [w.name for w in workspaces])


def _is_workspace(func: tirx.PrimFunc, var: Any) -> bool:
    return func.attrs is not None and WORKSPACES_ATTR in func.attrs and var.name in list(func.attrs[WORKSPACES_ATTR])


def _build(parsed: ParsedKernel, trace: KernelTrace, body: Callable[[], Any]) -> tuple[tirx.PrimFunc, Any]:
    result = None
    with open_trace(trace), IRBuilder() as ib:
        with Tb.prim_func():
            Tb.func_name(parsed.name)
            result = body()
            close_raw_kernel(trace)  # `tx = T.launch_thread(...)` statements last to the end of the body
    func = place_without_kernel(ib.get(), trace)
    # the function's own span names its `def` line, as upstream's parser gives it (tl.emit_line_directives prints it)
    def_span = tvm.ir.Span(tvm.ir.SourceName(parsed.filename), parsed.tree.lineno, parsed.tree.lineno,
                           parsed.tree.col_offset, parsed.tree.col_offset)
    func = tirx.PrimFunc(func.params, func.body, ret_type=func.ret_type, attrs=func.attrs, span=def_span)
    check_early_allocations(func, trace)
    check_no_kernel_follows(trace)
    return func, result


def _body_annotations(parsed: ParsedKernel, params: tuple[str, ...]) -> dict[str, ast.AnnAssign]:
    """`A: T.Tensor[(M,), dtype]` statements in the body that annotate parameters (upstream's lazy form)."""
    return {stmt.target.id: stmt for stmt in ast.walk(parsed.tree)
            if isinstance(stmt, ast.AnnAssign) and stmt.value is None and isinstance(stmt.target, ast.Name)
            and stmt.target.id in params}


_SIZE_CONSTRUCTORS = ("dynamic", "symbolic")


def _body_sizes(parsed: ParsedKernel) -> dict[str, Any]:
    """`m = T.dynamic("m")` statements at the top level of the body (upstream's lazy form declares a parameter's
    sizes so, then annotates it: `A: T.Tensor[[m], T.float32]`): evaluated before the body runs, so that the
    annotations may use them. The body's own T.dynamic("m") then returns the same size (trace.body_sizes)."""
    namespace, sizes = _annotation_namespace(parsed), {}
    for stmt in parsed.tree.body:
        value = stmt.value if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 else None
        if not (isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute)
                and value.func.attr in _SIZE_CONSTRUCTORS):
            continue
        try:
            made = eval(compile(ast.Expression(value), parsed.filename, "eval"), namespace)  # noqa: S307
        except Exception:  # noqa: BLE001 - not a size of the signature's: the body reports it when it runs
            continue
        target = stmt.targets[0]
        names = [target] if isinstance(target, ast.Name) else list(getattr(target, "elts", []))
        made = made if isinstance(made, tuple) else (made,)
        if len(names) == len(made) and all(isinstance(n, ast.Name) for n in names):
            sizes.update({n.id: v for n, v in zip(names, made)})
    return sizes


def _eval_body_annotation(parsed: ParsedKernel, name: str, stmt: ast.AnnAssign,
                          sizes: dict[str, Any] | None = None) -> Any:
    """The in-body annotation of parameter `name`, evaluated before the body runs (parameters come first, in
    signature order): it may use the function's globals and closure and the body's top-level T.dynamic sizes
    (_body_sizes), not the body's other variables."""
    try:
        return eval(compile(ast.Expression(stmt.annotation), parsed.filename, "eval"),  # noqa: S307
                    {**_annotation_namespace(parsed), **(sizes or {})})
    except NameError as err:
        raise CompileError(f"the annotation of parameter `{name}` must use names defined outside the kernel body "
                           f"(its closure or module) or by a `m = T.dynamic(\"m\")` at its top level: {err}",
                           SourceLoc(parsed.filename, stmt.lineno)) from None


def _parameter_locations(parsed: ParsedKernel) -> dict[str, SourceLoc]:
    """Where each parameter of the signature is written (errors about one point at it, not at the `def`)."""
    def_line = linecache.getline(parsed.filename, parsed.tree.lineno)
    indent = len(def_line) - len(def_line.lstrip())  # the parsed tree is dedented
    args = parsed.tree.args
    return {a.arg: SourceLoc(parsed.filename, a.lineno, a.col_offset + indent)
            for a in args.posonlyargs + args.args + args.kwonlyargs}


def trace_prim_func(parsed: ParsedKernel) -> tirx.PrimFunc:
    """`@T.prim_func`: parameters are annotated in the signature."""
    trace = KernelTrace(parsed.filename, mode="prim_func")
    sig = inspect.signature(parsed.source_fn)
    line = parsed.tree.lineno

    in_body = _body_annotations(parsed, tuple(sig.parameters))
    sizes = _body_sizes(parsed) if in_body else {}
    trace.body_sizes = {size.name: size for size in sizes.values() if isinstance(size, tirx.Var)}

    declared_at = _parameter_locations(parsed)

    def body():
        args = []
        for name, param in sig.parameters.items():
            trace.loc = declared_at.get(name, SourceLoc(parsed.filename, line))
            if param.annotation is inspect.Parameter.empty:
                if name not in in_body:
                    raise CompileError(
                        f"parameter `{name}` of @T.prim_func `{parsed.name}` needs an annotation such as "
                        "T.Tensor((M, N), 'float16') or T.int32 (in the signature, or `{name}: ...` in the body)",
                        SourceLoc(parsed.filename, line))
                annotation = _eval_body_annotation(parsed, name, in_body[name], sizes)
            else:
                annotation = _annotation(parsed, param)
            args.append(make_param(trace, name, annotation))
        result = parsed.fn(*args)
        if result is not None and not trace.params[len(args):]:
            raise trace.error("a @T.prim_func returns only the outputs it allocates with T.empty; other outputs "
                              "are parameters (select them with out_idx)")
        return result

    func, result = _build(parsed, trace, body)
    return _finish(func, parsed.name, trace, _returned_outputs(parsed, trace, result))


def prim_func(func: Callable | None = None, *, private: bool = False, check_well_formed: bool = True):
    """Decorator: parse a kernel function into a `tvm.tirx.PrimFunc`."""

    def decorate(f: Callable) -> tirx.PrimFunc:
        remember_defining_scope(f)
        return trace_prim_func(parse_kernel(f))

    return decorate(func) if func is not None else decorate


class Macro:
    """`@T.macro`: a helper whose body is inlined (rewritten like a kernel body) where it is called."""

    def __init__(self, func: Callable):
        self.func = func
        remember_defining_scope(func)
        self.__name__ = func.__name__
        self.__doc__ = func.__doc__

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        from .builder import current_trace
        from .proxy import check_macro_argument

        parsed = parse_kernel(self.func)
        bound = inspect.signature(self.func).bind(*args, **kwargs)
        trace = current_trace(f"@T.macro {self.__name__}")
        for name, value in bound.arguments.items():
            param = bound.signature.parameters[name]
            if param.annotation is not inspect.Parameter.empty:
                check_macro_argument(trace, self.__name__, name, _annotation(parsed, param), value)
        # the macro's lines are its own file's (a macro imported from another module)
        outer, trace.filename = trace.filename, parsed.filename
        try:
            return parsed.fn(*args, **kwargs)
        finally:
            trace.filename = outer


class Ref:
    """`x: T.Ref` on a @T.macro parameter: the argument is an element of the caller's (`m(buf[i])`, `m(var)` for
    a T.alloc_var), and `x = value` in the macro stores to it, as upstream's macros take references."""

    def __class_getitem__(cls, item: Any) -> type:  # `T.Ref[T.int32]`: the element type is the caller's
        return cls


def macro(func: Callable | None = None, *, hygienic: bool = True):
    return Macro(func) if func is not None else Macro


# ----------------------------------------------------------------------------------------------------
# The eager jit style


@dataclass(frozen=True)
class EagerSignature:
    """Which parameters of an eager-style function are tensors, in order: annotated in the body
    (`A: T.Tensor[...]` statements) or in the signature (`def kernel(A: T.Tensor((M, N), dtype), ...)`, whose
    annotations are in `signature_tensors`)."""

    parameters: tuple[str, ...]
    tensor_params: tuple[str, ...]
    defaults: dict[str, Any]
    signature_tensors: dict[str, Any] = field(default_factory=dict)
    # annotated in the body with a scalar dtype (`M: T.int32`): a run-time argument of the kernel, not a constant
    scalar_params: tuple[str, ...] = ()


def eager_signature(parsed: ParsedKernel) -> EagerSignature:
    sig = inspect.signature(parsed.source_fn)
    names = tuple(sig.parameters)
    annotated = [
        stmt.target.id for stmt in ast.walk(parsed.tree)
        if isinstance(stmt, ast.AnnAssign) and stmt.value is None and isinstance(stmt.target, ast.Name)
        and stmt.target.id in names
    ]
    in_signature = {}
    for n, p in sig.parameters.items():
        if p.annotation is not inspect.Parameter.empty and n not in annotated:
            annotation = _annotation(parsed, p)
            if isinstance(annotation, (TensorType, Pointer)):  # `a_ptr: T.ptr`: a pointer parameter
                in_signature[n] = annotation
    scalars = tuple(n for n in annotated if _scalar_annotation(parsed, n))
    tensors = tuple(n for n in names if (n in annotated or n in in_signature) and n not in scalars)
    defaults = {n: p.default for n, p in sig.parameters.items() if p.default is not inspect.Parameter.empty}
    return EagerSignature(names, tensors, defaults, in_signature, scalars)


def _scalar_annotation(parsed: ParsedKernel, name: str) -> bool:
    """Whether the body annotates parameter `name` with a scalar dtype (`M: T.int32`). A tensor annotation names
    the body's sizes (`A: T.Tensor[[M, K], ...]`), which do not exist yet: it does not evaluate here."""
    stmt = _body_annotations(parsed, (name,)).get(name)
    if stmt is None or isinstance(stmt.annotation, ast.Subscript):
        return False
    try:
        annotation = _eval_body_annotation(parsed, name, stmt)
    except Exception:  # noqa: BLE001 - anything but a plain dtype expression is not a scalar's annotation
        return False
    return isinstance(annotation, (DType, tvm.ir.PrimType))


def _eager_args(sig: EagerSignature, values: dict[str, Any], trace: KernelTrace, parsed: ParsedKernel) -> list[Any]:
    args = []
    for name in sig.parameters:
        if name in sig.signature_tensors:
            trace.pending_tensors[name] = None
            args.append(declare_param(trace, name, sig.signature_tensors[name], None))
        elif name in sig.tensor_params or name in sig.scalar_params:
            trace.pending_tensors[name] = None
            args.append(None)  # replaced by the `name: T.Tensor[...]` / `name: T.int32` statement
        elif name in values:
            args.append(values[name])
        elif name in sig.defaults:
            args.append(sig.defaults[name])
        else:
            raise CompileError(f"`{parsed.name}` needs a value for parameter `{name}`",
                               SourceLoc(parsed.filename, parsed.tree.lineno))
    return args


def _returned_outputs(parsed: ParsedKernel, trace: KernelTrace, result: Any) -> list[str]:
    """The names of the tensors the kernel returns: exactly those it allocated with T.empty, in return order."""
    outputs = [p.name for p in trace.params if p.is_output]
    returned = [] if result is None else list(result) if isinstance(result, (tuple, list)) else [result]
    returned_names = []
    for r in returned:
        if not is_buffer(r) or r.name not in outputs:
            raise CompileError(
                f"`{parsed.name}` must return the tensors it allocates with T.empty; it returned {r!r}",
                SourceLoc(parsed.filename, parsed.tree.lineno))
        returned_names.append(r.name)
    missing = [o for o in outputs if o not in returned_names]
    if missing:
        raise CompileError(f"`{parsed.name}`: output(s) {missing} allocated with T.empty are not returned",
                           SourceLoc(parsed.filename, parsed.tree.lineno))
    return returned_names


def trace_eager(parsed: ParsedKernel, values: dict[str, Any], consts: dict[str, int]) -> tirx.PrimFunc:
    """Build the PrimFunc of an eager-style function for constant parameter `values` and sizes `consts`."""
    sig = eager_signature(parsed)
    trace = KernelTrace(parsed.filename, mode="eager", consts=dict(consts))

    def body():
        result = parsed.fn(*_eager_args(sig, values, trace, parsed))
        if trace.pending_tensors:
            raise CompileError(
                f"`{parsed.name}`: tensor parameter(s) {sorted(trace.pending_tensors)} were never annotated",
                SourceLoc(parsed.filename, parsed.tree.lineno))
        return result

    func, result = _build(parsed, trace, body)
    unknown = sorted(set(consts) - trace.declared_consts)
    if unknown:  # e.g. `f.compile(N=..., target="musa")`: taken as a size, it would be silently ignored
        declared = ", ".join(sorted(trace.declared_consts)) or "none"
        raise TypeError(
            f"{parsed.name}.compile(): {', '.join(f'`{n}`' for n in unknown)} is neither a parameter of "
            f"`{parsed.name}` nor a size it declares with T.const (its sizes: {declared}); compile options such "
            "as target= or pass_configs= go to @tilelang.jit(...)")
    return _finish(func, parsed.name, trace, _returned_outputs(parsed, trace, result))


# A tensor of these torch dtypes passed for a parameter annotated with the key holds that many values a byte: two
# float4_e2m1fn values a byte (upstream's packed fp4 tensors: uint8, int8 or torch.float4_e2m1fn_x2).
PACKED_TORCH_DTYPES = {"float4_e2m1fn": (2, ("torch.uint8", "torch.int8", "torch.float4_e2m1fn_x2"))}


def _values_per_item(annotated: str | None, torch_dtype: str | None) -> int:
    per_byte, packed = PACKED_TORCH_DTYPES.get(canonical_dtype(annotated) if annotated else "", (1, ()))
    return per_byte if torch_dtype in packed else 1


def logical_shape(shape: tuple, annotated: str | None, torch_dtype: str | None) -> tuple:
    """The shape in annotated elements of a tensor of `shape` and `torch_dtype`: a packed last dim counts every
    value of its bytes."""
    per_item = _values_per_item(annotated, torch_dtype)
    return (*shape[:-1], shape[-1] * per_item) if shape and per_item > 1 else shape


def logical_strides(strides: tuple, annotated: str | None, torch_dtype: str | None) -> tuple:
    """The strides in annotated elements of a tensor of `strides` (in its items) and `torch_dtype`: every stride
    but a packed last dim's (1) counts the values of its bytes."""
    per_item = _values_per_item(annotated, torch_dtype)
    return (*(s * per_item for s in strides[:-1]), strides[-1]) if strides and per_item > 1 else strides


def discover_consts(parsed: ParsedKernel, values: dict[str, Any], shapes: dict[str, tuple],
                    dtypes: dict[str, str] | None = None, strides: dict[str, tuple] | None = None) -> dict[str, int]:
    """Run an eager function up to its `T.Kernel` to learn its tensor annotations, then bind each `T.const`
    size that appears as a dimension (or, in a `T.StridedTensor`, a stride) to the corresponding dimension (stride)
    of the given tensors, of the torch dtypes `dtypes` names where given: a byte tensor for an fp4 parameter holds
    two values a byte."""
    sig = eager_signature(parsed)
    trace = KernelTrace(parsed.filename, mode="discover")

    def body():
        try:
            parsed.fn(*_eager_args(sig, values, trace, parsed))
        except DiscoveryDone:
            pass

    _build_discard(parsed, trace, body)
    consts: dict[str, int] = {}
    for name, dims in trace.discovered_shapes.items():
        actual = shapes.get(name)
        if actual is None:
            continue
        annotated, passed = trace.discovered_dtypes.get(name), (dtypes or {}).get(name)
        actual = logical_shape(actual, annotated, passed)
        pairs = list(zip(dims, actual))
        if name in trace.discovered_strides and (strides or {}).get(name) is not None:
            pairs += zip(trace.discovered_strides[name], logical_strides(strides[name], annotated, passed))
        if len(actual) != len(dims):
            raise CompileError(f"`{parsed.name}`: tensor `{name}` has {len(actual)} dims but is annotated with "
                               f"{len(dims)}: {dims}", SourceLoc(parsed.filename, parsed.tree.lineno))
        for k, (dim, size) in enumerate(pairs):
            if isinstance(dim, tvm.ir.expr.Var) and dim.name in trace.consts:
                previous = consts.setdefault(dim.name, int(size))
                if previous != int(size):
                    raise CompileError(
                        f"`{parsed.name}`: size `{dim.name}` is {previous} from one tensor but {int(size)} from "
                        f"{f'dim {k}' if k < len(dims) else f'stride {k - len(dims)}'} of `{name}`",
                        SourceLoc(parsed.filename, parsed.tree.lineno))
    return consts


def _build_discard(parsed: ParsedKernel, trace: KernelTrace, body: Callable[[], Any]) -> None:
    with open_trace(trace), IRBuilder():
        with Tb.prim_func():
            Tb.func_name(parsed.name)
            body()
            # Leave the frame well-formed even though the kernel body was not built.
            Tb.evaluate(tirx.const(0, "int32"))
