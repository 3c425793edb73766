"""`assert_allclose`: numpy's closeness check for any array-like result, torch tensors of every dtype included."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

__all__ = ["assert_allclose"]


def _to_numpy(x: Any) -> np.ndarray:
    if isinstance(x, torch.Tensor):
        t = x.detach().cpu()
        if t.is_floating_point():
            t = t.to(torch.float64)  # numpy has no bfloat16 / float8; float64 holds them exactly
        elif t.is_complex():
            t = t.to(torch.complex128)
        return t.numpy()
    if hasattr(x, "numpy") and not isinstance(x, np.ndarray):  # tvm runtime tensors
        return np.asarray(x.numpy())
    return np.asarray(x)


def assert_allclose(actual: Any, desired: Any, rtol: float = 1e-7, atol: float = 0.0, equal_nan: bool = True,
                    err_msg: str = "") -> None:
    """Assert |actual - desired| <= atol + rtol * |desired| everywhere (numpy.testing.assert_allclose, as
    tvm.testing.assert_allclose), after checking the shapes are equal (no broadcasting). Accepts torch tensors
    (any device and dtype), numpy arrays, tvm tensors, lists and scalars."""
    a, d = _to_numpy(actual), _to_numpy(desired)
    if a.shape != d.shape:
        suffix = f"\n{err_msg}" if err_msg else ""
        raise AssertionError(f"assert_allclose: shapes differ: {a.shape} != {d.shape}{suffix}")
    np.testing.assert_allclose(a, d, rtol=rtol, atol=atol, equal_nan=equal_nan, err_msg=err_msg, verbose=True)
