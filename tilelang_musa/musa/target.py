"""Target predicates under Moore Threads' TileLang-MUSA names (`from tilelang.musa.target import target_is_qy2`).

QY2 is mp_22 (MTT S4000), PH1 mp_31 (MTT S5000). Each takes whatever `target=` accepts (a Target, "musa", a dict).
"""

from __future__ import annotations

from .. import target as _musa
from ..target import TargetLike, musa_device_present


def check_musa_availability() -> bool:
    """Whether a MUSA device is present (torch_musa sees one)."""
    return musa_device_present()


def target_is_musa(target: TargetLike) -> bool:
    """Whether `target` is of kind musa (anything else is refused by determine_target, so: whether it parses)."""
    try:
        _musa.determine_target(target)
    except (ValueError, TypeError):
        return False
    return True


def target_is_qy2(target: TargetLike) -> bool:
    """Whether `target` compiles for mp_22 (QY2, MTT S4000)."""
    return target_is_musa(target) and _musa.arch_of(target).name == "mp_22"


def target_is_ph1(target: TargetLike) -> bool:
    """Whether `target` compiles for mp_31 (PH1, MTT S5000)."""
    return target_is_musa(target) and _musa.arch_of(target).name == "mp_31"


__all__ = ["check_musa_availability", "target_is_musa", "target_is_ph1", "target_is_qy2"]
