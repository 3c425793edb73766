"""Upstream's module path for the TIR decoders (`from tilelang.quantize.quantization import _tir_...`); they live by
concept in packed_int.py, fp4.py, fp8.py and bf16_pack.py."""

from .bf16_pack import _tir_f32x2_to_bf16x2_to_u32, _tir_u32_to_bf16x2_to_f32x2  # noqa: F401
from .fp4 import (  # noqa: F401
    _tir_f16_to_uint_to_f4, _tir_f32_to_uint_to_f4, _tir_packed_to_fp4_to_f16, _tir_u8_to_f4_to_bf16,
    _tir_u32_to_f4_to_f32,
)
from .fp8 import _tir_u8_to_f8_e4m3_to_f16, _tir_u8_to_f8_e5m2_to_f16  # noqa: F401
from .packed_int import (  # noqa: F401
    _tir_packed_int_to_int_convert, _tir_packed_int_to_int_to_float, _tir_packed_to_signed_convert,
    _tir_packed_to_unsigned_convert, _tir_packed_to_unsigned_convert_with_zeros, _tir_packed_uint_to_uint_to_float,
    _tir_u32_to_int_to_float,
)
