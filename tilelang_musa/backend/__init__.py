"""Upstream TileLang's `tilelang.backend` import path, for the names scripts take from it on a MUSA build:
target determination (`tilelang.backend.target`). Compilation itself lives in `jit/`, `transform/` and `codegen/`."""

from .target import auto_detect_target, determine_target

__all__ = ["auto_detect_target", "determine_target"]
