"""`tilelang.contrib.nvcc` on a MUSA build: the calls upstream scripts make to ask for a compute version,
answered for the MUSA target; the CUDA-only calls raise saying there is no CUDA.

    arch = nvcc.get_target_compute_version()   # "3.1" for mp_31 (the current target), "2.2" for mp_22
    major, minor = nvcc.parse_compute_version(arch)

Upstream examples compare this to CUDA numbers (`float(arch) >= 9.0` for Hopper-only examples); a MUSA compute
version never reaches those, so such examples refuse to run on MUSA, as their CUDA-arch condition says they should.
"""

from __future__ import annotations

from typing import Any

from . import mcc

__all__ = ["compile_cuda", "find_cuda_path", "get_cuda_version", "get_target_compute_version",
           "parse_compute_version"]

NO_CUDA = "no CUDA on a MUSA build"


def get_target_compute_version(target: Any = None) -> str:
    """The compute version of a musa `target` (None: the current target), e.g. "3.1": see
    `tilelang.contrib.mcc.get_musa_compute_version`. A CUDA target is a ValueError (no CUDA on a MUSA build)."""
    return mcc.get_musa_compute_version(target)


def parse_compute_version(compute_version: str) -> tuple[int, int]:
    """"3.1" -> (3, 1); ValueError for anything else."""
    return mcc.parse_musa_compute_version(compute_version)


def find_cuda_path() -> str:
    """Always RuntimeError: a MUSA build uses no CUDA toolkit (mcc is `tilelang.contrib.mcc.find_musa_path`)."""
    raise RuntimeError(f"{NO_CUDA}: there is no CUDA toolkit to find; "
                       "the MUSA SDK is tilelang.contrib.mcc.find_musa_path()")


def get_cuda_version(cuda_path: str | None = None) -> tuple[int, ...]:
    """Always RuntimeError: a MUSA build has no CUDA version (mcc's is `tilelang.contrib.mcc.get_musa_version`)."""
    raise RuntimeError(f"{NO_CUDA}: there is no CUDA version; mcc's is tilelang.contrib.mcc.get_musa_version()")


def compile_cuda(code: str, target_format: str = "ptx", arch: Any = None, options: Any = None,
                 path_target: str | None = None, verbose: bool = False) -> bytearray:
    """Always RuntimeError: a MUSA build does not compile CUDA (MUSA C: `tilelang.contrib.mcc.compile_musa`)."""
    raise RuntimeError(f"{NO_CUDA}: compile MUSA C with tilelang.contrib.mcc.compile_musa(code, target_format='mubin')")
