"""Every change this package makes to the stock `apache-tvm` wheel, in one place.

The package is a plugin on the unmodified 0.27 wheel; where upstream TileLang changes its TVM fork, and the scripts
written against it need that change, the change is made here at run time, and nowhere else. `PATCHES` lists each:
what it patches, why, and which change of the wheel would remove it. Every patch goes through `_set`, which records
it in `applied()`; testing/test_wheel_patches.py checks that the list and what is applied agree, and that no other
module of the package assigns to the wheel's modules or classes.

Applied when `tilelang` is imported: the older TIR names (`add_tir_names`) and upstream's PrimFunc constructor
(`accept_buffer_map`), here at import, and from
tilelang.language the typed integer operands (`wrap_int_operators`) and `PrimFunc.buffer_map` (`add_buffer_map`).
Applied on demand: `Pass.__call__` while TILELANG_PASS_DIFF records every pass (`replace_pass_call`).
Applied at import too, for speed only: the memoized callback inspection of tvm_ffi's structural visitors
(`memoize_structural_callbacks`), the direct iteration of FFI Arrays (`iterate_arrays_directly`) and `is_prim_expr`
without ABC instance checks (`memoize_prim_expr_checks`); and the spans a
statement a pass replaces keeps (`keep_statement_spans`). Applied at import, for scripts that set pass configs through
TVM: `PassContext(config={"tl.*": ...})` keeps the keys TVM does not know for tilelang.compile / tilelang.lower
(`keep_tilelang_configs`, read back by `entered_tilelang_configs`).
"""

from __future__ import annotations

import sys
import threading
import types
from dataclasses import dataclass
from typing import Any, Callable

import tvm
import tvm_ffi
import tvm_ffi.container
import tvm_ffi.structural
from tvm import ir, tirx


@dataclass(frozen=True)
class WheelPatch:
    target: str  # the attribute of the wheel, dotted
    kind: str  # "adds" (the wheel has no such attribute) or "replaces" (the wheel's stays reachable, wrapped)
    why: str
    removed_by: str  # the upstream wheel change that would make the patch unnecessary


_INT_OPERATORS = ("__and__", "__rand__", "__or__", "__ror__", "__xor__", "__rxor__")

