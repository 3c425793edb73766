"""`tilelang.cuda.intrinsics.macro`: upstream's NVIDIA instruction emitters (ldmatrix + mma.sync, wgmma, tcgen05),
which scripts import to hand-write a GEMM's inner loop. They emit PTX, which MUSA has no equivalent of at the
level they work at (fragment lanes of NVIDIA's instructions), so the names import, and building an emitter is a
clear error that says what to write instead: T.gemm, which lowers to MUSA's SQMMA / WMMA / warp MMA."""

from .mma_macro_generator import (  # noqa: F401
    SparseTensorCoreIntrinEmitter, TensorCoreIntrinEmitter, TensorCoreIntrinEmitterSM120,
    TensorCoreIntrinEmitterWithLadderTransform,
)
