"""SplitKernels: a program with several `with T.Kernel(...)` scopes is several kernels, launched in order.

Each scope becomes a PrimFunc of its own with the program's parameters (and the buffer declarations before the
first scope), lowered by the pipeline and printed as its own `__global__` function; the host wrapper launches
them one after the other on one stream, so each sees what the previous ones wrote.
"""

from __future__ import annotations

from tvm import tirx

from ..errors import CompileError


def _is_kernel_scope(stmt) -> bool:
    return isinstance(stmt, tirx.AttrStmt) and stmt.attr_key == "thread_extent"


def split_kernels(func: tirx.PrimFunc) -> list[tirx.PrimFunc]:
    body = func.body
    stmts = list(body.seq) if isinstance(body, tirx.SeqStmt) else [body]
    kernels = [k for k, s in enumerate(stmts) if _is_kernel_scope(s)]
    if len(kernels) <= 1:
        return [func]
    prefix = stmts[:kernels[0]]
    between = [s for k, s in enumerate(stmts[kernels[0]:], kernels[0]) if k not in kernels]
    if between:
        raise CompileError(
            f"`{func.attrs['global_symbol'] if func.attrs is not None and 'global_symbol' in func.attrs else 'kernel'}`"
            f" has {len(kernels)} T.Kernel scopes with statements between or after them; only declarations may "
            "precede the first scope (host code between kernels is not supported)", stage="SplitKernels")
    return [func.with_body(tirx.SeqStmt([*prefix, stmts[k]]) if prefix else stmts[k]) for k in kernels]
