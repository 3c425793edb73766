"""Integer fields packed in a storage word, decoded in TIR: element `pos` of a word holds bits
[pos * nbit, pos * nbit + nbit) (element 0 in the least significant bits). Each factory takes the storage type
(`storage_type` + `storage_nbit`, e.g. "int" + 8) and returns `f(nbit, val, pos, dtype)`; `val` must be of that
storage type."""

from __future__ import annotations

from typing import Any, Callable

from tvm import tirx

from ._bits import as_dtype, check_dtype, const, field


def _storage(storage_type: str, storage_nbit: int) -> str:
    return f"{storage_type}{storage_nbit}"


def _tir_packed_to_unsigned_convert(storage_type: str = "uint", storage_nbit: int = 8) -> Callable[..., Any]:
    """The field as an unsigned integer (0 .. 2^nbit - 1), cast to `dtype`."""
    storage = _storage(storage_type, storage_nbit)

    def convert(nbit: int, val: Any, pos: Any, dtype: str) -> Any:
        check_dtype("_tir_packed_to_unsigned_convert", val, storage)
        return tirx.Cast(dtype, field(val, pos, nbit, storage))

    return convert


def _tir_packed_to_signed_convert(storage_type: str = "uint", storage_nbit: int = 8) -> Callable[..., Any]:
    """The field read in offset binary: its unsigned value minus 2^(nbit-1) (-2^(nbit-1) .. 2^(nbit-1) - 1)."""
    storage = _storage(storage_type, storage_nbit)

    def convert(nbit: int, val: Any, pos: Any, dtype: str) -> Any:
        check_dtype("_tir_packed_to_signed_convert", val, storage)
        return tirx.Cast(dtype, field(val, pos, nbit, "uint32")) - const(1 << (nbit - 1), dtype)

    return convert


def _tir_packed_to_unsigned_convert_with_zeros(storage_type: str = "uint", storage_nbit: int = 8) -> Callable[..., Any]:
    """`f(nbit, val, pos, zero, dtype)`: the unsigned field minus the zero point `zero`, computed in `dtype` (so an
    unsigned storage type does not wrap below zero)."""
    storage = _storage(storage_type, storage_nbit)

    def convert(nbit: int, val: Any, pos: Any, zero: Any, dtype: str) -> Any:
        check_dtype("_tir_packed_to_unsigned_convert_with_zeros", val, storage)
        return tirx.Cast(dtype, field(val, pos, nbit, storage)) - as_dtype(zero, dtype)

    return convert


def _sign_extend(unsigned: Any, nbit: int) -> Any:
    """An int32 field of `nbit` bits read as two's complement (shift its sign bit to bit 31 and back)."""
    shift = const(32 - nbit, "int32")
    return (as_dtype(unsigned, "int32") << shift) >> shift


def _tir_packed_int_to_int_convert(storage_type: str = "uint", storage_nbit: int = 8) -> Callable[..., Any]:
    """The field read as an nbit two's-complement integer (-2^(nbit-1) .. 2^(nbit-1) - 1), cast to `dtype`."""
    storage = _storage(storage_type, storage_nbit)

    def convert(nbit: int, val: Any, pos: Any, dtype: str) -> Any:
        check_dtype("_tir_packed_int_to_int_convert", val, storage)
        return tirx.Cast(dtype, _sign_extend(field(val, pos, nbit, "int32"), nbit))

    return convert


def _tir_packed_int_to_int_to_float(storage_nbit: int) -> Callable[..., Any]:
    """As `_tir_packed_int_to_int_convert("int", storage_nbit)`: two's-complement fields of a signed word."""
    return _tir_packed_int_to_int_convert("int", storage_nbit)


def _tir_packed_uint_to_uint_to_float(storage_nbit: int) -> Callable[..., Any]:
    """Fields of an unsigned word, biased by 2^(nbit-1) - 1 (value - 7 for 4-bit fields), cast to `dtype`."""
    storage = _storage("uint", storage_nbit)

    def convert(nbit: int, val: Any, pos: Any, dtype: str) -> Any:
        check_dtype("_tir_packed_uint_to_uint_to_float", val, storage)
        return tirx.Cast(dtype, field(val, pos, nbit, "uint32")) - const((1 << (nbit - 1)) - 1, dtype)

    return convert


def _tir_u32_to_int_to_float(nbit: int, val: Any, pos: Any, dtype: str) -> Any:
    """Field `pos` of a uint32 read as an nbit two's-complement integer, cast to `dtype`."""
    check_dtype("_tir_u32_to_int_to_float", val, "uint32")
    return tirx.Cast(dtype, _sign_extend(field(val, pos, nbit, "uint32"), nbit))
