"""AutoTuner: compile a kernel for every config, keep the valid ones, return the best with its config and latency.

    result = (AutoTuner.from_kernel(kernel=matmul, configs=get_configs())
              .set_compile_args(out_idx=[-1], target="musa")
              .set_profile_args(ref_prog=lambda a, b: a @ b, rtol=1e-2, atol=1e-2)
              .run(warmup=10, rep=50, timeout=60))
    result.config, result.latency, result.kernel, result.trials

`kernel(**config)` returns a PrimFunc. Configs are a list of dicts of its keyword parameters (plus an optional
"pass_configs" entry), a dict of lists (every combination), or a callable returning either.

A run, in order:
1. A result for this program, configs, target and package version is returned when there is one: from this
   process's earlier runs, else from the persisted results (store.py), of which only the best config is compiled
   (the kernel cache already holds its library).
2. Every config is compiled in parallel by the run's executor (workers.py): forked worker processes ("local", the
   default) or Ray tasks ("ray": `AutoTuner.from_kernel(..., executor="ray")`, `@autotune(..., executor="ray")` or
   TILELANG_AUTO_TUNING_EXECUTOR=ray), each under `timeout` seconds, with the same results; a config that fails
   to compile is skipped and its error recorded.
3. On a MUSA device, each compiled config is then, in this process and one at a time, checked against `ref_prog`
   and timed with MUSA events (`profiler.do_bench` with `warmup`/`rep` runs); the fastest valid config wins.
   In the CPU simulator wall-clock time means nothing: the workers check each config against `ref_prog` (or just
   run it when there is none) and rank the valid ones by the simulator's performance model, the modelled device
   time of one launch (`kernel.get_profiler().model()`, profiler/model.py), or by `cost_model` (ProfileArgs) when
   one is given. A config the model cannot estimate ranks after the estimated ones; ties go to the earlier
   config in the configs list (for a dict of lists, itertools.product's order: the last key varies fastest). The
   tuner says so in one message.
4. The best config is compiled here (a kernel-cache hit, unless the workers were other machines), the result is
   persisted, and returned.
"""

from __future__ import annotations

import contextlib
import inspect
import itertools
import logging
import math
import signal
import sys
import threading
from typing import Any, Callable

from tqdm.auto import tqdm

from ..jit import JITFunction, JITKernel
from ..profiler import TensorSupplyType
from ..profiler.arch_figures import ARCH_FIGURES
from . import store, workers
from .capture import get_autotune_inputs
from .compilers import ConfigCompiler, lazy_jit_compiler, program_compiler
from .evaluate import ConfigTask, check_kernel, kernel_inputs, source_files_of
from .evaluate import describe as _describe
from .param import (
    OK, RESERVED_CONFIG_KEYS, RUN_ERROR, TIMEOUT, AutotuneResult, CompileArgs, ProfileArgs, Trial, config_params,
)

logger = logging.getLogger(__name__)


