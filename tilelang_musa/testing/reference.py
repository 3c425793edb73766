"""Reference results for kernel tests: matmuls with a chosen accumulation and output dtype, and the output cast
(float8 outputs saturate to the format's finite range, as kernels that write them with satfinite conversions)."""

from __future__ import annotations

import torch

from ..utils.tensor import is_float8_dtype

__all__ = ["cast_to_output_dtype", "is_fp8_dtype", "matmul_naive", "matmul_reference"]


def is_fp8_dtype(dtype: torch.dtype) -> bool:
    """Whether `dtype` is one of torch's float8 formats."""
    return is_float8_dtype(dtype)


def cast_to_output_dtype(tensor: torch.Tensor, out_dtype: torch.dtype, *, saturate_fp8: bool = True) -> torch.Tensor:
    """`tensor` cast to `out_dtype`; for a float8 `out_dtype` with saturate_fp8, values beyond the format's finite
    range are clamped to it first (a plain cast would give NaN or infinity)."""
    if saturate_fp8 and is_fp8_dtype(out_dtype):
        info = torch.finfo(out_dtype)
        tensor = tensor.clamp(min=info.min, max=info.max)
    return tensor.to(out_dtype)


def matmul_reference(a: torch.Tensor, b: torch.Tensor, *, accum_dtype: torch.dtype = torch.float32,
                     out_dtype: torch.dtype | None = None, saturate_fp8: bool = True) -> torch.Tensor:
    """a @ b computed in `accum_dtype` (inputs converted first, so float8 inputs work), then cast to `out_dtype`
    (None: left in accum_dtype) by `cast_to_output_dtype`. Example: matmul_reference(a, b, out_dtype=torch.float16)"""
    result = torch.matmul(a.to(accum_dtype), b.to(accum_dtype))
    return result if out_dtype is None else cast_to_output_dtype(result, out_dtype, saturate_fp8=saturate_fp8)


def matmul_naive(A: torch.Tensor, B: torch.Tensor, accum_dtype: torch.dtype, out_dtype: torch.dtype) -> torch.Tensor:
    """A (M, K) @ B (K, N) accumulated one k at a time in `accum_dtype`, rounding after every step as a kernel with
    an `accum_dtype` accumulator does (float16 accumulation drifts from a float32 matmul; this follows it), then
    cast to `out_dtype`. Pass A and B already transposed as the kernel reads them."""
    if A.dim() != 2 or B.dim() != 2 or A.shape[1] != B.shape[0]:
        raise ValueError(f"matmul_naive: needs A (M, K) and B (K, N); got {tuple(A.shape)} and {tuple(B.shape)}")
    acc = torch.zeros((A.shape[0], B.shape[1]), dtype=accum_dtype, device=A.device)
    a, b = A.to(accum_dtype), B.to(accum_dtype)
    for k in range(A.shape[1]):
        acc.addcmul_(a[:, k:k + 1], b[k:k + 1, :])  # acc += a[:, k] (outer) b[k, :], one rounding per step
    return acc.to(out_dtype)
