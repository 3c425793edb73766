"""Data types of the language: `T.float16`, `T.int32`, ... are dtype strings that also build values.

`T.float32` can be passed wherever a dtype string is expected (it *is* the string "float32"), used as a
parameter annotation, and called: `T.float32(1)` is a constant, `T.float32(expr)` a cast.
"""

from __future__ import annotations

from typing import Any

import tvm
import tvm_ffi
from tvm import tirx

from .builder import take_name, value as _value_of

# float6 types are not supported on MUSA (the user's guide): they are rejected by name. float4_e2m1fn is a
# storage type only: kernel tensor parameters of it are accepted (transform/lower_fp4_storage.py), allocations
# and arithmetic on it are rejected where they are written. The fnuz float8 formats (AMD's) have no MUSA
# instruction but are full types, converted in software bit-exact with torch (tl::fp8_fnuz_t in common.h).
UNSUPPORTED_DTYPES = ("float6_e2m3fn", "float6_e3m2fn")
FP4_DTYPE = "float4_e2m1fn"
# Upstream's T.float4_e2m1fnx2: two fp4 values as one (vector) element. A name and a dtype here (bits, lanes,
# torch's float4_e2m1fn_x2); tensors and buffers are declared in fp4 elements instead (same bytes).
FP4X2_DTYPE = "float4_e2m1fnx2"
# Sub-byte integers name the packed fields of quantized weights (`out_dtype == T.int4`, `T.int4.bits`); a kernel
# cannot hold them: MUSA C has no 4- or 2-bit integer type, and element i of a packed tensor is not element i of its
# bytes. Buffers, tensors and values of them are rejected where written (SUB_BYTE_INT_HINT says what to do instead),
# except int4 / uint4 tensor parameters and shared tiles: packed storage (two a byte) whose bytes only move, by
# T.ptx_cp_async (transform/lower_fp4_storage.py refuses any element access).
SUB_BYTE_INT_DTYPES = ("int4", "uint4", "int2", "uint2")
PACKED_INT_DTYPES = ("int4", "uint4")
SUB_BYTE_INT_HINT = ("keep the packed fields in int8/uint8 and decode them with tilelang.quantize "
                     "(_tir_packed_int_to_int_convert, _tir_packed_to_unsigned_convert, ...)")

# Other spellings of one dtype. TVM parses "float8_e4m3" as a type distinct from "float8_e4m3fn", but upstream
# scripts mean the OCP E4M3 format MUSA implements (finite, NaN only): one name reaches the passes and the
# printer. "tfloat32" (upstream's `custom[tfloat32]`) is stored as float32; a float32 T.gemm already runs on the
# TF32 MMA/SQMMA instructions, as upstream's does on CUDA.
_ALIASES = {"float": "float32", "half": "float16", "double": "float64", "int": "int32", "bf16": "bfloat16",
            "uint": "uint32", "short": "int16", "long": "int64", "ulong": "uint64",
            "float8_e4m3": "float8_e4m3fn", "tfloat32": "float32", "custom[tfloat32]": "float32",
            "float4_e2m1fn_x2": FP4_DTYPE}


class Pointer:
    """`T.ptr`: a device address. As a parameter annotation (`a_ptr: T.ptr`, or `T.ptr(dtype)`) a raw pointer the
    kernel views with `T.make_tensor`; as a tensor's dtype (`T.Tensor([G], T.ptr)`, a pointer table) an int64
    element holding an address, as upstream lowers it."""

    def __init__(self, dtype: Any = None, storage_scope: str = "global"):
        self.dtype = None if dtype is None else canonical_dtype(dtype)
        self.storage_scope = storage_scope

    def __call__(self, dtype: Any = None, storage_scope: str = "global") -> Pointer:
        return Pointer(dtype, storage_scope)

    def __repr__(self) -> str:
        return "T.ptr" if self.dtype is None else f"T.ptr({self.dtype!r})"


ptr = Pointer()
POINTER_DTYPE = "int64"  # a pointer stored in a tensor (pointer tables)


