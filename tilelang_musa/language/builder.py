"""The trace state of the frontend and the classification of values; every `T.*` construct starts here.

A `KernelTrace` is open while a kernel function runs: it owns the tvm IRBuilder, the current source
location, the kernel parameters and, in the eager jit style, the values of `T.const` sizes. Static values
(Python ints, bools, lists) keep Python semantics everywhere; IR values become TIR statements. The helpers the
rewritten kernel code calls (assignment, stores, control flow) are `runtime.py`.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Any, Iterator

import tvm
import tvm_ffi
from tvm import tirx

from ..errors import CompileError, OperandTypeError, SourceLoc
from ..ir.outside_kernel import kernel_required_message
from ..ir.trace import OPEN_TRACES, current_trace as _current_trace

# ----------------------------------------------------------------------------------------------------
# Trace state


@dataclass
class Param:
    name: str
    var: Any  # a buffer Var (tensor) or a scalar Var
    is_output: bool = False
    is_workspace: bool = False  # T.alloc_global: allocated by the launcher, never returned


@dataclass(eq=False)
class ControlScope:
    """One entry into an IR loop or one branch of an IR `if`; compared by identity."""

    conditional: bool  # an `if` branch (a loop otherwise)


@dataclass
class KernelTrace:
    """Everything the frontend knows while one kernel function runs."""

    filename: str
    mode: str = "prim_func"  # "prim_func" | "eager" | "discover"
    consts: dict[str, Any] = field(default_factory=dict)  # eager: T.const name -> value (int or Var)
    declared_consts: set = field(default_factory=set)  # eager: the names T.const declared
    pending_tensors: dict[str, Any] = field(default_factory=dict)  # eager: tensor param name -> placeholder
    params: list[Param] = field(default_factory=list)
    discovered_shapes: dict[str, tuple] = field(default_factory=dict)  # discover: param -> shape exprs
    discovered_dtypes: dict[str, str] = field(default_factory=dict)  # discover: param -> its annotated dtype
    discovered_strides: dict[str, tuple] = field(default_factory=dict)  # discover: param -> stride exprs, if given
    loc: SourceLoc | None = None
    naming_hint: str | None = None
    kernel: Any = None  # the open kernel (language.kernel.Kernel): `with T.Kernel`, or thread bindings
    layout_annotations: dict = field(default_factory=dict)  # buffer -> Layout/Fragment (T.annotate_layout)
    pass_configs: dict = field(default_factory=dict)  # T.annotate_pass_configs
    reducers: dict = field(default_factory=dict)  # T.alloc_reducer buffer -> its op
    reducer_seeds: dict = field(default_factory=dict)  # reducer -> the T.reducer_init seed its finalize combines
    reducer_epochs: dict = field(default_factory=dict)  # reducer -> its Epoch (reducer_epoch.py)
    body_sizes: dict = field(default_factory=dict)  # T.dynamic name -> the size a parameter annotation already used
    buffer_views: dict = field(default_factory=dict)  # view buffer -> the buffer it views (T.view / T.reshape)
    dtype_views: dict = field(default_factory=dict)  # shared tile's view as another dtype -> its T.view's location
    scoped_params: dict = field(default_factory=dict)  # T.Tensor(scope=) parameter name -> its declaration's location
    compile_flags: list = field(default_factory=list)  # T.annotate_compile_flags
    safe_values: dict = field(default_factory=dict)  # tensor name -> value of its out-of-bounds reads
    non_restrict: list = field(default_factory=list)  # T.annotate_restrict_buffers: tensor names that may alias
    kernels: list = field(default_factory=list)  # every kernel opened, in launch order (per-kernel annotations)
    imported_sources: list = field(default_factory=list)  # T.import_source: C source texts, in first-use order
    named_arrive_ids: set = field(default_factory=set)  # barrier ids of T.named_barrier_arrive calls
    let_regions: list = field(default_factory=list)  # (vector let var, the slice it loads): `b = A[0, 0:4]`
    early_allocations: list = field(default_factory=list)  # kernel buffers allocated before the kernel (early_alloc)
    # the `for`/`while` statements being traced, innermost last: the LoopFrame of an IR loop, None for Python
    # iteration (where a `break` / `continue` binds; runtime.loop_exit)
    loops: list = field(default_factory=list)
    # the IR loops and `if` branches being traced, innermost last (a fresh ControlScope each time one is entered):
    # where a reducer epoch opened and may close (reducer_epoch.py)
    scopes: list = field(default_factory=list)
    outside_kernel: list = field(default_factory=list)  # (construct, loc) built before any kernel (outside_kernel)

    def error(self, message: str) -> CompileError:
        return CompileError(message, self.loc)


# The open traces, innermost last: the list the bottom layer (ir/trace.py) keeps, so that tile ops built below the
# frontend read the current trace without importing it.
_TRACES: list[KernelTrace] = OPEN_TRACES


def current_trace(construct: str | None = None) -> KernelTrace:
    return _current_trace(construct)


def kernel_trace(construct: str) -> KernelTrace:
    """The current trace, after checking that `construct` is used inside `with T.Kernel(...)`."""
    trace = current_trace(construct)
    if trace.kernel is None:
        raise trace.error(kernel_required_message(construct))
    return trace


def expression_trace(construct: str) -> KernelTrace | None:
    """For a built-in that only builds an expression (`T.any_sync(p)`, `T.__exp(x)`): outside every kernel, None,
    and the caller builds the plain expression (upstream builds them there, for inspection); inside a kernel's
    function, the trace after kernel_trace's check."""
    return kernel_trace(construct) if _TRACES else None