PATCHES: tuple[WheelPatch, ...] = (
    WheelPatch("tvm.arith", "adds",
               "upstream scripts and tests build `tvm.arith.Analyzer()`; the wheel's analysis module is `tvm.sym`",
               "a `tvm.arith` alias of tvm.sym"),
    WheelPatch("tvm.ir.structural_equal", "adds",
               "upstream tests compare IR with `tvm.ir.structural_equal`; the wheel has it as tvm_ffi.structural_equal",
               "`structural_equal` re-exported by tvm.ir"),
    WheelPatch("tvm.tirx.PrimExpr", "adds",
               "upstream scripts name the expression class tirx.PrimExpr; the wheel calls it tvm.ir.Expr (tirx.Expr)",
               "a `PrimExpr` alias in tvm.tirx"),
    WheelPatch("tvm.tirx.Call", "adds",
               "upstream tests check built expressions with `isinstance(e, tirx.Call)`; the wheel has the class as "
               "tvm.ir.Call only", "a `Call` re-export in tvm.tirx"),
    WheelPatch("tvm.tirx.StringImm", "adds",
               "upstream scripts and libraries match string arguments with `isinstance(arg, tirx.StringImm)` "
               "(TileOPs' trace pass finds its markers so); the wheel has the class as tvm.ir.StringImm only",
               "a `StringImm` re-export in tvm.tirx"),
    WheelPatch("tvm.tirx.PrimFunc.__init__", "replaces",
               "upstream's TVM builds `PrimFunc(params, body, ret_type=None, buffer_map=None, attrs=None, span=None)` "
               "(TileOPs' trace pass rebuilds every dense GEMM so); the wheel's takes (params, body, ret_type, attrs, "
               "span) and has no buffer map: a tensor parameter is its buffer. Upstream's signature, its buffer_map "
               "applied by making each mapped parameter its buffer (the wheel's constructor does the rest)",
               "PrimFunc's constructor taking upstream's buffer_map"),
    WheelPatch("tvm.tirx.stmt_functor", "adds",
               "upstream tests walk IR with `tvm.tirx.stmt_functor.post_order_visit(stmt, fvisit)` (its TVM fork's "
               "module); the wheel walks IR with tvm_ffi.structural_walk",
               "a `stmt_functor` module in tvm.tirx with post_order_visit / pre_order_visit / substitute / ir_transform"),
    WheelPatch("tvm.ir.PrimExpr", "adds",
               "scripts and libraries annotate with `from tvm.ir import PrimExpr` (TileOPs' trace records); the "
               "wheel calls the class tvm.ir.Expr", "a `PrimExpr` alias in tvm.ir"),
    WheelPatch("tvm.ir.Expr.dtype", "adds",
               "scripts' helpers read `expr.dtype` (`assert val.dtype == T.uint8`); the wheel keeps it in `expr.ty`",
               "a `dtype` property on PrimType-typed expressions"),
    WheelPatch("tvm.ir.Var.dtype", "replaces",
               "the wheel's Var.dtype answers for buffer variables and raises for scalar ones; scalars answer their "
               "type too (buffer variables as before)",
               "Var.dtype answering a scalar variable's PrimType"),
    *(WheelPatch(f"tvm.ir._overload_prim_expr.{name}", "replaces",
                 "a Python int beside an integer expression in &, |, ^ takes the expression's type (the wheel makes "
                 "it int32 first: `x & 0xFFFFFFFF` fails on uint32, `x & 2**32` becomes `x & 0` on int64)",
                 "the operator overloads converting Python ints to the other operand's integer type "
                 "(as upstream's TVM fork does)") for name in _INT_OPERATORS),
    WheelPatch("tvm.tirx.PrimFunc.buffer_map", "adds",
               "upstream scripts read `func.buffer_map[func.params[i]]`; the wheel's tensor parameters carry their "
               "buffer as their type and PrimFunc has no buffer_map (read-only: nothing is changed on a function)",
               "a read-only buffer_map view on PrimFunc"),
    WheelPatch("tvm_ffi.structural._callback_accepts_inplace_mode", "replaces",
               "every structural_mutate call runs inspect.signature on each callback (a fresh lambda each time, "
               "~12% of a GEMM's lowering); the answer depends only on the function's code and defaults, so it is "
               "memoized by them (anything else is asked afresh, as before)",
               "structural_mutate caching its callback inspection"),
    WheelPatch("tvm_ffi.structural._callback_type_to_type_index", "replaces",
               "every structural visit/mutate/map call converts each callback's type to its FFI type index through "
               "typing introspection (~6% of a GEMM's lowering); a class's index never changes: memoized by type",
               "structural visitors caching the type index of a callback type"),
    WheelPatch("tvm_ffi.structural._normalize_callbacks", "replaces",
               "a structural_mutate callback on statements that returns a new statement without a span gives it the "
               "replaced statement's (ir/source_lines.py keep_span): the user's line survives a pass, for "
               "tl.emit_line_directives and the simulator's reports; other callbacks and visitors are unchanged. "
               "The common forms (a list of (class, callback) pairs, no callbacks) are normalized without the "
               "wheel's per-entry ABC checks (~1,000 calls a GEMM lowering); others go to the wheel's",
               "structural_mutate carrying a replaced node's span over to its replacement"),
    WheelPatch("tvm_ffi.container.Array.__iter__", "replaces",
               "the wheel's iteration goes through Array.__getitem__, which asks the size and normalizes the index "
               "for every element (three FFI calls and an ABC check each, ~2,000 elements a GEMM lowering); the "
               "size is asked once and each element fetched with one call, the same elements in the same order",
               "Array.__iter__ fetching the elements directly"),
    *(WheelPatch(f"{module}.is_prim_expr", "replaces",
                 "`is_prim_expr` (every comparison operator of an expression, and so every dict lookup of a Var key "
                 "through another Python object of the same Var: ~900 calls a GEMM lowering) asks two isinstance "
                 "questions of classes whose metaclass is an ABCMeta (~1 us each); their answers depend on the "
                 "class alone, so they are memoized by class (the same answers; `.ty` is still read every time)",
                 "is_prim_expr without ABC instance checks") for module in ("tvm.ir", "tvm.ir.expr",
                                                                            "tvm.ir._overload_prim_expr")),
    *(WheelPatch(f"tvm.ir.transform.PassContext.{name}", "replaces",
                 "upstream registers its `tl.*` pass configs with TVM, so scripts set them with "
                 "`with tvm.transform.PassContext(config={...}): tilelang.lower(...)`; the wheel rejects keys it "
                 "does not know. The keys tilelang knows are kept aside for the context (TVM gets the others, and "
                 "those it knows itself) and tilelang.compile / tilelang.lower read the innermost entered context's "
                 "under their own pass_configs", "the tl.* pass config options registered with the wheel")
      for name in ("__init__", "__enter__", "__exit__")),
    WheelPatch("tvm.ir.transform.Pass.__call__", "replaces",
               "TILELANG_PASS_DIFF diffs every pass a program goes through, the pipeline's and those a script calls "
               "itself; only while it is set (restored by restore_pass_call)",
               "a pass instrument that also sees passes called outside a PassContext's pipeline"),
)

