"""Compiler helpers under upstream TileLang's `tilelang.contrib` path.

    mcc   the MUSA compiler: find it, read its version, compile MUSA C to a device binary, and the compute
          version ("3.1") of a target
    nvcc  the few `tilelang.contrib.nvcc` calls upstream scripts make for a compute version, answered for the
          MUSA target (a MUSA build has no CUDA; the CUDA-only calls raise saying so)
"""

from . import mcc, nvcc
from .mcc import compile_musa

__all__ = ["compile_musa", "mcc", "nvcc"]
