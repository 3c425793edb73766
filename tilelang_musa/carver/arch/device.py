"""The device a config helper tunes for (upstream's `tilelang.carver.arch.CUDA(target)` / `CDNA(target)`).

Upstream scripts pick `CUDA("cuda") if torch.version.hip is None else CDNA("hip")`: "the GPU this runs on". Here
that GPU is a MUSA one, so `CUDA` (alias of `MUSA`) describes the MUSA arch of the target (the device's arch when
none is named); `CDNA` is an AMD device and an error.
"""

from __future__ import annotations

from typing import Any

from ...errors import UnsupportedError
from ...target import arch_of, determine_target
from .driver import get_num_sms


class MUSA:
    """A MUSA arch as the config helper sees it: `platform`, `arch` (e.g. "mp_31"), `warp_size`,
    `smem_cap` (shared memory per block, bytes), `compute_max_core` (multiprocessors) and `sm_partition`."""

    platform = "MUSA"

    def __init__(self, target: Any = "auto") -> None:
        if isinstance(target, str) and target in ("cuda", "musa"):
            target = "auto"  # "the GPU in use"
        self.target = determine_target(target)
        info = arch_of(self.target)
        self.arch = info.name
        self.warp_size = info.warp_size
        self.smem_cap = info.max_shared_memory_per_block
        self.compute_max_core = get_num_sms()
        self.sm_partition = 4

    def __repr__(self) -> str:
        return f"MUSA({self.arch})"


CUDA = MUSA  # upstream's name for "the (non-AMD) GPU in use"


def CDNA(target: Any = "hip") -> None:  # noqa: N802 - upstream's class name
    raise UnsupportedError(f"tilelang.carver.arch.CDNA({target!r}): an AMD device; TileLang-MUSA tunes for the "
                           "MUSA device in use (tilelang.carver.arch.CUDA / MUSA)")


def auto_infer_current_arch() -> MUSA:
    """Upstream's "the arch of the GPU this runs on": the MUSA device in use (the default target's arch)."""
    return MUSA("auto")