_applied: dict[str, Any] = {}  # target -> the wheel's own value (None where the wheel had none)
_MISSING = object()


def _set(owner: Any, name: str, value: Any, target: str) -> None:
    """The one place the package changes the wheel: `owner.name = value`, recorded under `target`."""
    assert target in {p.target for p in PATCHES}, f"{target}: add it to PATCHES, saying why"
    if target not in _applied:
        original = getattr(owner, name, _MISSING)
        _applied[target] = None if original is _MISSING else original
    setattr(owner, name, value)


def applied() -> dict[str, Any]:
    """The patches in force: target -> the wheel's value it replaced (None for an added name)."""
    return dict(_applied)


# -- the older TIR names upstream scripts use

def _prim_dtype(expr: Any) -> Any:
    ty = getattr(expr, "ty", None)
    if not isinstance(ty, ir.PrimType):
        raise AttributeError(f"{type(expr).__name__} has no dtype: its type is {ty}")
    return tvm.DataType(str(ty.dtype))


def _structural_equal(lhs: Any, rhs: Any, map_free_vars: bool = False) -> bool:
    """tvm_ffi.structural_equal; values it cannot hash (plain Python objects, such as tilelang.layout.cute's
    layouts) compare with `==`."""
    try:
        return bool(tvm_ffi.structural_equal(lhs, rhs, map_free_vars))
    except TypeError:
        return bool(lhs == rhs)


def _visit_ir(node: Any, fvisit: Callable[[Any], Any], order: str) -> None:
    """fvisit on every statement and expression under `node` (itself included), children first for "post"."""
    def on_node(n: Any) -> None:
        if isinstance(n, (ir.Expr, tirx.Stmt)):
            fvisit(n)

    tvm_ffi.structural_walk(node, [(object, on_node)], order=order)


def _substitute_ir(node: Any, vmap: Any) -> Any:
    """`node` with each Var of `vmap` (a mapping by identity, or a function answering a Var's replacement or None)
    replaced, as upstream's TVM `stmt_functor.substitute`."""
    if callable(vmap):
        lookup = vmap
    else:
        pairs = list(vmap.items())

        def lookup(var: Any) -> Any:
            return next((value for key, value in pairs if key.same_as(var)), None)

    def on_var(var: Any, mutator: Any) -> Any:
        value = lookup(var)
        if value is None:
            return var
        return tirx.const(value, var.ty.dtype) if isinstance(value, (int, float)) else value

    return tvm_ffi.structural_mutate(node, [(ir.Var, on_var)])


