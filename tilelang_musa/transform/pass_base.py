"""Wrapping our Python passes as TVM passes without losing our error types.

A Python exception raised inside a pass (often inside a structural-mutate callback) crosses tvm-ffi on
its way out and arrives as a generic error carrying only its message. `run_pass` re-raises the original
TileLangError (with its source line and message intact) once the pass has unwound, but only the error that
escaped: a TileLangError the pass created and handled itself (an implementation declining a GEMM, a layout
that did not fit) must not stand in for an unrelated error raised later. The error that arrives names the
one that escaped by its message. A TVM InternalError (a check inside a pass failing on a program it did not
expect) becomes a CompileError that names the pass, so that the user learns where it broke.
"""

from __future__ import annotations

from typing import Any, Callable

import tvm
from tvm import tirx

from ..errors import CompileError, TileLangError, take_recent_error


def tl_pass(name: str, fn: Callable[[tirx.PrimFunc], tirx.PrimFunc]):
    """A PrimFunc pass named `tl.<name>` running `fn(func)`."""
    return tirx.transform.prim_func_pass(lambda func, mod, ctx: fn(func), opt_level=0, name=f"tl.{name}")


def tl_body_pass(name: str, rewrite: Callable[[Any], Any]):
    """A PrimFunc pass named `tl.<name>` that rewrites the function's body with `rewrite(body)`."""

    def on_func(func: tirx.PrimFunc) -> tirx.PrimFunc:
        body = rewrite(func.body)
        return func if body.same_as(func.body) else func.with_body(body)

    return tl_pass(name, on_func)


def run_pass(p: Any, mod: Any) -> Any:
    take_recent_error()
    try:
        return p(mod)
    except TileLangError:
        raise
    except Exception as arrived:
        err = take_recent_error()
        if err is not None and str(err) == str(arrived):
            raise err from None
        if isinstance(arrived, tvm.error.InternalError):
            first_line = str(arrived).strip().splitlines()[-1] if str(arrived).strip() else type(arrived).__name__
            raise CompileError(f"the pass failed on this program (an internal check of the compiler: please report "
                               f"it): {first_line}", stage=p.info.name) from arrived
        raise
