"""(rtol, atol) per dtype for comparing kernel results, by named profile: `get_tolerance(torch.float16)`.

    baseline        a result rounded once to the dtype: about one unit in the last place at 1.0 (the dtype's
                    machine epsilon), so float16 1e-3, bfloat16 7.9e-3, float8_e4m3fn 0.125
    gemm_contract   a GEMM whose output is cast to the input dtype after a wider accumulation: as baseline
    gemm_algorithm  a GEMM checked against a float32 oracle before its output cast (accumulation order differs
                    from the oracle's): float16 2e-2, bfloat16 5e-2, float8_e4m3fn 0.25
The float32/float16/bfloat16/float8_e4m3fn numbers are TileLang-MUSA's, so tests written against its
tilelang.testing keep their meaning here; float64 and float8_e5m2 follow the same rules.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

import torch

__all__ = ["TOLERANCE_PROFILES", "get_tolerance", "list_tolerance_profiles"]

ToleranceMap = Mapping[torch.dtype, tuple[float, float]]

_BASELINE: ToleranceMap = MappingProxyType({
    torch.float64: (1e-7, 1e-7),
    torch.float32: (1e-5, 3e-5),
    torch.float16: (1e-3, 1e-3),
    torch.bfloat16: (7.9e-3, 7.9e-3),
    torch.float8_e4m3fn: (1.25e-1, 1.25e-1),
    torch.float8_e5m2: (2.5e-1, 2.5e-1),
})

TOLERANCE_PROFILES: Mapping[str, ToleranceMap] = MappingProxyType({
    "baseline": _BASELINE,
    "gemm_contract": _BASELINE,
    "gemm_algorithm": MappingProxyType({
        torch.float64: (1e-7, 1e-7),
        torch.float32: (1e-5, 3e-5),
        torch.float16: (2e-2, 2e-2),
        torch.bfloat16: (5e-2, 5e-2),
        torch.float8_e4m3fn: (2.5e-1, 2.5e-1),
        torch.float8_e5m2: (5e-1, 5e-1),
    }),
})


def get_tolerance(dtype: torch.dtype, profile: str = "baseline", *,
                  overrides: ToleranceMap | None = None) -> tuple[float, float]:
    """(rtol, atol) for `dtype` under `profile`; `overrides` (dtype -> (rtol, atol)) takes precedence.
    ValueError for an unknown profile (listing the known ones), KeyError for a dtype the profile does not cover."""
    if profile not in TOLERANCE_PROFILES:
        raise ValueError(f"unknown tolerance profile {profile!r}; known: {', '.join(list_tolerance_profiles())}")
    if overrides is not None and dtype in overrides:
        return tuple(overrides[dtype])
    table = TOLERANCE_PROFILES[profile]
    if dtype not in table:
        raise KeyError(f"tolerance profile {profile!r} has no entry for {dtype}; it covers "
                       f"{', '.join(str(d) for d in table)} (pass overrides= for others)")
    return table[dtype]


def list_tolerance_profiles() -> tuple[str, ...]:
    """The profile names, sorted."""
    return tuple(sorted(TOLERANCE_PROFILES))
