"""8-bit floats (one per uint8) widened to float16 in TIR by moving bits, no table and no float arithmetic."""

from __future__ import annotations

from typing import Any

from tvm import tirx

from ._bits import as_dtype, const


def _tir_u8_to_f8_e4m3_to_f16(nbit: int, val: Any, dtype: str) -> Any:
    """E4M3 bits s eeee mmm as float16: sign to bit 15, exponent rebased by +8 (bias 7 -> 15) into bits 14-10,
    mantissa to bits 9-7. Every code is read as a normal number (e = 0 gives 2^-7 * 1.m, not a subnormal; 0x7F is
    480, not NaN): the fast path of upstream's decoder, exact for normal E4M3 values."""
    if nbit != 8 or str(dtype) != "float16":
        raise ValueError(f"_tir_u8_to_f8_e4m3_to_f16 decodes 8-bit codes to float16, got {nbit}, {dtype}")
    u16 = "uint16"
    code = as_dtype(val, u16)
    sign = (code >> const(7, u16)) << const(15, u16)
    exponent = ((code >> const(3, u16)) & const(15, u16)) + const(8, u16)
    mantissa = code & const(7, u16)
    return tirx.reinterpret("float16", sign | (exponent << const(10, u16)) | (mantissa << const(7, u16)))


def _tir_u8_to_f8_e5m2_to_f16(nbit: int, val: Any, dtype: str) -> Any:
    """E5M2 bits are the top byte of the float16 of the same value (same exponent width and bias): shift left 8."""
    if nbit != 8 or str(dtype) != "float16":
        raise ValueError(f"_tir_u8_to_f8_e5m2_to_f16 decodes 8-bit codes to float16, got {nbit}, {dtype}")
    return tirx.reinterpret("float16", as_dtype(val, "uint16") << const(8, "uint16"))
