"""Tile ops by name: the TVM Op registration and the Python class of each `tl.tileop.<name>`."""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

import tvm
from tvm.tirx.script import builder as Tb

from ..ir.trace import current_trace
from .base import TileOp

_CLASSES: dict[str, type[TileOp]] = {}
_OPAQUE = 3  # CallEffectKind::kOpaque: passes must neither move nor drop a tile op
# Recently parsed calls: handle -> (the call, its op). A lowering's passes parse the same unchanged call again and
# again (StageGemmOperands, the gemm groups, LayoutInference, LowerTileOp...), ~50 parses of a GEMM. An op is a
# frozen dataclass built from the call alone, so one call's op serves every pass. The entry keeps the call alive:
# its handle cannot name another object while it is here.
_PARSED: OrderedDict[int, tuple[Any, TileOp]] = OrderedDict()
_PARSED_KEPT = 1024


def register_tile_op(cls: type[TileOp]) -> type[TileOp]:
    name = cls.op_name
    if not _op_exists(name):  # the TVM registry outlives a re-import of this module
        tvm.get_global_func("ir.RegisterOp")(name, cls.__doc__ or name)
        op = tvm.ir.Op.get(name)
        op.set_attr("TCallEffectKind", _OPAQUE)
        op.set_attr("TScriptPrinterName", name)
    _CLASSES[name] = cls
    return cls


def _op_exists(name: str) -> bool:
    try:
        tvm.ir.Op.get(name)
        return True
    except Exception:  # noqa: BLE001 - tvm raises a generic error for unknown ops
        return False


def is_tile_op(call: Any) -> bool:
    return isinstance(call, tvm.ir.Call) and isinstance(call.op, tvm.ir.Op) and str(call.op.name) in _CLASSES


def parse_tile_op(call: tvm.ir.Call) -> TileOp:
    handle = call.__chandle__()
    hit = _PARSED.get(handle)
    if hit is not None and hit[0].same_as(call):
        _PARSED.move_to_end(handle)
        return hit[1]
    op = _CLASSES[str(call.op.name)].from_call(call)
    _PARSED[handle] = (call, op)
    if len(_PARSED) > _PARSED_KEPT:
        _PARSED.popitem(last=False)
    return op


def emit_tile_op(name: str, args: list[Any], attrs: dict[str, Any]) -> None:
    """Append `Evaluate(Call(tl.tileop.<name>, args, attrs))` to the kernel being built."""
    trace = current_trace(name)
    attrs = {k: v for k, v in attrs.items() if v is not None}
    if trace.loc is not None:
        attrs["tl.loc"] = str(trace.loc)
    Tb.evaluate(tvm.ir.Call(tvm.ir.Op.get(name), args, attrs=attrs, ret_ty="int32"))
