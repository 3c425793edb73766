"""What the launcher needs to know about a kernel's parameters, and the error it raises when a launch fails.

`ParamSpec` is the contract between the host-wrapper printer (which knows the PrimFunc's parameters) and the
Cython `Launcher` (which checks the caller's tensors against it). Specs are validated on construction, so a bad
spec fails where it is built, not at the first call.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

__all__ = ["KernelLaunchError", "ParamSpec", "SCALAR_DTYPES", "torch_dtype"]


class KernelLaunchError(RuntimeError):
    """A kernel library's `call_packed` returned non-zero; the message carries its `get_last_error()` text."""


# Scalar dtypes the launcher can pack into a C value (see `_launcher.pyx` for the C type of each).
SCALAR_DTYPES = frozenset(
    ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
     "float16", "bfloat16", "float32", "float64"]
)

# TVM dtype string -> name of the torch dtype with the same element layout. TVM's "float8_e4m3" is the OCP E4M3
# format MUSA implements (finite, NaN only), which torch calls float8_e4m3fn. Names are looked up on `torch` so an
# older torch without, say, uint16 only loses that dtype.
_TORCH_DTYPE_NAMES = {
    "bool": "bool",
    "int8": "int8", "int16": "int16", "int32": "int32", "int64": "int64",
    "uint8": "uint8", "uint16": "uint16", "uint32": "uint32", "uint64": "uint64",
    "float16": "float16", "bfloat16": "bfloat16", "float32": "float32", "float64": "float64",
    "float8_e4m3": "float8_e4m3fn", "float8_e4m3fn": "float8_e4m3fn", "float8_e4m3fnuz": "float8_e4m3fnuz",
    "float8_e5m2": "float8_e5m2", "float8_e5m2fnuz": "float8_e5m2fnuz", "float8_e8m0fnu": "float8_e8m0fnu",
}


def torch_dtype(dtype: str) -> torch.dtype:
    """The torch dtype of tensors passed for a TVM `dtype` tensor parameter; ValueError if there is none."""
    name = _TORCH_DTYPE_NAMES.get(dtype)
    if name is None:
        # Sub-byte types (int4, float4_e2m1fn) and vector types (float16x4) have no one-to-one torch dtype.
        raise ValueError(f"no torch dtype corresponds to the TVM dtype {dtype!r}; "
                         f"supported tensor dtypes: {', '.join(sorted(_TORCH_DTYPE_NAMES))}")
    result = getattr(torch, name, None)
    if not isinstance(result, torch.dtype):
        raise ValueError(f"TVM dtype {dtype!r} needs torch.{name}, which torch {torch.__version__} does not have")
    return result


def _check_dim(param: str, what: str, index: int, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise TypeError(f"parameter {param}: {what}[{index}] must be an int or a symbol name (str); "
                        f"got {type(value).__name__} {value!r}")
    if isinstance(value, int) and value < 0:
        raise ValueError(f"parameter {param}: {what}[{index}] = {value} is negative")
    if isinstance(value, str) and not value.isidentifier():
        raise ValueError(f"parameter {param}: {what}[{index}] = {value!r} is not a symbol name (an identifier)")


@dataclass(frozen=True)
class ParamSpec:
    """One kernel parameter, in the order of the library's `call_packed` arguments.

    name      the kernel parameter name, used in every error message
    kind      "tensor" | "scalar"
    dtype     TVM dtype string ("float32", "bfloat16", "int8", "float8_e4m3", ...)
    shape     tensor dims, each an int (static) or a str (symbolic size, e.g. "N", bound from the caller's tensors)
    strides   None: contiguous row-major required; else one int or symbol name per dim (in elements)
    is_output allocated by the launcher (out_idx / T.empty) and returned, not passed by the caller
    align     bytes the data pointer must be a multiple of: the widest vector access the kernel makes to it
    unused    the kernel never accesses the tensor: the caller may pass None for it
    """

    name: str
    kind: str
    dtype: str
    shape: tuple = ()
    strides: tuple | None = None
    is_output: bool = False
    align: int = 1
    unused: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"ParamSpec.name must be a non-empty str; got {self.name!r}")
        if self.kind not in ("tensor", "scalar"):
            raise ValueError(f"parameter {self.name}: kind must be 'tensor' or 'scalar'; got {self.kind!r}")
        if not isinstance(self.dtype, str):
            raise TypeError(f"parameter {self.name}: dtype must be a TVM dtype string; got {self.dtype!r}")
        # Accept lists for convenience; the frozen dataclass stores tuples so specs stay hashable.
        object.__setattr__(self, "shape", tuple(self.shape))
        if self.strides is not None:
            object.__setattr__(self, "strides", tuple(self.strides))
        if not isinstance(self.align, int) or self.align < 1 or self.align & (self.align - 1):
            raise ValueError(f"parameter {self.name}: align must be a power of two; got {self.align!r}")
        if self.kind == "scalar":
            self._check_scalar()
        else:
            self._check_tensor()

    def _check_scalar(self) -> None:
        if self.shape or self.strides is not None:
            raise ValueError(f"scalar parameter {self.name} cannot have a shape or strides")
        if self.is_output:
            raise ValueError(f"scalar parameter {self.name} cannot be an output; only tensors are allocated")
        if self.dtype not in SCALAR_DTYPES:
            raise ValueError(f"scalar parameter {self.name} has unsupported dtype {self.dtype!r}; "
                             f"supported: {', '.join(sorted(SCALAR_DTYPES))}")

    def _check_tensor(self) -> None:
        try:
            torch_dtype(self.dtype)
        except ValueError as err:
            raise ValueError(f"tensor parameter {self.name}: {err}") from None
        for i, dim in enumerate(self.shape):
            _check_dim(self.name, "shape", i, dim)
        if self.strides is not None:
            if len(self.strides) != len(self.shape):
                raise ValueError(f"parameter {self.name}: {len(self.strides)} strides for {len(self.shape)} dims")
            for i, stride in enumerate(self.strides):
                _check_dim(self.name, "strides", i, stride)

    @property
    def symbols(self) -> tuple[str, ...]:
        """Symbol names in shape and strides, in order of first appearance."""
        dims = self.shape + (self.strides or ())
        return tuple(dict.fromkeys(d for d in dims if isinstance(d, str)))

    def describe(self) -> str:
        """`A: Tensor[(N, 128), float32]`, `N: int32`: how error messages and reprs show the parameter."""
        if self.kind == "scalar":
            return f"{self.name}: {self.dtype}"
        dims = ", ".join(str(d) for d in self.shape) + ("," if len(self.shape) == 1 else "")
        extra = "" if self.strides is None else f", strides=({', '.join(str(s) for s in self.strides)})"
        role = " (output)" if self.is_output else ""
        return f"{self.name}: Tensor[({dims}), {self.dtype}{extra}]{role}"
