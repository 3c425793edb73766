"""`tilelang.compile(program, ...)`: PrimFunc -> lowered device function -> MUSA source -> library -> JITKernel.

Stages, in order: target and options; lowering (transform/pipeline.py); code generation (device kernel
by the C++ printer, host wrapper in Python); build with the backend's toolchain (cached on disk); a
launcher over the library.
"""

from __future__ import annotations

import hashlib
import os
import shlex
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any, Sequence

import tvm
import tvm_ffi
from tvm import tirx

from .. import env
from ..codegen import generate
from ..errors import CompileError
from ..language.annotate import COMPILE_FLAGS_ATTR, PASS_CONFIGS_ATTR
from ..language.prim_func import OUTPUTS_ATTR, SIZE_PARAMS_ATTR
from ..target import arch_of, determine_target
from ..transform import lower, normalize_pass_configs
from ..transform.split_kernels import split_kernels
from ..transform.pass_config import PassConfigKey, enabled
from .backend import resolve_backend
from .cache import build_cached, cache_key
from .kernel import CompiledArtifact, JITKernel
from .launcher import ParamSpec
from .toolchains import BuildRequest

SOURCE_NAME = "kernel.mu"
LIBRARY_NAME = "kernel.so"


def _output_indices(func: tirx.PrimFunc, out_idx: Any) -> set[int]:
    """Indices of the output parameters; `out_idx` counts the user's parameters (not T.dynamic sizes)."""
    sizes = func.attrs[SIZE_PARAMS_ATTR] if func.attrs is not None and SIZE_PARAMS_ATTR in func.attrs else []
    n = len(func.params) - len(sizes)
    if out_idx is None:
        names = list(func.attrs[OUTPUTS_ATTR]) if func.attrs is not None and OUTPUTS_ATTR in func.attrs else []
        return {i for i, p in enumerate(func.params) if p.name in [str(x) for x in names]}
    indices = [out_idx] if isinstance(out_idx, int) else list(out_idx)
    out = set()
    for i in indices:
        if not -n <= i < n:
            raise CompileError(f"out_idx {i} is out of range for `{func.attrs['global_symbol']}` with {n} parameters")
        out.add(i % n)
    return out


def _dim(extent: Any) -> Any:
    if isinstance(extent, tirx.IntImm):
        return int(extent.value)
    if isinstance(extent, tvm.ir.expr.Var):
        return extent.name
    raise CompileError(f"tensor dimension `{extent}` must be a constant or a plain size variable")


