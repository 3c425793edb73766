"""C type names of TVM dtypes in generated MUSA C (the same names the C++ device printer uses)."""

from __future__ import annotations

import tvm

_SCALAR = {
    "float32": "float", "float64": "double", "float16": "half_t", "bfloat16": "bfloat16_t",
    "int8": "signed char", "int16": "short", "int32": "int", "int64": "int64_t",
    "uint8": "unsigned char", "uint16": "unsigned short", "uint32": "unsigned int", "uint64": "uint64_t",
    "bool": "bool",
    "float8_e4m3fn": "fp8_e4_t", "float8_e5m2": "fp8_e5_t", "float8_e8m0fnu": "fp8_e8_t",
    "float8_e4m3fnuz": "fp8_e4fnuz_t", "float8_e5m2fnuz": "fp8_e5fnuz_t",
}


def c_type(dtype) -> str:
    dt = tvm.runtime.DataType(str(dtype))
    scalar = str(dtype).split("x")[0] if dt.lanes > 1 else str(dtype)
    if scalar not in _SCALAR:
        raise NotImplementedError(f"dtype {dtype} has no MUSA C type yet")
    name = _SCALAR[scalar]
    return name if dt.lanes == 1 else f"tl::vec<{name}, {dt.lanes}>"
