"""`with set_autotune_inputs(a, b):` the inputs every config is checked (and timed) on, instead of generated ones.

    with set_autotune_inputs([a, b]):
        kernel = matmul.compile(M=1024, N=1024, K=1024)

The stack is per thread, as upstream's: a tuning run in another thread does not see this thread's inputs.
"""

from __future__ import annotations

import threading
from typing import Any

_local = threading.local()


def _stack() -> list[list[Any]]:
    if not hasattr(_local, "stack"):
        _local.stack = []
    return _local.stack


class AutotuneInputsCapture:
    __slots__ = ("tensors",)

    def __init__(self, tensors: list[Any]):
        self.tensors = tensors

    def __enter__(self) -> None:
        _stack().append(self.tensors)

    def __exit__(self, *exc: Any) -> None:
        _stack().pop()


def set_autotune_inputs(*args: Any) -> AutotuneInputsCapture:
    """`set_autotune_inputs(a, b, c)` or `set_autotune_inputs([a, b, c])`: a context manager."""
    tensors = list(args[0]) if len(args) == 1 and isinstance(args[0], (list, tuple)) else list(args)
    return AutotuneInputsCapture(tensors)


def get_autotune_inputs() -> list[Any] | None:
    """The innermost `set_autotune_inputs` tensors of this thread, or None."""
    stack = _stack()
    return stack[-1] if stack else None
