"""Inputs a profiler makes for a kernel from its parameter specs (`tensor_supply_type=`).

The distributions are upstream TileLang's, since the tolerances of the scripts users bring were chosen for them
(an fp16-accumulator GEMM checked at 1e-2 passes on uniform(-1, 1) inputs and not on randn):
  Auto     unsigned ints 0..2, float8 the integers -128..127, bool 0/1, fp16/bf16/fp32 uniform(-1, 1),
           other types the integers -2..2
  Integer  as Auto, but every float type the integers -2..2 too
  Uniform  uniform(-1, 1)      Normal  normal(mean=-1, std=1)      Randn  normal(0, 1)
  Zero, One
(int8 under Uniform or Normal is all ones, as upstream's.)
"""

from __future__ import annotations

import enum
import torch

from ..launcher import ParamSpec, torch_dtype


class TensorSupplyType(enum.Enum):
    Integer = 1
    Uniform = 2
    Normal = 3
    Randn = 4
    Zero = 5
    One = 6
    Auto = 7


_UNIT_FLOATS = (torch.float16, torch.bfloat16, torch.float32)


def _integers(shape: tuple, dtype: torch.dtype, low: int, high: int, gen: torch.Generator | None) -> torch.Tensor:
    via = torch.int8 if dtype.is_floating_point and dtype.itemsize == 1 else torch.int64
    return torch.randint(low, high, shape, generator=gen, dtype=via).to(dtype)


def make_tensor(shape: tuple, dtype: torch.dtype, kind: TensorSupplyType,
                generator: torch.Generator | None = None) -> torch.Tensor:
    """One tensor of `shape` and `dtype` drawn as `kind` says (see the module docstring), on the CPU."""
    unsigned = dtype in (torch.uint8, torch.uint16, torch.uint32, torch.uint64)
    float8 = dtype.is_floating_point and dtype.itemsize == 1
    if kind in (TensorSupplyType.Auto, TensorSupplyType.Integer):
        if dtype == torch.bool:
            return _integers(shape, torch.int64, 0, 2, generator).bool()
        if unsigned:
            return _integers(shape, dtype, 0, 3, generator)
        if float8:
            return _integers(shape, dtype, -128, 128, generator)
        if kind == TensorSupplyType.Auto and dtype in _UNIT_FLOATS:
            return torch.empty(shape, dtype=torch.float32).uniform_(-1.0, 1.0, generator=generator).to(dtype)
        return _integers(shape, dtype, -2, 3, generator)
    if kind == TensorSupplyType.Zero:
        return torch.zeros(shape, dtype=dtype)
    if kind == TensorSupplyType.One or (dtype == torch.int8 and kind in (TensorSupplyType.Uniform,
                                                                         TensorSupplyType.Normal)):
        return torch.ones(shape, dtype=dtype)
    values = torch.empty(shape, dtype=torch.float32)
    if kind == TensorSupplyType.Uniform:
        values.uniform_(-1.0, 1.0, generator=generator)
    elif kind == TensorSupplyType.Normal:
        values.normal_(-1.0, 1.0, generator=generator)
    elif kind == TensorSupplyType.Randn:
        values.normal_(0.0, 1.0, generator=generator)
    else:
        raise NotImplementedError(f"tensor supply {kind}")
    return values.to(dtype)


def supply_tensor(spec: ParamSpec, sizes: dict[str, int], kind: TensorSupplyType, device: str,
                  generator: torch.Generator) -> torch.Tensor:
    shape = tuple(sizes[d] if isinstance(d, str) else d for d in spec.shape)
    return make_tensor(shape, torch_dtype(spec.dtype), kind, generator).to(device)
