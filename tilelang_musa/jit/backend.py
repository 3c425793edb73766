"""Choosing the execution backend: "cython" (a MUSA device, built with mcc) or "sim" (the CPU simulator).

$TILELANG_EXECUTION_BACKEND, when set, wins over the script's `execution_backend=` (as Triton's interpreter
switch does), so a device script runs unchanged on a machine without a MUSA GPU:
`TILELANG_EXECUTION_BACKEND=sim python script.py`. Without it, `execution_backend="auto"` (the default) is
"cython" when a MUSA device and mcc are present, else "sim", and says so once per process. Upstream's names of
device launchers ("tvm_ffi", "ctypes", "nvrtc", "torch") mean ours, "cython".
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from functools import cache

from .. import env
from ..errors import TileLangError
from ..target import musa_device_present
from .toolchains import TOOLCHAINS, Toolchain

# Each backend: the toolchain that builds its libraries (the launcher is the Cython one for both).
BACKENDS = {"cython": "mcc", "sim": "sim"}
UPSTREAM_NAMES = ("tvm_ffi", "ctypes", "nvrtc", "torch")  # upstream's device launchers: ours is the Cython one
_announced = False
_noted_overrides: set[tuple[str, str]] = set()


@dataclass(frozen=True)
class Backend:
    name: str
    toolchain: Toolchain

    @property
    def device(self) -> str:
        return self.toolchain.device


def resolve_backend(name: str | None) -> Backend:
    """The backend for the script's `execution_backend=` (None = "auto"), $TILELANG_EXECUTION_BACKEND first."""
    global _announced
    asked = (name or "auto").lower()
    forced = (env.EXECUTION_BACKEND.raw() or "").lower()
    requested = forced if forced and forced != "auto" else asked
    if requested != asked and asked != "auto" and (asked, requested) not in _noted_overrides:
        _noted_overrides.add((asked, requested))
        print(f"[tilelang] {env.EXECUTION_BACKEND.name}={requested} overrides execution_backend={asked!r}",
              file=sys.stderr)
    if requested == "auto":
        if musa_device_present() and TOOLCHAINS["mcc"].available():
            requested = "cython"
        else:
            requested = "sim"
            if not _announced:
                _announced = True
                print("[tilelang] no MUSA device found: kernels run in the CPU simulator (execution_backend='sim')",
                      file=sys.stderr)
    if requested in UPSTREAM_NAMES:
        requested = "cython"
    if requested not in BACKENDS:
        source = f" (from {env.EXECUTION_BACKEND.name})" if requested == forced else ""
        raise TileLangError(f"unknown execution_backend {requested!r}{source}; choose 'auto', 'cython' (MUSA device) "
                            f"or 'sim'")
    return backend_named(requested)


@cache
def backend_named(name: str) -> Backend:
    """The backend called `name` ("cython" or "sim") as it is, with no environment consulted."""
    return Backend(name, TOOLCHAINS[BACKENDS[name]])
