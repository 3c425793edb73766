"""TileLang-MUSA: TileLang for Moore Threads MUSA GPUs, a plugin on stock apache-tvm.

    import tilelang
    import tilelang.language as T

compiles TileLang programs (`@T.prim_func`, `@tilelang.jit`) to MUSA C and runs them on a MUSA device,
or in the bundled CPU simulator of the MUSA device where there is none.
"""

from ._version import __version__
from . import _native

_native.load()  # registers the `musa` target kind and the device printer

import tvm  # noqa: E402  (`from tilelang import tvm`, as upstream scripts do)
from tvm import DataType  # noqa: E402  (`from tilelang import DataType`, as upstream scripts do)

from . import _wheel_patches  # noqa: E402,F401  (every change to the wheel; at import: tirx.PrimExpr, expr.dtype)
from .ir.source_lines import keep_span as _keep_span  # noqa: E402

_wheel_patches.keep_statement_spans(_keep_span)  # a statement a pass replaces keeps its span (the user's line)
from .ir.pass_config import is_pass_config_key as _is_pass_config_key  # noqa: E402

_wheel_patches.keep_tilelang_configs(_is_pass_config_key)  # PassContext(config={"tl.*": ...}) as upstream's

from . import backend, contrib, env, language, math, profiler, utils  # noqa: E402
from .math import cdiv, next_power_of_2  # noqa: E402
from .profiler import TensorSupplyType  # noqa: E402
from .diagnostics import TileLangWarning  # noqa: E402
from .errors import CompileError, TileLangError, UnsupportedError  # noqa: E402
from .jit import (JITKernel, compile, disable_cache, enable_cache, is_cache_enabled, jit, load_library,  # noqa: E402
                  lower, par_compile)
from .log import install_handler as _install_log_handler, set_log_level  # noqa: E402
from .target import determine_target  # noqa: E402
from .transform import PassConfigKey  # noqa: E402

_install_log_handler()

_LAZY = {"autotune": ("autotuner", "autotune"), "autotuner": ("autotuner", None)}  # tqdm etc. only when tuning


def __getattr__(name: str):
    """`tilelang.autotune` / `tilelang.autotuner`, imported on first use."""
    if name not in _LAZY:
        raise AttributeError(f"module 'tilelang' has no attribute {name!r}")
    import importlib

    module_name, attr = _LAZY[name]
    module = importlib.import_module(f"{__name__}.{module_name}")
    return module if attr is None else getattr(module, attr)


__all__ = [
    "CompileError", "DataType", "JITKernel", "PassConfigKey", "TensorSupplyType", "TileLangError", "TileLangWarning",
    "UnsupportedError", "__version__", "autotune", "autotuner", "backend", "cdiv", "compile", "contrib",
    "determine_target", "disable_cache", "enable_cache", "env", "is_cache_enabled", "jit", "language", "load_library", "lower",
    "math",
    "next_power_of_2", "par_compile", "profiler", "set_log_level", "tvm", "utils",
]
