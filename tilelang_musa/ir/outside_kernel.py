"""Functions with no kernel, and the statements in them that need one.

Upstream builds such functions (a `T.prim_func` with no `T.Kernel` or thread binding, written to print the IR,
compare it structurally or feed it to a pass), so the frontend builds them too: the allocation is placed where
upstream's parser places it, `T.evaluate` where it was written. Whether one can be compiled is decided from the IR
alone (`check_compilable`), so that the same program built by TVM's own TVMScript parser (`from tvm.script import
tirx`) takes the same path: a function with no launch (no `thread_extent` attribute, no thread-bound loop) compiles
as one thread of one block when its statements are plain (loads, stores, loops, branches); a statement that only a
kernel gives a meaning (a shared, fragment, local or var allocation, whose storage is per block or per thread;
`T.evaluate`, a call made for a kernel's effect) is the error, naming the construct and its line.
The frontend records the source location of each such statement it builds (`record`): the record lives beside the
IR, not in it, so that the printed script and structural equality are those of the program as written; a statement
it has no record of is located by its span (TVM's parser gives every statement one). A function whose kernel opens
after such a statement is rejected when it is defined (language/prim_func.py), as before.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import tvm_ffi
from tvm import tirx

from ..errors import CompileError, SourceLoc
from .source_lines import user_line


@dataclass(frozen=True)
class OutsideKernel:
    construct: str  # as the user wrote it: "T.evaluate", "T.alloc_fragment", ...
    loc: SourceLoc | None


# statement node -> what built it. Nodes hash by identity; the entries are the few statements of IR-only functions.
_RECORDED: dict[Any, OutsideKernel] = {}


def record(stmt: Any, construct: str, loc: SourceLoc | None) -> None:
    _RECORDED[stmt] = OutsideKernel(construct, loc)


def is_recorded(stmt: Any) -> bool:
    return stmt in _RECORDED


def kernel_required_message(construct: str) -> str:
    return (f"`{construct}` must be used inside `with T.Kernel(...)` (or below the T.thread_binding / "
            "T.launch_thread bindings of a TVMScript-style kernel)")


def _is_launch(node: Any) -> bool:
    return (isinstance(node, tirx.AttrStmt) and node.attr_key == "thread_extent") or (
        isinstance(node, tirx.For) and node.thread_binding is not None)


# An allocation's scope -> the construct that allocates it: storage that is per block or per thread.
_KERNEL_SCOPES = {"shared": "T.alloc_shared", "shared.dyn": "T.alloc_shared", "local.fragment": "T.alloc_fragment",
                  "local": "T.alloc_local", "local.var": "T.alloc_var"}


def _needs_a_kernel(node: Any) -> str | None:
    """The construct of a statement that only a kernel gives a meaning, else None."""
    if isinstance(node, tirx.AllocBuffer):
        return _KERNEL_SCOPES.get(str(node.buffer.scope()))
    if isinstance(node, tirx.Evaluate):
        return "T.evaluate"
    return None


def _first_needing_a_kernel(func: tirx.PrimFunc) -> tuple[Any, str] | None:
    """The first statement (pre-order) of a kernel-less `func` that needs a kernel, and its construct; None when
    `func` launches a kernel or all of its statements are plain."""
    found: list[tuple[Any, str]] = []
    launched: list[bool] = []

    def on_node(node: Any) -> Any:
        if launched:
            return tvm_ffi.WalkResult.SKIP
        if _is_launch(node):
            launched.append(True)
            return tvm_ffi.WalkResult.SKIP
        construct = _needs_a_kernel(node)
        if construct is not None and not found:
            found.append((node, construct))
        return None

    tvm_ffi.structural_walk(func.body, [(tirx.Stmt, on_node)], order="pre")
    return None if launched or not found else found[0]


def _location(stmt: Any, func: tirx.PrimFunc) -> SourceLoc | None:
    """The statement's recorded location, else its span's, else the frontend's record of the function body (the
    builder may rebuild a statement it was handed, e.g. `T.evaluate` in a loop: language/outside_kernel.py)."""
    use = _RECORDED.get(stmt)
    if use is not None and use.loc is not None:
        return use.loc
    where = user_line(stmt.span)
    if where is not None:
        return SourceLoc(where[0], where[1])
    use = _RECORDED.get(func.body)
    return use.loc if use is not None else None


def check_compilable(func: tirx.PrimFunc) -> None:
    """Raise at the line of the first statement of a kernel-less function that needs a kernel (see the module's
    docstring); a function with a kernel costs a walk up to its first launch."""
    first = _first_needing_a_kernel(func)
    if first is None:
        return
    stmt, construct = first
    name = str(func.attrs["global_symbol"]) if func.attrs is not None and "global_symbol" in func.attrs else "main"
    raise CompileError(f"{kernel_required_message(construct)}: `{name}` has no kernel, so it builds IR to "
                       "inspect (print, compare, transform) but cannot be compiled", _location(stmt, func))


__all__ = ["OutsideKernel", "check_compilable", "is_recorded", "kernel_required_message", "record"]
