"""Which T.gemm ops accumulate into the same fragment (they choose their instruction together), and which
fragments are filled from an accumulator (a path that can stage them does).

Two gemms into one accumulator (`acc_s` = Q @ KV^T over the latent part, then += Q_pe @ K_pe^T over the rope
part) must leave it in one layout; the gemm registry (tileop/gemm/registry.py) makes the joint choice from
this map. Read by every pass that asks a gemm for its path (StageGemmOperands, LayoutInference, LowerTileOp),
each on the function as it stands then, so all three see the same groups.
"""

from __future__ import annotations

import tvm_ffi
from tvm import tirx

from ..ir.utils import collect_accesses, scope_of
from ..tileop import is_tile_op, parse_tile_op
from ..tileop.copy import Copy
from ..tileop.gemm import Gemm


def accumulator_groups(func: tirx.PrimFunc) -> dict:
    """Accumulator fragment -> the gemms into it, in program order (only fragments with two or more)."""
    groups: dict = {}

    def on_eval(node):
        if is_tile_op(node.value):
            op = parse_tile_op(node.value)
            if isinstance(op, Gemm):
                groups.setdefault(op.C.buffer, []).append(op)

    tvm_ffi.structural_walk(func.body, [(tirx.Evaluate, on_eval)])
    return {buf: tuple(ops) for buf, ops in groups.items() if len(ops) > 1}


def accumulator_fed_fragments(func: tirx.PrimFunc) -> frozenset:
    """Fragments filled from a gemm's accumulator: by `T.copy(acc, frag)` or an element-wise store that reads it
    (`frag[i, j] = acc[i, j]`), directly or through other such fragments (P = softmax(S) cast for the next gemm)."""
    sources: set = set()
    edges: list = []  # (source buffer, filled fragment)

    def on_eval(node):
        if not is_tile_op(node.value):
            return
        op = parse_tile_op(node.value)
        if isinstance(op, Gemm):
            sources.add(op.C.buffer)
        elif isinstance(op, Copy) and op.src.scope == "local.fragment" and op.dst.scope == "local.fragment":
            edges.append((op.src.buffer, op.dst.buffer))

    def on_store(node):
        if scope_of(node.buffer) != "local.fragment" or len(node.indices) < 2:
            return
        for access in collect_accesses(node.value):
            if scope_of(access.buffer) == "local.fragment" and len(access.indices) >= 2:
                edges.append((access.buffer, node.buffer))

    tvm_ffi.structural_walk(func.body, [(tirx.Evaluate, on_eval), (tirx.BufferStore, on_store)])
    fed: set = set()
    changed = True
    while changed:  # to the fixed point: fragments filled from fed fragments are fed too
        changed = False
        for src, dst in edges:
            if (src in sources or src in fed) and dst not in fed and dst not in sources:
                fed.add(dst)
                changed = True
    return frozenset(fed)