def _transform_ir(node: Any, preorder: Callable | None, postorder: Callable | None,
                  only_enable: Any = None) -> Any:
    """upstream's TVM `stmt_functor.ir_transform`: `preorder(n)` before a statement's or expression's children (a
    value it returns replaces `n`, children unvisited), `postorder(n)` on `n` rebuilt from its mutated children (a
    value it returns replaces it). `only_enable` (type keys such as "tir.Evaluate") limits both to those classes,
    matched by class name since the wheel's keys differ in prefix."""
    names = None if only_enable is None else {str(key).rsplit(".", 1)[-1] for key in only_enable}

    def on_node(n: Any, mutator: Any) -> Any:
        if not isinstance(n, (ir.Expr, tirx.Stmt)):
            return mutator.default_mutate(n)
        enabled = names is None or type(n).__name__ in names
        if enabled and preorder is not None:
            replaced = preorder(n)
            if replaced is not None:
                return replaced
        rebuilt = mutator.default_mutate(n)
        if enabled and postorder is not None:
            replaced = postorder(rebuilt)
            if replaced is not None:
                return replaced
        return rebuilt

    return tvm_ffi.structural_mutate(node, [(object, on_node)])


def _buffer_of(value: Any) -> Any:
    """The wheel's buffer (a Var typed by its BufferType) that a buffer_map value stands for: a buffer itself
    (`tirx.decl_buffer`'s), or what `func.buffer_map` answers (its `.data` is the parameter); None otherwise."""
    for candidate in (value, getattr(value, "data", None)):
        if isinstance(candidate, ir.Var) and isinstance(getattr(candidate, "ty", None), tirx.BufferType):
            return candidate
    return None


def _mapped_params(params: Any, buffer_map: Any) -> list:
    """Upstream's `params` and `buffer_map` (parameter -> buffer) as the wheel's parameter list: a mapped parameter
    is replaced by its buffer, as the wheel's tensor parameters are their buffers."""
    params = list(params)
    if not buffer_map:
        return params
    if isinstance(buffer_map, ir.DictAttrs) or not hasattr(buffer_map, "items"):
        raise TypeError(f"PrimFunc: buffer_map (the 4th argument, as in upstream TVM) must map parameters to "
                        f"buffers, got {type(buffer_map).__name__}; pass the function's attributes as attrs=")
    for key, value in buffer_map.items():
        buffer = _buffer_of(value)
        if buffer is None:
            raise TypeError(f"PrimFunc: buffer_map[{key}] is {type(value).__name__}, not a buffer")
        at = [k for k, p in enumerate(params) if p.same_as(key) or p.same_as(buffer)]
        if not at:
            raise ValueError(f"PrimFunc: buffer_map names `{key}` (buffer `{buffer.name}`), which is not one of "
                             f"the parameters {[p.name for p in params]}")
        params[at[0]] = buffer
    return params


def accept_buffer_map() -> None:
    """`tirx.PrimFunc(params, body, ret_type=None, buffer_map=None, attrs=None, span=None)`, upstream's signature;
    once per process."""
    target = "tvm.tirx.PrimFunc.__init__"
    if target in _applied:
        return
    wheel_init = tirx.PrimFunc.__init__

    def __init__(self, params, body, ret_type=None, buffer_map=None, attrs=None, span=None):  # noqa: N807
        wheel_init(self, _mapped_params(params, buffer_map), body, ret_type=ret_type, attrs=attrs, span=span)

    __init__.__doc__ = wheel_init.__doc__
    _set(tirx.PrimFunc, "__init__", __init__, target)


