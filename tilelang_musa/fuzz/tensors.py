"""Inputs, poisoned outputs and comparison against the torch reference, per dtype."""

from __future__ import annotations

import torch

TORCH_DTYPES = {
    "float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16,
    "int32": torch.int32, "int8": torch.int8,
    "float8_e4m3": torch.float8_e4m3fn, "float8_e5m2": torch.float8_e5m2,
}
FLOATS = ("float32", "float16", "bfloat16")  # the float dtypes the elementwise families compute in
INTS = ("int32", "int8")
INT_POISON = {"int32": -123456789, "int8": -128}

# (rtol, atol) per output dtype, as the hand-written tests use them; atol is scaled by max(1, max |reference|)
# so that a long chain of ops on values of a few units is judged relative to its magnitude.
TOLERANCE = {
    "float32": (1e-5, 1e-5), "float16": (1e-2, 1e-2), "bfloat16": (2e-2, 2e-2), "int32": (0, 0), "int8": (0, 0),
}


def random_tensor(shape, dtype: str, gen: torch.Generator, *, integral: bool = False, low: int = -8,
                  high: int = 8) -> torch.Tensor:
    """Fresh random data, never zeros: N(0, 1) floats (integer-valued in [low, high] when `integral`, for
    results that must be exact), integers in [low, high] without 0."""
    shape = tuple(shape)
    if dtype in INTS or integral:
        x = torch.randint(low, high, shape, generator=gen, dtype=torch.int32)
        x = torch.where(x >= 0, x + 1, x)  # [low, high] without 0
        return x.to(TORCH_DTYPES[dtype])
    x = torch.randn(shape, generator=gen, dtype=torch.float32)
    x = torch.where(x == 0, torch.ones_like(x), x)
    return x.to(TORCH_DTYPES[dtype])


def poisoned(shape, dtype: str) -> torch.Tensor:
    """An output the kernel must overwrite: NaN (floats) or a sentinel (integers)."""
    fill = INT_POISON[dtype] if dtype in INTS else float("nan")
    return torch.full(tuple(shape), fill, dtype=TORCH_DTYPES[dtype])


def compare(name: str, got: torch.Tensor, expected: torch.Tensor, rtol: float, atol: float) -> str | None:
    """None when `got` matches `expected`; else a one-line description of the difference."""
    if got.shape != expected.shape:
        return f"{name}: shape {tuple(got.shape)} != expected {tuple(expected.shape)}"
    g, e = got.double(), expected.double()
    if got.dtype.is_floating_point or expected.dtype.is_floating_point:
        finite = e[torch.isfinite(e)]
        scale = max(1.0, finite.abs().max().item()) if finite.numel() else 1.0
        ok = torch.isclose(g, e, rtol=rtol, atol=atol * scale, equal_nan=True)
    else:
        ok = g == e
    if bool(ok.all()):
        return None
    bad = (~ok).nonzero()
    first = tuple(bad[0].tolist())
    nans = int((torch.isnan(g) & ~torch.isnan(e)).sum())
    err = (g - e).abs()
    err = torch.where(ok, torch.zeros_like(err), err)
    worst = tuple((err == err.nan_to_num(0).max()).nonzero()[0].tolist()) if nans < bad.shape[0] else first
    return (f"{name}: {bad.shape[0]}/{ok.numel()} elements differ ({nans} NaN/poison); first at {first}: got "
            f"{g[first].item():.6g}, expected {e[first].item():.6g}; worst at {worst}: got {g[worst].item():.6g}, "
            f"expected {e[worst].item():.6g}")
