"""Tile ops by name: the TVM Op registration and the Python class of each `tl.tileop.<name>`."""

from __future__ import annotations

from typing import Any

import tvm
from tvm.tirx.script import builder as Tb

from ..ir.trace import current_trace
from .base import TileOp

_CLASSES: dict[str, type[TileOp]] = {}
_OPAQUE = 3  # CallEffectKind::kOpaque: passes must neither move nor drop a tile op


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
    return _CLASSES[str(call.op.name)].from_call(call)


def emit_tile_op(name: str, args: list[Any], attrs: dict[str, Any]) -> None:
    """Append `Evaluate(Call(tl.tileop.<name>, args, attrs))` to the kernel being built."""
    trace = current_trace(name)
    attrs = {k: v for k, v in attrs.items() if v is not None}
    if trace.loc is not None:
        attrs["tl.loc"] = str(trace.loc)
    Tb.evaluate(tvm.ir.Call(tvm.ir.Op.get(name), args, attrs=attrs, ret_ty="int32"))