def canonical_dtype(dtype: Any) -> str:
    """The canonical TVM dtype string of `dtype` (a string, a DType, a torch dtype or a tvm dtype; `T.ptr` as an
    element type is int64)."""
    if isinstance(dtype, Pointer):
        return POINTER_DTYPE
    text = str.__str__(dtype) if isinstance(dtype, DType) else str(dtype)
    if text.startswith("torch."):
        text = text[len("torch."):]
    text = _ALIASES.get(text, text)
    if text.split("x")[0] in UNSUPPORTED_DTYPES:
        from ..errors import UnsupportedError

        raise UnsupportedError(f"dtype `{text}` is not supported by TileLang-MUSA (no float6 types: use "
                               "float8_e4m3fn / float8_e5m2; float4_e2m1fn is a storage type for tensor parameters)")
    if isinstance(dtype, DType):
        return text
    try:
        tvm.runtime.DataType(text)
    except Exception:  # noqa: BLE001 - tvm raises a generic error for unknown names
        from ..errors import CompileError

        raise CompileError(f"unknown dtype `{dtype}`") from None
    return text


def is_sub_byte_int(dtype: Any) -> bool:
    """True for the scalar or vector forms of int4/uint4/int2/uint2."""
    return str(dtype).split("x")[0] in SUB_BYTE_INT_DTYPES


def resolve_torch_storage_dtype(dtype: Any) -> "DType":
    """The dtype whose torch dtype holds `dtype`'s storage (upstream's helper): itself for whole-byte types, int8
    for the sub-byte integers, float4_e2m1fnx2 for fp4 where torch has float4_e2m1fn_x2 (else int8)."""
    import torch

    name = canonical_dtype(dtype)
    if name in SUB_BYTE_INT_DTYPES:
        return DType("int8")
    if name in (FP4_DTYPE, FP4X2_DTYPE):
        return DType(FP4X2_DTYPE) if hasattr(torch, "float4_e2m1fn_x2") else DType("int8")
    return DType(name)


def reject_sub_byte_int(construct: str, dtype: Any, loc: Any, packed_storage: bool = False) -> None:
    """Raise UnsupportedError naming `construct` if `dtype` is a sub-byte integer (see SUB_BYTE_INT_DTYPES; with
    `packed_storage`, a tensor parameter or shared tile, int4 / uint4 are allowed), or the packed fp4 pair
    float4_e2m1fnx2 as an element type."""
    if str(dtype) == FP4X2_DTYPE:
        from ..errors import UnsupportedError

        raise UnsupportedError(f"{construct}: dtype `{FP4X2_DTYPE}` (two fp4 values as one element) is not an element "
                               f"type here; declare `{FP4_DTYPE}` with the last dimension doubled (the same bytes, "
                               "one fp4 value per element; torch.float4_e2m1fn_x2 or uint8 tensors are passed as they "
                               "are)", loc)
    if is_sub_byte_int(dtype) and not (packed_storage and str(dtype) in PACKED_INT_DTYPES):
        from ..errors import UnsupportedError

        raise UnsupportedError(f"{construct}: dtype `{dtype}` is a sub-byte integer, which a MUSA kernel cannot hold "
                               f"(no 4- or 2-bit integer type in MUSA C); {SUB_BYTE_INT_HINT}", loc)


def _of_dtypes(e: Any, names: tuple) -> bool:
    ty = getattr(e, "ty", None)
    return isinstance(ty, tvm.ir.PrimType) and str(ty.dtype).split("x")[0] in names


def sub_byte_int_value(expr: Any) -> Any:
    """The first node of `expr` whose value is a sub-byte integer a kernel cannot hold, or None: an int2 / uint2
    value, or one computed with int4 / uint4 operands. An int4 / uint4 element of packed storage may be loaded,
    cast (`T.cast(S[i], "int32")`, `T.cast(v, "int4")`), selected and stored, as fp4 values are (storage_arithmetic);
    transform/lower_fp4_storage.py decodes and encodes it."""
    if not isinstance(expr, tvm.ir.Expr):
        return None
    found: list[Any] = []

    def visit(node: Any) -> None:
        if not found and _of_dtypes(node, tuple(d for d in SUB_BYTE_INT_DTYPES if d not in PACKED_INT_DTYPES)):
            found.append(node)

    tvm_ffi.structural_walk(expr, [(tvm.ir.Expr, visit)])
    return found[0] if found else storage_arithmetic(expr, PACKED_INT_DTYPES)


def fp4_arithmetic(expr: Any) -> Any:
    """The first node of `expr` that computes with float4_e2m1fn operands (fp4 is storage only: its values may be
    loaded, cast, selected and stored, nothing else), or None."""
    return storage_arithmetic(expr, (FP4_DTYPE,))


