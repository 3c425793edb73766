"""Test gates: decorators that skip a test, with the reason, where it cannot run here.

pytest is imported when a gate is applied (when a test module is imported), never at `import tilelang.testing`.
Each gate is evaluated once, when it decorates (as upstream's are): set TILELANG_TARGET or
TILELANG_EXECUTION_BACKEND before the test module is imported. Gates work on test functions and classes, bare
(`@requires_musa`) or called (`@requires_musa()`), and stack with each other and with `pytest.mark.parametrize`.

    requires_musa                 kernels can run here: on a MUSA device, or in the CPU simulator (the default
                                  where there is no device), so MUSA tests RUN in the simulator
    requires_musa_device          a real MUSA device and mcc (e.g. timings the simulator cannot model)
    requires_musa_compute_version_ge(3, 1) (and _gt, _eq, _lt, _le; requires_musa_compute_version(3, 1, mode="ge"))
                                  the current target's arch compares as asked ((3, 1) is mp_31, (2, 2) mp_22) and
                                  kernels can run. The current target: a `with Target(...)` scope of kind musa, else
                                  TILELANG_TARGET, else the MUSA device's arch, else mp_31
    requires_package("einops")    every named package is importable
    requires_cuda, requires_cuda_compute_version (and _ge, ...), requires_rocm, requires_cdna, requires_gfx950,
    requires_cuda_or_cdna, requires_metal: always skip, a MUSA build has none of these
    requires_llvm                 always skips: tilelang_musa compiles for the musa target only
"""

from __future__ import annotations

import importlib.util
import operator
from typing import Any, Callable

from .. import env
from ..backend.target import auto_detect_target
from ..target import arch_of

__all__ = [
    "requires_cdna", "requires_cuda", "requires_cuda_compute_version", "requires_cuda_compute_version_eq",
    "requires_cuda_compute_version_ge", "requires_cuda_compute_version_gt", "requires_cuda_compute_version_le",
    "requires_cuda_compute_version_lt", "requires_cuda_or_cdna", "requires_gfx950", "requires_llvm",
    "requires_metal", "requires_musa", "requires_musa_compute_version", "requires_musa_compute_version_eq",
    "requires_musa_compute_version_ge", "requires_musa_compute_version_gt", "requires_musa_compute_version_le",
    "requires_musa_compute_version_lt", "requires_musa_device", "requires_package", "requires_rocm", "musa_runtime",
]

COMPARISONS: dict[str, Callable[[Any, Any], bool]] = {
    "ge": operator.ge, "gt": operator.gt, "eq": operator.eq, "lt": operator.lt, "le": operator.le,
}


def _skip_unless(condition: bool, reason: str) -> Callable[[Any], Any]:
    """A decorator adding `pytest.mark.skipif(not condition, reason=reason)` to a test function or class."""
    import pytest

    return pytest.mark.skipif(not condition, reason=reason)


def _apply(func: Any, marks: list[Callable[[Any], Any]]) -> Any:
    for mark in marks:
        func = mark(func)
    return func


def _gate(name: str, marks: Callable[[], list[Callable[[Any], Any]]], doc: str) -> Callable[..., Any]:
    """A gate usable bare (`@gate`) and called (`@gate()`): `marks()` is evaluated when it decorates."""

    def gate(func: Any = None) -> Any:
        if func is None:
            return lambda f: _apply(f, marks())
        return _apply(func, marks())

    gate.__name__ = gate.__qualname__ = name
    gate.__doc__ = doc
    return gate


def musa_runtime() -> tuple[bool, str]:
    """Whether kernels can run here, and where (or why not): the execution backend `execution_backend="auto"`
    resolves to ("cython" on a MUSA device, "sim" otherwise, or TILELANG_EXECUTION_BACKEND) and its toolchain."""
    from ..errors import TileLangError
    from ..jit.backend import resolve_backend
    from ..target import musa_device_present

    try:
        backend = resolve_backend(None)
    except TileLangError as err:  # an unknown TILELANG_EXECUTION_BACKEND
        return False, f"kernels cannot run here: {err}"
    if not backend.toolchain.available():
        what = "mcc (set MUSA_HOME)" if backend.name == "cython" else f"the host compiler {env.SIM_CXX.raw()!r}"
        return False, f"kernels cannot run here: execution backend {backend.name!r} needs {what}, which is missing"
    if backend.name == "cython" and not musa_device_present():
        return False, "kernels cannot run here: execution backend 'cython' needs a MUSA device (torch_musa finds none)"
    where = "on the MUSA device" if backend.name == "cython" else "in the CPU simulator"
    return True, f"kernels run {where} (execution backend {backend.name!r})"


def _musa_marks() -> list[Callable[[Any], Any]]:
    ok, why = musa_runtime()
    return [_skip_unless(ok, why)]


def _musa_device_marks() -> list[Callable[[Any], Any]]:
    from ..target import musa_device_present
    from ..jit.toolchains import TOOLCHAINS

    has_device, has_mcc = musa_device_present(), TOOLCHAINS["mcc"].available()
    missing = [what for what, ok in (("a MUSA device", has_device), ("mcc", has_mcc)) if not ok]
    return [_skip_unless(not missing, f"requires a real MUSA device and mcc; missing: {', '.join(missing)}")]


