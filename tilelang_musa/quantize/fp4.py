"""4-bit floating-point fields decoded (and encoded) in TIR with shifts, masks and bit reinterpretation.

Two 4-bit layouts appear, bit 3 being the sign in both:
- E2M1 (MXFP4): bits 2-1 the exponent (bias 1), bit 0 the mantissa; decoded by `_tir_u8_to_f4_to_bf16`.
- E3M0: bits 2-0 an exponent (bias 7) and no mantissa: the code is +-2^(e-7), and e = 0 is zero;
  decoded by `_tir_packed_to_fp4_to_f16` and `_tir_u32_to_f4_to_f32`, produced by `_tir_f32_to_uint_to_f4` and
  `_tir_f16_to_uint_to_f4`.
Field `pos` of a word is bits [4 * pos, 4 * pos + 4).
"""

from __future__ import annotations

from typing import Any, Callable

from tvm import tirx

from ._bits import as_dtype, check_dtype, const, field


def _tir_u8_to_f4_to_bf16(nbit: int, val: Any, pos: Any, scale: Any, dtype: str) -> Any:
    """E2M1 field `pos` of a uint8, times 2^scale, as bfloat16.

    bf16 bits: sign << 15 | min(e + 126 + scale, 255) << 7 | m << 6 (the exponent rebias 127 - 1 = 126; the scale,
    an unsigned exponent, is added to the biased exponent and clamped to the largest exponent code). An exponent
    field of 0 is read as a normal number too (code 0 is 2^(scale-1), not zero), as upstream decodes it."""
    if nbit != 4 or str(dtype) != "bfloat16":
        raise ValueError(f"_tir_u8_to_f4_to_bf16 decodes 4-bit fields to bfloat16, got nbit={nbit}, dtype={dtype}")
    check_dtype("_tir_u8_to_f4_to_bf16", val, "uint8")
    u16 = "uint16"
    f4 = field(val, pos, 4, u16)
    sign = f4 >> const(3, u16)
    exponent = ((f4 & const(6, u16)) >> const(1, u16)) + const(126, u16) + as_dtype(scale, u16)
    exponent = tirx.Min(exponent, const(255, u16))
    mantissa = f4 & const(1, u16)
    bits = (sign << const(15, u16)) | (exponent << const(7, u16)) | (mantissa << const(6, u16))
    return tirx.reinterpret("bfloat16", bits)


def _e3m0(f4: Any, work: str, exp_bits: int, bias_gap: int, out: str, out_bits: str) -> Any:
    """An E3M0 code (in integer dtype `work`) as float `out`: exponent e + bias_gap, no mantissa, zero for e = 0."""
    sign = f4 >> const(3, work)
    exponent = f4 & const(7, work)
    man_bits = {"float16": 10, "float32": 23}[out]
    bits = (tirx.Cast(out_bits, exponent + const(bias_gap, work)) << const(man_bits, out_bits)) | \
        (tirx.Cast(out_bits, sign) << const(man_bits + exp_bits, out_bits))
    return tirx.Select(exponent == const(0, work), tirx.const(0, out), tirx.reinterpret(out, bits))


def _tir_packed_to_fp4_to_f16(storage_type: str = "uint", storage_nbit: int = 8) -> Callable[..., Any]:
    """`f(nbit, val, pos, dtype)`: E3M0 field `pos` of a `storage_type + storage_nbit` word as float16
    (+-2^(e-7): the float16 exponent is e + 8; e = 0 gives +0)."""
    storage = f"{storage_type}{storage_nbit}"

    def convert(nbit: int, val: Any, pos: Any, dtype: str) -> Any:
        if nbit != 4 or str(dtype) != "float16":
            raise ValueError(f"_tir_packed_to_fp4_to_f16 decodes 4-bit fields to float16, got {nbit}, {dtype}")
        check_dtype("_tir_packed_to_fp4_to_f16", val, storage)
        return _e3m0(field(val, pos, 4, "uint32"), "uint32", 5, 8, "float16", "uint16")

    return convert


def _tir_u32_to_f4_to_f32(nbit: int, val: Any, pos: Any, dtype: str) -> Any:
    """E3M0 field `pos` of a uint32 as float32 (+-2^(e-7): the float32 exponent is e + 120; e = 0 gives +0)."""
    if nbit != 4 or str(dtype) != "float32":
        raise ValueError(f"_tir_u32_to_f4_to_f32 decodes 4-bit fields to float32, got {nbit}, {dtype}")
    check_dtype("_tir_u32_to_f4_to_f32", val, "uint32")
    return _e3m0(field(val, pos, 4, "uint32"), "uint32", 8, 120, "float32", "uint32")


def _encode_e3m0(bits: Any, man_bits: int, exp_mask: int, bias_gap: int) -> Any:
    """The E3M0 code (uint32) of a float given as uint32 bits: e = min(E - bias_gap + top mantissa bit, 7) above
    the gap (rounding half up on the mantissa), 1 at E = bias_gap, 0 below (flush to zero)."""
    u32 = "uint32"
    top = (bits >> const(man_bits - 1, u32)) & const(1, u32)
    exponent = (bits >> const(man_bits, u32)) & const(exp_mask, u32)
    sign = bits >> const(man_bits + (exp_mask.bit_length()), u32)
    gap = const(bias_gap, u32)
    e4 = tirx.Select(exponent > gap, tirx.Min(exponent - gap + top, const(7, u32)),
                     tirx.Select(exponent == gap, const(1, u32), const(0, u32)))
    return (sign << const(3, u32)) | e4


def _tir_f32_to_uint_to_f4(val: Any) -> Any:
    """A float32 as its E3M0 code (uint32, sign in bit 3)."""
    check_dtype("_tir_f32_to_uint_to_f4", val, "float32")
    return _encode_e3m0(tirx.reinterpret("uint32", val), 23, 255, 120)


def _tir_f16_to_uint_to_f4(val: Any) -> Any:
    """A float16 as its E3M0 code (uint32, sign in bit 3)."""
    check_dtype("_tir_f16_to_uint_to_f4", val, "float16")
    return _encode_e3m0(tirx.Cast("uint32", tirx.reinterpret("uint16", val)), 10, 31, 8)


__all__ = ["_tir_u8_to_f4_to_bf16", "_tir_packed_to_fp4_to_f16", "_tir_u32_to_f4_to_f32", "_tir_f32_to_uint_to_f4",
           "_tir_f16_to_uint_to_f4"]
