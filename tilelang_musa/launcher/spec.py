"""What the launcher needs to know about a kernel's parameters, and the error it raises when a launch fails.

`ParamSpec` is the contract between the host-wrapper printer (which knows the PrimFunc's parameters) and the
Cython `Launcher` (which checks the caller's tensors against it). Specs are validated on construction, so a bad
spec fails where it is built, not at the first call.

A dim or stride is an int (static), a str (a size symbol, bound from the first tensor dim that is exactly it) or a
`DimExpr` over symbols (`m * 4`, `n * 3 + 1`). A symbol that appears only inside expressions is solved from a dim
that is linear in it once its other symbols are known (`solve_dim`); every expression dim is then checked against
the tensor. `float4_e2m1fn` (and `int4` / `uint4`) tensors are uint8 tensors holding two values a byte: their logical last dim is twice the
byte tensor's and their other strides twice the byte strides (`PACKED_DTYPES`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch

__all__ = ["PACKED_DTYPES", "SCALAR_DTYPES", "DimExpr", "KernelLaunchError", "ParamSpec", "accepted_torch_dtypes",
           "solve_dim", "torch_dtype", "unsolvable_symbols"]


class KernelLaunchError(RuntimeError):
    """A kernel library's `call_packed` returned non-zero; the message carries its `get_last_error()` text."""


class UnboundSizeError(ValueError, RuntimeError):
    """A size the kernel reads that only tensors left out as None would give. A RuntimeError as upstream's binder
    raises it ("requires at least one non-null buffer"), and a ValueError as the launcher's other checks of
    argument values."""


# Scalar dtypes the launcher can pack into a C value (see `_launcher.pyx` for the C type of each).
SCALAR_DTYPES = frozenset(
    ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
     "float16", "bfloat16", "float32", "float64"]
)

# TVM dtype string -> name of the torch dtype with the same element layout. TVM's "float8_e4m3" is the OCP E4M3
# format MUSA implements (finite, NaN only), which torch calls float8_e4m3fn. Names are looked up on `torch` so an
# older torch without, say, uint16 only loses that dtype.
_TORCH_DTYPE_NAMES = {
    "bool": "bool",
    "int8": "int8", "int16": "int16", "int32": "int32", "int64": "int64",
    "uint8": "uint8", "uint16": "uint16", "uint32": "uint32", "uint64": "uint64",
    "float16": "float16", "bfloat16": "bfloat16", "float32": "float32", "float64": "float64",
    "float8_e4m3": "float8_e4m3fn", "float8_e4m3fn": "float8_e4m3fn", "float8_e4m3fnuz": "float8_e4m3fnuz",
    "float8_e5m2": "float8_e5m2", "float8_e5m2fnuz": "float8_e5m2fnuz", "float8_e8m0fnu": "float8_e8m0fnu",
}


# Sub-byte storage dtypes -> values per byte. Their tensors are passed as bytes (torch.uint8), and accepted as
# int8 or torch's own packed dtype too (upstream's tests pass `.view(torch.int8)`).
PACKED_DTYPES = {"float4_e2m1fn": 2, "int4": 2, "uint4": 2}
_PACKED_ALSO = {"float4_e2m1fn": ("int8", "float4_e2m1fn_x2"), "int4": ("int8",), "uint4": ("int8",)}
# The torch dtype outputs get where torch has it (upstream main's adapters return fp4 outputs as
# torch.float4_e2m1fn_x2, torch >= 2.8); else the first of the accepted ones (uint8).
_PACKED_OUTPUT = {"float4_e2m1fn": "float4_e2m1fn_x2"}


def accepted_torch_dtypes(dtype: str) -> tuple[torch.dtype, ...]:
    """Every torch dtype a tensor passed for a `dtype` parameter may have; the first is the one outputs get."""
    names = (_PACKED_OUTPUT.get(dtype, ""), "", *_PACKED_ALSO.get(dtype, ()))
    found = [torch_dtype(dtype) if not n else getattr(torch, n, None) for n in names]
    return tuple(dict.fromkeys(t for t in found if isinstance(t, torch.dtype)))


