"""Integer helpers for sizing kernels on the host, as upstream TileLang's `tilelang.math` (also at top level:
`tilelang.cdiv`, `tilelang.next_power_of_2`).

    grid = tilelang.cdiv(N, block_N)                 # blocks needed to cover N
    block = tilelang.math.next_power_of_2(head_dim)  # round a tile up to a power of two
"""

from __future__ import annotations

import operator
from typing import Any

__all__ = ["cdiv", "next_power_of_2", "prev_power_of_2", "is_power_of_2"]


def _as_int(x: Any, name: str, fn: str) -> int:
    if isinstance(x, bool):
        raise TypeError(f"{fn}: {name} must be an integer, got bool {x!r}")
    try:
        return operator.index(x)  # int, numpy integers, anything with __index__
    except TypeError:
        raise TypeError(f"{fn}: {name} must be an integer, got {type(x).__name__} {x!r}") from None


def cdiv(a: Any, b: Any) -> Any:
    """ceil(a / b). Exact for Python integers of any sign (ZeroDivisionError for b == 0); for TIR expressions
    (e.g. a T.dynamic size) the expression `(a + b - 1) // b`, valid for a >= 0 and b > 0 as in upstream.
    Example: tilelang.cdiv(1000, 128) == 8"""
    if getattr(a, "ndim", None) is not None or getattr(b, "ndim", None) is not None:
        return (a + b - 1) // b  # a tensor (of one element too, which operator.index would turn into an int)
    try:
        ia, ib = operator.index(a), operator.index(b)
    except TypeError:
        return (a + b - 1) // b
    return -(-ia // ib)


def next_power_of_2(x: Any) -> int:
    """The smallest power of two >= x (1 for x <= 1). Example: next_power_of_2(100) == 128, next_power_of_2(64) == 64"""
    n = _as_int(x, "x", "next_power_of_2")
    return 1 if n <= 1 else 1 << (n - 1).bit_length()


def prev_power_of_2(x: Any) -> int:
    """The largest power of two <= x, for x >= 1. Example: prev_power_of_2(100) == 64"""
    n = _as_int(x, "x", "prev_power_of_2")
    if n < 1:
        raise ValueError(f"prev_power_of_2: x must be >= 1, got {n}")
    return 1 << (n.bit_length() - 1)


def is_power_of_2(x: Any) -> bool:
    """True for 1, 2, 4, 8, ...; False for 0, negatives and every other integer."""
    n = _as_int(x, "x", "is_power_of_2")
    return n > 0 and n & (n - 1) == 0
