"""The `musa` target: the table of MUSA architectures, and `determine_target`, which turns whatever
a user passes as `target=` into a `tvm.target.Target` of kind `musa`.

The TargetKind itself is registered by the C++ library (src/target/musa_target.cc). It declares the
options `arch` (default "mp_31"), `thread_warp_size`, `max_num_threads` (default 1024) and
`max_shared_memory_per_block`, and a canonicalizer that derives the warp size and the shared-memory
limit from `arch` unless they are given explicitly.

Accepted target forms:
    None / "auto"               $TILELANG_TARGET if set, else "musa"
    "musa"                      the current device's arch: the visible MUSA device's (torch_musa), else
                                the simulated device's ($TILELANG_SIM_ARCH, default mp_31), as a bare
                                "cuda" target compiles for the GPU at hand
    "musa -arch=mp_22"          options as -key=value (the wheel's Target() no longer parses it)
    '{"kind": "musa", ...}'     a JSON config
    {"arch": "mp_22"}           a config dict; "kind" defaults to "musa"
    tvm.target.Target           returned unchanged if its kind is musa
"""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Mapping
from dataclasses import dataclass, fields
from functools import cache
from types import MappingProxyType
from typing import Any, Union

import tvm
import tvm_ffi
from tvm.target import Target

from . import _native, env

KIND = "musa"
DEFAULT_ARCH = "mp_31"
ENV_TARGET = env.TARGET.name  # the default target when none is given, in any accepted string form

TargetLike = Union[None, str, Mapping[str, Any], Target]