def torch_dtype(dtype: str) -> torch.dtype:
    """The torch dtype of tensors passed for a TVM `dtype` tensor parameter; ValueError if there is none."""
    if dtype in PACKED_DTYPES:
        return torch.uint8
    name = _TORCH_DTYPE_NAMES.get(dtype)
    if name is None:
        # Other sub-byte types (int2) and vector types (float16x4) have no one-to-one torch dtype.
        raise ValueError(f"no torch dtype corresponds to the TVM dtype {dtype!r}; "
                         f"supported tensor dtypes: {', '.join(sorted([*_TORCH_DTYPE_NAMES, *PACKED_DTYPES]))}")
    result = getattr(torch, name, None)
    if not isinstance(result, torch.dtype):
        raise ValueError(f"TVM dtype {dtype!r} needs torch.{name}, which torch {torch.__version__} does not have")
    return result


_OPS = {"add": "+", "sub": "-", "mul": "*", "floordiv": "//", "floormod": "%", "min": "min", "max": "max"}


def symbols_of(args: Any) -> tuple[str, ...]:
    """The symbol names an expression's operands read, in first-use order: a str operand is one, an operand
    expression (anything with `.symbols`) contributes its own, numbers none."""
    found: dict[str, None] = {}
    for a in args:
        if isinstance(a, str):
            found[a] = None
        elif hasattr(a, "symbols"):
            found.update(dict.fromkeys(a.symbols))
    return tuple(found)


@dataclass(frozen=True)
class DimExpr:
    """A dim or stride computed from size symbols: `op` applied to two operands, each an int, a symbol name or a
    DimExpr. `floordiv`/`floormod` round toward minus infinity (TIR's floordiv/floormod, Python's // and %).

    DimExpr("mul", ("m", 4)) is `m * 4`; it serialises as {"op": "mul", "args": ["m", 4]} (asdict / JSON)."""

    op: str
    args: tuple

    def __post_init__(self) -> None:
        if self.op not in _OPS:
            raise ValueError(f"DimExpr op must be one of {', '.join(_OPS)}; got {self.op!r}")
        args = tuple(_as_dim(a) for a in self.args)
        if len(args) != 2:
            raise ValueError(f"DimExpr {self.op} takes two operands; got {len(args)}")
        for a in args:
            if isinstance(a, bool) or not isinstance(a, (int, str, DimExpr)):
                raise TypeError(f"DimExpr operand must be an int, a symbol name or a DimExpr; got {a!r}")
        object.__setattr__(self, "args", args)

    def evaluate(self, values: Mapping[str, int]) -> int:
        """The value for the symbols' `values` (KeyError for a missing one)."""
        a, b = (x.evaluate(values) if isinstance(x, DimExpr) else values[x] if isinstance(x, str) else x
                for x in self.args)
        if self.op in ("floordiv", "floormod") and b == 0:
            raise ZeroDivisionError(f"`{self}` divides by zero")
        return {"add": a + b, "sub": a - b, "mul": a * b, "floordiv": a // b if b else 0,
                "floormod": a % b if b else 0, "min": min(a, b), "max": max(a, b)}[self.op]

    @property
    def symbols(self) -> tuple[str, ...]:
        return symbols_of(self.args)

    def linear(self) -> tuple[dict[str, int], int] | None:
        """({symbol: coefficient}, constant) when the expression is an integer linear form, else None."""
        forms = []
        for a in self.args:
            if isinstance(a, DimExpr):
                form = a.linear()
                if form is None:
                    return None
                forms.append(form)
            else:
                forms.append(({a: 1}, 0) if isinstance(a, str) else ({}, a))
        (ca, ka), (cb, kb) = forms
        if self.op in ("add", "sub"):
            sign = 1 if self.op == "add" else -1
            coefs = dict(ca)
            for s, c in cb.items():
                coefs[s] = coefs.get(s, 0) + sign * c
            return coefs, ka + sign * kb
        if self.op == "mul" and (not ca or not cb):
            scale, (coefs, const) = (ka, (cb, kb)) if not ca else (kb, (ca, ka))
            return {s: c * scale for s, c in coefs.items()}, const * scale
        return None

    def __str__(self) -> str:
        def operand(x: Any) -> str:
            text = str(x)
            return f"({text})" if isinstance(x, DimExpr) and x.op not in ("min", "max") else text

        a, b = self.args
        if self.op in ("min", "max"):
            return f"{self.op}({a}, {b})"
        return f"{operand(a)} {_OPS[self.op]} {operand(b)}"


def _as_dim(value: Any) -> Any:
    """A dim as given, or read back from JSON (a DimExpr arrives as a dict)."""
    if isinstance(value, dict):
        return DimExpr(value["op"], tuple(value["args"]))
    return value