class AutoTuner:
    """Tunes `fn` over `configs` (see the module docstring). `from_kernel`, `set_compile_args`,
    `set_profile_args` and `run` are upstream TileLang's, and chain."""

    # key -> result of the runs in this process (upstream's memory cache, before the persisted results)
    _memory_cache: dict[str, AutotuneResult] = {}
    _lock = threading.Lock()

    def __init__(self, fn: Callable[..., Any], configs: Any, executor: Any = None):
        self.fn = fn
        self.configs = configs
        self.executor = workers.check_executor(executor)  # None: $TILELANG_AUTO_TUNING_EXECUTOR, else "local"
        self.compile_args = CompileArgs()
        self.profile_args = ProfileArgs()
        self.compiler: ConfigCompiler | None = None  # set by @autotune; else derived from fn and compile_args
        self._kernel_parameters: tuple[tuple, dict] | None = None  # the tuned call's (args, kwargs)
        self._key_parameters: Any = None  # what of that call the persisted key covers
        self._captured_inputs = False

    @classmethod
    def from_kernel(cls, kernel: Callable[..., Any], configs: Any, executor: Any = None) -> "AutoTuner":
        """executor: where configs are compiled and checked: "local" (forked processes), "ray" (Ray tasks), or an
        executor object; None: $TILELANG_AUTO_TUNING_EXECUTOR, else "local" (workers.py)."""
        return cls(kernel, configs, executor)

    def set_compile_args(self, out_idx: list[int] | int | None = None, target: Any = None,
                         execution_backend: str | None = None, target_host: Any = None, verbose: bool | None = None,
                         pass_configs: dict[str, Any] | None = None) -> "AutoTuner":
        """How every config is compiled (`tilelang.compile`'s arguments). target None or "auto": the default
        target ($TILELANG_TARGET, else musa); execution_backend None: "auto"; verbose None: $TILELANG_VERBOSE."""
        from .. import env

        self.compile_args = CompileArgs(
            out_idx=out_idx, target="auto" if target is None else target,
            execution_backend=execution_backend or "auto", target_host=target_host,
            verbose=env.VERBOSE.flag() if verbose is None else verbose, pass_configs=pass_configs)
        return self

    def set_profile_args(self, warmup: int = 25, rep: int = 100, timeout: float = 30,
                         supply_type: TensorSupplyType = TensorSupplyType.Auto, ref_prog: Callable | None = None,
                         supply_prog: Callable | None = None, rtol: float = 1e-2, atol: float = 1e-2,
                         max_mismatched_ratio: float = 0.01, skip_check: bool = False,
                         manual_check_prog: Callable | None = None, cache_input_tensors: bool = False,
                         backend: str = "event", cost_model: Callable | None = None) -> "AutoTuner":
        """How every config is checked and timed (see ProfileArgs). Inside `with set_autotune_inputs(...)` those
        tensors are the inputs (and `supply_prog` is ignored), as upstream."""
        captured = get_autotune_inputs()
        self._captured_inputs = captured is not None
        if captured is not None:
            if supply_prog is not None:
                logger.warning("supply_prog is ignored inside `with set_autotune_inputs(...)`")
            frozen = list(captured)

            def supply_prog(params: list, _inputs: list = frozen) -> list:
                return list(_inputs)

        self.profile_args = ProfileArgs(
            warmup=warmup, rep=rep, timeout=timeout, backend=backend, supply_type=supply_type, ref_prog=ref_prog,
            supply_prog=supply_prog, rtol=rtol, atol=atol, max_mismatched_ratio=max_mismatched_ratio,
            skip_check=skip_check, manual_check_prog=manual_check_prog, cache_input_tensors=cache_input_tensors,
            cost_model=cost_model)
        return self

    def set_kernel_parameters(self, call: tuple[tuple, dict], key_parameters: Any = None) -> None:
        """The decorated call being tuned: its (args, kwargs) feed a callable `configs`; `key_parameters` (default:
        the call) is what of it the persisted key covers."""
        self._kernel_parameters = call
        self._key_parameters = call if key_parameters is None else key_parameters

    # -- configs

    def _signature_names(self) -> list[str]:
        return list(inspect.signature(self.fn).parameters)

    def _resolve_configs(self) -> list[dict[str, Any]]:
        configs = self.configs
        if callable(configs):
            args, kwargs = self._kernel_parameters or ((), {})
            args, kwargs = _fitting(configs, args, kwargs)
            configs = configs(*args, **kwargs)
        if isinstance(configs, dict):  # {"block_M": [64, 128], ...}: every combination
            keys = list(configs)
            configs = [dict(zip(keys, values)) for values in itertools.product(*(configs[k] for k in keys))]
        configs = list(configs)
        if not configs:
            raise ValueError("autotune: no configs to tune; check the configs given to @autotune / AutoTuner")
        names = set(self._signature_names())
        for config in configs:
            if not isinstance(config, dict):
                raise TypeError(f"autotune: each config must be a dict of parameter values; got {config!r}")
            unknown = set(config) - names - RESERVED_CONFIG_KEYS
            if unknown:
                raise ValueError(f"autotune: config {config} has keys {sorted(unknown)} that are not parameters of "
                                 f"`{getattr(self.fn, '__name__', self.fn)}` ({sorted(names)})")
        return configs

    # -- the persisted key

    def generate_cache_key(self, parameters: Any = None, extra_parameters: Any = None, *,
                           configs: list[dict[str, Any]] | None = None, warmup: int = 25, rep: int = 100,
                           timeout: float = 180) -> str | None:
        """The key of a run's persisted result, or None when it cannot be persisted. `parameters` and
        `extra_parameters` (upstream's signature defaults and closure values) are accepted and not needed: the
        kernel function's fingerprint covers both. Unlike upstream, callbacks (ref_prog, ...) do not prevent
        persisting: they are part of the key by source and closure."""
        del parameters, extra_parameters
        if configs is None:
            configs = self._resolve_configs()
        if self._captured_inputs:
            return None  # inputs given with set_autotune_inputs: not persisted (as upstream)
        from .. import __version__
        from ..jit.backend import resolve_backend
        from ..target import determine_target

        args, p = self.compile_args, self.profile_args
        target = determine_target(args.target)
        timed = device_timing(args)
        figures = ARCH_FIGURES.get(target.attrs["arch"])
        parts = {
            "version": __version__,
            "timed": timed,
            # the simulator ranks by the performance model: new figures, new ranking
            "model": None if timed or figures is None else figures.describe(),
            "kernel": self.fn,
            "call": self._key_parameters,
            "configs": configs,
            "compile": {"out_idx": args.out_idx, "target": str(target),
                        "backend": resolve_backend(args.execution_backend).name, "pass_configs": args.pass_configs,
                        "target_host": None if args.target_host is None else str(args.target_host)},
            "profile": {"warmup": warmup, "rep": rep, "timeout": timeout, "backend": p.backend,
                        "supply_type": p.supply_type, "ref_prog": p.ref_prog, "supply_prog": p.supply_prog,
                        "rtol": p.rtol, "atol": p.atol, "max_mismatched_ratio": p.max_mismatched_ratio,
                        "skip_check": p.skip_check, "manual_check_prog": p.manual_check_prog,
                        "cache_input_tensors": p.cache_input_tensors, "cost_model": p.cost_model},
        }
        try:
            return store.result_key(parts)
        except store.NotPersistable as err:
            print(f"[tilelang] autotune: this run's result is not persisted: {err}", file=sys.stderr)
            return None

    # -- one config

    def _compiler(self) -> ConfigCompiler:
        if self.compiler is not None:
            return self.compiler
        if isinstance(self.fn, JITFunction) and not self.fn.is_eager:
            return lazy_jit_compiler(self.fn, (), {})
        return program_compiler(self.fn, self.compile_args)

    def compile_config(self, config: dict[str, Any]) -> JITKernel:
        return self._compiler().compile(config_params(config), config.get("pass_configs"))

    def _require_generated_inputs_suffice(self, config: dict[str, Any]) -> None:
        """Inputs are generated from the parameter specs, which gives no value for a scalar parameter: without
        supply_prog (or set_autotune_inputs) such a kernel cannot be tuned. Checked on the first config's
        program before anything is compiled; a config that does not elaborate is left to the workers to report."""
        if self.profile_args.supply_prog is not None:
            return
        from tvm import tirx

        from ..ir.attrs import SIZE_PARAMS_ATTR

        try:
            program = self._compiler().program(config_params(config))
        except Exception:  # noqa: BLE001
            return
        attrs = program.attrs if program.attrs is not None else {}
        sizes = {str(s) for s in attrs[SIZE_PARAMS_ATTR]} if SIZE_PARAMS_ATTR in attrs else set()
        scalars = [p.name for p in program.params if not isinstance(p.ty, tirx.BufferType) and p.name not in sizes]
        if scalars:
            raise ValueError(
                f"autotune: `{getattr(self.fn, '__name__', 'kernel')}` takes scalar input(s) {scalars}, for which no "
                "value can be generated; give the inputs with `with set_autotune_inputs(...)` (or supply_prog=)")

    # -- the run

    def run(self, warmup: int = 25, rep: int = 100, timeout: float = 180, use_pipeline: bool = False,
            enable_grouped_compile: bool = False, group_compile_size: int = 2,
            benchmark_devices: list[int] | None = None, benchmark_multi_gpu: bool = False,
            early_stop: bool = False, early_stop_factor: float = 2.0) -> AutotuneResult:
        """Tune (see the module docstring). warmup/rep: warmup and timed runs per config on a device; timeout:
        seconds per config (compile and check in a worker, then timing here); <= 0: none. early_stop: on a device,
        a config whose first estimate exceeds early_stop_factor x the best so far is not timed further.
        use_pipeline, enable_grouped_compile, group_compile_size, benchmark_devices and benchmark_multi_gpu are
        accepted for upstream scripts and change nothing: configs compile in separate processes and are timed on
        the current device."""
        del use_pipeline, enable_grouped_compile, group_compile_size, benchmark_devices, benchmark_multi_gpu
        if early_stop and early_stop_factor < 1.0:
            raise ValueError(f"early_stop_factor must be >= 1.0; got {early_stop_factor}")
        configs = self._resolve_configs()
        persist = store.persistence_enabled()
        key = self.generate_cache_key(configs=configs, warmup=warmup, rep=rep, timeout=timeout) if persist else None
        if key is not None:
            with self._lock:
                cached = self._memory_cache.get(key)
            if cached is not None:
                return cached
            result = self._load(key, configs)
            if result is not None:
                with self._lock:
                    self._memory_cache[key] = result
                return result

        self._require_generated_inputs_suffice(configs[0])
        timed = device_timing(self.compile_args)
        name = getattr(self.fn, "__name__", "kernel")
        if not timed:
            print(_untimed_message(self.profile_args), file=sys.stderr)
        trials = self._compile_and_check(configs, name, check=not timed, timeout=timeout)
        ref_latency = math.nan
        if timed:
            trials, ref_latency = self._time_on_device(trials, warmup, rep, timeout,
                                                       early_stop_factor if early_stop else None)
        source = "musa_events" if timed else "cost_model" if self.profile_args.cost_model is not None else "sim_model"
        best = _best(trials)
        if best is None:
            lines = "\n".join(f"  config {t.index} {t.config}: {t.status}: {_first_line(t.error)}" for t in trials)
            raise RuntimeError(f"autotune: no valid config for `{name}`; every config was skipped:\n{lines}")
        result = self._result(configs, best, trials, ref_latency, source, loaded=False)
        if key is not None:
            path = store.save(key, best.index, best.latency, ref_latency, source, trials)
            logger.info("autotune: result persisted in %s", path)
            with self._lock:
                self._memory_cache[key] = result
        return result

    def __call__(self) -> AutotuneResult:
        return self.run()

    def _compile_and_check(self, configs: list[dict[str, Any]], name: str, check: bool,
                           timeout: float) -> list[Trial]:
        trials: list[Trial | None] = [None] * len(configs)
        executor = workers.executor_for(self.executor, len(configs))
        # what a worker needs, whole: a forked one inherits it, a Ray one receives it pickled
        task = ConfigTask(self._compiler(), configs, self.profile_args, check, source_files_of(self.fn))
        where = "" if executor.name == "local" else f", on {executor.name}"
        desc = f"Tuning {name} (compile + check{where})" if check else f"Compiling {name}{where}"
        with tqdm(total=len(configs), desc=desc, unit="config", file=sys.stderr) as bar:

            def on_done(i: int, value: Any, failure: tuple[str, str] | None) -> None:
                if failure is None:
                    status, error, latency = value
                else:
                    kind, text = failure
                    status = TIMEOUT if kind == workers.TIMED_OUT else RUN_ERROR
                    error = f"{text} (while compiling or checking the config)" if kind == workers.DIED else text
                    latency = math.nan
                trials[i] = Trial(i, configs[i], status, error, latency)
                if status != OK:
                    bar.write(f"[tilelang] autotune: config {i} {configs[i]} skipped ({status}): {_first_line(error)}",
                              file=sys.stderr)
                bar.update(1)
                bar.set_postfix(valid=sum(1 for t in trials if t is not None and t.valid))

            executor.run_tasks(len(configs), task, timeout if timeout and timeout > 0 else None, on_done)
        return list(trials)

    def _time_on_device(self, trials: list[Trial], warmup: int, rep: int, timeout: float,
                        early_stop_factor: float | None) -> tuple[list[Trial], float]:
        """Check and time every compiled config here, one at a time, with MUSA events."""
        p = self.profile_args
        timed: list[Trial] = []
        ref_latency = math.nan
        best = math.inf
        inputs = None
        compiled = [t for t in trials if t.valid]
        with tqdm(total=len(compiled), desc="Benchmarking configurations", unit="config", file=sys.stderr) as bar:
            for trial in trials:
                if not trial.valid:
                    timed.append(trial)
                    continue
                try:
                    with _deadline(timeout):
                        kernel = self.compile_config(trial.config)  # the workers built it: a kernel-cache hit
                        if inputs is None or not p.cache_input_tensors:
                            inputs = kernel_inputs(kernel, p)
                        status, error = check_kernel(kernel, inputs, p)
                        latency = math.nan
                        if status == OK:
                            profiler = kernel.get_profiler(p.supply_type)
                            baseline = best * early_stop_factor if early_stop_factor and best < math.inf else None
                            latency = profiler.do_bench(n_warmup=warmup, n_repeat=rep, input_tensors=inputs,
                                                        backend=p.backend, early_stop_baseline=baseline)
                            if p.ref_prog is not None and math.isnan(ref_latency):
                                ref_latency = profiler.do_bench(p.ref_prog, n_warmup=warmup, n_repeat=rep,
                                                                input_tensors=inputs, backend=p.backend)
                except _Timeout:
                    status, error, latency = TIMEOUT, f"did not finish within the {timeout:g} s timeout", math.nan
                except Exception as err:  # noqa: BLE001
                    status, error, latency = RUN_ERROR, _describe(err), math.nan
                timed.append(Trial(trial.index, trial.config, status, error, latency))
                if status == OK:
                    best = min(best, latency)
                    bar.write(f"[tilelang] autotune: config {trial.index} {trial.config}: {latency:.4f} ms",
                              file=sys.stderr)
                else:
                    bar.write(f"[tilelang] autotune: config {trial.index} {trial.config} skipped ({status}): "
                              f"{_first_line(error)}", file=sys.stderr)
                bar.update(1)
                bar.set_postfix(best_ms=best)
        return timed, ref_latency

    def _load(self, key: str, configs: list[dict[str, Any]]) -> AutotuneResult | None:
        record = store.load(key, len(configs))
        if record is None:
            return None
        trials = store.trials_from_record(record, configs)
        best = trials[record["best_index"]]
        ref_latency = math.nan if record.get("ref_latency") is None else float(record["ref_latency"])
        try:
            return self._result(configs, best, trials, ref_latency, record.get("latency_source", "none"), loaded=True)
        except Exception as err:  # noqa: BLE001 - the best config no longer compiles: tune again
            logger.warning("autotune: the persisted best config %s does not compile any more (%s); tuning again",
                           best.config, _first_line(_describe(err)))
            return None

    def _result(self, configs: list[dict[str, Any]], best: Trial, trials: list[Trial], ref_latency: float,
                source: str, loaded: bool) -> AutotuneResult:
        kernel = mark_tuned(self.compile_config(best.config), configs[best.index], best.latency, ref_latency)
        return AutotuneResult(latency=best.latency, config=dict(configs[best.index]), ref_latency=ref_latency,
                              libcode=kernel.get_kernel_source(), func=kernel.program, kernel=kernel,
                              latency_source=source, trials=trials, loaded_from_disk=loaded)


