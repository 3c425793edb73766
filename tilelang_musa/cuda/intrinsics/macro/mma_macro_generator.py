"""The emitter classes of upstream's `tilelang.cuda.intrinsics.macro`: importable, an error to build (see the
package docstring)."""

from __future__ import annotations

from typing import Any

from ....errors import UnsupportedError


class _NvidiaEmitter:
    """An NVIDIA instruction emitter: building one raises UnsupportedError naming it."""

    instruction = "NVIDIA tensor-core instructions"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise UnsupportedError(
            f"tilelang.cuda.intrinsics.macro.{type(self).__name__} emits {self.instruction}, which have no MUSA "
            "equivalent at the fragment-lane level it works at; write the tile product as T.gemm(A_shared, "
            "B_shared, C_local), which lowers to SQMMA / WMMA on mp_31 and the warp MMA on mp_22")


class TensorCoreIntrinEmitter(_NvidiaEmitter):
    instruction = "ldmatrix + mma.sync (PTX)"


class TensorCoreIntrinEmitterWithLadderTransform(_NvidiaEmitter):
    instruction = "ldmatrix + mma.sync (PTX) on ladder-transformed operands"


class TensorCoreIntrinEmitterSM120(_NvidiaEmitter):
    instruction = "sm_120 block-scaled mma.sync (PTX)"


class SparseTensorCoreIntrinEmitter(_NvidiaEmitter):
    instruction = "sparse mma.sp (PTX)"
