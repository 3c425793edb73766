"""Tile ops (`tl.tileop.*`): one class per op. Registered here, explicitly, in one place."""

from .atomic import Atomic
from .base import LayoutInferArgs, LowerArgs, TileOp
from .copy import Copy
from .fill import Fill
from .finalize_reducer import FinalizeReducer
from .im2col import Im2Col
from .gemm import Gemm
from .reduce import Reduce
from .scan import CumMax, CumSum
from .transpose import Transpose
from .tme_copy import TmeCopy
from .registry import emit_tile_op, is_tile_op, parse_tile_op, register_tile_op

for _cls in (Atomic, Copy, CumMax, CumSum, Fill, FinalizeReducer, Gemm, Im2Col, Reduce, TmeCopy,
             Transpose):
    register_tile_op(_cls)

__all__ = ["Atomic", "Copy", "CumMax", "CumSum", "Fill", "FinalizeReducer", "Gemm", "Im2Col", "Reduce", "LayoutInferArgs",
           "LowerArgs", "TmeCopy", "Transpose", "TileOp", "emit_tile_op", "is_tile_op", "parse_tile_op"]