def solve_dim(expr: DimExpr, value: int, known: Mapping[str, int]) -> tuple[str, int] | None:
    """The one symbol of `expr` not in `known` and its value if `expr == value` determines it (the expression is
    linear in it with a coefficient that divides), else None. The caller checks `expr` against `value` afterwards."""
    unknown = [s for s in expr.symbols if s not in known]
    form = expr.linear()
    if len(unknown) != 1 or form is None:
        return None
    coefs, const = form
    (symbol,) = unknown
    coef = coefs.get(symbol, 0)
    if coef == 0:
        return None
    rest = value - const - sum(c * known[s] for s, c in coefs.items() if s != symbol)
    return symbol, rest // coef


def unsolvable_symbols(params: Any, bound: Any = ()) -> list[str]:
    """Symbols of the input tensors that neither a plain dim or stride, a scalar argument of that name (one not in
    `bound`: those take their value from the tensors), nor a chain of linear dims (`m * 4`, `n + 1`, `2 * m + n`
    once m is known) determines."""
    known: set[str] = set()
    exprs = []
    for p in params:
        if p.kind == "scalar":
            if p.name not in bound:
                known.add(p.name)
        elif p.kind == "tensor" and not p.is_output and not p.is_workspace:
            for d in p.shape + (p.strides or ()):
                if isinstance(d, str):
                    known.add(d)
                elif isinstance(d, DimExpr):
                    exprs.append(d)
    progress = True
    while progress:
        progress = False
        for e in exprs:
            form = e.linear()
            unknown = [s for s in e.symbols if s not in known]
            if form is not None and len(unknown) == 1 and form[0].get(unknown[0], 0) != 0:
                known.add(unknown[0])
                progress = True
    return list(dict.fromkeys(s for p in params if p.kind == "tensor" and not p.is_output and not p.is_workspace
                              for s in p.symbols if s not in known))


def _check_dim(param: str, what: str, index: int, value: object) -> None:
    if isinstance(value, DimExpr):
        return
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise TypeError(f"parameter {param}: {what}[{index}] must be an int, a symbol name (str) or a DimExpr; "
                        f"got {type(value).__name__} {value!r}")
    if isinstance(value, int) and value < 0:
        raise ValueError(f"parameter {param}: {what}[{index}] = {value} is negative")
    if isinstance(value, str) and not value.isidentifier():
        raise ValueError(f"parameter {param}: {what}[{index}] = {value!r} is not a symbol name (an identifier)")


