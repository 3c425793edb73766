"""Tensor helpers under upstream TileLang's `tilelang.utils.tensor` names: `torch_assert_close` (closeness with an
allowed fraction of mismatches), `map_torch_type` (TileLang dtype string -> torch dtype), `TensorSupplyType` and
`get_tensor_supply` (inputs drawn as the profiler draws them)."""

from __future__ import annotations

from typing import Any, Callable

import torch

from ..launcher.spec import torch_dtype
from ..profiler import TensorSupplyType
from ..profiler.tensor_supply import make_tensor
from .device import get_current_device

__all__ = ["TensorSupplyType", "get_tensor_supply", "is_float8_dtype", "map_torch_type", "torch_assert_close"]

# Older spellings scripts pass (Moore Threads' and upstream's map_torch_type accept them).
_DTYPE_ALIASES = {"e4m3fnuz_float8": "float8_e4m3fnuz", "e5m2_float8": "float8_e5m2", "e4m3_float8": "float8_e4m3"}


def map_torch_type(intype: Any) -> torch.dtype:
    """The torch dtype of a TileLang dtype ("float16", T.bfloat16, "float8_e4m3" -> torch.float8_e4m3fn, ...);
    a torch dtype is returned unchanged. ValueError names the dtype when torch has no counterpart (int4, vectors)."""
    if isinstance(intype, torch.dtype):
        return intype
    name = str(intype)
    return torch_dtype(_DTYPE_ALIASES.get(name, name))


def get_tensor_supply(supply_type: TensorSupplyType = TensorSupplyType.Integer) -> Callable[[Any], torch.Tensor]:
    """A function from a kernel parameter (a `ParamSpec` of `kernel.params`, or anything with a static `shape` and
    a `dtype`) to a tensor on the current device, drawn as the profiler draws `supply_type` inputs."""

    def get_tensor(param: Any) -> torch.Tensor:
        shape = tuple(param.shape)
        if not shape or any(not isinstance(d, int) for d in shape):
            raise ValueError(f"get_tensor_supply: parameter `{getattr(param, 'name', param)}` needs a static shape, "
                             f"got {shape}; a dynamic symbolic shape has no size to draw")
        return make_tensor(shape, map_torch_type(param.dtype), supply_type).to(get_current_device())

    return get_tensor


def is_float8_dtype(dtype: torch.dtype) -> bool:
    """Whether `dtype` is one of torch's 8-bit float formats (e4m3fn, e4m3fnuz, e5m2, e5m2fnuz, e8m0fnu)."""
    return dtype.is_floating_point and dtype.itemsize == 1


def _check_attributes(a: torch.Tensor, b: torch.Tensor, check_device: bool, check_dtype: bool, check_layout: bool,
                      check_stride: bool) -> None:
    def differ(what: str, x: Any, y: Any) -> None:
        raise AssertionError(f"torch_assert_close: {what} differs: {x} != {y}")

    if a.shape != b.shape:
        differ("shape", tuple(a.shape), tuple(b.shape))
    if check_device and a.device != b.device:
        differ("device", a.device, b.device)
    if check_dtype and a.dtype != b.dtype:
        differ("dtype", a.dtype, b.dtype)
    if check_layout and a.layout != b.layout:
        differ("layout", a.layout, b.layout)
    if check_stride and a.layout == torch.strided and b.layout == torch.strided and a.stride() != b.stride():
        differ("stride", a.stride(), b.stride())


def _comparable(t: torch.Tensor) -> torch.Tensor:
    """A dense CPU copy in a dtype `torch.isclose` handles exactly for `t`: complex128, float64 or int64."""
    t = t.detach().to_dense() if t.layout != torch.strided else t.detach()
    t = t.cpu()
    if t.is_complex():
        return t.to(torch.complex128)
    if t.is_floating_point():
        return t.to(torch.float64)  # exact for every float format up to float64, fp8 included
    return t.to(torch.int64)  # bool and integers (uint64 beyond 2**63 wraps, as in upstream)


def _unravel(flat: int, shape: tuple[int, ...]) -> list[int]:
    index = []
    for extent in reversed(shape):
        flat, i = divmod(flat, extent)
        index.append(i)
    return index[::-1]


def torch_assert_close(tensor_a: Any, tensor_b: Any, rtol: float = 1e-2, atol: float = 1e-3,
                       max_mismatched_ratio: float = 0.001, verbose: bool = False, equal_nan: bool = True,
                       check_device: bool = True, check_dtype: bool = True, check_layout: bool = True,
                       check_stride: bool = False, base_name: str = "LHS", ref_name: str = "RHS") -> bool:
    """Assert that `tensor_a` (the result) is close to `tensor_b` (the reference) element-wise,
    |a - b| <= atol + rtol * |b|, except for at most int(numel * max_mismatched_ratio) elements. Returns True.

    Shapes must match; device, dtype, layout (and, with check_stride, strides) too unless their check is off. The
    values are compared in float64 (or int64 / complex128), so tensors of different dtypes compare exactly when
    check_dtype=False. equal_nan: NaN matches NaN. verbose: print the mismatch count even when within the limit.
    The AssertionError gives the count against the limit, the first mismatching index with both values, the
    greatest absolute and relative differences, and both tensors (named `base_name` and `ref_name`).
    Example: torch_assert_close(c, a @ b, rtol=1e-2, atol=1e-2, max_mismatched_ratio=0.01)
    """
    a = tensor_a if isinstance(tensor_a, torch.Tensor) else torch.as_tensor(tensor_a)
    b = tensor_b if isinstance(tensor_b, torch.Tensor) else torch.as_tensor(tensor_b)
    _check_attributes(a, b, check_device, check_dtype, check_layout, check_stride)
    if not 0 <= max_mismatched_ratio <= 1:
        raise ValueError(f"torch_assert_close: max_mismatched_ratio must be in [0, 1], got {max_mismatched_ratio}")
    a, b = _comparable(a), _comparable(b)
    if a.dtype != b.dtype:  # e.g. an integer result against a float reference
        common = torch.promote_types(a.dtype, b.dtype)
        a, b = a.to(common), b.to(common)

    mismatched = ~torch.isclose(a, b, rtol=rtol, atol=atol, equal_nan=equal_nan)
    total = a.numel()
    count = int(mismatched.sum().item())
    allowed = int(total * max_mismatched_ratio)
    if verbose:
        print(f"torch_assert_close: {count} of {total} elements mismatch (allowed: {allowed})")
    if count <= allowed:
        return True

    flat = int(mismatched.reshape(-1).nonzero()[0].item())
    index = _unravel(flat, tuple(a.shape))
    a_val, b_val = a.reshape(-1)[flat].item(), b.reshape(-1)[flat].item()
    diff = (a - b).abs().to(torch.float64)
    finite = torch.isfinite(diff)
    max_abs = diff[finite].max().item() if finite.any() else float("nan")
    rel = diff / (b.abs().to(torch.float64) + 1e-12)
    max_rel = rel[finite].max().item() if finite.any() else float("nan")
    raise AssertionError(
        f"Too many mismatched elements: {count} > {allowed} ({max_mismatched_ratio * 100:.2f}% of {total} allowed, "
        f"got {count / total * 100:.2f}%) at rtol={rtol}, atol={atol}.\n"
        f"First mismatch at index {index}: {base_name}={a_val}, {ref_name}={b_val}, "
        f"abs_diff={abs(a_val - b_val)}\n"
        f"Greatest absolute difference: {max_abs}, greatest relative difference: {max_rel}\n"
        f"{base_name}: {tensor_a}\n{ref_name}: {tensor_b}"
    )