def storage_arithmetic(expr: Any, names: tuple) -> Any:
    """The first node of `expr` that computes with operands of the storage-only dtypes `names`, or None."""
    if not isinstance(expr, tvm.ir.Expr):
        return None
    found: list[Any] = []

    def is_fp4(e: Any) -> bool:
        return _of_dtypes(e, names)

    def visit(node: Any) -> None:
        if found or isinstance(node, (tirx.Cast, tirx.Select, tvm.ir.expr.TensorLoad)):
            return
        if isinstance(node, tvm.ir.Call):
            if str(getattr(node.op, "name", "")) == "prim.if_then_else":
                return
            operands = list(node.args)
        else:
            operands = [getattr(node, f, None) for f in ("a", "b", "value")]
        if any(is_fp4(o) for o in operands if o is not None):
            found.append(node)

    tvm_ffi.structural_walk(expr, [(tvm.ir.Expr, visit)])
    return found[0] if found else None


class DType(tvm.DataType):
    """A dtype string that is also a constructor of constants and casts. `T.dtype("half")`, `T.dtype(torch.half)`
    and `T.float16` are equal (to each other, to "float16" and to torch.float16); `.as_torch()` is the torch dtype.
    A `tvm.DataType` (a str) as upstream's are, with its `bits` / `lanes`."""

    def __new__(cls, value: Any) -> "DType":
        return tvm.DataType.__new__(cls, canonical_dtype(value))

    def __eq__(self, other: Any) -> bool:
        if isinstance(other, str) or type(other).__module__ == "torch":
            try:
                return str.__eq__(self, canonical_dtype(other))
            except Exception:  # noqa: BLE001 - not a dtype at all: unequal
                return False
        return NotImplemented

    def __ne__(self, other: Any) -> bool:
        equal = self.__eq__(other)
        return equal if equal is NotImplemented else not equal

    __hash__ = str.__hash__

    @property
    def bytes(self) -> int:
        """Bytes of one value (all lanes), as upstream's `dtype.bytes` (tvm's `itemsize`)."""
        return self.itemsize

    def as_torch(self) -> Any:
        import torch

        name = str.__str__(self)
        if name in (FP4_DTYPE, FP4X2_DTYPE):  # two fp4 values a byte (low nibble first): torch's packed pair
            return getattr(torch, "float4_e2m1fn_x2", torch.uint8)  # where torch has it (as upstream), else bytes
        if name in SUB_BYTE_INT_DTYPES:  # torch has no sub-byte integers: their packed storage, as upstream's int4
            return torch.int8 if name.startswith("int") else torch.uint8
        found = getattr(torch, name, None)
        if not isinstance(found, torch.dtype):
            raise TypeError(f"T.{name} has no torch dtype")
        return found

    def is_float4(self) -> bool:
        """An fp4 type: float4_e2m1fn, or upstream's packed pair float4_e2m1fnx2."""
        return str.__str__(self) in (FP4_DTYPE, FP4X2_DTYPE)

    def __call__(self, value: Any = None, *more: Any) -> Any:
        dtype = str.__str__(self)
        if dtype == FP4X2_DTYPE:
            raise TypeError(f"T.{FP4X2_DTYPE} is a dtype name here: no constants or casts of packed fp4 pairs")
        value = _value_of(value)  # `T.float32(v)` of a T.alloc_var: a cast of its value
        if more:  # `T.float16x2(a, b)`: the vector of one value per lane
            return self._vector_of((value, *(_value_of(m) for m in more)))
        if value is None:  # `v = T.int32()`: a fresh variable, bound later (T.let) or used as a size
            return tirx.Var(take_name("v"), dtype)
        if isinstance(value, tvm.ir.Expr):
            return tirx.Cast(dtype, value)
        return tirx.const(value, dtype)

    def _vector_of(self, values: tuple) -> Any:
        dtype = tvm.DataType(str.__str__(self))
        if dtype.lanes != len(values):
            raise TypeError(f"T.{self}(...) takes one value per lane ({dtype.lanes}); got {len(values)}")
        element = str(dtype.element_of) if hasattr(dtype, "element_of") else str.__str__(self).rsplit("x", 1)[0]
        lanes = [v if isinstance(v, tvm.ir.Expr) and str(v.ty.dtype) == element else DType(element)(v)
                 for v in values]
        return tirx.Shuffle(lanes, [tirx.const(k, "int32") for k in range(len(lanes))])

    def __repr__(self) -> str:
        return f"T.{str.__str__(self)}"



