"""T.Pipelined's num_stages against the shared memory the kernel really plans: lower with the stages asked for, and
only when PlanDynamicSharedMemory finds the arena past the target's limit, lower again from PipelinePlanning with
one stage fewer (a TileLangWarning names the loop and the bytes), down to none: a loop that does not fit even at
one stage runs in order (upstream's num_stages=0), its copies done before the iteration's compute reads them.

An estimate made before lowering cannot be exact: the planner shares bytes between tiles in use at different
times, statement by statement past the limit (shared_memory_lifetimes.py), and adds the compiler's own tiles (staged
gemm operands, layout exchanges, reduction scratch) that exist only later. So the planner decides: a kernel whose
stages fit only thanks to its sharing keeps them. A kernel that needs no fewer stages costs nothing more; one that
does costs a lowering per stage dropped (the passes after PipelinePlanning).
"""

from __future__ import annotations

from typing import Any, Callable

from ..diagnostics import warn_once
from .pass_base import run_pass
from .pipeline_planning import PipelinePlanning, StageCap, requested_stages
from .plan_dynamic_shared_memory import SharedMemoryOverLimit

PLANNING = "tl.PipelinePlanning"


def _warn(cap: StageCap) -> None:
    for loc, requested in cap.lowered:
        warn_once(f"T.Pipelined stages {loc} {requested} {cap.stages}",
                  f"{loc}: T.Pipelined(num_stages={requested}) would need {cap.needed} bytes of shared memory as "
                  f"planned (its tiles' copies and the compiler's own tiles), more than the target's {cap.limit} per "
                  f"block; " + (f"pipelined with num_stages={cap.stages} instead" if cap.stages else
                                "not pipelined instead (num_stages=0: its copies complete before each iteration's "
                                "compute)"))


def run_fitting_stages(passes: list[Any], mod: Any, dump: Callable[[str, Any], None] | None = None) -> Any:
    """`passes` run on `mod` in order (each dumped as `NN_name`), with PipelinePlanning's stages lowered while the
    planned shared memory does not fit; the last attempt's error when the loop does not fit unpipelined either."""
    names = [p.info.name for p in passes]
    start = names.index(PLANNING) if PLANNING in names else None
    first_error: SharedMemoryOverLimit | None = None
    before_planning = None
    index, stages, cap = 0, None, None
    while True:
        try:
            for index in range(index, len(passes)):
                if index == start:
                    before_planning = mod
                mod = run_pass(passes[index], mod)
                if dump is not None:
                    dump(f"{index:02d}_{passes[index].info.name}", mod)
            if cap is not None:
                _warn(cap)
            return mod
        except SharedMemoryOverLimit as error:
            if before_planning is None:
                raise
            first_error = first_error or error
            if stages is None:
                (func,) = before_planning.functions.values()
                stages = requested_stages(func)
            stages -= 1
            if stages < 0:
                raise
            cap = StageCap(stages, first_error.needed, first_error.limit)
            passes = [*passes[:start], PipelinePlanning(cap), *passes[start + 1:]]
            mod, index = before_planning, start
