"""Upstream's `tilelang.tools.Analyzer`: a static estimate of a program's work, read from its tile ops before
lowering. `Analyzer.analysis(program, device)` counts the FLOPs of every `T.gemm` (2 M N K) and the global-memory
bytes of every `T.copy` to or from a tensor and every `T.im2col` tile, each times the blocks of its kernel and the trip counts of the loops
around it, and estimates the time from the MUSA device's peak figures (profiler/arch_figures.py): the larger of
FLOPs / peak matrix FLOP/s and bytes / peak DRAM bandwidth. For run-time counters and a modelled time of the
lowered kernel, run it under `tilelang.profiler` instead."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import tvm
from tvm import tirx

from ..errors import CompileError


@dataclass(frozen=True)
class AnalysisResult:
    total_flops: int
    total_global_bytes: int
    estimated_time: float  # seconds
    expected_tflops: float
    expected_bandwidth_GBps: float


def _const(value: Any, what: str) -> int:
    if isinstance(value, int):
        return value
    if isinstance(value, tirx.IntImm):
        return int(value.value)
    raise CompileError(f"tilelang.tools.Analyzer: {what} = {value} is not a compile-time constant")


def _dtype_bytes(region: Any) -> int:
    return max(tvm.DataType(region.dtype).bits * tvm.DataType(region.dtype).lanes // 8, 1)


def _elements(region: Any) -> int:
    count = 1
    for extent in region.extents:
        count *= _const(extent, f"the extent of {region.name}")
    return count


class Analyzer:
    """FLOPs and global bytes of a TileLang program, and the time they take at the device's peak rates."""

    def __init__(self, fn: Any, device: Any = None):
        if isinstance(fn, tvm.IRModule):
            functions = list(fn.functions.values())
            if len(functions) != 1:
                raise CompileError(f"tilelang.tools.Analyzer takes one PrimFunc; the IRModule has {len(functions)}")
            fn = functions[0]
        if not isinstance(fn, tirx.PrimFunc):
            raise TypeError(f"tilelang.tools.Analyzer expects a @T.prim_func; got {type(fn).__name__}")
        self.fn = fn
        self.device = device
        self.total_flops = 0
        self.total_global_bytes = 0

    def _visit(self, stmt: Any, times: int) -> None:
        from ..tileop.copy import Copy
        from ..tileop.gemm.base import Gemm
        from ..tileop.im2col import Im2Col
        from ..tileop.registry import is_tile_op, parse_tile_op

        if isinstance(stmt, tirx.SeqStmt):
            for child in stmt.seq:
                self._visit(child, times)
        elif isinstance(stmt, tirx.For):
            self._visit(stmt.body, times * _const(stmt.extent, "a loop's trip count"))
        elif isinstance(stmt, tirx.AttrStmt) and stmt.attr_key == "thread_extent":
            tag = str(stmt.node.thread_tag)
            blocks = _const(stmt.value, f"the extent of {tag}") if tag.startswith("blockIdx") else 1
            self._visit(stmt.body, times * blocks)
        elif isinstance(stmt, tirx.IfThenElse):  # both branches counted: an upper bound
            self._visit(stmt.then_case, times)
            if stmt.else_case is not None:
                self._visit(stmt.else_case, times)
        elif isinstance(stmt, tirx.Evaluate):
            if not is_tile_op(stmt.value):
                return
            op = parse_tile_op(stmt.value)
            if isinstance(op, Gemm):
                self.total_flops += 2 * op.M * op.N * op.K * times
            elif isinstance(op, Copy):
                # an origin (`A[by * 64, k]`) takes the on-chip side's extents: count those, at the tensor's width
                tensors = [r for r in (op.src, op.dst) if r.scope == "global"]
                on_chip = [r for r in (op.src, op.dst) if r.scope != "global"]
                if tensors:
                    counted = on_chip[0] if on_chip else op.dst
                    self.total_global_bytes += _elements(counted) * _dtype_bytes(tensors[0]) * times
            elif isinstance(op, Im2Col):  # one column tile gathered from the image (padding counted as read)
                self.total_global_bytes += _elements(op.col) * _dtype_bytes(op.img) * times
        elif hasattr(stmt, "body"):
            self._visit(stmt.body, times)

    def _figures(self) -> Any:
        from ..profiler.arch_figures import figures_for
        from ..target import arch_of, determine_target

        target = getattr(self.device, "target", None)
        return figures_for(arch_of(determine_target(target if target is not None else "auto")).name)

    def analyze(self) -> AnalysisResult:
        self._visit(self.fn.body, 1)
        figures = self._figures()
        compute = self.total_flops / figures.peak_tensor_flops
        memory = self.total_global_bytes / figures.dram_bytes_per_s
        seconds = max(compute, memory)
        return AnalysisResult(self.total_flops, self.total_global_bytes, seconds,
                              self.total_flops / seconds / 1e12 if seconds else 0.0,
                              self.total_global_bytes / seconds / 1e9 if seconds else 0.0)

    @classmethod
    def analysis(cls, fn: Any, device: Any = None) -> AnalysisResult:
        return cls(fn, device).analyze()
