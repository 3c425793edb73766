"""`tilelang.cuda.intrinsics.layout`: the portable swizzle helpers at upstream's module paths (`.utils`,
`.mma_layout`). The NVIDIA MMA fragment maps that upstream keeps beside them (ldmatrix offsets, mma.sync layouts)
describe PTX instructions and are not provided."""

from ....intrinsics import get_swizzle_layout, make_mma_swizzle_layout  # noqa: F401

__all__ = ["get_swizzle_layout", "make_mma_swizzle_layout"]
