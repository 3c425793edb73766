"""Pass configuration keys (`tilelang.PassConfigKey.*`) and validation of a user's `pass_configs` dict.

Users may pass the enum members or their string values; unknown keys are an error that lists the known
ones (a typo must not silently leave a safety guard on or off).
"""

from __future__ import annotations

import enum
from typing import Any, Mapping

from ..diagnostics import warn_once


class PassConfigKey(str, enum.Enum):
    TL_DISABLE_SQMMA = "tl.disable_sqmma"
    TL_DISABLE_PH1_WMMA = "tl.disable_ph1_wmma"
    TL_DISABLE_SAFE_MEMORY_ACCESS = "tl.disable_safe_memory_legalize"
    TL_DISABLE_SAFE_COPY_PREDICATION = "tl.disable_safe_copy_predication"
    TL_DISABLE_SAFE_ROBUST_COPY_PREDICATION = "tl.disable_safe_robust_copy_predication"
    TL_DISABLE_INDEX_TYPE_PROMOTION = "tl.disable_index_type_promotion"
    TL_DISABLE_WARP_SPECIALIZED = "tl.disable_warp_specialized"
    TL_DISABLE_TMA_LOWER = "tl.disable_tma_lower"
    TL_ENABLE_FAST_MATH = "tl.enable_fast_math"
    TL_DISABLE_VECTORIZE = "tir.disable_vectorize"
    TL_ENABLE_DUMP_IR = "tl.enable_dump_ir"
    TL_DUMP_IR_PATH = "tl.dump_ir_path"
    MUSA_KERNELS_OUTPUT_DIR = "musa.kernels_output_dir"
    TL_DEVICE_COMPILE_FLAGS = "tl.device_compile_flags"

    def __str__(self) -> str:
        return self.value


# Keys accepted for upstream scripts whose subject does not exist in this build: setting one warns once, why.
WITHOUT_EFFECT = {
    PassConfigKey.TL_DISABLE_WARP_SPECIALIZED: "no kernel is warp-specialized yet",
    PassConfigKey.TL_DISABLE_TMA_LOWER: "no copy is lowered to TME yet",
    PassConfigKey.TL_DISABLE_SAFE_ROBUST_COPY_PREDICATION: "robust (descriptor-guarded) copies are not supported yet",
    PassConfigKey.TL_DISABLE_INDEX_TYPE_PROMOTION: "indices are never promoted to 64 bits yet",
}

_BY_VALUE = {k.value: k for k in PassConfigKey}
_BY_NAME = {k.name: k for k in PassConfigKey}


def normalize_pass_configs(configs: Mapping[Any, Any] | None) -> dict[PassConfigKey, Any]:
    """Map user keys (enum members, their values, or their names) to PassConfigKey; reject unknown keys."""
    out: dict[PassConfigKey, Any] = {}
    for key, value in (configs or {}).items():
        if isinstance(key, PassConfigKey):
            out[key] = value
            continue
        text = str(key)
        member = _BY_VALUE.get(text) or _BY_NAME.get(text)
        if member is None:
            known = ", ".join(sorted(_BY_VALUE))
            raise ValueError(f"unknown pass config key {key!r}; known keys: {known}")
        out[member] = value
    for key, value in out.items():
        if key in WITHOUT_EFFECT and value not in (None, False):
            warn_once(f"pass config {key.value}", f"pass config {key.name} ({key.value!r}) has no effect: "
                      f"{WITHOUT_EFFECT[key]}")
    return out


def enabled(configs: Mapping[PassConfigKey, Any], key: PassConfigKey) -> bool:
    value = configs.get(key, False)
    if isinstance(value, str):
        return value.strip().lower() in ("1", "true", "yes", "on")
    return bool(value)