@dataclass(frozen=True)
class ParamSpec:
    """One kernel parameter, in the order of the library's `call_packed` arguments.

    name      the kernel parameter name, used in every error message
    kind      "tensor" | "scalar" | "pointer" (a raw `T.ptr`: the caller passes a tensor, for its data pointer, or an
              int address; nothing about the memory behind it is checked)
    dtype     TVM dtype string ("float32", "bfloat16", "int8", "float8_e4m3", ...); a pointer's element type, or
              "void" for an untyped `T.ptr"
    shape     tensor dims, each an int (static), a str (symbolic size, e.g. "N", bound from the caller's tensors) or a
              DimExpr over symbols (`N * 4`; solved and checked at launch). Logical elements: a float4_e2m1fn
              tensor's last dim counts fp4 values, twice its bytes
    strides   None: contiguous row-major required; else one int, symbol name or DimExpr per dim (in elements)
    is_output allocated by the launcher (out_idx / T.empty) and returned, not passed by the caller
    align     bytes the data pointer must be a multiple of: what the vector accesses the kernel makes to it need
    unused    the kernel never accesses the tensor: the caller may pass None for it. A scalar: the kernel never
              reads it (a size only tensors left out as None determine is then passed as 0)
    is_workspace  a `T.alloc_global` scratch tensor: allocated by the launcher for each call (filled with 0xFF bytes
              on the simulator, so a read before a write shows as NaN or -1), neither passed nor returned
    zeroed    a workspace the launcher fills with zero bytes for each call instead (the flags of a stream-K
              schedule, transform/stream_k.py, which count publishers from zero)
    """

    name: str
    kind: str
    dtype: str
    shape: tuple = ()
    strides: tuple | None = None
    is_output: bool = False
    align: int = 1
    unused: bool = False
    is_workspace: bool = False
    zeroed: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"ParamSpec.name must be a non-empty str; got {self.name!r}")
        if self.kind not in ("tensor", "scalar", "pointer"):
            raise ValueError(f"parameter {self.name}: kind must be 'tensor', 'scalar' or 'pointer'; got {self.kind!r}")
        if not isinstance(self.dtype, str):
            raise TypeError(f"parameter {self.name}: dtype must be a TVM dtype string; got {self.dtype!r}")
        # Accept lists for convenience; the frozen dataclass stores tuples so specs stay hashable.
        object.__setattr__(self, "shape", tuple(_as_dim(d) for d in self.shape))
        if self.strides is not None:
            object.__setattr__(self, "strides", tuple(_as_dim(s) for s in self.strides))
        if not isinstance(self.align, int) or self.align < 1 or self.align & (self.align - 1):
            raise ValueError(f"parameter {self.name}: align must be a power of two; got {self.align!r}")
        if self.kind == "scalar":
            self._check_scalar()
        elif self.kind == "pointer":
            if self.shape or self.strides is not None or self.is_output or self.is_workspace:
                raise ValueError(f"pointer parameter {self.name} cannot have a shape or strides, or be an output "
                                 "or a workspace")
        else:
            self._check_tensor()

    def _check_scalar(self) -> None:
        if self.shape or self.strides is not None:
            raise ValueError(f"scalar parameter {self.name} cannot have a shape or strides")
        if self.is_output:
            raise ValueError(f"scalar parameter {self.name} cannot be an output; only tensors are allocated")
        if self.dtype not in SCALAR_DTYPES:
            raise ValueError(f"scalar parameter {self.name} has unsupported dtype {self.dtype!r}; "
                             f"supported: {', '.join(sorted(SCALAR_DTYPES))}")

    def _check_tensor(self) -> None:
        if self.is_output and self.is_workspace:
            raise ValueError(f"parameter {self.name} cannot be both an output and a workspace")
        if self.zeroed and not self.is_workspace:
            raise ValueError(f"parameter {self.name}: only a workspace is zeroed by the launcher")
        try:
            torch_dtype(self.dtype)
        except ValueError as err:
            raise ValueError(f"tensor parameter {self.name}: {err}") from None
        for i, dim in enumerate(self.shape):
            _check_dim(self.name, "shape", i, dim)
        if self.strides is not None:
            if len(self.strides) != len(self.shape):
                raise ValueError(f"parameter {self.name}: {len(self.strides)} strides for {len(self.shape)} dims")
            for i, stride in enumerate(self.strides):
                _check_dim(self.name, "strides", i, stride)

    @property
    def symbols(self) -> tuple[str, ...]:
        """Symbol names in shape and strides (plain or inside expressions), in order of first appearance."""
        found: dict[str, None] = {}
        for d in self.shape + (self.strides or ()):
            if isinstance(d, str):
                found[d] = None
            elif isinstance(d, DimExpr):
                found.update(dict.fromkeys(d.symbols))
        return tuple(found)

    @property
    def pack(self) -> int:
        """Logical elements per byte of the tensor passed (2 for float4_e2m1fn, int4 and uint4, else 1)."""
        return PACKED_DTYPES.get(self.dtype, 1)

    def storage_shape(self, sizes: Mapping[str, int]) -> tuple[int, ...]:
        """The shape of the torch tensor passed for this parameter, given the symbols' values (packed dtypes: the
        last dim in bytes)."""
        shape = [d if isinstance(d, int) else sizes[d] if isinstance(d, str) else d.evaluate(sizes)
                 for d in self.shape]
        if shape and self.pack > 1:
            if shape[-1] % self.pack:
                raise ValueError(f"parameter {self.name}: the last dim of a {self.dtype} tensor ({shape[-1]}) must "
                                 f"be a multiple of {self.pack} (whole bytes)")
            shape[-1] //= self.pack
        return tuple(shape)

    def describe(self) -> str:
        """`A: Tensor[(N, 128), float32]`, `N: int32`: how error messages and reprs show the parameter."""
        if self.kind == "scalar":
            return f"{self.name}: {self.dtype}"
        if self.kind == "pointer":
            return f"{self.name}: T.ptr" + ("" if self.dtype == "void" else f"({self.dtype})")
        dims = ", ".join(str(d) for d in self.shape) + ("," if len(self.shape) == 1 else "")
        extra = "" if self.strides is None else f", strides=({', '.join(str(s) for s in self.strides)})"
        role = " (output)" if self.is_output else " (workspace)" if self.is_workspace else ""
        return f"{self.name}: Tensor[({dims}), {self.dtype}{extra}]{role}"
