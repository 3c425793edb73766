"""Statements built outside every kernel, for a construct that needs one, in a function that has no kernel.

Upstream builds such functions (a `T.prim_func` with no `T.Kernel` or thread binding, written to print the IR,
compare it structurally or feed it to a pass), so the frontend builds them too: the allocation is placed where
upstream's parser places it, `T.evaluate` where it was written. Compiling one is the error, at the construct's line:
the frontend records each such statement here (`record`), and `check_compilable` finds them in a program about to be
lowered. The record lives beside the IR, not in it, so that the printed script and structural equality are those of
the program as written (a function attribute or an annotation would differ between two otherwise equal programs).
A function whose kernel opens after such a statement is rejected when it is defined (language/prim_func.py), as
before.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import tvm_ffi
from tvm import tirx

from ..errors import CompileError, SourceLoc


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


def check_compilable(func: tirx.PrimFunc) -> None:
    """Raise at the line of the first recorded statement. Kernels are not entered (nothing inside one is recorded),
    so a program with kernels costs a walk over its top-level statements, and nothing at all while no IR-only
    function was defined. (A kernel-less function that TVM's own TVMScript parser built records nothing: it compiles
    to one thread of one block, as it did before.)"""
    if not _RECORDED:
        return
    found: list[Any] = []

    def on_node(node: Any) -> Any:
        if found or _is_launch(node):
            return tvm_ffi.WalkResult.SKIP
        if node in _RECORDED:
            found.append(node)
            return tvm_ffi.WalkResult.SKIP
        return None

    tvm_ffi.structural_walk(func.body, [(tirx.Stmt, on_node)], order="pre")
    if not found:
        return
    use = _RECORDED[found[0]]
    name = str(func.attrs["global_symbol"]) if func.attrs is not None and "global_symbol" in func.attrs else "main"
    raise CompileError(f"{kernel_required_message(use.construct)}: `{name}` has no kernel, so it builds IR to "
                       "inspect (print, compare, transform) but cannot be compiled", use.loc)


__all__ = ["OutsideKernel", "check_compilable", "is_recorded", "kernel_required_message", "record"]
