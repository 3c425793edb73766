"""`tilelang.engine.lower.lower`: upstream's module path of `tilelang.lower` (scripts import it from here)."""

from ..jit.compile import lower

__all__ = ["lower"]
