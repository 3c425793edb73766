"""`func.buffer_map[func.params[i]]` on the PrimFuncs `T.prim_func` returns, as upstream scripts read it.

In the 0.27 wheel a tensor parameter is a Var whose type is its buffer (`BufferType`) and PrimFunc has no
`buffer_map`; `install()` adds it as a read-only property (nothing is changed on the function): each tensor
parameter maps to a `ParamBuffer` with upstream's buffer fields as plain values, scalars and pointers to nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tvm import tirx

from .. import _wheel_patches
from .dtypes import DType


@dataclass(frozen=True)
class ParamBuffer:
    """A tensor parameter's buffer: `dtype` a dtype string, `shape` / `strides` tuples of its extents (ints, or
    expressions of T.dynamic sizes; `strides` empty for a contiguous tensor)."""

    name: str
    dtype: DType
    shape: tuple
    strides: tuple
    scope: str
    data: Any  # the parameter itself

    def __repr__(self) -> str:
        return f"ParamBuffer({self.name}, {str(self.dtype)}, {list(self.shape)})"


def _extent(value: Any) -> Any:
    return int(value) if isinstance(value, (int, tirx.IntImm)) else value


def buffer_map(func: tirx.PrimFunc) -> dict:
    out = {}
    for param in func.params:
        ty = param.ty
        if isinstance(ty, tirx.BufferType):
            out[param] = ParamBuffer(param.name, DType(str(ty.dtype.dtype)), tuple(_extent(d) for d in ty.shape),
                                     tuple(_extent(s) for s in ty.strides), str(ty.storage_scope or "global"), param)
    return out


def install() -> None:
    """Adds `PrimFunc.buffer_map`, once per process, if the wheel has none (_wheel_patches.py makes the change)."""
    _wheel_patches.add_buffer_map(buffer_map, __doc__)


__all__ = ["ParamBuffer", "buffer_map", "install"]
