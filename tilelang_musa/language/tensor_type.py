"""`TensorType`: what a tensor annotation (`T.Tensor((M, K), dtype)`) stands for, shared by the annotations
(proxy.py) and the views that accept an annotation as their source (view.py)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TensorType:
    """The type of a tensor parameter: shape (ints or size expressions), dtype, optional strides."""

    shape: tuple
    dtype: str
    strides: tuple | None = None
    scope: str = "global"
    proxy: str = "T.Tensor"  # the annotation that made it (T.SharedBuffer, ... annotate @T.macro parameters)

    def __repr__(self) -> str:
        return f"T.Tensor({self.shape}, {self.dtype!r})"
