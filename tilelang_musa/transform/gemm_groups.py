"""Which T.gemm ops accumulate into the same fragment: they choose their instruction together.

Two gemms into one accumulator (`acc_s` = Q @ KV^T over the latent part, then += Q_pe @ K_pe^T over the rope
part) must leave it in one layout; the gemm registry (tileop/gemm/registry.py) makes the joint choice from
this map. Read by every pass that asks a gemm for its path (StageGemmOperands, LayoutInference, LowerTileOp),
each on the function as it stands then, so all three see the same groups.
"""

from __future__ import annotations

import tvm_ffi
from tvm import tirx

from ..tileop import is_tile_op, parse_tile_op
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
