"""Choosing the execution backend: "cython" (a MUSA device, built with mcc) or "sim" (the CPU simulator).

`execution_backend="auto"` (the default) takes $TILELANG_EXECUTION_BACKEND if set, else "cython" when a
MUSA device and mcc are present, else "sim", and says so once per process.
"""

from __future__ import annotations

import importlib.util
import sys
from dataclasses import dataclass
from functools import cache

from .. import env
from ..errors import TileLangError
from .toolchains import TOOLCHAINS, Toolchain

# Each backend: the toolchain that builds its libraries (the launcher is the Cython one for both).
BACKENDS = {"cython": "mcc", "sim": "sim"}
_announced = False


@dataclass(frozen=True)
class Backend:
    name: str
    toolchain: Toolchain

    @property
    def device(self) -> str:
        return self.toolchain.device


@cache
def musa_device_present() -> bool:
    if importlib.util.find_spec("torch_musa") is None:
        return False
    try:
        import torch
        import torch_musa  # noqa: F401

        return bool(torch.musa.is_available())
    except Exception:  # noqa: BLE001 - a broken torch_musa install means: no device
        return False


def resolve_backend(name: str | None) -> Backend:
    global _announced
    requested = (name or "auto").lower()
    if requested == "auto":
        forced = env.EXECUTION_BACKEND.raw()
        if forced:
            requested = forced.lower()
        elif musa_device_present() and TOOLCHAINS["mcc"].available():
            requested = "cython"
        else:
            requested = "sim"
            if not _announced:
                _announced = True
                print("[tilelang] no MUSA device found: kernels run in the CPU simulator (execution_backend='sim')",
                      file=sys.stderr)
    if requested in ("tvm_ffi", "ctypes", "nvrtc", "torch"):
        requested = "cython"  # upstream names of device launchers: ours is the Cython one
    if requested not in BACKENDS:
        raise TileLangError(f"unknown execution_backend {name!r}; choose 'auto', 'cython' (MUSA device) or 'sim'")
    return Backend(requested, TOOLCHAINS[BACKENDS[requested]])
