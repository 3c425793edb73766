"""`T.ws(*squads)`: a region of the kernel that only the listed squads (warp groups of 128 threads) run.

Explicit warp specialization, as Moore Threads' kernels write it: a producer squad copies while consumer squads
compute, each in its own region:

    with T.Kernel(grid, threads=256):
        with T.ws(1):                      # threads 128..255
            T.copy(A[...], A_shared)
        with T.ws(0):                      # threads 0..127
            T.gemm(A_shared, B_shared, C_local)

A squad is 128 threads on both architectures (4 warps of 32 on mp_31, one warp of 128 on mp_22), numbered over
the block's linear thread id. The region is an `if` on that id (`128 <= tid < 256` for T.ws(1)); the tile ops and
T.Parallel loops inside are laid out and run on the region's threads only (LayoutInference, LowerTileOp), and the
barriers the compiler puts inside become barriers over those threads (transform/range_barriers.py). Squads that
are not contiguous (T.ws(0, 2)) give a region that plain statements may use but tile ops may not.
"""

from __future__ import annotations

from typing import Any

import tvm
from tvm import tirx
from tvm.tirx.script import builder as Tb

from ..ir.attrs import SQUAD_THREADS, WS_ATTR
from .builder import kernel_trace, static_value


def linear_thread_id(kernel: Any) -> Any:
    """threadIdx.x + threadIdx.y * X + threadIdx.z * X * Y of the open kernel."""
    tid, stride = None, 1
    for var, extent in zip(kernel.thread_vars, kernel.threads):
        term = var if stride == 1 else var * stride
        tid = term if tid is None else tid + term
        stride *= static_value(extent)
    return tid


def _runs(squads: list[int]) -> list[tuple[int, int]]:
    """Sorted squads as runs of consecutive ones: [0, 1, 3] -> [(0, 2), (3, 4)]."""
    runs: list[tuple[int, int]] = []
    for s in sorted(squads):
        if runs and runs[-1][1] == s:
            runs[-1] = (runs[-1][0], s + 1)
        else:
            runs.append((s, s + 1))
    return runs


class ws:  # noqa: N801 - a language construct, spelled as upstream spells it
    """`with T.ws(*squads):` the body runs on the listed squads only: squad s is threads 128*s .. 128*s + 127 of
    the block's linear thread id. `T.ws(1)` = `128 <= tid < 256`, `T.ws(0, 1, 2, 3)` = `tid < 512`.
    Tile ops inside need contiguous squads (their layouts are made for one range of threads).

    Example: with T.ws(0): T.gemm(A_shared, B_shared, C_local)  # squad 0 computes, the others do not"""

    def __init__(self, *squads: Any):
        trace = kernel_trace("T.ws")
        self.construct = f"T.ws({', '.join(map(str, squads))})"
        if not squads:
            raise trace.error("T.ws needs at least one squad index (T.ws(0) runs the body on threads 0..127)")
        values = [static_value(s) for s in squads]
        if any(not isinstance(v, int) or isinstance(v, bool) for v in values):
            raise trace.error(f"{self.construct}: squad indices must be compile-time integers")
        if len(set(values)) != len(values):
            raise trace.error(f"{self.construct}: a squad is listed twice")
        kernel = trace.kernel
        if not kernel.thread_vars or any(static_value(t) is None for t in kernel.threads):
            raise trace.error(f"{self.construct} needs a kernel with a compile-time number of threads")
        block = kernel.num_threads
        for s in values:
            if s < 0 or s * SQUAD_THREADS >= block:
                raise trace.error(
                    f"{self.construct}: squad {s} would be threads {s * SQUAD_THREADS}..{(s + 1) * SQUAD_THREADS - 1}, "
                    f"but the block has {block} threads (squads 0..{(block - 1) // SQUAD_THREADS})")
        self.squads = values
        self.block = block
        self.tid = linear_thread_id(kernel)
        self.label = f"{self.construct} at {trace.loc}" if trace.loc is not None else self.construct
        self._frames: list[Any] = []

    def condition(self) -> Any:
        """`lo <= tid and tid < hi` for each run of consecutive squads, or-ed; None for the whole block."""
        terms = []
        for a, b in _runs(self.squads):
            lo, hi = a * SQUAD_THREADS, min(b * SQUAD_THREADS, self.block)
            parts = ([tirx.LE(tirx.const(lo, "int32"), self.tid)] if lo > 0 else []) + \
                ([tirx.LT(self.tid, tirx.const(hi, "int32"))] if hi < self.block else [])
            if not parts:
                return None
            terms.append(parts[0] if len(parts) == 1 else tirx.And(parts[0], parts[1]))
        cond = terms[0]
        for term in terms[1:]:
            cond = tirx.Or(cond, term)
        return cond

    def __enter__(self) -> None:
        frames = [Tb.attr(tirx.const(0, "int32"), WS_ATTR, tvm.ir.expr.StringImm(self.label))]
        cond = self.condition()
        if cond is not None:
            frames += [Tb.If(cond), Tb.Then()]
        for frame in frames:
            frame.__enter__()
            self._frames.append(frame)

    def __exit__(self, *exc: Any) -> None:
        while self._frames:
            self._frames.pop().__exit__(*exc)
