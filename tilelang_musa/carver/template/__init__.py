"""`tilelang.carver.template`: config helpers upstream's GEMM examples import (`MatmulTemplate`)."""

from .matmul import Hint, MatmulTemplate  # noqa: F401
