"""`@autotune(configs=...)` stacked on `@tilelang.jit`, as upstream: calling the result with the problem tunes.

    @autotune(configs=get_configs(), warmup=10, rep=10)
    @tilelang.jit(out_idx=[-1])
    def matmul(M, N, K, block_M=128, block_N=128, block_K=32, num_stages=2):
        ...  # returns a @T.prim_func

    kernel = matmul(1024, 1024, 1024)    # tunes block_M/... over the configs; the best JITKernel
    kernel.config, kernel.latency        # its config and latency (NaN where nothing timed it)
    matmul(1024, 1024, 1024, block_M=64, block_N=64, block_K=32, num_stages=2)   # tunables given: no tuning

For an eager-style kernel (sizes from `T.const`, tensors annotated in the body) `f.compile(M=..., ...)` tunes
and returns the best kernel, and `f(a, b)` tunes for the tensors' sizes and runs the best kernel on them.
The order is upstream's: @autotune goes above @tilelang.jit (it needs the jit's compile options).
Each distinct problem is tuned once per process; the tuner's persisted results make later processes skip it.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
from typing import Any, Callable

import torch

from ..jit import JITFunction, JITKernel
from ..profiler import TensorSupplyType
from .compilers import eager_jit_compiler, lazy_jit_compiler
from .param import AutotuneResult, config_params
from . import workers
from .tuner import AutoTuner, mark_tuned


def _key_value(value: Any) -> Any:
    """A call argument as the tuning key sees it: tensors by dtype and shape (their values do not matter)."""
    if isinstance(value, torch.Tensor):
        return ("tensor", str(value.dtype), tuple(value.shape))
    if isinstance(value, (list, tuple)):
        return type(value)(_key_value(v) for v in value)
    if isinstance(value, dict):
        return {k: _key_value(v) for k, v in value.items()}
    return value


class AutoTuneImpl:
    """The callable `@autotune(...)` makes of a `@tilelang.jit` function (see the module docstring)."""

    def __init__(self, jit_impl: JITFunction, configs: Any, warmup: int = 25, rep: int = 100, timeout: float = 100,
                 supply_type: TensorSupplyType = TensorSupplyType.Auto, ref_prog: Callable | None = None,
                 supply_prog: Callable | None = None, rtol: float = 1e-2, atol: float = 1e-2,
                 max_mismatched_ratio: float = 0.01, skip_check: bool = False,
                 manual_check_prog: Callable | None = None, cache_input_tensors: bool = False,
                 do_not_specialize: list[str] | tuple[str, ...] | None = None, early_stop: bool = False,
                 early_stop_factor: float = 2.0, cost_model: Callable | None = None, executor: Any = None):
        functools.update_wrapper(self, jit_impl)
        self.jit_impl = jit_impl
        self.configs = configs
        self.run_args = dict(warmup=warmup, rep=rep, timeout=timeout, early_stop=early_stop,
                             early_stop_factor=early_stop_factor)
        self.profile_args = dict(supply_type=supply_type, ref_prog=ref_prog, supply_prog=supply_prog, rtol=rtol,
                                 atol=atol, max_mismatched_ratio=max_mismatched_ratio, skip_check=skip_check,
                                 manual_check_prog=manual_check_prog, cache_input_tensors=cache_input_tensors,
                                 cost_model=cost_model)
        self.do_not_specialize = tuple(do_not_specialize or ())
        self.executor = workers.check_executor(executor)
        self._tuner_cache: dict[Any, AutotuneResult] = {}  # problem -> result, for this process
        self.last_result: AutotuneResult | None = None

    def get_tuner(self) -> AutoTuner:
        """An AutoTuner with this decorator's compile and profile arguments (run() with its warmup/rep/timeout)."""
        options = self.jit_impl.options
        tuner = AutoTuner(self.jit_impl.func, self.configs, executor=self.executor)
        tuner.set_compile_args(out_idx=options.get("out_idx"), target=options.get("target"),
                               execution_backend=options.get("execution_backend"),
                               verbose=options.get("verbose"), pass_configs=options.get("pass_configs"))
        tuner.set_profile_args(warmup=self.run_args["warmup"], rep=self.run_args["rep"],
                               timeout=self.run_args["timeout"], **self.profile_args)
        tuner.run = functools.partial(tuner.run, **self.run_args)
        return tuner

    get_tunner = get_tuner  # upstream's spelling

    def _configs(self, args: tuple, kwargs: dict[str, Any]) -> list[dict[str, Any]]:
        tuner = AutoTuner(self.jit_impl.func, self.configs)
        tuner.set_kernel_parameters((args, kwargs))
        return tuner._resolve_configs()

    def _bind(self, args: tuple, kwargs: dict[str, Any]) -> dict[str, Any]:
        """The call's arguments by name. Keywords that are not parameters stay as given: the sizes (`T.const`) an
        eager-style function is compiled for."""
        signature = inspect.signature(self.jit_impl.func)
        bound = signature.bind_partial(*args, **{k: v for k, v in kwargs.items() if k in signature.parameters})
        return {**bound.arguments, **{k: v for k, v in kwargs.items() if k not in signature.parameters}}

    def _problem(self, args: tuple, kwargs: dict[str, Any]) -> dict[str, Any]:
        """The call as tuning sees it: arguments by name, do_not_specialize left out, tensors by dtype and shape;
        and the jit's compile flags, which CompileArgs does not carry."""
        bound = self._bind(args, kwargs)
        problem = {k: _key_value(v) for k, v in bound.items() if k not in self.do_not_specialize}
        return {"arguments": problem, "compile_flags": self.jit_impl.options.get("compile_flags")}

    def _tune(self, args: tuple, kwargs: dict[str, Any], specialization: dict[str, Any] | None) -> AutotuneResult:
        """The result for this problem: from this process's earlier calls, else from a tuning run (which reads the
        persisted results first). `specialization`: the eager style's sizes and values; None for the lazy style."""
        problem = self._problem(args, kwargs)
        key = repr(problem)
        tuner = self.get_tuner()
        if specialization is None:
            tuner.compiler = lazy_jit_compiler(self.jit_impl, args, kwargs)
        else:
            tuner.compiler = eager_jit_compiler(self.jit_impl, specialization)
        result = self._tuner_cache.get(key)
        if result is None or result.config is None:  # not tuned yet (or only compiled with given tunables)
            tuner.set_kernel_parameters((args, kwargs), problem)
            result = self._tuner_cache[key] = tuner.run()
        elif self.do_not_specialize:  # the same problem but for do_not_specialize: the best config, compiled anew
            kernel = mark_tuned(tuner.compile_config(result.config), result.config, result.latency,
                                result.ref_latency)
            result = dataclasses.replace(result, kernel=kernel, libcode=kernel.get_kernel_source(),
                                         func=kernel.program)
        self.last_result = result
        return result

    def __call__(self, *args: Any, **kwargs: Any) -> JITKernel | Any:
        return_kernel = kwargs.pop("__return_kernel", False)
        eager = self.jit_impl.is_eager
        tensors_given = any(isinstance(v, torch.Tensor) for v in (*args, *kwargs.values()))
        bound = self._bind(args, kwargs)
        configs = self._configs(args, kwargs)
        if any(k in bound for config in configs for k in config_params(config)):
            # the caller fixed the tunable parameters: compile (and run) as the jit function would, no tuning
            if eager:
                return self.jit_impl.compile(**bound) if return_kernel else self.jit_impl(*args, **kwargs)
            kernel = self.jit_impl(*args, **kwargs)
            # kept per problem, as upstream (its tuning cache counts these calls too)
            self._tuner_cache.setdefault(repr(self._problem(args, kwargs)), AutotuneResult(
                kernel=kernel, libcode=kernel.get_kernel_source(), func=kernel.program))
            return kernel
        if not eager:
            return self._tune(args, kwargs, None).kernel
        if not tensors_given:  # f.compile(M=..., N=...): sizes and values, no tensors
            return self._tune((), bound, dict(bound)).kernel
        return self._tune_and_run(bound, configs[0], return_kernel)

    def _tune_and_run(self, bound: dict[str, Any], first_config: dict[str, Any], return_kernel: bool) -> Any:
        """Eager style called with tensors: tune for their sizes, then run the best kernel on them."""
        from ..language.parser import parse_kernel
        from ..language.prim_func import discover_consts, eager_signature

        parsed = parse_kernel(self.jit_impl.func)
        tensor_names = eager_signature(parsed).tensor_params
        tensors = {k: v for k, v in bound.items() if k in tensor_names}
        values = {k: v for k, v in bound.items() if k not in tensor_names}
        params = config_params(first_config)
        consts = discover_consts(parsed, {**params, **values}, {k: tuple(t.shape) for k, t in tensors.items()})
        specialization = {**values, **consts}  # keyed as `f.compile(**specialization)`: the same tuning
        result = self._tune((), specialization, specialization)
        if return_kernel:
            return result.kernel
        return result.kernel(*[tensors[p.name] for p in result.kernel.params if not p.is_output])

    def compile(self, *args: Any, **kwargs: Any) -> JITKernel:
        """Tune (if not done) and return the best kernel."""
        return self(*args, **kwargs, __return_kernel=True)


