"""`python -m tilelang.tools.aot SCRIPT.py:FUNCTION [ARG ...] [NAME=VALUE ...] -o DIR`: compile a kernel ahead of time.

FUNCTION is a `@tilelang.jit` function, a function returning a `@T.prim_func` or a JITKernel, or a `@T.prim_func`
itself, found in SCRIPT.py (imported as a module: its `if __name__ == "__main__"` part does not run) or in an
importable module (`package.module:FUNCTION`). The ARGs and NAME=VALUEs are its arguments, each a Python literal
(`128`, `"float16"`, `(64, 64)`) or, where it is none, a string (`dtype=float16`).

Writes into DIR, `<name>` being --name or else FUNCTION: `<name>.h` and `<name>.c` (jit/aot.py: a C entry point
with the kernel library embedded) and `<name>.so` (the exported kernel, which `tilelang.load_library` loads in
Python). `--target` and `--backend` choose what to build for, as `tilelang.compile`'s `target` and
`execution_backend` do:

    python -m tilelang.tools.aot examples/gemm/gemm.py:matmul M=1024 N=1024 K=1024 block_M=128 block_N=128 \\
        block_K=32 --target "musa -arch=mp_22" -o build/gemm
    cc -O2 main.c build/gemm/matmul.c -Ibuild/gemm -ldl -lpthread
"""

from __future__ import annotations

import argparse
import ast
import importlib
import importlib.util
import sys
from pathlib import Path
from typing import Any

from tvm import tirx

from ..errors import TileLangError
from ..jit import JITKernel, compile as compile_program
from ..jit.aot import write_aot
from ..jit.jit import JITFunction


def _literal(text: str) -> Any:
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def parse_arguments(items: list[str]) -> tuple[list[Any], dict[str, Any]]:
    """Positional literals and NAME=VALUE keywords, in the order given."""
    args: list[Any] = []
    kwargs: dict[str, Any] = {}
    for item in items:
        name, eq, value = item.partition("=")
        if eq and name.isidentifier():
            kwargs[name] = _literal(value)
        elif kwargs:
            raise TileLangError(f"aot: positional argument {item!r} after keyword arguments")
        else:
            args.append(_literal(item))
    return args, kwargs


def find_function(spec: str) -> Any:
    """The object `SCRIPT.py:NAME` or `module:NAME` names."""
    where, colon, attr = spec.rpartition(":")
    if not colon or not where or not attr:
        raise TileLangError(f"aot: expected SCRIPT.py:FUNCTION or module:FUNCTION; got {spec!r}")
    if where.endswith(".py"):
        path = Path(where).resolve()
        if not path.is_file():
            raise TileLangError(f"aot: no such script: {where}")
        module_spec = importlib.util.spec_from_file_location(f"_tilelang_aot_{path.stem}", path)
        module = importlib.util.module_from_spec(module_spec)
        sys.path.insert(0, str(path.parent))  # the script's own imports of its neighbours
        try:
            module_spec.loader.exec_module(module)
        finally:
            sys.path.remove(str(path.parent))
    else:
        module = importlib.import_module(where)
    try:
        return getattr(module, attr)
    except AttributeError:
        raise TileLangError(f"aot: {where} has no {attr!r}") from None


def build_kernel(function: Any, args: list[Any], kwargs: dict[str, Any], target: str | None,
                 backend: str | None) -> JITKernel:
    """The kernel `function(*args, **kwargs)` describes, compiled for `target` with `backend` where given (else as
    the function's own options say)."""
    chosen = {k: v for k, v in (("target", target), ("execution_backend", backend)) if v is not None}
    if isinstance(function, JITFunction):
        return compile_program(function.get_tir(*args, **kwargs), **{**function.options, **chosen})
    if isinstance(function, tirx.PrimFunc):
        if args or kwargs:
            raise TileLangError("aot: a @T.prim_func takes no arguments here")
        return compile_program(function, **chosen)
    if not callable(function):
        raise TileLangError(f"aot: {type(function).__name__} is neither a kernel function nor a @T.prim_func")
    made = function(*args, **kwargs)
    if isinstance(made, tirx.PrimFunc):
        return compile_program(made, **chosen)
    if isinstance(made, JITKernel):
        if chosen:
            raise TileLangError("aot: the function returned a compiled JITKernel: --target/--backend cannot "
                                "change it; return the @T.prim_func instead, or compile it for that target")
        return made
    raise TileLangError(f"aot: the function returned {type(made).__name__}, not a @T.prim_func or a JITKernel")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tilelang.tools.aot", description=__doc__.splitlines()[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("function", help="SCRIPT.py:FUNCTION or module:FUNCTION")
    parser.add_argument("arguments", nargs="*", help="the function's arguments: literals, then NAME=VALUE")
    parser.add_argument("-o", "--out-dir", required=True, help="directory for <name>.h, <name>.c, <name>.so")
    parser.add_argument("--name", help="C name of the entry point and file stem (default: FUNCTION)")
    parser.add_argument("--target", help='e.g. "musa -arch=mp_22" (default: the function\'s, else TILELANG_TARGET)')
    parser.add_argument("--backend", choices=["auto", "cython", "sim"],
                        help="execution backend to build for (default: the function's, else auto)")
    options = parser.parse_args(argv)
    try:
        args, kwargs = parse_arguments(options.arguments)
        kernel = build_kernel(find_function(options.function), args, kwargs, options.target, options.backend)
        name = options.name or options.function.rpartition(":")[2]
        header, source = write_aot(kernel, options.out_dir, name)
        library = kernel.export_library(Path(options.out_dir) / f"{name}.so")
    except TileLangError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(f"{kernel}\n  {header}\n  {source}\n  {library}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
