"""One-time warnings for options that are accepted but cannot apply on MUSA (yet), each with its reason.

An option that is parsed and then dropped without a word is a silent miscompile waiting to happen; one that cannot
apply says so, once per process and option, as a `TileLangWarning` (filterable with Python's `warnings`).
"""

from __future__ import annotations

import warnings


class TileLangWarning(UserWarning):
    """An accepted option without effect on MUSA, or a slower fallback the compiler chose."""


_WARNED: set[str] = set()


def warn_once(key: str, message: str) -> None:
    """Warn with `message` the first time `key` is seen in this process."""
    if key in _WARNED:
        return
    _WARNED.add(key)
    warnings.warn(message, TileLangWarning, stacklevel=3)
