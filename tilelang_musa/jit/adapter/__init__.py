"""Upstream's `tilelang.jit.adapter`: the adapter classes. Upstream has one per execution backend (tvm_ffi,
cython, nvrtc, cutedsl); here one adapter serves every kernel: `KernelAdapter` (kernel_adapter.py)."""

from .base import BaseKernelAdapter
from .kernel_adapter import KernelAdapter, ProgramAdapter

__all__ = ["BaseKernelAdapter", "KernelAdapter", "ProgramAdapter"]
