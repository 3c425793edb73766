"""Values computed from an immutable IR object, kept for the last few objects by structure.

A lowering builds its layouts afresh (LayoutInference makes new Fragment objects every compile), so a memo keyed on
the object misses on every compile of the same tile shapes; a memo keyed on the structure (structural hash, then
structural equality: equal up to renaming of the Vars the object defines, its free Vars compared by identity) hits
there too. Only for values that depend on nothing but the object's structure (a layout's numeric evaluation, a plan
derived from it) and that their users never mutate.
"""

from __future__ import annotations

from typing import Any, Hashable

import tvm_ffi

_MISSING = object()


class StructuralMemo:
    """At most `keep` (object, extra key) -> value entries; the oldest goes first."""

    def __init__(self, keep: int):
        self.keep = keep
        self._table: dict[tuple, list[tuple[Any, Any]]] = {}

    def __len__(self) -> int:
        return sum(len(entries) for entries in self._table.values())

    def get(self, obj: Any, extra: Hashable = (), default: Any = None) -> Any:
        """What was kept for an object structurally equal to `obj` with the same `extra`, or `default`."""
        for known, value in self._table.get(self._key(obj, extra), ()):
            if known.same_as(obj) or tvm_ffi.structural_equal(known, obj):
                return value
        return default

    def put(self, obj: Any, value: Any, extra: Hashable = ()) -> Any:
        """Keep `value` for `obj` (and `extra`); returns `value`."""
        while len(self._table) >= self.keep:  # the oldest key goes (tolerant of a compile in another thread)
            try:
                self._table.pop(next(iter(self._table)), None)
            except (StopIteration, RuntimeError):
                break
        self._table.setdefault(self._key(obj, extra), []).append((obj, value))
        return value

    def clear(self) -> None:
        self._table.clear()

    @staticmethod
    def _key(obj: Any, extra: Hashable) -> tuple:
        return tvm_ffi.structural_hash(obj), extra
