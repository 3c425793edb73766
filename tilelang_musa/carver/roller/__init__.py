"""`tilelang.carver.roller`: the block orders upstream's config helper names (`rasterization`)."""

from . import rasterization  # noqa: F401
