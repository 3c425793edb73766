"""Upstream TileLang constructs that select NVIDIA-only hardware: each one is a clear error on MUSA (the
user's guide lists them as unsupported), never a silent no-op."""

from __future__ import annotations

from typing import Any, Callable

from ..errors import UnsupportedError
from .builder import current_loc

_NVIDIA_ONLY = {
    "alloc_tmem": "Blackwell tensor memory",
    "alloc_descriptor": "Hopper/Blackwell matrix descriptors",
    "alloc_wgmma_desc": "Hopper WGMMA descriptors",
    "alloc_tcgen05_smem_desc": "Blackwell tcgen05 descriptors",
    "alloc_tcgen05_instr_desc": "Blackwell tcgen05 descriptors",
    "ptx_cp_async": ("raw PTX cp.async between access pointers; copy the regions with T.async_copy (MUSA's LDLMS) "
                     "and wait with T.ptx_wait_group"),
}


def _reject(name: str, what: str) -> Callable[..., Any]:
    def construct(*args: Any, **kwargs: Any) -> Any:
        raise UnsupportedError(f"T.{name} ({what}) is NVIDIA-specific and not supported by TileLang-MUSA",
                               current_loc())

    construct.__name__ = name
    construct.__doc__ = f"Not supported on MUSA: {what}."
    return construct


UNSUPPORTED = {name: _reject(name, what) for name, what in _NVIDIA_ONLY.items()}