def mark_tuned(kernel: JITKernel, config: dict[str, Any], latency: float, ref_latency: float) -> JITKernel:
    """Upstream's attributes of a tuned JITKernel: `config`, `latency`, `ref_latency`."""
    kernel.config, kernel.latency, kernel.ref_latency = dict(config), latency, ref_latency
    return kernel


def device_timing(compile_args: CompileArgs) -> bool:
    """Whether configs are timed: kernels run on a MUSA device (not in the CPU simulator)."""
    from ..jit.backend import resolve_backend

    return resolve_backend(compile_args.execution_backend).device != "cpu"


def _fitting(fn: Callable, args: tuple, kwargs: dict[str, Any]) -> tuple[tuple, dict[str, Any]]:
    """Of a call's (args, kwargs), what `fn` accepts, so that `configs=lambda M, N, K: ...` works for a call that
    also passes other parameters."""
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return args, kwargs
    kinds = {p.kind for p in params}
    if inspect.Parameter.VAR_POSITIONAL not in kinds:
        positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        args = args[:len(positional)]
    if inspect.Parameter.VAR_KEYWORD not in kinds:
        names = {p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
        kwargs = {k: v for k, v in kwargs.items() if k in names}
    return args, kwargs


def _best(trials: list[Trial]) -> Trial | None:
    """The fastest valid trial (ties, and valid trials without a latency after the others: the earlier config)."""
    valid = [t for t in trials if t.valid]
    if not valid:
        return None
    return min(valid, key=lambda t: (math.isnan(t.latency), t.latency if not math.isnan(t.latency) else 0.0,
                                     t.index))


def _untimed_message(p: ProfileArgs) -> str:
    check = ("checked against ref_prog" if p.ref_prog is not None and not p.skip_check
             else "run once (no ref_prog to check against)")
    pick = ("the valid config with the lowest cost_model estimate is taken" if p.cost_model is not None
            else "the valid config with the lowest modelled device time (profiler.model()) is taken")
    return (f"[tilelang] autotune: no MUSA device, so no config is timed: each config is compiled and {check} "
            f"in the CPU simulator, and {pick}.")


def _first_line(text: str | None) -> str:
    return (text or "").strip().splitlines()[0] if text and text.strip() else ""


class _Timeout(Exception):
    pass


@contextlib.contextmanager
def _deadline(seconds: float):
    """Raise _Timeout in the block after `seconds` (SIGALRM: main thread of a POSIX process only; elsewhere, and
    for seconds <= 0, no deadline)."""
    if not seconds or seconds <= 0 or not hasattr(signal, "SIGALRM") \
            or threading.current_thread() is not threading.main_thread():
        yield
        return

    def expire(signum: int, frame: Any) -> None:
        raise _Timeout()

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, float(seconds))
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
