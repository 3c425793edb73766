"""Tensor parameters declared in on-chip memory (`T.Tensor(..., scope="shared.dyn")`, upstream main's proxy).

Upstream builds such a parameter as a buffer of that scope, and its passes treat it as the caller's, filled before
the kernel runs (VerifyBufferInit reports nothing for it). Nothing can pass a kernel a tile of shared memory or
registers: the launcher's tensors are global memory. So the function builds IR for passes to inspect (print,
compare, transform), and compiling it is an error at the parameter's declaration.
"""

from __future__ import annotations

from tvm import tirx

from ..errors import CompileError
from .attrs import SCOPED_PARAMS_ATTR
from .utils import loc_from_text


def check_global_params(func: tirx.PrimFunc) -> None:
    """Raise at the declaration of the first tensor parameter that is not in global memory."""
    located = dict(func.attrs[SCOPED_PARAMS_ATTR]) if func.attrs is not None and SCOPED_PARAMS_ATTR in func.attrs \
        else {}
    name = str(func.attrs["global_symbol"]) if func.attrs is not None and "global_symbol" in func.attrs else "main"
    for param in func.params:
        ty = param.ty
        if not isinstance(ty, tirx.BufferType) or str(ty.storage_scope) in ("global", ""):
            continue
        loc = located.get(param.name)
        raise CompileError(f"tensor parameter `{param.name}` of `{name}` is declared in {ty.storage_scope} memory "
                           f"(T.Tensor(..., scope={str(ty.storage_scope)!r})); a kernel's tensor parameters are "
                           "global memory the caller passes, so the function builds IR to inspect (print, compare, "
                           "transform) but cannot be compiled; declare it without scope=",
                           loc_from_text(str(loc)) if loc else None)