requires_musa = _gate("requires_musa", _musa_marks,
                      "Skip unless kernels can run here: on a MUSA device or in the CPU simulator.")
requires_musa_device = _gate("requires_musa_device", _musa_device_marks,
                             "Skip unless a real MUSA device and mcc are present (the simulator does not count).")


def _compare(mode: str) -> Callable[[Any, Any], bool]:
    if mode not in COMPARISONS:
        raise ValueError(f"compute-version gate: mode must be one of {', '.join(COMPARISONS)}; got {mode!r}")
    return COMPARISONS[mode]


def requires_musa_compute_version(major_version: int, minor_version: int = 0, mode: str = "ge") -> Callable:
    """Skip unless the current target's compute version compares to (major_version, minor_version) by `mode`
    ("ge", "gt", "eq", "lt", "le"), and kernels can run here. mp_31 is (3, 1), mp_22 (2, 2)."""
    compare = _compare(mode)
    wanted = (int(major_version), int(minor_version))

    def marks() -> list[Callable[[Any], Any]]:
        arch = arch_of(auto_detect_target())
        have = arch.capability
        reason = (f"requires MUSA compute {mode} {wanted[0]}.{wanted[1]}; the current target is {arch.name} "
                  f"({have[0]}.{have[1]}); set {env.TARGET.name} to compile for another arch")
        return [_skip_unless(compare(have, wanted), reason), *_musa_marks()]

    return lambda func: _apply(func, marks())


def _version_gate(general: Callable[..., Callable], mode: str, doc: str) -> Callable[..., Callable]:
    """`general` (a requires_*_compute_version) with its mode fixed: requires_*_compute_version_<mode>."""
    def gate(major_version: int, minor_version: int = 0) -> Callable:
        return general(major_version, minor_version, mode=mode)

    gate.__name__ = gate.__qualname__ = f"{general.__name__}_{mode}"
    gate.__doc__ = f"{doc} ({general.__name__}(major_version, minor_version, mode={mode!r}))."
    return gate


requires_musa_compute_version_ge, requires_musa_compute_version_gt, requires_musa_compute_version_eq, \
    requires_musa_compute_version_lt, requires_musa_compute_version_le = (
        _version_gate(requires_musa_compute_version, mode, "Skips unless the current arch compares as asked")
        for mode in ("ge", "gt", "eq", "lt", "le"))


def _absent(name: str, reason: str) -> Callable[..., Any]:
    return _gate(name, lambda: [_skip_unless(False, reason)], f"Always skips: {reason}.")


NO_CUDA = "no CUDA on a MUSA build"
requires_cuda = _absent("requires_cuda", NO_CUDA)
requires_rocm = _absent("requires_rocm", "no ROCm on a MUSA build")
requires_cdna = _absent("requires_cdna", "no ROCm (CDNA) on a MUSA build")
requires_gfx950 = _absent("requires_gfx950", "no ROCm (gfx950) on a MUSA build")
requires_cuda_or_cdna = _absent("requires_cuda_or_cdna", "no CUDA or ROCm (CDNA) on a MUSA build")
requires_metal = _absent("requires_metal", "no Metal on a MUSA build")
requires_llvm = _absent("requires_llvm", "tilelang_musa compiles for the musa target only (no llvm CPU target)")


def requires_cuda_compute_version(major_version: int, minor_version: int = 0, mode: str = "ge") -> Callable:
    """Always skips (the reason names the CUDA version asked for): no CUDA on a MUSA build. The MUSA gate is
    requires_musa_compute_version."""
    _compare(mode)  # an invalid mode is an error here as upstream
    reason = f"requires CUDA compute {mode} {major_version}.{minor_version}: {NO_CUDA}"
    return lambda func: _apply(func, [_skip_unless(False, reason)])


requires_cuda_compute_version_ge, requires_cuda_compute_version_gt, requires_cuda_compute_version_eq, \
    requires_cuda_compute_version_lt, requires_cuda_compute_version_le = (
        _version_gate(requires_cuda_compute_version, mode, f"Always skips: {NO_CUDA}")
        for mode in ("ge", "gt", "eq", "lt", "le"))


def requires_package(*packages: str) -> Callable:
    """Skip unless every named package is importable (found by importlib, without importing it)."""
    names = [p for p in packages if isinstance(p, str)]
    if len(names) != len(packages) or not names:
        raise TypeError(f"requires_package takes one or more package names (str); got {packages!r}")

    def marks() -> list[Callable[[Any], Any]]:
        missing = [name for name in names if not _importable(name)]
        return [_skip_unless(not missing, f"requires package(s) {', '.join(missing)}, not installed")]

    return lambda func: _apply(func, marks())


def _importable(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):  # a dotted name whose parent is missing
        return False


def _check_is_cdna() -> bool:
    """Whether the current target is a ROCm CDNA GPU: never on a MUSA build (upstream's private helper)."""
    return False


def _check_is_gfx950() -> bool:
    """Whether the current target is ROCm gfx950: never on a MUSA build (upstream's private helper)."""
    return False


def _check_is_cuda_or_cdna() -> bool:
    """Whether the current target is CUDA or ROCm CDNA: never on a MUSA build (upstream's private helper)."""
    return False

