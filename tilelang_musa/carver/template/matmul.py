"""`MatmulTemplate`: tile configurations for C (M x N) = A (M x K) @ B (N x K)^T on a MUSA arch, as upstream's
pipelined/autotuned GEMM examples read them (`hint.block`, `hint.warp`, `hint.rstep`, `hint.pipeline_stage`,
`hint.rasterization_plan`).

This is not upstream's roller (which models NVIDIA memory hierarchies). It enumerates the tiles MUSA's matrix
instructions take (block_M, block_N in {64, 128, 256}, block_K in {32, 64}, 128 or 256 threads, 2 or 3 stages),
keeps those whose pipelined operand tiles fit the arch's shared memory, and ranks them: first by how well the grid
fills whole waves of the multiprocessors, then by tile area (operand reuse), then by fewer stages. For a ranking
from modelled time, hand the hints to `tilelang.autotune`, which runs the simulator's performance model.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from typing import Any

import tvm
from tvm import te, tirx

from ...language.dtypes import canonical_dtype
from ..arch.device import MUSA
from ..roller.rasterization import NoRasterization, Rasterization, Rasterization2DRow

_BLOCKS = (64, 128, 256)
_BLOCK_K = (32, 64)
_STAGES = (2, 3)
_WARPS = (4, 8)  # 32-thread warps per block, as the upstream example counts threads (128 or 256)


@dataclass
class Hint:
    """One configuration: block = [block_M, block_N], warp = [warp_M, warp_N] (the tile of one 32-thread warp; the
    block has (block_M // warp_M) * (block_N // warp_N) of them), rstep = [block_K], pipeline_stage (stages of the
    K loop), rasterization_plan (a roller.rasterization block order)."""

    block: list[int]
    warp: list[int]
    rstep: list[int]
    pipeline_stage: int
    rasterization_plan: Rasterization = field(default_factory=NoRasterization)
    use_tc: bool = True  # MUSA's matrix instructions (SQMMA / WMMA / warp MMA) for these tile sizes

    @property
    def threads(self) -> int:
        return (self.block[0] // self.warp[0]) * (self.block[1] // self.warp[1]) * 32


class MatmulTemplate:
    """C = A @ B^T with A (M, K), B (N, K), C (M, N): `.with_arch(arch).recommend_hints(topk)`."""

    def __init__(self, M: int, N: int, K: int, in_dtype: Any = "float16", out_dtype: Any = "float16",
                 accum_dtype: Any = "float16", with_bias: bool = False) -> None:
        for name, value in (("M", M), ("N", N), ("K", K)):
            if not isinstance(value, int) or value <= 0:
                raise ValueError(f"MatmulTemplate: {name} must be a positive int; got {value!r}")
        self.M, self.N, self.K = M, N, K
        self.in_dtype, self.out_dtype = canonical_dtype(in_dtype), canonical_dtype(out_dtype)
        self.accum_dtype = canonical_dtype(accum_dtype)
        self.with_bias = with_bias
        self._arch: MUSA | None = None

    def with_arch(self, arch: MUSA) -> "MatmulTemplate":
        self._arch = arch
        return self

    @property
    def arch(self) -> MUSA:
        if self._arch is None:
            raise ValueError("MatmulTemplate: call .with_arch(tilelang.carver.arch.CUDA('musa')) first")
        return self._arch

    def has_arch(self) -> bool:
        return self._arch is not None

    def equivalent_function(self) -> tirx.PrimFunc:
        """The computation the hints are for, as a TIR function (no schedule): C = A @ B^T (+ Bias)."""
        A = te.placeholder((self.M, self.K), self.in_dtype, name="A")
        B = te.placeholder((self.N, self.K), self.in_dtype, name="B")
        k = te.reduce_axis((0, self.K), name="k")
        acc = te.compute((self.M, self.N), lambda i, j: te.sum(
            A[i, k].astype(self.accum_dtype) * B[j, k].astype(self.accum_dtype), axis=k), name="C_acc")
        args = [A, B]
        if self.with_bias:
            bias = te.placeholder((self.N,), self.out_dtype, name="Bias")
            args.append(bias)
            C = te.compute((self.M, self.N), lambda i, j: acc[i, j].astype(self.out_dtype) + bias[j], name="C")
        else:
            C = te.compute((self.M, self.N), lambda i, j: acc[i, j].astype(self.out_dtype), name="C")
        return te.create_prim_func(args + [C])

    def _fits(self, bm: int, bn: int, bk: int, stages: int) -> bool:
        elem = max(1, tvm.runtime.DataType(self.in_dtype).bits // 8)
        return (bm + bn) * bk * elem * stages <= self.arch.smem_cap

    def recommend_hints(self, topk: int = 10) -> list[Hint]:
        """Up to `topk` configurations, best first (see the module docstring for the ranking)."""
        sms = self.arch.compute_max_core
        ranked = []
        for bm, bn, bk, stages, warps in itertools.product(_BLOCKS, _BLOCKS, _BLOCK_K, _STAGES, _WARPS):
            if bm > max(64, self.M * 2) or bn > max(64, self.N * 2) or bk > max(32, self.K):
                continue  # a tile far beyond the problem computes padding
            if not self._fits(bm, bn, bk, stages):
                continue
            rows = 2 if warps == 4 else 4  # warps along M; two along N
            blocks = math.ceil(self.M / bm) * math.ceil(self.N / bn)
            wave_fill = blocks / (math.ceil(blocks / sms) * sms)
            plan = Rasterization2DRow(10) if blocks >= 2 * sms else NoRasterization()
            hint = Hint([bm, bn], [bm // rows, bn // 2], [bk], stages, plan)
            ranked.append(((-round(wave_fill, 2), -(bm * bn), stages, bk, warps), hint))
        ranked.sort(key=lambda item: item[0])
        return [hint for _, hint in ranked[:topk]]

    def get_hardware_aware_configs(self, arch: MUSA | None = None, topk: int = 10) -> list[Hint]:
        if arch is not None:
            self.with_arch(arch)
        return self.recommend_hints(topk)

    def __repr__(self) -> str:
        return (f"MatmulTemplate(M={self.M}, N={self.N}, K={self.K}, in_dtype={self.in_dtype}, "
                f"out_dtype={self.out_dtype}, accum_dtype={self.accum_dtype}, with_bias={self.with_bias})")

