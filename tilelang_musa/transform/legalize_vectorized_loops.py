"""LegalizeVectorizedLoops: explicit `T.vectorized` loops made into what the wheel's VectorizeLoop turns into correct
MUSA vector code.

- A loop whose body stores an element that every lane shares (`t[0] = A[tx, v]` into a local `t`, an
  `T.alloc_var`, or a global or shared one: `B[row] = B[row] + A[row, k]`) runs serially: VectorizeLoop would write
  all lanes into the one element and let every lane read the value from before the loop, a wrong result.
  (T.Parallel's per-thread loops stay scalar for the thread-private case.)
- So does a loop that binds a lane-varying value and chooses with `T.if_then_else` on a lane-varying condition:
  VectorizeLoop would scalarize it around a fresh, never-bound copy of the binding (a printer error).
- `T.vectorized(1)` is a serial loop (VectorizeLoop fails on a vector of one lane).
- A loop whose accesses are wider than 128 bits becomes a serial loop over vectorized pieces of at most 128 bits,
  where the piece has a MUSA built-in vector type (below).

The wheel's VectorizeLoop turns a vectorized loop into one access of N lanes, which the printer spells
`tl::vec<float, 128>`: an access wider than any MUSA load or store, whose address is aligned only as far as the
indices make it. Upstream's and Moore Threads' printers emit at most 128-bit accesses (`float4`), and Moore Threads'
tests look for them. The piece is the widest V (16 bytes of the widest accessed dtype at most) for which every global
and shared access is contiguous and V-aligned (`vector_width`, the rule T.Parallel's per-thread loops follow), and
it must divide N: `for i in T.vectorized(128)` over float32 becomes `for i_o in serial(32): for i in
vectorized(4)` with the index `i_o * 4 + i`, printed as `float4` accesses, or `float2` where the rows are only
8-byte aligned. Splitting a vectorized loop never changes what it computes (its lanes are its iterations, in
order). Left as they are: loops of at most 128 bits (every loop the compiler partitions itself), loops whose
widest dtype has no 128-bit built-in type (8- and 16-bit elements: 16 chars or 8 halves are `tl::vec` anyway),
and loops for which no piece of two lanes or more is contiguous and aligned. A `T.vectorized(1)` loop becomes
serial (see above).
"""

from __future__ import annotations

from typing import Any

import tvm
import tvm_ffi
from tvm import tirx

from ..ir.options import CompileOptions
from ..ir.utils import as_int, collect_accesses, dtype_bytes, substitute, thread_info
from ..tileop.loop_plan import (MAX_VECTOR_BYTES, lane_varying_vars, select_of_lanes_under_a_binding,
                                stores_a_lane_invariant_element, vector_width)
from .partition_parallel_loop import thread_analyzer
from .pass_base import tl_pass


def has_builtin_piece(dtype: Any) -> bool:
    """Whether 128 bits of `dtype` are a MUSA built-in vector type (codegen/musa_types.h BuiltinVectorName): 4 lanes
    of a 32-bit integer or float32 (`int4`, `uint4`, `float4`), 2 of a 64-bit one (`longlong2`, `double2`)."""
    dt = tvm.runtime.DataType(str(dtype))
    return dt.lanes == 1 and dt.bits in (32, 64) and dt.type_code in (tvm.runtime.DataTypeCode.INT,
                                                                        tvm.runtime.DataTypeCode.UINT,
                                                                        tvm.runtime.DataTypeCode.FLOAT)


def legalize_vectorized_loops(func: tirx.PrimFunc, disable_vectorize: bool = False) -> tirx.PrimFunc:
    analyzer = thread_analyzer(thread_info(func))

    def on_for(node, mutator):
        node = mutator.default_mutate(node)
        if not isinstance(node, tirx.For) or node.kind != tirx.ForKind.VECTORIZED:
            return node
        extent = as_int(node.extent)
        if (extent == 1 or stores_a_lane_invariant_element(node.body, node.loop_var)
                or select_of_lanes_under_a_binding(node.body, lane_varying_vars(node.body, node.loop_var),
                                                   node.loop_var)):
            return tirx.For(node.loop_var, node.min, node.extent, tirx.ForKind.SERIAL, node.body,
                            annotations=node.annotations)
        accesses = collect_accesses(node.body)
        if extent is None or as_int(node.min) != 0 or not accesses:
            return node
        widest = max((a.buffer.ty.dtype for a in accesses), key=dtype_bytes)
        if dtype_bytes(widest) * extent <= MAX_VECTOR_BYTES or not has_builtin_piece(widest):
            return node
        width = vector_width([extent], node.loop_var, node.body, analyzer, disable_vectorize,
                             piece_invariant_loads=True)
        if width < 2 or extent % width:
            return node
        var = node.loop_var
        outer = tirx.Var(f"{var.name}_o", var.ty.dtype)
        inner = tirx.Var(var.name, var.ty.dtype)
        body = substitute(node.body, {var: outer * width + inner})
        piece = tirx.For(inner, 0, width, tirx.ForKind.VECTORIZED, body, annotations=node.annotations)
        return tirx.For(outer, 0, extent // width, tirx.ForKind.SERIAL, piece)

    return func.with_body(tvm_ffi.structural_mutate(func.body, [(tirx.For, on_for)]))


def LegalizeVectorizedLoops(configs):  # noqa: N802 - a pass constructor, named like TVM's
    disable = CompileOptions.of(configs).disable_vectorize
    return tl_pass("LegalizeVectorizedLoops", lambda func: legalize_vectorized_loops(func, disable))