@dataclass(frozen=True)
class ArchInfo:
    """One MUSA GPU architecture (docs/MUSA_FACTS.md, "Architectures"): the one table of what each arch has.
    Passes and tile ops ask it a capability (`arch_of(target).has_tme`), never compare arch names or numbers."""

    name: str  # the `arch` target attribute and mcc's --offload-arch, e.g. "mp_31"
    musa_arch: int  # __MUSA_ARCH__ in device code, e.g. 310
    warp_size: int  # threads per warp
    max_shared_memory_per_block: int  # bytes
    squad_size: int | None  # threads per squad (4 warps issuing one SQMMA); None: no squads
    has_sqmma: bool  # squad MMA on shared-memory operands (__musa_sqmma_*)
    has_wmma: bool  # 32-thread warp WMMA (__musa_wmma_*)
    has_warp_mma: bool  # 128-thread warp MMA, 32x32 atoms (__musa_fmma_m32n32k16_mma family)
    has_tme: bool  # tensor memory engine, the TMA analogue (__musa_tme_*)
    has_async_barriers: bool  # asynchronous barriers, integer ids 1..63 (__musa_async_*; docs/ASYNC_MODEL.md)
    has_async_copy: bool  # LDLMS: global -> shared copies that land asynchronously (__musa_memcpy_g2s)
    has_robust_access: bool  # loads through a robust descriptor, 0 out of range (__musa_ld_v4_robust_*)
    has_fp8_mma: bool  # float8 (E4M3/E5M2) MMA operands (SQMMA fp8)
    # multiprocessors ("cores") that run blocks at once; None: not known. The performance model's figures
    # (profiler/arch_figures.py, with their sources) use the same numbers (testing/test_target.py checks).
    multiprocessors: int | None = None

    @property
    def capability(self) -> tuple[int, int]:
        """(major, minor) as torch.musa.get_device_capability() reports it: mp_31 -> (3, 1)."""
        return divmod(self.musa_arch // 10, 10)


# The warp sizes, shared-memory limits and async-barrier flags must agree with kArchs in src/target/musa_archs.h
# (testing/test_target.py checks this).
ARCHS: Mapping[str, ArchInfo] = MappingProxyType(
    {
        arch.name: arch
        for arch in (
            # Inferred: __MUSA_ARCH__ 210 by pattern, and the shared-memory limit from one MTT S70
            # report. No MMA builtins are documented for QY1.
            ArchInfo("mp_21", 210, 128, 28672, None,
                     has_sqmma=False, has_wmma=False, has_warp_mma=False, has_tme=False,
                     has_async_barriers=False, has_async_copy=False, has_robust_access=False, has_fp8_mma=False),
            ArchInfo("mp_22", 220, 128, 73728, None,
                     has_sqmma=False, has_wmma=False, has_warp_mma=True, has_tme=False,
                     has_async_barriers=False, has_async_copy=True, has_robust_access=True, has_fp8_mma=False,
                     multiprocessors=32),
            ArchInfo("mp_31", 310, 32, 196608, 128,
                     has_sqmma=True, has_wmma=True, has_warp_mma=False, has_tme=True,
                     has_async_barriers=True, has_async_copy=True, has_robust_access=True, has_fp8_mma=True,
                     multiprocessors=56),
            # Inferred: mp_32 (PH1S) is documented only as "like mp_31".
            ArchInfo("mp_32", 320, 32, 196608, 128,
                     has_sqmma=True, has_wmma=True, has_warp_mma=False, has_tme=True,
                     has_async_barriers=True, has_async_copy=True, has_robust_access=True, has_fp8_mma=True,
                     multiprocessors=56),
        )
    }
)
CAPABILITIES = tuple(f.name for f in fields(ArchInfo) if f.name.startswith("has_"))


def archs_with(capability: str) -> tuple[str, ...]:
    """The names of the archs that have `capability` (an ArchInfo flag, e.g. "has_tme"), oldest first: for
    messages such as "needs mp_31 or newer"."""
    if capability not in CAPABILITIES:
        raise ValueError(f"unknown arch capability {capability!r}; known: {', '.join(CAPABILITIES)}")
    return tuple(name for name, arch in ARCHS.items() if getattr(arch, capability))


def determine_target(target: TargetLike = None) -> Target:
    """The `musa` Target for `target`, in any of the forms listed in the module docstring.

    Raises ValueError for a target of another kind, an unknown arch, or an unparsable string (the
    message names the input), and TypeError for an argument of another type.
    """
    _ensure_kind_registered()
    if isinstance(target, Target):
        _require_musa_kind(str(target.kind.name), target)
        return target
    if target is None or (isinstance(target, str) and target.strip() == "auto"):
        return _default_target()
    if isinstance(target, str):
        return _target(_config_from_string(target))
    if isinstance(target, Mapping):
        return _target(_checked_config(dict(target), target))
    raise TypeError(
        "target must be None, 'auto', a string, a config dict or a tvm.target.Target; "
        f"got {type(target).__name__}: {target!r}"
    )


def arch_of(target: TargetLike = None) -> ArchInfo:
    """The architecture `target` compiles for."""
    return ARCHS[str(determine_target(target).attrs["arch"])]


def warp_size(target: TargetLike = None) -> int:
    """Threads per warp of `target`: its `thread_warp_size`, which an explicit option overrides."""
    return int(determine_target(target).attrs["thread_warp_size"])


@cache
def _ensure_kind_registered() -> None:
    # The native library registers the kind when loaded; a refused registration is reported here
    # (it cannot raise from inside dlopen).
    _native.load()
    error = str(_native.get_global_func("tilelang_musa.target.registration_error")())
    if error:
        raise RuntimeError(f"tilelang_musa: the `musa` target kind is unavailable: {error}")


def _default_target() -> Target:
    configured = (env.TARGET.raw() or "").strip()
    if configured and configured != "auto":
        try:
            return _target(_config_from_string(configured))
        except ValueError as err:
            raise ValueError(f"{ENV_TARGET}={configured!r}: {err}") from None
    return _target({"kind": KIND, "arch": current_device_arch()})


def _target(config: dict[str, Any]) -> Target:
    """Target(config), with the config passed as an FFI Map. Given a dict, Target() converts it through
    tvm_ffi.convert, whose first test is `isinstance(value, numbers.Number)`: the first time a process asks it of a
    dict, the ABC walks every registered Number subclass (numpy's scalars among them), ~1 ms of the first compile
    of every process, the largest single item of a cache hit. The Map is what that conversion builds."""
    return Target(tvm_ffi.Map(config))


def current_device_arch() -> str:
    """The arch kernels run on here: the visible MUSA device's, else the simulated device's."""
    detected = _detect_device_arch()
    if detected:
        return detected
    simulated = (env.SIM_ARCH.raw() or "").strip() or DEFAULT_ARCH
    if simulated not in ARCHS:
        raise ValueError(f"{env.SIM_ARCH.name}={simulated!r} is not a MUSA arch tilelang_musa knows "
                         f"(known: {', '.join(ARCHS)})")
    return simulated


def _torch_musa_importable() -> bool:
    """Whether `import torch_musa` can succeed: installed, or already in sys.modules. A script's stand-in module
    there has no __spec__ (find_spec raises ValueError on it); it is asked for a device like the real one."""
    try:
        return importlib.util.find_spec("torch_musa") is not None
    except ValueError:
        return True


@cache
def musa_device_present() -> bool:
    """Whether torch_musa is installed and sees a MUSA device (a broken install counts as no device)."""
    if not _torch_musa_importable():
        return False
    try:
        import torch
        import torch_musa  # noqa: F401

        return bool(torch.musa.is_available())
    except Exception:  # noqa: BLE001 - a broken torch_musa install means: no device
        return False


def _detect_device_arch() -> str | None:
    """The arch of the current MUSA device, or None when torch_musa or a device is missing."""
    if not _torch_musa_importable():
        return None
    import torch
    import torch_musa  # noqa: F401  (registers torch.musa)

    musa = getattr(torch, "musa", None)
    if musa is None or not musa.is_available():
        return None
    major, minor = musa.get_device_capability()
    return _arch_from_capability(major, minor)


def _arch_from_capability(major: int, minor: int) -> str:
    name = f"mp_{major}{minor}"
    if name not in ARCHS:
        raise ValueError(
            f"the MUSA device reports capability ({major}, {minor}), i.e. {name}, which "
            f"tilelang_musa does not support (known: {', '.join(ARCHS)}); "
            f"set {ENV_TARGET} to choose an arch"
        )
    return name


def _config_from_string(text: str) -> dict[str, Any]:
    stripped = text.strip()
    if not stripped:
        raise ValueError("the target string is empty; use e.g. 'musa' or 'musa -arch=mp_22'")
    if stripped.startswith("{"):
        try:
            return _checked_config(json.loads(stripped), text)  # "{" parses to a dict or fails
        except json.JSONDecodeError as err:
            raise ValueError(f"target {text!r} is not valid JSON: {err}") from None
    kind, *options = stripped.split()
    _require_musa_kind(kind, text)
    config: dict[str, Any] = {"kind": kind}
    for option in options:
        key, sep, value = option.lstrip("-").partition("=")
        if not option.startswith("-") or not sep or not key:
            raise ValueError(
                f"target {text!r}: cannot parse {option!r}; write options as -key=value, "
                "e.g. 'musa -arch=mp_22'"
            )
        if key in config:
            raise ValueError(f"target {text!r}: option {key!r} is given twice")
        config[key] = _parse_option_value(key, value, text)
    return _checked_config(config, text)


def _parse_option_value(key: str, value: str, text: str) -> Any:
    # Unknown keys pass through as strings: Target() rejects them, listing the known options.
    type_str = _option_types().get(key)
    if type_str == "int":
        try:
            return int(value)
        except ValueError:
            raise ValueError(
                f"target {text!r}: option {key!r} expects an integer, got {value!r}"
            ) from None
    if type_str == "Array<str>":
        return [item for item in value.split(",") if item]
    return value


@cache
def _option_types() -> dict[str, str]:
    return {str(k): str(v) for k, v in tvm.target.TargetKind.options_from_name(KIND).items()}


def _checked_config(config: dict[str, Any], original: object) -> dict[str, Any]:
    config.setdefault("kind", KIND)
    _require_musa_kind(config["kind"], original)
    if "arch" not in config:  # not setdefault: the device query runs only when no arch is named
        config["arch"] = current_device_arch()
    return config


def _require_musa_kind(kind: object, original: object) -> None:
    if kind != KIND:
        raise ValueError(f"tilelang_musa compiles for the `musa` target only; got {original!r}")
