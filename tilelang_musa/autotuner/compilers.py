"""How one config becomes a PrimFunc and a JITKernel, for each kind of function the autotuner tunes.

`params` are a config's kernel parameters; `pass_configs` its own "pass_configs" entry (None when it has none),
merged over the compile options.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from ..jit import JITFunction, JITKernel
from ..jit import compile as compile_program
from .param import CompileArgs


@dataclass(frozen=True)
class ConfigCompiler:
    program: Callable[[dict[str, Any]], Any]  # params -> PrimFunc (elaboration only)
    compile: Callable[[dict[str, Any], "dict[str, Any] | None"], JITKernel]  # params, pass_configs -> kernel


def _merged_options(jit_fn: JITFunction, pass_configs: dict[str, Any] | None) -> dict[str, Any]:
    options = dict(jit_fn.options)
    options["pass_configs"] = {**(options.get("pass_configs") or {}), **(pass_configs or {})} or None
    return options


def program_compiler(fn: Callable[..., Any], compile_args: CompileArgs) -> ConfigCompiler:
    """`fn(**params)` returns a PrimFunc, compiled with `compile_args` (upstream's AutoTuner.from_kernel). A `fn`
    that returns a JITKernel (a function decorated with @tilelang.jit) is taken as compiled."""

    def program(params: dict[str, Any]) -> Any:
        built = fn(**params)
        return built.program if isinstance(built, JITKernel) else built

    def compile_config(params: dict[str, Any], pass_configs: dict[str, Any] | None) -> JITKernel:
        built = fn(**params)
        return built if isinstance(built, JITKernel) else compile_args.compile_program(built, pass_configs)

    return ConfigCompiler(program, compile_config)


def lazy_jit_compiler(jit_fn: JITFunction, args: tuple, kwargs: dict[str, Any]) -> ConfigCompiler:
    """A lazy-style @tilelang.jit function called with the problem (`args`, `kwargs`) and a config's parameters.
    Without per-config pass configs this is the jit function's own call, so its in-memory cache keeps the kernel."""

    def program(params: dict[str, Any]) -> Any:
        return jit_fn.func(*args, **kwargs, **params)

    def compile_config(params: dict[str, Any], pass_configs: dict[str, Any] | None) -> JITKernel:
        if not pass_configs:
            return jit_fn(*args, **kwargs, **params)
        return compile_program(program(params), **_merged_options(jit_fn, pass_configs))

    return ConfigCompiler(program, compile_config)


def eager_jit_compiler(jit_fn: JITFunction, specialization: dict[str, Any]) -> ConfigCompiler:
    """An eager-style @tilelang.jit function specialized by `specialization` (sizes such as M=1024 and parameter
    values), plus a config's parameters: `jit_fn.compile(**specialization, **params)`."""

    def program(params: dict[str, Any]) -> Any:
        from ..language.parser import parse_kernel
        from ..language.prim_func import eager_signature, trace_eager

        parsed = parse_kernel(jit_fn.func)
        names = eager_signature(parsed).parameters
        merged = {**specialization, **params}
        return trace_eager(parsed, {k: v for k, v in merged.items() if k in names},
                           {k: v for k, v in merged.items() if k not in names})

    def compile_config(params: dict[str, Any], pass_configs: dict[str, Any] | None) -> JITKernel:
        if not pass_configs:
            return jit_fn.compile(**specialization, **params)
        return compile_program(program(params), **_merged_options(jit_fn, pass_configs))

    return ConfigCompiler(program, compile_config)
