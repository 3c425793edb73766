"""What a worker does with one config: compile it and, in the simulator, check it and estimate its time.

ConfigTask carries everything that takes: the config compiler (the kernel function, the call being tuned, the
compile options), the configs and the profile arguments (ref_prog, supply_prog or captured inputs, tolerances,
cost_model). A forked local worker inherits it; the Ray executor pickles it, so on Ray each of those must pickle
(TVM objects are never shipped: the kernel is built in the worker from the Python function and the config).
"""

from __future__ import annotations

import inspect
import logging
import math
from dataclasses import dataclass
from typing import Any

from ..jit import JITFunction, JITKernel
from .compilers import ConfigCompiler
from .param import COMPILE_ERROR, MISMATCH, OK, RUN_ERROR, ProfileArgs, config_params

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ConfigTask:
    """`task(i)`: config i compiled and, with `check`, checked and estimated: (status, error, estimate in ms).
    `source_files`: the kernel function's source file, which the frontend reads (shipped to Ray workers)."""

    compiler: ConfigCompiler
    configs: list[dict[str, Any]]
    profile_args: ProfileArgs
    check: bool
    source_files: tuple[str, ...] = ()

    def __call__(self, index: int) -> tuple[str, str | None, float]:
        return evaluate_config(self.compiler, self.configs[index], self.profile_args, self.check)


def source_files_of(fn: Any) -> tuple[str, ...]:
    func = fn.func if isinstance(fn, JITFunction) else fn
    try:
        path = inspect.getsourcefile(func)
    except TypeError:
        return ()
    return (path,) if path else ()


def evaluate_config(compiler: ConfigCompiler, config: dict[str, Any], p: ProfileArgs,
                    check: bool) -> tuple[str, str | None, float]:
    """Compile `config`; in the simulator (`check`) also check it and estimate its time (the cost model's, else
    the simulator's performance model's)."""
    try:
        kernel = compiler.compile(config_params(config), config.get("pass_configs"))
    except Exception as err:  # noqa: BLE001 - recorded as the config's compile error
        return COMPILE_ERROR, describe(err), math.nan
    if not check:
        return OK, None, math.nan
    try:
        inputs = kernel_inputs(kernel, p)
    except Exception as err:  # noqa: BLE001
        return RUN_ERROR, describe(err), math.nan
    status, error = check_kernel(kernel, inputs, p)
    estimate = math.nan
    if status == OK and p.cost_model is not None:
        value = p.cost_model(kernel, config)
        estimate = math.nan if value is None else float(value)
    elif status == OK:
        try:
            estimate = kernel.get_profiler(p.supply_type).model(inputs).milliseconds
        except Exception as err:  # noqa: BLE001 - a config the model cannot estimate ranks last
            logger.info("autotune: config %s has no modelled time: %s", config, describe(err))
    return status, error, estimate


def kernel_inputs(kernel: JITKernel, p: ProfileArgs) -> list[Any]:
    profiler = kernel.get_profiler(p.supply_type)
    if p.supply_prog is not None:
        return list(p.supply_prog(profiler._get_params()))
    return profiler._get_inputs()


def check_kernel(kernel: JITKernel, inputs: list[Any], p: ProfileArgs) -> tuple[str, str | None]:
    """Whether `kernel` is valid on `inputs`: matches ref_prog, or (without one) runs."""
    profiler = kernel.get_profiler(p.supply_type)
    try:
        if p.ref_prog is None or p.skip_check:
            kernel(*inputs)
        elif p.manual_check_prog is not None:
            profiler.manual_assert_close(p.ref_prog, inputs, p.manual_check_prog)
        else:
            profiler.assert_allclose(p.ref_prog, inputs, atol=p.atol, rtol=p.rtol,
                                     max_mismatched_ratio=p.max_mismatched_ratio)
    except AssertionError as err:
        return MISMATCH, describe(err)
    except Exception as err:  # noqa: BLE001 - a config that fails to run is skipped, its error kept
        return RUN_ERROR, describe(err)
    return OK, None


def describe(err: BaseException) -> str:
    text = str(err).strip()
    return f"{type(err).__name__}: {text}" if text else type(err).__name__
