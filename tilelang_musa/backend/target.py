"""Target determination under upstream TileLang's names (`from tilelang.backend.target import determine_target`),
answering for the one kind this build compiles for: `musa`.

    target = determine_target()                          # the current target, as a string Target() parses
    target = determine_target("auto", return_object=True)  # ... as a tvm.target.Target
    tvm.target.Target(determine_target("auto"))          # upstream's idiom works unchanged

The current target ("auto") is the innermost `with Target(...)` scope of kind musa if there is one, else
$TILELANG_TARGET, else the arch of the visible MUSA device, else "musa" (mp_31); see tilelang_musa/target.py.
The registries of detectors and normalizers that upstream keeps here (one per backend) are not provided: a MUSA
build has one target kind and `tilelang_musa.target.determine_target` is its only normalizer.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Union

from tvm.target import Target

from .. import target as _musa

TargetLike = Union[None, str, Mapping[str, Any], Target]

SUPPORTED_TARGETS: Mapping[str, str] = {
    "auto": "the current target: a `with Target(...)` scope, $TILELANG_TARGET, the MUSA device, else musa (mp_31)",
    "musa": "a MUSA GPU; options as -key=value, e.g. 'musa -arch=mp_22' (archs: " + ", ".join(_musa.ARCHS) + ")",
}


def describe_supported_targets() -> dict[str, str]:
    """Target names accepted by `determine_target` / `tilelang.compile(target=...)`, with a description of each."""
    return dict(SUPPORTED_TARGETS)


def auto_detect_target() -> Target:
    """The current musa target: the innermost `with Target(...)` scope if it is of kind musa, else
    `tilelang_musa.target.determine_target(None)` ($TILELANG_TARGET, the device's arch, or mp_31)."""
    scoped = Target.current(allow_none=True)
    if scoped is not None and str(scoped.kind.name) == _musa.KIND:
        return scoped
    return _musa.determine_target(None)


def determine_target(target: TargetLike = "auto", return_object: bool = False) -> str | Mapping[str, Any] | Target:
    """Validate `target` (or find the current one for "auto"/None) and return it.

    return_object=True: always a `tvm.target.Target`. Otherwise the input's own form once validated (a string
    stays the string, a dict the dict, a Target the Target), and for "auto" the current target's canonical
    string, which both `tvm.target.Target(...)` and `tilelang.compile(target=...)` accept. A target of another
    kind ("cuda", "hip", ...) is a ValueError naming it.
    """
    if target is None or (isinstance(target, str) and target.strip() == "auto"):
        resolved = auto_detect_target()
        return resolved if return_object else str(resolved)
    resolved = _musa.determine_target(target)  # raises for another kind, an unknown arch or a bad string
    if return_object:
        return resolved
    return target.strip() if isinstance(target, str) else target


def target_is_musa(target: TargetLike) -> bool:
    """Whether `target` is a musa target (False for another kind or an unparsable one)."""
    if isinstance(target, Target):
        return str(target.kind.name) == _musa.KIND
    try:
        _musa.determine_target(target)
    except (TypeError, ValueError):
        return False
    return True


def _arch_name(target: TargetLike) -> str | None:
    if not target_is_musa(target):
        return None
    return _musa.arch_of(target).name


def target_is_qy2(target: TargetLike) -> bool:
    """mp_22 (QY2, MTT S4000): 128-thread warps, warp MMA m32n32k16."""
    return _arch_name(target) == "mp_22"


def target_is_ph1(target: TargetLike) -> bool:
    """mp_31 (PH1, MTT S5000): 32-thread warps, SQMMA, TME."""
    return _arch_name(target) == "mp_31"


def target_compute_version(target: TargetLike = None) -> tuple[int, int]:
    """(major, minor) of `target`'s arch, as torch.musa.get_device_capability() reports it: mp_31 -> (3, 1).
    None means the current target (see `auto_detect_target`)."""
    resolved = auto_detect_target() if target is None else _musa.determine_target(target)
    return _musa.arch_of(resolved).capability


__all__ = [
    "SUPPORTED_TARGETS", "auto_detect_target", "describe_supported_targets", "determine_target",
    "target_compute_version", "target_is_musa", "target_is_ph1", "target_is_qy2",
]
