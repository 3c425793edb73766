"""`determine_fp8_type`: the FP8 dtype a portable script should use on this platform (upstream's helper).

MUSA implements the OCP formats, float8_e4m3fn and float8_e5m2 (no fnuz variants as on most ROCm GPUs), on
every arch.
"""

from __future__ import annotations

from typing import Any, Literal

from .dtypes import float8_e4m3fn, float8_e5m2

_FORMATS = {"e4m3": float8_e4m3fn, "e5m2": float8_e5m2}


def determine_fp8_type(fp8_format: Literal["e4m3", "e5m2"] = "e4m3") -> str:
    """`T.float8_e4m3fn` for "e4m3", `T.float8_e5m2` for "e5m2"."""
    if fp8_format not in _FORMATS:
        raise ValueError(f"Unsupported FP8 format: {fp8_format!r} (expected 'e4m3' or 'e5m2')")
    return _FORMATS[fp8_format]


def determine_torch_fp8_type(fp8_format: Literal["e4m3", "e5m2"] = "e4m3") -> Any:
    """The torch dtype of `determine_fp8_type(fp8_format)`."""
    return determine_fp8_type(fp8_format).as_torch()
