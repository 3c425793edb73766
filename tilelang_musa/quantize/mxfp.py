"""`get_mxfp_intrin_group`: the name and source of a batch decoder of MXFP4 (E2M1) weights.

Provided: the "twiddling" form to bfloat16, `decode_fp4_to_bf16_twiddling(src, dst, N = 8)` (bit layout in
src/tl_templates/musa/quantize.h; upstream's is PTX prmt/and/mul.bf16x2 inline assembly, ours portable MUSA C with
the same results). Upstream defines no other variant; asking for one raises NotImplementedError."""

from __future__ import annotations

from ..language.dtypes import dtype as _dtype
from ._intrin_source import INTRIN_SOURCE


def get_mxfp_intrin_group(out_dtype="bfloat16", source_format="uint", source_bit: int = 4, storage_dtype="uint8",
                          use_twiddling: bool = False) -> dict[str, str]:
    """{"func_name": ..., "c_source": ...}; call as `T.call_extern(func_name, src_ptr, dst_ptr[, N])` after
    `T.import_source(c_source)`."""
    out = {"float16": "f16", "bfloat16": "bf16"}.get(str(_dtype(out_dtype)))
    if out is None:
        raise ValueError(f"get_mxfp_intrin_group: out_dtype must be float16 or bfloat16, got {out_dtype!r}")
    if str(_dtype(storage_dtype)) not in ("int32", "int8", "uint8"):
        raise ValueError(f"get_mxfp_intrin_group: storage_dtype must be int32, int8 or uint8, got {storage_dtype!r}")
    name = f"decode_fp{source_bit}_to_{out}" + ("_twiddling" if use_twiddling else "")
    if name != "decode_fp4_to_bf16_twiddling":
        raise NotImplementedError(f"get_mxfp_intrin_group: no {name} decoder (only the twiddling FP4 to bfloat16 "
                                  "one exists); decode in TIR with tilelang.quantize._tir_u8_to_f4_to_bf16 instead")
    return {"func_name": name, "c_source": INTRIN_SOURCE}
