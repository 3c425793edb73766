"""torch dtype -> TileLang dtype string, for tests that build kernels from the dtypes of their torch inputs."""

from __future__ import annotations

import torch

__all__ = ["get_tilelang_type"]

# TileLang spells torch's float8_e4m3fn "float8_e4m3" (the OCP E4M3 format MUSA implements: finite, NaN only).
_TILELANG_NAMES = {"float8_e4m3fn": "float8_e4m3"}


def get_tilelang_type(elem_type: torch.dtype) -> str:
    """The TileLang dtype string of a torch dtype: torch.float16 -> "float16", torch.float8_e4m3fn ->
    "float8_e4m3". A string is returned unchanged; TypeError for anything else."""
    if isinstance(elem_type, str):
        return elem_type
    if not isinstance(elem_type, torch.dtype):
        raise TypeError(f"get_tilelang_type: expected a torch.dtype, got {type(elem_type).__name__} {elem_type!r}")
    name = str(elem_type).removeprefix("torch.")
    return _TILELANG_NAMES.get(name, name)
