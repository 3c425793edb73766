"""`tl.access_ptr(&X[i], rw)`: the address of `X[i]` handed to a callee that reads (READ) and/or writes (WRITE)
elements of X through it (which ones the marker does not say: the analysis takes all of X).

A template that takes `&A_s[0]` (a gemm's operand tiles, an LDLMS copy's destination) reads or writes shared memory
where TVM's barrier analysis cannot see it: it skips the operand of `address_of`. Wrapped in this marker the access
is visible: ThreadSync (transform/thread_sync.py) hands it to the analysis as `tvm_access_ptr(..., rw)`, so barriers
go where a writer and a reader of the tile meet, not around every call. It prints as the address itself
(src/codegen/call_rules_tirx.cc); every pass that rewrites `X[i]` (layouts, flattening, the shared-memory arena)
sees the address_of inside it as before.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import tvm
from tvm import tirx

from ..ir.ops import register_intrinsic

ACCESS_PTR_OP = "tl.access_ptr"
register_intrinsic(ACCESS_PTR_OP, "an element's address that a callee reads (1) and/or writes (2) its buffer through")

READ = 1
WRITE = 2


def access_ptr(element: Any, rw: int) -> Any:
    """`&element` (a buffer element, X[i]) marked as read and/or written through by its callee."""
    if not rw or rw & ~(READ | WRITE):
        raise ValueError(f"access_ptr: rw must be READ, WRITE or both, got {rw}")
    return tirx.call_intrin("handle", ACCESS_PTR_OP, tirx.address_of(element), tirx.const(rw, "int32"))


class Access(NamedTuple):
    element: Any  # the TensorLoad X[i] whose address is taken
    rw: int


def as_access(expr: Any) -> Access | None:
    """The marked access of `expr` if it is a tl.access_ptr call, else None."""
    if not (isinstance(expr, tvm.ir.Call) and isinstance(expr.op, tvm.ir.Op) and str(expr.op.name) == ACCESS_PTR_OP):
        return None
    address, rw = expr.args
    return Access(address.args[0], int(rw.value))