def add_tir_names() -> None:
    """`tirx.PrimExpr`, `ir.PrimExpr`, `tirx.Call`, `tirx.StringImm`, `tirx.stmt_functor`, `expr.dtype` on every
    expression, `var.dtype` on scalar variables, `tvm.arith` and `tvm.ir.structural_equal`; only where missing."""
    if not hasattr(tirx, "PrimExpr"):
        _set(tirx, "PrimExpr", tirx.Expr, "tvm.tirx.PrimExpr")
    if not hasattr(ir, "PrimExpr"):
        _set(ir, "PrimExpr", ir.Expr, "tvm.ir.PrimExpr")
    if not hasattr(tirx, "Call"):
        _set(tirx, "Call", ir.Call, "tvm.tirx.Call")
    if not hasattr(tirx, "StringImm"):
        _set(tirx, "StringImm", ir.StringImm, "tvm.tirx.StringImm")
    if not hasattr(tirx, "stmt_functor"):
        functor = types.ModuleType("tvm.tirx.stmt_functor", "IR walks as upstream's TVM names them (tilelang's "
                                   "wheel patch, over tvm_ffi.structural_walk).")
        functor.post_order_visit = lambda node, fvisit: _visit_ir(node, fvisit, "post")
        functor.pre_order_visit = lambda node, fvisit: _visit_ir(node, fvisit, "pre")
        functor.substitute = _substitute_ir
        functor.ir_transform = _transform_ir
        _set(tirx, "stmt_functor", functor, "tvm.tirx.stmt_functor")
        sys.modules.setdefault("tvm.tirx.stmt_functor", functor)  # `from tvm.tirx.stmt_functor import ...`
    if not hasattr(tvm, "arith"):
        _set(tvm, "arith", tvm.sym, "tvm.arith")
        sys.modules.setdefault("tvm.arith", tvm.sym)  # `import tvm.arith`, `from tvm.arith import Analyzer`
    if not hasattr(ir, "structural_equal"):
        _set(ir, "structural_equal", _structural_equal, "tvm.ir.structural_equal")
    if "dtype" not in vars(ir.Expr):
        _set(ir.Expr, "dtype", property(_prim_dtype), "tvm.ir.Expr.dtype")
    var_dtype = vars(ir.Var).get("dtype")
    if isinstance(var_dtype, property) and not getattr(var_dtype.fget, "_tilelang_scalar", False):
        def var_or_buffer_dtype(var, _buffer_dtype=var_dtype.fget):
            return _prim_dtype(var) if isinstance(getattr(var, "ty", None), ir.PrimType) else _buffer_dtype(var)

        var_or_buffer_dtype._tilelang_scalar = True
        _set(ir.Var, "dtype", property(var_or_buffer_dtype), "tvm.ir.Var.dtype")


# -- tilelang.language's

def wrap_int_operators(typed_operand: Callable[[Any, Any], Any]) -> None:
    """Each stock bitwise overload first passes its other operand through `typed_operand(other, self)`; once per
    process."""
    from tvm.ir import _overload_prim_expr as overloads

    if f"tvm.ir._overload_prim_expr.{_INT_OPERATORS[0]}" in _applied:
        return
    for name in _INT_OPERATORS:
        original = getattr(overloads, name)

        def wrapped(self, other, _original=original):
            return _original(self, typed_operand(other, self))

        wrapped.__name__ = name
        wrapped.__doc__ = original.__doc__
        _set(overloads, name, wrapped, f"tvm.ir._overload_prim_expr.{name}")


def add_buffer_map(buffer_map: Callable[[Any], dict], doc: str) -> None:
    """`PrimFunc.buffer_map` as a read-only property computed by `buffer_map(func)`, if the wheel has none."""
    if not hasattr(tirx.PrimFunc, "buffer_map"):
        _set(tirx.PrimFunc, "buffer_map", property(buffer_map, doc=doc), "tvm.tirx.PrimFunc.buffer_map")


# -- the pass-diff tooling's

def replace_pass_call(call: Callable[[Callable, Any, Any], Any]) -> bool:
    """Every `Pass.__call__(self, mod)` becomes `call(original, self, mod)`; False (nothing done) if already
    replaced."""
    target = "tvm.ir.transform.Pass.__call__"
    if _applied.get(target) is not None:
        return False
    original = tvm.ir.transform.Pass.__call__

    def diffed(self, mod):
        return call(original, self, mod)

    _set(tvm.ir.transform.Pass, "__call__", diffed, target)
    return True


def restore_pass_call() -> None:
    """The wheel's own Pass.__call__ again; safe to call when it was not replaced."""
    target = "tvm.ir.transform.Pass.__call__"
    original = _applied.pop(target, None)
    if original is not None:
        setattr(tvm.ir.transform.Pass, "__call__", original)


# -- speed: tvm_ffi's structural visitors inspect their callbacks on every call

def _signature_key(fn: Any) -> tuple | None:
    """What inspect.signature of a plain function or bound method depends on for binding (its code, how many
    defaults, its keyword-only defaults); None for anything else (asked afresh every time)."""
    bound = type(fn) is types.MethodType
    func = fn.__func__ if bound else fn
    if type(func) is not types.FunctionType or "__signature__" in func.__dict__ or "__wrapped__" in func.__dict__:
        return None
    kwdefaults = func.__kwdefaults__
    return bound, func.__code__, len(func.__defaults__ or ()), tuple(sorted(kwdefaults)) if kwdefaults else ()