def operand_error(construct: str, message: str) -> CompileError:
    """A bad operand of an expression built-in (see expression_trace): at the user's line inside a kernel."""
    return CompileError(message, _TRACES[-1].loc if _TRACES else None)


def operand_type_error(construct: str, message: str) -> OperandTypeError:
    """`construct` was given an operand of a dtype it does not take: at the user's line inside a kernel."""
    return OperandTypeError(message, _TRACES[-1].loc if _TRACES else None)


@contextlib.contextmanager
def open_trace(trace: KernelTrace) -> Iterator[KernelTrace]:
    _TRACES.append(trace)
    try:
        yield trace
    finally:
        _TRACES.pop()


def current_loc() -> SourceLoc | None:
    return _TRACES[-1].loc if _TRACES else None


def take_name(default: str) -> str:
    """The name of the variable the current statement assigns to (for readable generated code)."""
    if not _TRACES:
        return default
    trace = _TRACES[-1]
    name, trace.naming_hint = trace.naming_hint, None
    return name or default


class DiscoveryDone(Exception):
    """Raised in "discover" mode once the kernel starts building IR: the parameter shapes are known."""


# ----------------------------------------------------------------------------------------------------
# Classification of values


def is_ir(value: Any) -> bool:
    return isinstance(value, tvm.ir.Expr) and not isinstance(value, (tirx.IntImm,))


def is_buffer(value: Any) -> bool:
    return isinstance(value, tvm.ir.expr.Var) and isinstance(value.ty, tirx.BufferType)


def as_expr(value: Any) -> Any:
    """`x == y` on IR values is a lazy comparison object (EqualOp/NotEqualOp): make it an expression."""
    if isinstance(value, tvm_ffi.core.ObjectConvertible) and hasattr(value, "asobject"):
        return value.asobject()
    return value


def static_value(value: Any) -> Any:
    """The Python value of a compile-time constant (int/bool/IntImm), else None."""
    value = as_expr(value)
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return value
    if isinstance(value, tirx.IntImm):
        return int(value.value)
    return None


VAR_SCOPE = "local.var"  # the scope of a `T.alloc_var` scalar (language/allocate.py)


def is_var_buffer(value: Any) -> bool:
    return is_buffer(value) and value.ty.storage_scope == VAR_SCOPE


def value(x: Any) -> Any:
    """An operand's value: a `T.alloc_var` scalar reads as its element; anything else is itself."""
    return x[0] if is_var_buffer(x) else x


class _Unbound:
    def __repr__(self) -> str:
        return "<unbound>"


_UNBOUND = _Unbound()  # `lookup` of a name the kernel has not bound yet (runtime.py); a parameter not yet declared
