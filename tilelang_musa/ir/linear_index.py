"""A flat (row-major) index and the coordinates it stands for: `index_to_coordinates(index, shape)` and its inverse
`linear_index(*coords, *strides)`, upstream's helpers for kernels that walk a tile by one flat counter (a thread's
vector of a tile: `vi, vj = T.index_to_coordinates(i * threads * vec + tx * vec + v, tile.shape)`). Plain
arithmetic on ints or PrimExprs, folded by the usual simplification."""

from __future__ import annotations

from typing import Any, Sequence


def index_to_coordinates(index: Any, shape: Sequence[Any]) -> list[Any]:
    """The coordinates, one a dimension of `shape`, of row-major element `index`: the last dimension varies fastest."""
    if len(shape) == 0:
        raise ValueError("index_to_coordinates: the shape has no dimensions")
    coordinates = []
    for extent in reversed(list(shape)):
        coordinates.append(index % extent)
        index = index // extent
    coordinates.reverse()
    return coordinates


def linear_index(*args: Any) -> Any:
    """`linear_index(c0, c1, ..., cn, s1, ..., sn)`: the flat index of coordinates c0..cn where si is the extent of
    dimension i (c0 * s1 * ... * sn + ... + cn): n coordinates take n - 1 strides."""
    if not args:
        raise ValueError("linear_index: at least one coordinate is required")
    count = (len(args) + 1) // 2
    coordinates, strides = args[:count], args[count:]
    if len(strides) != len(coordinates) - 1:
        raise ValueError(f"linear_index: {len(coordinates)} coordinate(s) take {len(coordinates) - 1} stride(s); "
                         f"got {len(args)} arguments")
    flat = coordinates[0]
    for coordinate, stride in zip(coordinates[1:], strides):
        flat = flat * stride + coordinate
    return flat


__all__ = ["index_to_coordinates", "linear_index"]
