"""Inputs a profiler makes for a kernel from its parameter specs (`tensor_supply_type=`)."""

from __future__ import annotations

import enum

import torch

from ..jit.launcher import ParamSpec, torch_dtype


class TensorSupplyType(enum.Enum):
    Integer = 1
    Uniform = 2
    Normal = 3
    Randn = 4
    Zero = 5
    One = 6
    Auto = 7


def supply_tensor(spec: ParamSpec, sizes: dict[str, int], kind: TensorSupplyType, device: str,
                  generator: torch.Generator) -> torch.Tensor:
    shape = tuple(sizes[d] if isinstance(d, str) else d for d in spec.shape)
    dtype = torch_dtype(spec.dtype)
    if kind == TensorSupplyType.Auto:
        kind = TensorSupplyType.Integer if not dtype.is_floating_point else TensorSupplyType.Normal
    if kind == TensorSupplyType.Zero:
        return torch.zeros(shape, dtype=dtype, device=device)
    if kind == TensorSupplyType.One:
        return torch.ones(shape, dtype=dtype, device=device)
    if kind == TensorSupplyType.Integer or not dtype.is_floating_point:
        if dtype == torch.bool:
            return torch.randint(0, 2, shape, generator=generator).bool().to(device)
        return torch.randint(-2, 3, shape, generator=generator).to(dtype).to(device)
    if kind == TensorSupplyType.Uniform:
        return torch.rand(shape, generator=generator).to(dtype).to(device)
    return torch.randn(shape, generator=generator).to(dtype).to(device)