def memoize_structural_callbacks() -> None:
    """tvm_ffi.structural's two per-callback inspections, memoized (same answers, same errors); once per process."""
    target = "tvm_ffi.structural._callback_accepts_inplace_mode"
    if target in _applied:
        return
    accepts_mode, type_index = (tvm_ffi.structural._callback_accepts_inplace_mode,
                                tvm_ffi.structural._callback_type_to_type_index)
    modes: dict[tuple, bool] = {}
    indices: dict[tuple, int] = {}

    def callback_accepts_inplace_mode(callback: Callable[..., Any]) -> bool:
        key = _signature_key(callback)
        if key is None:
            return accepts_mode(callback)
        if key not in modes:
            modes[key] = accepts_mode(callback)
        return modes[key]

    def callback_type_to_type_index(callback_type: Any, *, api_name: str) -> int:
        try:
            key = (callback_type, api_name)
            known = indices.get(key)
        except TypeError:  # unhashable: asked afresh (and refused as before)
            return type_index(callback_type, api_name=api_name)
        if known is None:
            known = indices[key] = type_index(callback_type, api_name=api_name)
        return known

    _set(tvm_ffi.structural, "_callback_accepts_inplace_mode", callback_accepts_inplace_mode, target)
    _set(tvm_ffi.structural, "_callback_type_to_type_index", callback_type_to_type_index,
         "tvm_ffi.structural._callback_type_to_type_index")


def _plain_entries(callbacks: Any) -> list | None:
    """The wheel's normalization of the common forms, without its per-entry ABC checks: no callbacks (`()`), or a
    list of (type, callback) pairs with one type each; None for any other form (the wheel's normalizes it)."""
    if type(callbacks) is tuple and not callbacks:
        return []
    if type(callbacks) is not list:
        return None
    for entry in callbacks:
        if type(entry) is not tuple or len(entry) != 2 or type(entry[0]) is tuple or not callable(entry[1]):
            return None
    return list(callbacks)


def iterate_arrays_directly() -> None:
    """`iter(array)` on an FFI Array: the size asked once, one call per element (the same elements in order);
    once per process."""
    target = "tvm_ffi.container.Array.__iter__"
    if target in _applied:
        return
    array = tvm_ffi.container.Array
    size, get_item = tvm_ffi.container._ffi_api.ArraySize, tvm_ffi.container._ffi_api.ArrayGetItem

    def __iter__(self):  # noqa: N807
        for i in range(size(self)):
            yield get_item(self, i)

    __iter__.__doc__ = array.__iter__.__doc__
    _set(array, "__iter__", __iter__, target)


def memoize_prim_expr_checks() -> None:
    """tvm.ir's `is_prim_expr` with its two instance checks memoized by class (see PATCHES); once per process."""
    target = "tvm.ir.expr.is_prim_expr"
    if target in _applied:
        return
    expr_class, prim_type = ir.expr.Expr, ir.PrimType
    is_expr: dict[type, bool] = {}
    is_prim: dict[type, bool] = {}

    def is_prim_expr(value: object) -> bool:
        kind = type(value)
        known = is_expr.get(kind)
        if known is None:
            known = is_expr[kind] = isinstance(value, expr_class)
        if not known:
            return False
        ty = value.ty
        kind = type(ty)
        known = is_prim.get(kind)
        if known is None:
            known = is_prim[kind] = isinstance(ty, prim_type)
        return known

    is_prim_expr.__doc__ = ir.expr.is_prim_expr.__doc__
    for module in ("tvm.ir", "tvm.ir.expr", "tvm.ir._overload_prim_expr"):
        _set(sys.modules[module], "is_prim_expr", is_prim_expr, f"{module}.is_prim_expr")


# -- the user's source lines: a statement a pass replaces keeps its span

