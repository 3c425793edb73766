"""What the autotuner is told (CompileArgs, ProfileArgs) and what it answers (Trial, AutotuneResult)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Literal

from ..profiler import TensorSupplyType

# Config keys that are not kernel parameters: "pass_configs" holds PassConfig entries for that config only,
# merged over the compile arguments' pass_configs.
RESERVED_CONFIG_KEYS = frozenset({"pass_configs"})


def config_params(config: dict[str, Any]) -> dict[str, Any]:
    """A config's kernel parameters (without its "pass_configs")."""
    return {k: v for k, v in config.items() if k not in RESERVED_CONFIG_KEYS}


@dataclass(frozen=True)
class CompileArgs:
    """How every config is compiled (the arguments of `tilelang.compile`)."""

    out_idx: list[int] | int | None = None
    target: Any = "auto"
    execution_backend: str = "auto"
    target_host: Any = None
    verbose: bool = False
    pass_configs: dict[str, Any] | None = None

    def compile_program(self, program: Any, pass_configs: dict[str, Any] | None = None):
        """Compile `program` (a PrimFunc) with these arguments; `pass_configs` are merged over ours."""
        from ..jit import compile as compile_program

        merged = {**(self.pass_configs or {}), **(pass_configs or {})}
        return compile_program(program, out_idx=self.out_idx, target=self.target,
                               execution_backend=self.execution_backend, target_host=self.target_host,
                               verbose=self.verbose, pass_configs=merged or None)


@dataclass(frozen=True)
class ProfileArgs:
    """How every compiled config is checked and timed.

    ref_prog: `ref_prog(*inputs)` returns the expected outputs; a config whose outputs differ (beyond rtol/atol on
        more than max_mismatched_ratio of the elements) is invalid. Without it a config is valid when it runs.
    supply_prog: `supply_prog(params)` returns the inputs (params: the kernel's input `ParamSpec`s); else the
        profiler makes them with `supply_type` (or `set_autotune_inputs` gives them).
    manual_check_prog: `manual_check_prog(outputs, ref_outputs)` raises on mismatch, instead of the tolerance test.
    cost_model: a performance model of your own for the simulator. `cost_model(kernel, config)` returns an
        estimated time in ms (or None: no estimate). Where no MUSA device times the kernels, configs are ranked by
        it when given, instead of by the simulator's modelled device time (profiler/model.py). Not used on a
        device, which is timed.
    """

    warmup: int = 25
    rep: int = 100
    timeout: float = 30
    backend: Literal["event", "cupti", "cudagraph"] = "event"
    supply_type: TensorSupplyType = TensorSupplyType.Auto
    ref_prog: Callable | None = None
    supply_prog: Callable | None = None
    rtol: float = 1e-2
    atol: float = 1e-2
    max_mismatched_ratio: float = 0.01
    skip_check: bool = False
    manual_check_prog: Callable | None = None
    cache_input_tensors: bool = False
    cost_model: Callable[[Any, dict], float | None] | None = None


# Trial.status values: "ok" is a valid config; the others say why a config was skipped.
OK, COMPILE_ERROR, MISMATCH, RUN_ERROR, TIMEOUT = "ok", "compile_error", "mismatch", "run_error", "timeout"


@dataclass(frozen=True)
class Trial:
    """What happened to one config: `status` (ok / compile_error / mismatch / run_error / timeout), the error's
    text for a skipped config, and its latency in ms (device time, or the cost model's estimate; NaN when the
    config was not timed)."""

    index: int
    config: dict[str, Any]
    status: str
    error: str | None = None
    latency: float = math.nan

    @property
    def valid(self) -> bool:
        return self.status == OK


@dataclass(frozen=True)
class AutotuneResult:
    """The outcome of a tuning run (upstream's fields first).

    latency: the best config's time in ms (measured, or modelled in the simulator); NaN when nothing estimated it.
    config: the best config, one of the dicts given (None when tuning was skipped because the caller fixed the
        tunable parameters). kernel: its compiled JITKernel. ref_latency: ref_prog's time (NaN when not timed).
    latency_source: "musa_events" (timed on a device), "sim_model" (the simulator's modelled device time),
        "cost_model" (the ProfileArgs hook's estimate), or "none" (nothing ran: a result of no tuning).
    trials: one Trial per config, in the configs' order, each skipped one with its error.
    loaded_from_disk: the result was read back from the persisted results (no config was compiled but the best).
    """

    latency: float = math.nan
    config: dict[str, Any] | None = None
    ref_latency: float = math.nan
    libcode: str | None = None
    func: Any = None
    kernel: Any = None
    latency_source: str = "none"
    trials: list[Trial] = field(default_factory=list)
    loaded_from_disk: bool = False

    @property
    def skipped(self) -> list[Trial]:
        return [t for t in self.trials if not t.valid]
