"""tilelang.quantize: decoders of packed low-bit weights for dequantize-GEMM kernels.

- TIR expression builders (`_tir_*`): one element decoded with shifts, masks, casts and reinterpret, portable to
  every target: packed_int.py (integer fields), fp4.py (4-bit floats), fp8.py (8-bit floats), bf16_pack.py.
- Intrinsic groups (`get_lop3_intrin_group`, `get_mxfp_intrin_group`): name and source of batch decoders called with
  `T.import_source` + `T.call_extern`, implemented in src/tl_templates/musa/quantize.h.
- utils.py: host-side packing and interleaving of weights (torch).
"""

from .bf16_pack import _tir_f32x2_to_bf16x2_to_u32, _tir_u32_to_bf16x2_to_f32x2
from .fp4 import (
    _tir_f16_to_uint_to_f4, _tir_f32_to_uint_to_f4, _tir_packed_to_fp4_to_f16, _tir_u8_to_f4_to_bf16,
    _tir_u32_to_f4_to_f32,
)
from .fp8 import _tir_u8_to_f8_e4m3_to_f16, _tir_u8_to_f8_e5m2_to_f16
from .lop3 import get_lop3_intrin_group
from .mxfp import get_mxfp_intrin_group
from .packed_int import (
    _tir_packed_int_to_int_convert, _tir_packed_int_to_int_to_float, _tir_packed_to_signed_convert,
    _tir_packed_to_unsigned_convert, _tir_packed_to_unsigned_convert_with_zeros, _tir_packed_uint_to_uint_to_float,
    _tir_u32_to_int_to_float,
)
from .utils import gen_quant4, general_compress, interleave_weight

__all__ = [
    "_tir_f16_to_uint_to_f4", "_tir_f32_to_uint_to_f4", "_tir_f32x2_to_bf16x2_to_u32", "_tir_packed_int_to_int_convert",
    "_tir_packed_int_to_int_to_float", "_tir_packed_to_fp4_to_f16", "_tir_packed_to_signed_convert",
    "_tir_packed_to_unsigned_convert", "_tir_packed_to_unsigned_convert_with_zeros",
    "_tir_packed_uint_to_uint_to_float", "_tir_u32_to_bf16x2_to_f32x2", "_tir_u32_to_f4_to_f32",
    "_tir_u32_to_int_to_float", "_tir_u8_to_f4_to_bf16", "_tir_u8_to_f8_e4m3_to_f16", "_tir_u8_to_f8_e5m2_to_f16",
    "gen_quant4", "general_compress", "get_lop3_intrin_group", "get_mxfp_intrin_group", "interleave_weight",
]