dtype = DType  # T.dtype("float16"), as upstream
float16 = DType("float16")
bfloat16 = DType("bfloat16")
float32 = DType("float32")
float64 = DType("float64")
int8 = DType("int8")
int4 = DType("int4")  # sub-byte: dtype names only (SUB_BYTE_INT_DTYPES)
uint4 = DType("uint4")
int2 = DType("int2")
uint2 = DType("uint2")
int16 = DType("int16")
int32 = DType("int32")
int64 = DType("int64")
uint8 = DType("uint8")
uint16 = DType("uint16")
uint32 = DType("uint32")
uint64 = DType("uint64")
boolean = DType("bool")
float8_e4m3 = DType("float8_e4m3fn")
float8_e4m3fn = DType("float8_e4m3fn")
float8_e5m2 = DType("float8_e5m2")
float8_e8m0fnu = DType("float8_e8m0fnu")
# AMD's fnuz float8 formats (no negative zero, 0x80 is NaN): storage types converted through float.
float8_e4m3fnuz = DType("float8_e4m3fnuz")
float8_e5m2fnuz = DType("float8_e5m2fnuz")
float4_e2m1fn = DType(FP4_DTYPE)  # storage only: tensors of it are torch.uint8, two values a byte
float4_e2m1fnx2 = DType(FP4X2_DTYPE)  # upstream's packed pair: a dtype name (FP4X2_DTYPE)
tfloat32 = DType("tfloat32")  # stored as float32 (T.tfloat32 == "float32")
float = DType("float32")  # noqa: A001 - upstream's T.float, T.half, T.int, T.double aliases
half = DType("float16")
int = DType("int32")  # noqa: A001
double = DType("float64")
short = DType("int16")
long = DType("int64")
uint = DType("uint32")

# torch dtype -> dtype name, upstream's private `_TORCH_DTYPE_TO_STR` (scripts import it: upstream's gemm_sp
# sparse_utils). Built on first use (module __getattr__) so that importing the language does not import torch.
_TORCH_DTYPE_NAMES = ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float16",
                      "bfloat16", "float32", "float64", "float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2",
                      "float8_e5m2fnuz", "float8_e8m0fnu")
_torch_dtype_to_str: dict | None = None


def _build_torch_dtype_to_str() -> dict:
    import torch

    table = {}
    for name in _TORCH_DTYPE_NAMES:  # the names this torch has (older ones lack the wide uints and float8s)
        found = getattr(torch, name, None)
        if isinstance(found, torch.dtype):
            table[found] = name
    if isinstance(getattr(torch, "float4_e2m1fn_x2", None), torch.dtype):
        table[torch.float4_e2m1fn_x2] = FP4X2_DTYPE
    return table


def __getattr__(name: str) -> Any:
    global _torch_dtype_to_str
    if name == "_TORCH_DTYPE_TO_STR":
        if _torch_dtype_to_str is None:
            _torch_dtype_to_str = _build_torch_dtype_to_str()
        return _torch_dtype_to_str
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# Vector types, `T.float32x4` and so on: the lane counts of upstream's table.
VECTOR_DTYPES = {
    f"{base}x{lanes}": DType(f"{base}x{lanes}")
    for base in ("float16", "bfloat16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "uint16",
                 "uint32", "uint64", "float8_e4m3fn", "float8_e5m2")
    for lanes in (2, 4, 8, 16, 32, 64)
}
globals().update(VECTOR_DTYPES)

# Every dtype name `T` has (upstream's `_all_dtypes`, less what MUSA lacks: float6).
_all_dtypes = [
    "bool", "short", "int", "uint", "long", "half", "float", "double", "float16", "bfloat16", "float32", "float64",
    "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", *SUB_BYTE_INT_DTYPES, "float8_e4m3",
    "float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz", "float8_e8m0fnu", "float4_e2m1fn", "float4_e2m1fnx2",
    "tfloat32",
    *VECTOR_DTYPES,
]

__all__ = [
    "DType", "canonical_dtype", "resolve_torch_storage_dtype", "float16", "bfloat16", "float32", "float64", "int8", "int16", "int32", "int64",
    "int4", "uint4", "int2", "uint2", "uint8", "uint16", "uint32", "uint64", "boolean", "float8_e4m3", "float8_e4m3fn", "float8_e5m2",
    "float8_e8m0fnu", "float8_e4m3fnuz", "float8_e5m2fnuz", "float4_e2m1fn", "float4_e2m1fnx2", "tfloat32", "dtype", "float", "half", "int", "double", "short", "long", "uint",
    *VECTOR_DTYPES,
]
