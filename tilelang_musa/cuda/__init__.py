"""Upstream TileLang's `tilelang.cuda`, as far as portable scripts import from it: newer upstream keeps the
shared-memory swizzle helpers in `tilelang.cuda.intrinsics` (`make_mma_swizzle_layout`). They are portable and
answer here as `tilelang.intrinsics` does; nothing here targets CUDA."""

from . import intrinsics  # noqa: F401