def keep_statement_spans(keep_span: Callable[[Any, Any], Any]) -> None:
    """structural_mutate's callbacks on statement types wrapped by `keep_span` (ir/source_lines.py's, which the
    package's __init__ passes: this bottom module imports no layer above it); once per process."""
    target = "tvm_ffi.structural._normalize_callbacks"
    if target in _applied:
        return

    normalize = tvm_ffi.structural._normalize_callbacks
    accepts_mode = tvm_ffi.structural._callback_accepts_inplace_mode

    def wrap(fn: Callable[..., Any]) -> Callable[..., Any]:
        # keyword-only `_fn`: the wrapper binds (value, mutator[, mode]) exactly as `fn` does
        if accepts_mode(fn):
            def keeping(value, mutator, mode, *, _fn=fn):
                return keep_span(value, _fn(value, mutator, mode))
        else:
            def keeping(value, mutator, *, _fn=fn):
                return keep_span(value, _fn(value, mutator))
        return keeping

    statement_types: dict[Any, bool] = {}

    def is_statement_type(t: Any) -> bool:
        try:
            known = statement_types.get(t)
        except TypeError:  # unhashable: asked afresh
            return isinstance(t, type) and issubclass(t, tirx.Stmt)
        if known is None:
            known = statement_types[t] = isinstance(t, type) and issubclass(t, tirx.Stmt)
        return known

    def normalize_callbacks(callbacks: Any, *, api_name: str) -> list:
        entries = _plain_entries(callbacks)
        if entries is None:
            entries = normalize(callbacks, api_name=api_name)
        if api_name != "structural_mutate":
            return entries
        return [(t, wrap(fn)) if is_statement_type(t) else (t, fn) for t, fn in entries]

    _set(tvm_ffi.structural, "_normalize_callbacks", normalize_callbacks, target)


add_tir_names()
accept_buffer_map()
memoize_structural_callbacks()
iterate_arrays_directly()
memoize_prim_expr_checks()


# -- pass configs given to a PassContext

_configs_pending: dict[int, tuple[int, dict]] = {}  # id of a PassContext -> (its handle, its tilelang configs)
_entered = threading.local()  # .stack: the tilelang configs of the PassContexts entered on this thread, innermost last


def keep_tilelang_configs(is_tilelang_key: Callable[[Any], bool]) -> None:
    """`PassContext(config=...)` takes the keys `is_tilelang_key` accepts (tilelang's pass configs) besides TVM's;
    `entered_tilelang_configs()` gives those of the innermost PassContext entered on this thread."""
    context = tvm.ir.transform.PassContext
    if "tvm.ir.transform.PassContext.__init__" in _applied:
        return
    wheel_init, wheel_enter, wheel_exit = context.__init__, context.__enter__, context.__exit__
    known_to_tvm = set(context.list_configs())

    def __init__(self, opt_level=2, required_pass=None, disabled_pass=None, instruments=None, config=None):
        config = dict(config or {})
        ours = {key: value for key, value in config.items() if is_tilelang_key(key)}
        theirs = {key: value for key, value in config.items()
                  if key not in ours or str(getattr(key, "value", key)) in known_to_tvm}
        wheel_init(self, opt_level, required_pass, disabled_pass, instruments, theirs or None)
        if ours:
            _configs_pending[id(self)] = (self.__chandle__(), ours)
        else:  # a new context where a freed one lived: never its configs
            _configs_pending.pop(id(self), None)

    def __enter__(self):
        result = wheel_enter(self)
        handle, ours = _configs_pending.get(id(self), (None, {}))
        stack = _entered.__dict__.setdefault("stack", [])
        stack.append(ours if handle == self.__chandle__() else {})
        return result

    def __exit__(self, ptype, value, trace):
        stack = _entered.__dict__.get("stack")
        if stack:
            stack.pop()
        return wheel_exit(self, ptype, value, trace)

    for name, value in (("__init__", __init__), ("__enter__", __enter__), ("__exit__", __exit__)):
        _set(context, name, value, f"tvm.ir.transform.PassContext.{name}")


def entered_tilelang_configs() -> dict:
    """The tilelang pass configs of the innermost PassContext entered on this thread ({} outside one)."""
    stack = _entered.__dict__.get("stack")
    return dict(stack[-1]) if stack else {}
