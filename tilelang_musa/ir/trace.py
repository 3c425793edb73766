"""The frontend's open kernel traces, for the code below it that builds IR on the frontend's behalf.

A tile op's constructor (`tileop/region.py`, `tileop/registry.py`) runs while the frontend traces a kernel and
needs two things from it: the user's source line (attached to the call it emits) and a way to raise an error
that points there. The frontend (`language/builder.py`) pushes each kernel trace it opens onto `OPEN_TRACES`
and pops it when the kernel function returns, so the tile ops read the innermost one here instead of importing
the frontend.
"""

from __future__ import annotations

from typing import Protocol

from ..errors import CompileError, SourceLoc


class Trace(Protocol):
    """What code below the frontend may use of a trace (language/builder.py's KernelTrace has more)."""

    loc: SourceLoc | None

    def error(self, message: str) -> CompileError: ...


OPEN_TRACES: list = []  # the frontend's open traces, innermost last (the frontend owns pushing and popping)


def current_trace(construct: str | None = None) -> Trace:
    """The innermost open trace; outside a kernel, an error naming `construct`."""
    if not OPEN_TRACES:
        what = f"`{construct}`" if construct else "this construct"
        raise CompileError(f"{what} can only be used inside a TileLang kernel (@T.prim_func or @tilelang.jit)")
    return OPEN_TRACES[-1]
