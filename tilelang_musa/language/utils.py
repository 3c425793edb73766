"""`tilelang.language.utils` as upstream names it: the flat-index helpers (ir/linear_index.py)."""

from ..ir.linear_index import index_to_coordinates, linear_index

__all__ = ["index_to_coordinates", "linear_index"]
