"""Upstream TileLang's `tilelang.engine`: `lower` (the MUSA source without a build) and the postproc callbacks."""

from ..jit.compile import CompiledArtifact, lower
from .callback import (
    register_c_postproc, register_c_postproc_callback, register_musa_postproc, register_musa_postproc_callback,
)

__all__ = ["CompiledArtifact", "lower", "register_c_postproc", "register_c_postproc_callback",
           "register_musa_postproc", "register_musa_postproc_callback"]
