"""`get_lop3_intrin_group`: the name and source of a batch decoder of packed integer weights (upstream's "lop3"
group, named after the PTX instruction its NVIDIA version uses).

Our decoders are in src/tl_templates/musa/quantize.h, portable MUSA C with the same results; the bit layout each
reads is described there. Provided: 4- and 2-bit fields, signed or unsigned, to float16, optionally scaled. The rest
of upstream's group (1-bit fields, zero points, int8/int4 outputs, the warp-scope offset forms) raises
NotImplementedError naming the variant."""

from __future__ import annotations

from ..language.dtypes import dtype as _dtype
from ._intrin_source import INTRIN_SOURCE

_SUPPORTED_BITS = (4, 2)


def get_lop3_intrin_group(out_dtype, source_format="uint", source_bit: int = 4, storage_dtype="int8",
                          with_scaling: bool = False, with_zeros: bool = False, zeros_mode: str = "original",
                          storage_scope: str = "local") -> dict[str, str]:
    """{"func_name": ..., "c_source": ...} for `decode_i{bit}{u|s}_to_f16[_scale](src, dst[, scale], N = 8)`:
    call it with `T.call_extern(func_name, T.access_ptr(packed, "r"), T.access_ptr(decoded, "w")[, scale ptr])`
    after `T.import_source(c_source)`. Weights are expected in interleave_weight's order."""
    out = str(_dtype(out_dtype))
    fmt = str(source_format)
    fmt = {"int32": "int", "uint32": "uint"}.get(fmt, fmt)
    if fmt not in ("int", "uint"):
        raise ValueError(f"get_lop3_intrin_group: source_format must be 'int' or 'uint', got {source_format!r}")
    if with_zeros and fmt == "int":
        raise ValueError("get_lop3_intrin_group: zero points are only defined for unsigned sources")
    variant = f"i{source_bit}{'u' if fmt == 'uint' else 's'}_to_{out}" + ("_scale" if with_scaling else "") + \
        (f"_zeros_{zeros_mode}" if with_zeros else "") + ("_offset" if storage_scope == "warp" and with_scaling else "")
    if out != "float16" or source_bit not in _SUPPORTED_BITS or with_zeros or storage_scope != "local":
        raise NotImplementedError(
            f"get_lop3_intrin_group: the {variant} decoder has no MUSA implementation yet (upstream's is PTX lop3 "
            f"inline assembly, which MUSA cannot compile); provided: {source_bit if source_bit in _SUPPORTED_BITS else 4}"
            "-bit and 2-bit int/uint fields to float16, with or without a scale, local scope. Decode in TIR with "
            "tilelang.quantize._tir_packed_* instead.")
    name = f"decode_i{source_bit}{'u' if fmt == 'uint' else 's'}_to_f16" + ("_scale" if with_scaling else "")
    return {"func_name": name, "c_source": INTRIN_SOURCE}
