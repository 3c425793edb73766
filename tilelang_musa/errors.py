"""User-facing errors. Every error about a program points at the user's source line.

A `SourceLoc` is captured by the frontend when a statement of the user's kernel runs (see
`language/runtime.py`) and travels with the IR it produced (tile-op calls carry it as an argument,
statements through the `tl.loc` annotation), so that a pass can raise `CompileError(loc, msg)` and the
user sees the file, the line, a caret and a message that names the construct.
"""

from __future__ import annotations

import linecache
import threading
from dataclasses import dataclass

_recent = threading.local()


@dataclass(frozen=True)
class SourceLoc:
    filename: str
    lineno: int
    col: int = 0

    def __str__(self) -> str:
        return f"{self.filename}:{self.lineno}:{self.col}"

    def render(self) -> str:
        line = linecache.getline(self.filename, self.lineno).rstrip("\n")
        if not line:
            return f"at {self}"
        stripped = line.lstrip()
        caret_col = max(0, self.col - (len(line) - len(stripped)))
        return f"at {self}:\n    {stripped}\n    {' ' * caret_col}^"


class TileLangError(Exception):
    """Base class of every error tilelang_musa raises on purpose."""

    def __init__(self, *args: object):
        super().__init__(*args)
        # Errors raised inside IR callbacks cross tvm-ffi and come back as generic errors; the pass runner
        # recovers the original from here (transform/pass_base.py).
        _recent.error = self


def take_recent_error() -> TileLangError | None:
    """The TileLangError most recently created on this thread (and forget it)."""
    err = getattr(_recent, "error", None)
    _recent.error = None
    return err


class BuildError(TileLangError):
    """The device or host compiler rejected a generated source (jit/toolchains.py raises it)."""


class CompileError(TileLangError, ValueError):
    """A program we cannot compile correctly: names the construct and, when known, the source line. A ValueError,
    as upstream TileLang raises for bad programs, so that scripts catching that keep working."""

    def __init__(self, message: str, loc: SourceLoc | None = None, stage: str | None = None):
        self.message = message
        self.loc = loc
        self.stage = stage
        where = ""
        if loc is not None:
            where = loc.render()
            if stage:
                where = where.replace(f"at {loc}", f"at {loc} (in {stage})", 1)
            where += "\n"
        elif stage:
            where = f"(in {stage}) "
        super().__init__(f"{where}{message}")


class ViewSizeError(CompileError, AssertionError):
    """T.view / T.reshape to a size other than the viewed storage's: an AssertionError too, as upstream asserts it."""


class ReducerDtypeError(CompileError, AssertionError):
    """A bitwise reducer (op="bitand" ...) of a non-integer dtype: an AssertionError too, as upstream asserts it."""


class OperandTypeError(CompileError, TypeError):
    """An operand of a dtype the construct does not take (`T.__exp` of an int8): a TypeError too, as upstream
    raises it."""


class UnsupportedError(CompileError):
    """A construct TileLang-MUSA does not support (e.g. NVIDIA-only IR): always names the construct."""


class SliceStepError(UnsupportedError, RuntimeError):
    """A buffer slice with a step other than 1 (`A[0:10:2]`): a RuntimeError too, as upstream's frontend raises it."""


class EndlessLoopError(CompileError, RuntimeError):
    """A loop of the kernel function that would never end while it is traced (`while True:` with no `break`): a
    RuntimeError too, as upstream's frontend raises it ("Infinite while loop detected")."""
