"""The int4 / uint4 elements of packed storage (two a byte, element 2k in the low nibble of byte k), for
LowerFP4Storage (lower_fp4_storage.py), through the helpers of tl_templates/musa/common.h.

A read extracts the nibble, `tl::int4_nibble(byte, odd)`, and for int4 extends its sign (`n - 2 * (n & 8)`). A write,
`tl::int4_nibble_store(&byte, odd, code)`, is a read-modify-write of the byte: unlike fp4's atomic nibble store, two
threads writing the two nibbles of one byte race, and checked mode's race detector reports it (its print of the
helpers' byte tracks the nibble: writing one half of a byte is no read of the other, uninitialised, half).
"""

from __future__ import annotations

from typing import Any

from tvm import tirx


def _int32(value: Any) -> Any:
    return value if str(value.ty.dtype) == "int32" else tirx.Cast("int32", value)


def sign_extended(code: Any, signed: bool) -> Any:
    """The int32 value of a 4-bit code (0..15): itself for uint4, -8..7 for int4."""
    if not signed:
        return code
    return code - tirx.shift_left(tirx.bitwise_and(code, tirx.const(8, "int32")), tirx.const(1, "int32"))


def nibble_code(byte: Any, odd: Any) -> Any:
    """The 4-bit code (int32, 0..15) of nibble `odd` (0 low, 1 high) of `byte` (a load of the byte)."""
    return tirx.call_extern("int32", "tl::int4_nibble", byte, odd)


def wrapped_code(value: Any) -> Any:
    """The low 4 bits of an integer value (C's conversion to a 4-bit type, two's complement), as int32."""
    return tirx.bitwise_and(_int32(value), tirx.const(15, "int32"))


def nibble_store(byte: Any, odd: Any, code: Any) -> Any:
    """Nibble `odd` of `byte` (a load of the byte) set to `code` (int32, 0..15), the other nibble kept."""
    return tirx.Evaluate(tirx.call_extern("int32", "tl::int4_nibble_store", tirx.address_of(byte), odd, code))
