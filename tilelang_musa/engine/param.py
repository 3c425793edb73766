"""Upstream's `tilelang.engine.param.KernelParam`: a kernel parameter's dtype and shape, as scripts annotate the
parameters they materialize inputs for (`from tilelang.engine.param import KernelParam`). A JITKernel's own
`params` are the launcher's ParamSpec records, which carry the same `dtype` (a TVM dtype string) and `shape`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from tvm import tirx

from ..language.dtypes import DType


@dataclass
class KernelParam:
    dtype: Any  # the TVM dtype (buffer.dtype / var.dtype)
    shape: list  # ints, and the variables of symbolic sizes

    @classmethod
    def from_buffer(cls, buffer: tirx.Buffer) -> KernelParam:
        shape = []
        for dim in buffer.shape:
            if isinstance(dim, (int, tirx.IntImm)):  # the stock wheel's shapes may hold plain ints
                shape.append(int(dim))
            elif isinstance(dim, tirx.PrimExpr):
                shape.append(dim)
            else:
                raise ValueError(f"Unsupported dimension type: {type(dim)} {dim}")
        return cls(buffer.dtype, shape)

    @classmethod
    def from_var(cls, var: tirx.Var) -> KernelParam:
        return cls(var.dtype, [])

    def is_scalar(self) -> bool:
        return len(self.shape) == 0

    def is_unsigned(self) -> bool:
        return str(self.dtype).startswith("uint")

    def is_float8(self) -> bool:
        return str(self.dtype).startswith("float8")

    def is_float4(self) -> bool:
        return str(self.dtype).startswith("float4")

    def is_boolean(self) -> bool:
        return str(self.dtype).startswith("bool")

    def tilelang_dtype(self) -> DType:
        return DType(str(self.dtype))

    def torch_dtype(self) -> torch.dtype:
        return self.tilelang_dtype().as_torch()