def parameter_accesses(funcs: Sequence[tirx.PrimFunc]) -> tuple[set[str], dict[str, int]]:
    """Which tensor parameters the kernels read, write or take the address of, and for each the widest vector
    load or store they make to it in bytes (its data pointer must be aligned to that). Parameters are matched by
    name: lowering may redeclare a parameter's buffer."""
    accessed: set[str] = set()
    widest: dict[str, int] = {}

    def note(names: set[str], buffer: Any, dtype: Any) -> None:
        if buffer.name not in names:
            return
        accessed.add(buffer.name)
        if dtype.lanes > 1:
            widest[buffer.name] = max(widest.get(buffer.name, 1), dtype.lanes * dtype.bits // 8)

    for func in funcs:
        names = {p.name for p in func.params}
        tvm_ffi.structural_walk(func.body, [
            (tvm.ir.expr.TensorLoad, lambda n: note(names, n.source, n.ty.dtype)),
            (tirx.BufferStore, lambda n: note(names, n.buffer, n.value.ty.dtype))])
    return accessed, widest


def param_specs(func: tirx.PrimFunc, outputs: set[int], align: dict[str, int] | None = None,
                accessed: set[str] | None = None) -> list[ParamSpec]:
    specs = []
    align = align or {}
    for i, var in enumerate(func.params):
        ty = var.ty
        if isinstance(ty, tirx.BufferType):
            strides = tuple(_dim(d) for d in ty.strides) if ty.strides else None  # T.StridedTensor
            specs.append(ParamSpec(var.name, "tensor", str(ty.dtype.dtype), tuple(_dim(d) for d in ty.shape),
                                   strides=strides, is_output=i in outputs, align=align.get(var.name, 1),
                                   unused=accessed is not None and var.name not in accessed and i not in outputs))
        else:
            specs.append(ParamSpec(var.name, "scalar", str(ty.dtype)))
    return specs


def _split_flags(flags: Any) -> tuple[str, ...]:
    """Compiler flags given as one string or a list of strings, each split like a shell (as upstream does)."""
    if not flags:
        return ()
    items = [flags] if isinstance(flags, str) else list(flags)
    return tuple(token for item in items for token in shlex.split(str(item)))


def _ir_dumper(configs: dict) -> Any:
    path = configs.get(PassConfigKey.TL_DUMP_IR_PATH) or env.DUMP_IR_PATH.raw()
    if not (enabled(configs, PassConfigKey.TL_ENABLE_DUMP_IR) or env.DUMP_IR.flag()):
        return None
    out = Path(str(path) if path else "tilelang_ir")
    out.mkdir(parents=True, exist_ok=True)

    def dump(name: str, mod: tvm.IRModule) -> None:
        (out / f"{name}.py").write_text(mod.script())

    return dump


def _annotated(attrs: Any, key: str, default: Any) -> Any:
    if key not in attrs:
        return default
    value = attrs[key]
    return {str(k): _plain(v) for k, v in value.items()} if hasattr(value, "items") else list(value)


def _plain(value: Any) -> Any:
    """A config value from the IR as Python (bool/int/float/str)."""
    for kind in (bool, int, float):
        if isinstance(value, kind):
            return value
    if hasattr(value, "value"):
        return value.value
    return str(value)


def archive_source(text: str, name: str, arch: str) -> Path | None:
    """Keeps `text` in TILELANG_SOURCE_ARCHIVE_DIR as `<name>.<arch>.<hash>.mu`, the arch in the name so that a
    later build (mcc, or the test suite's device-compiler check) knows its --offload-arch. Written atomically:
    processes compiling the same kernel at once never leave a half-written file."""
    directory = env.SOURCE_ARCHIVE_DIR.path()
    if directory is None:
        return None
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{name}.{arch}.{hashlib.sha256(text.encode()).hexdigest()[:16]}.mu"
    if not path.exists():
        fd, tmp = tempfile.mkstemp(dir=directory, suffix=".tmp")
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    return path


def compile(  # noqa: A001 - the public name is tilelang.compile
    program: tirx.PrimFunc,
    out_idx: int | Sequence[int] | None = None,
    target: Any = None,
    execution_backend: str = "auto",
    pass_configs: dict | None = None,
    instruments: Sequence[Any] | None = None,
    verbose: bool = False,
    target_host: Any = None,
    compile_flags: Sequence[str] | None = None,
) -> JITKernel:
    """Compile a TileLang PrimFunc for MUSA and return a callable `JITKernel`."""
    if not isinstance(program, tirx.PrimFunc):
        raise TypeError(f"tilelang.compile expects a @T.prim_func; got {type(program).__name__}")
    target = determine_target(target)
    attrs = program.attrs if program.attrs is not None else {}
    # The kernel's own settings (T.annotate_pass_configs / T.annotate_compile_flags) over the caller's.
    configs = {**normalize_pass_configs(pass_configs),
               **normalize_pass_configs(_annotated(attrs, PASS_CONFIGS_ATTR, {}))}
    compile_flags = [*_split_flags(compile_flags), *(str(f) for f in _annotated(attrs, COMPILE_FLAGS_ATTR, []))]
    backend = resolve_backend(execution_backend)
    verbose = verbose or env.VERBOSE.flag()
    name = str(program.attrs["global_symbol"]) if program.attrs is not None and "global_symbol" in program.attrs \
        else "main"
    outputs = _output_indices(program, out_idx)

    dumper = _ir_dumper(configs)
    device_funcs = []
    for index, kernel in enumerate(split_kernels(program)):  # one per T.Kernel scope, launched in order
        dump = dumper if dumper is None or index == 0 else (lambda n, m, i=index: dumper(f"kernel{i}_{n}", m))
        device_funcs.append(lower(kernel, target, configs, list(instruments or []), dump))
    if verbose:
        for device_func in device_funcs:
            print(f"[tilelang] lowered {name}:\n{device_func.script()}", file=sys.stderr)
    accessed, widest = parameter_accesses(device_funcs)
    specs = param_specs(program, outputs, widest, accessed)
    source = generate(device_funcs, target, name)
    text = source.text
    replacement = env.REPLACE_MUSAC.path()
    if replacement is not None:
        text = replacement.read_text()
    dump_path = env.DUMP_KERNEL_SOURCE.path()
    if dump_path is not None:
        dump_path.parent.mkdir(parents=True, exist_ok=True)
        dump_path.write_text(text)
    archive_source(text, name, arch_of(target).name)

    flags = _split_flags(compile_flags) + _split_flags(configs.get(PassConfigKey.TL_DEVICE_COMPILE_FLAGS))
    # TL_DISABLE_FAST_MATH is upstream's older switch; as there, setting it overrides TL_ENABLE_FAST_MATH.
    fast_math = (enabled(configs, PassConfigKey.TL_ENABLE_FAST_MATH)
                 and not enabled(configs, PassConfigKey.TL_DISABLE_FAST_MATH))
    arch = arch_of(target)
    toolchain = backend.toolchain

    def build(workdir: Path) -> None:
        src = workdir / SOURCE_NAME
        src.write_text(text)
        toolchain.build(BuildRequest(src, workdir / LIBRARY_NAME, arch, fast_math, flags, source.local_bytes))

    # The command line (with placeholder paths) covers flags, arch and TILELANG_MCC_EXTRA_ARGS.
    command = toolchain.command(
        BuildRequest(Path(SOURCE_NAME), Path(LIBRARY_NAME), arch, fast_math, flags, source.local_bytes))
    key = cache_key(text, toolchain.name, toolchain.version(), " ".join(command))
    library = build_cached(key, LIBRARY_NAME, build)
    output_dir = configs.get(PassConfigKey.MUSA_KERNELS_OUTPUT_DIR)
    if output_dir:
        out = Path(str(output_dir))
        out.mkdir(parents=True, exist_ok=True)
        (out / f"{name}.mu").write_text(text)
        shutil.copyfile(library, out / f"{name}.so")
    artifact = CompiledArtifact(source, library, device_funcs[0])
    size_names = {d for spec in specs if spec.kind == "tensor" for d in spec.shape + (spec.strides or ())
                  if isinstance(d, str)}
    bound = [spec.name for spec in specs if spec.kind == "scalar" and spec.name in size_names]
    return JITKernel(artifact, specs, backend, target, program, configs, bound)
