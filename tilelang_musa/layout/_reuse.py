"""A layout's fields (its index maps simplified, their extents bounded), reused up to renaming of its Vars.

Every compile builds its layouts afresh (a GEMM's swizzled operand tiles and accumulator fragment, over new Vars),
and simplifying and bounding their index maps is most of building one. A layout over constant shapes whose maps use
no Var but its own inputs gets the same fields as one built before from maps equal up to renaming those inputs
(the analyzer sees nothing else), so the fields kept for it are returned over the new Vars. Maps over other Vars (a
symbolic shape, a loop variable) are built afresh each time, as is a refusal (its message names the maps).
"""

from __future__ import annotations

from typing import Any, Callable, Hashable, Sequence

import tvm_ffi
from tvm import tirx

from ._expr import Expr, IntImm, Var, all_const, substitute

_KEPT: dict[tuple, list[tuple[list, list[Var], tuple]]] = {}
_KEEP = 256


def reuse_fields(kind: str, shape: Sequence[Expr], inputs: Sequence[Var], maps: Sequence[Expr], extra: Any,
                 build: Callable[[], tuple]) -> tuple:
    """`build()`, the fields of a layout of `kind` over `inputs` (its Vars, extents `shape`) made from `maps` and
    `extra` (hashable: what else `build` reads), or those of an equal layout built before, renamed to `inputs`."""
    if not all_const(shape) or not _uses_only(maps, inputs):
        return build()
    key_map = [*inputs, *maps]
    key = (kind, tuple(int(e) for e in shape), extra, tvm_ffi.structural_hash(key_map, map_free_vars=True))
    for known_map, known_inputs, fields in _KEPT.get(key, ()):
        if tvm_ffi.structural_equal(known_map, key_map, map_free_vars=True):
            return _renamed(fields, dict(zip(known_inputs, inputs)))
    fields = build()
    while len(_KEPT) >= _KEEP:  # the oldest goes (tolerant of a compile in another thread)
        try:
            _KEPT.pop(next(iter(_KEPT)), None)
        except (StopIteration, RuntimeError):
            break
    _KEPT.setdefault(key, []).append((key_map, list(inputs), fields))
    return fields


_LAYOUT_FIELDS = ("input_size", "forward_vars", "forward_index", "output_size")
_FRAGMENT_FIELDS = _LAYOUT_FIELDS + ("replicate_var", "replicate_size", "forward_thread", "thread_extent")
_BUILT: dict[tuple, Any] = {}


def reuse_layout(key: Hashable, build: Callable[[], Any]) -> Any:
    """`build()`, a Layout or Fragment made from plain values only (`key`: all of them, with the builder's name), or
    a copy over new Vars of the one built before for the same key (a layout builder reads nothing else)."""
    known = _BUILT.get(key)
    if known is None:
        while len(_BUILT) >= _KEEP:  # the oldest goes (tolerant of a compile in another thread)
            try:
                _BUILT.pop(next(iter(_BUILT)), None)
            except (StopIteration, RuntimeError):
                break
        known = _BUILT[key] = build()
        return known
    return fresh_copy(known)


def fresh_copy(layout: Any) -> Any:
    """An equal Layout or Fragment over new Vars named as its own: a copy that shares no Var with it."""
    names = _FRAGMENT_FIELDS if hasattr(layout, "replicate_var") else _LAYOUT_FIELDS
    bound = list(layout.forward_vars) + ([layout.replicate_var] if names is _FRAGMENT_FIELDS else [])
    rename = {v: tirx.Var(v.name, v.ty) for v in bound}
    fields = [_renamed(list(value) if isinstance(value, tvm_ffi.Array) else value, rename)
              for value in (getattr(layout, name) for name in names)]
    copy = type(layout).__new__(type(layout))
    copy.__ffi_init__(*fields)
    return copy


def _uses_only(maps: Sequence[Expr], inputs: Sequence[Var]) -> bool:
    allowed = {v.__chandle__() for v in inputs}
    others: list[Var] = []
    tvm_ffi.structural_walk(list(maps), [(Var, lambda v: None if v.__chandle__() in allowed else others.append(v))])
    return not others


def _renamed(value: Any, rename: dict) -> Any:
    if isinstance(value, (list, tuple)):
        return type(value)(_renamed(v, rename) for v in value)
    if isinstance(value, Var):
        return rename.get(value, value)
    if isinstance(value, Expr) and not isinstance(value, IntImm):
        return substitute(value, rename)
    return value
