"""Code generation: the device kernel (C++ printer through tvm-ffi) and the host wrapper (Python)."""

from .source import KernelSource, generate

__all__ = ["KernelSource", "generate"]
