"""How a block's instruction groups split a gemm's M x N tile: `T.GemmWarpPolicy`.

A *group* is the set of threads one MMA instruction runs on (mma_layouts.py: a warp for WMMA and mp_22 MMA, a
squad of 4 warps for SQMMA). `policy.partition(M, N, num_groups, atom_m, atom_n)` returns `(g_m, g_n)`,
`g_m * g_n == num_groups`, such that each group's tile (M / g_m) x (N / g_n) is a whole number of
atom_m x atom_n instruction atoms:

* FullRow: as many groups along M as possible (each group owns whole rows when g_n == 1);
* FullCol: as many groups along N as possible;
* Square: the most square group tile (|log(tile_m / tile_n)| smallest), ties to more groups along M.

SQMMA (MUSA_LAYOUTS section 3, "warps along M in multiples of 4"): partition in squads, so g_m squads are
4 * g_m warps along M and g_n warps along N; `sqmma_warp_grid` gives that warp grid.
"""

from __future__ import annotations

import math
from enum import IntEnum

from .layout import LayoutError


class GemmWarpPolicy(IntEnum):
    """Upstream's policies (same values)."""

    Square = 0
    FullRow = 1
    FullCol = 2

    def is_square(self) -> bool:
        return self == GemmWarpPolicy.Square

    def is_full_row(self) -> bool:
        return self == GemmWarpPolicy.FullRow

    def is_full_col(self) -> bool:
        return self == GemmWarpPolicy.FullCol

    def partition(self, M: int, N: int, num_groups: int, atom_m: int, atom_n: int) -> tuple[int, int]:
        """(g_m, g_n): groups along M and along N (see the module docstring)."""
        for name, value in (("M", M), ("N", N), ("num_groups", num_groups), ("atom_m", atom_m), ("atom_n", atom_n)):
            if not isinstance(value, int) or value <= 0:
                raise LayoutError(f"GemmWarpPolicy.partition: {name} must be a positive int, got {value!r}")
        valid = [(g_m, num_groups // g_m) for g_m in range(1, num_groups + 1)
                 if num_groups % g_m == 0 and M % (g_m * atom_m) == 0 and N % ((num_groups // g_m) * atom_n) == 0]
        if not valid:
            raise LayoutError(
                f"T.gemm: no way to split the {M} x {N} tile over {num_groups} instruction groups (policy "
                f"{self.name}): every group must own a multiple of {atom_m} rows and {atom_n} columns; "
                "change the thread count or the block tile")
        if self == GemmWarpPolicy.FullRow:
            return max(valid)
        if self == GemmWarpPolicy.FullCol:
            return min(valid)
        return min(valid, key=lambda p: (round(abs(math.log((M / p[0]) / (N / p[1]))), 9), -p[0]))

    def compute_warp_partition(self, M: int, N: int, num_warps: int, atom_m: int = 16,
                               atom_n: int = 8) -> tuple[int, int]:
        """Upstream's spelling, in warps, with the mp_31 WMMA m16n8 atom by default."""
        return self.partition(M, N, num_warps, atom_m, atom_n)


def sqmma_warp_grid(g_m: int, g_n: int) -> tuple[int, int]:
    """(warps along M, warps along N) of a g_m x g_n grid of SQMMA squads: a squad's 4 warps stack along M."""
    return 4 * g_m, g_n
