"""Target checks under the names Moore Threads' TileLang-MUSA keeps in `tilelang.utils.target` (upstream moved
them to `tilelang.backend.target`, where they are defined here too): re-exported, with the toolkit availability
checks tests branch on."""

from __future__ import annotations

from ..backend.target import (
    SUPPORTED_TARGETS, auto_detect_target, describe_supported_targets, determine_target, target_is_musa, target_is_ph1,
    target_is_qy2,
)

__all__ = [
    "SUPPORTED_TARGETS", "auto_detect_target", "check_hip_availability",
    "check_musa_availability", "describe_supported_targets", "determine_target",
    "target_is_musa", "target_is_ph1", "target_is_qy2",
]


def check_musa_availability() -> bool:
    """Whether the MUSA SDK's compiler mcc is found (see `tilelang.contrib.mcc.find_musa_path`). Kernels run without
    it, in the simulator: `tilelang.testing.requires_musa` asks whether kernels can run at all."""
    from ..contrib import mcc

    try:
        mcc.find_musa_path()
    except RuntimeError:
        return False
    return True


def check_hip_availability() -> bool:
    """False: a MUSA build compiles for no HIP (ROCm) target, whatever is installed (tests branch on this to pick
    MUSA's warp size over ROCm's 64)."""
    return False