def autotune(func: Callable | None = None, *, configs: Any, warmup: int = 25, rep: int = 100, timeout: float = 100,
             supply_type: TensorSupplyType = TensorSupplyType.Auto, ref_prog: Callable | None = None,
             supply_prog: Callable | None = None, rtol: float = 1e-2, atol: float = 1e-2,
             max_mismatched_ratio: float = 0.01, skip_check: bool = False, manual_check_prog: Callable | None = None,
             cache_input_tensors: bool = False, do_not_specialize: list[str] | tuple[str, ...] | None = None,
             early_stop: bool = False, early_stop_factor: float = 2.0, cost_model: Callable | None = None,
             executor: Any = None):
    """Decorator: tune a `@tilelang.jit` function over `configs` when it is called (see the module docstring).

    configs: a list of dicts of the function's tunable keyword parameters (each may add "pass_configs"), a dict
        of lists (every combination), or a callable taking the call's arguments and returning either.
    warmup, rep: warmup and timed runs per config on a MUSA device; timeout: seconds per config.
    ref_prog, supply_type, supply_prog, rtol, atol, max_mismatched_ratio, skip_check, manual_check_prog,
    cache_input_tensors, cost_model: see ProfileArgs. do_not_specialize: parameters whose value does not start a
    new tuning (the best config found is compiled for the new value). executor: where configs are compiled and
    checked: "local" (forked processes), "ray" (Ray tasks, on a local Ray instance or the cluster at RAY_ADDRESS),
    or an executor object; None: $TILELANG_AUTO_TUNING_EXECUTOR, else "local"."""
    if callable(func):
        raise ValueError("autotune(f, configs=...) is not supported: write @autotune(configs=...) above "
                         "@tilelang.jit")

    def decorate(impl: Any) -> AutoTuneImpl:
        if not isinstance(impl, JITFunction):
            raise TypeError("@autotune(...) applies to a @tilelang.jit function: put @autotune(...) above "
                            f"@tilelang.jit(...); got {type(impl).__name__}")
        return AutoTuneImpl(impl, configs, warmup=warmup, rep=rep, timeout=timeout, supply_type=supply_type,
                            ref_prog=ref_prog, supply_prog=supply_prog, rtol=rtol, atol=atol,
                            max_mismatched_ratio=max_mismatched_ratio, skip_check=skip_check,
                            manual_check_prog=manual_check_prog, cache_input_tensors=cache_input_tensors,
                            do_not_specialize=do_not_specialize, early_stop=early_stop,
                            early_stop_factor=early_stop_factor, cost_model=cost_model, executor=executor)

    return decorate


