"""Tile ops (`tl.tileop.*`): one class per op. Registered here, explicitly, in one place."""

from .base import LayoutInferArgs, LowerArgs, TileOp
from .copy import Copy
from .fill import Fill
from .registry import emit_tile_op, is_tile_op, parse_tile_op, register_tile_op

for _cls in (Copy, Fill):
    register_tile_op(_cls)

__all__ = ["Copy", "Fill", "LayoutInferArgs", "LowerArgs", "TileOp", "emit_tile_op", "is_tile_op", "parse_tile_op"]
