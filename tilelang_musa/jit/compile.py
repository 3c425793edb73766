"""`tilelang.compile(program, ...)`: a PrimFunc through ordered stages to a callable JITKernel, cached on disk.

    tir -> lowered -> mu -> host -> bin      (stages.py: what each is, and its file)

First the target and the options are settled, and the cache key is computed from them and the program without
lowering anything (cache.py). A repeated compile returns the kernel from memory; a disk hit reloads the entry
(`JITKernel.from_database`). Otherwise the stages run in order into a new entry: lowering (transform/pipeline.py,
once per T.Kernel scope), the MUSA source (device kernels by the C++ printer, host wrapper in Python), the launch
description, and the build by the backend's toolchain.

TILELANG_DUMP_STAGES=<dir> writes every stage's output there; TILELANG_REPLACE_STAGES=<dir> (and
TILELANG_REPLACE_MUSAC for `mu`) replaces a stage's output with a file, and the later stages start from it.
Pass timing and the lower trace watch a compile through observers.py.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shlex
import shutil
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

import tvm
import tvm_ffi
from tvm import tirx

from .. import _wheel_patches, env
from .._version import __version__
from ..diagnostics import warn_once
from ..errors import BuildError, CompileError
from ..ir.attrs import (
    COMPILE_FLAGS_ATTR, DESCRIPTORS_ATTR, OUTPUTS_ATTR, PASS_CONFIGS_ATTR, SIZE_ATTR, SIZE_PARAMS_ATTR,
    WORKSPACES_ATTR,
    ZEROED_WORKSPACES_ATTR,
)
from ..ir.outside_kernel import check_compilable
from ..ir.program_lines import program_lines
from ..ir.param_scopes import check_global_params
from ..ir.options import CompileOptions
from ..ir.source_lines import table_to_json
from ..ir.utils import thread_info
from ..launcher import DimExpr, ParamSpec
from ..launcher.spec import unsolvable_symbols
from ..target import ArchInfo, arch_of, determine_target
from ..tileop.async_copy import global_piece_alignment
from ..tileop.atomic import lane_add_alignment
from ..tileop.tme_copy import GLOBAL_ALIGN as TME_GLOBAL_ALIGN
from ..transform import lower_program, normalize_pass_configs, program_passes
from . import cache
from .adapter import ProgramAdapter
from .backend import Backend, resolve_backend
from .kernel import JITKernel
from ..instrumentation.session import session_has_tools
from .observers import CompileObservers
from .postproc import has_postproc, postprocess
from .diagnostics import jit_phase
from .host_assumes import host_assumes
from .stages import METADATA, STAGES, HostInfo, KernelMetadata, Launch, file_stem, plain, stage_file
from .toolchains import BuildRequest

logger = logging.getLogger("tilelang")


def _user_params(func: tirx.PrimFunc) -> list:
    """The parameters the caller passes or gets back: not T.dynamic sizes, not T.alloc_global workspaces."""
    sizes = func.attrs[SIZE_PARAMS_ATTR] if func.attrs is not None and SIZE_PARAMS_ATTR in func.attrs else []
    return list(func.params)[:len(func.params) - len(sizes) - len(_workspaces(func))]


def _legal_out_idx(func: tirx.PrimFunc, out_idx: Any) -> list[int] | None:
    """`out_idx` as non-negative indices of the user's parameters, through the adapters' `_legalize_result_idx`
    (upstream's adapters legalize it so; scripts patch that method). None stays None: no outputs chosen."""
    if out_idx is None:
        return None
    try:
        return ProgramAdapter(_user_params(func))._legalize_result_idx(out_idx)
    except ValueError as err:
        raise CompileError(f"out_idx={out_idx!r} of `{func.attrs['global_symbol']}` (with "
                           f"{len(_user_params(func))} parameters): {err}") from None


def _output_indices(func: tirx.PrimFunc, outputs: list[int] | None) -> set[int]:
    """Indices of the output parameters: `outputs` (out_idx legalized, _legal_out_idx), or those the kernel
    allocates with T.empty."""
    attrs = func.attrs if func.attrs is not None else {}
    if OUTPUTS_ATTR in attrs:  # the outputs the kernel allocates with T.empty and returns
        if outputs is not None:
            raise CompileError(f"Out index conflict: `{attrs['global_symbol']}` returns the outputs it allocates with "
                               f"T.empty; out_idx={outputs!r} cannot select others")
        outputs = _legal_out_idx(func, [int(i) for i in attrs[OUTPUTS_ATTR]])
    return set(outputs or ())


_DIM_OPS = {tirx.Add: "add", tirx.Sub: "sub", tirx.Mul: "mul", tirx.FloorDiv: "floordiv", tirx.FloorMod: "floormod",
            tirx.Min: "min", tirx.Max: "max"}


def _dim(extent: Any, param: str = "", what: str = "dim", index: int = 0) -> Any:
    """A tensor dim or stride for the launcher: an int, a size variable's name, or a DimExpr over them."""
    if isinstance(extent, tirx.IntImm):
        return int(extent.value)
    if isinstance(extent, tvm.ir.expr.Var):
        return extent.name
    op = _DIM_OPS.get(type(extent))
    if op is not None:
        return DimExpr(op, (_dim(extent.a, param, what, index), _dim(extent.b, param, what, index)))
    raise CompileError(f"tensor parameter `{param}`: {what} {index} is `{extent}`; a dim or stride must be a "
                       "constant, a size variable (T.dynamic) or an expression of them with + - * // % min max")


def parameter_accesses(funcs: Sequence[tirx.PrimFunc]) -> tuple[set[str], dict[str, int]]:
    """Which tensor parameters the kernels read, write or take the address of, and which scalar parameters they
    read (a size variable counts as read where any expression of the kernels, a declared buffer's shape included,
    names it); for each tensor the alignment in bytes its data pointer needs for the vector loads and stores they
    make to it. Parameters are matched by name: lowering may redeclare a parameter's buffer."""
    accessed: set[str] = set()
    widest: dict[str, int] = {}

    def note(names: set[str], buffer: Any, dtype: Any) -> None:
        if buffer.name not in names:
            return
        accessed.add(buffer.name)
        if dtype.lanes > 1:
            # the alignment of the access's tl::vec type: its largest power-of-two divisor, at most 16 bytes
            # (common.h's vec_alignment; a 6-lane float32 access is 24 bytes, aligned to 8)
            nbytes = dtype.lanes * dtype.bits // 8
            widest[buffer.name] = max(widest.get(buffer.name, 1), min(nbytes & -nbytes, 16))

    def piece(names: set[str], call: Any) -> None:
        # an async / robust copy piece reads its global source by address; a pair of 16-bit atomic adds is one
        # 32-bit atomic
        found = global_piece_alignment(call) or lane_add_alignment(call)
        if found is not None and found[0].name in names:
            accessed.add(found[0].name)
            widest[found[0].name] = max(widest.get(found[0].name, 1), found[1])

    def read(names: set[str], var: Any) -> None:
        if isinstance(var.ty, tvm.ir.PrimType) and var.name in names:
            accessed.add(var.name)

    for func in funcs:
        names = {p.name for p in func.params}
        # a tensor TME copies move is read through its descriptor, whose global address must be 16-byte aligned
        for tensor, *_ in (func.attrs or {}).get(DESCRIPTORS_ATTR, {}).values():
            if str(tensor) in names:
                accessed.add(str(tensor))
                widest[str(tensor)] = max(widest.get(str(tensor), 1), TME_GLOBAL_ALIGN)
        tvm_ffi.structural_walk(func.body, [
            (tvm.ir.expr.Call, lambda c: piece(names, c)),
            (tvm.ir.expr.TensorLoad, lambda n: note(names, n.source, n.ty.dtype)),
            (tirx.BufferStore, lambda n: note(names, n.buffer, n.value.ty.dtype)),
            (tvm.ir.expr.Var, lambda v: read(names, v))])
    return accessed, widest


def _workspaces(func: tirx.PrimFunc) -> list[str]:
    """The T.alloc_global parameters: allocated by the launcher, hidden from the caller."""
    return [str(n) for n in func.attrs[WORKSPACES_ATTR]] if func.attrs is not None and WORKSPACES_ATTR in func.attrs \
        else []


def param_specs(func: tirx.PrimFunc, outputs: set[int], align: dict[str, int] | None = None,
                accessed: set[str] | None = None) -> list[ParamSpec]:
    specs = []
    align = align or {}
    workspaces = set(_workspaces(func))
    zeroed = ({str(n) for n in func.attrs[ZEROED_WORKSPACES_ATTR]}
              if func.attrs is not None and ZEROED_WORKSPACES_ATTR in func.attrs else set())
    for i, var in enumerate(func.params):
        ty = var.ty
        if isinstance(ty, tvm.ir.PointerType):  # T.ptr: a raw address
            elem = str(ty.element_type.dtype) if isinstance(ty.element_type, tvm.ir.PrimType) else ""
            specs.append(ParamSpec(var.name, "pointer", elem or "void"))
        elif var.name in workspaces:
            specs.append(ParamSpec(var.name, "tensor", str(ty.dtype.dtype),
                                   tuple(_dim(d, var.name, "dim", k) for k, d in enumerate(ty.shape)),
                                   is_workspace=True, zeroed=var.name in zeroed, align=align.get(var.name, 1)))
        elif isinstance(ty, tirx.BufferType):
            strides = (tuple(_dim(d, var.name, "stride", k) for k, d in enumerate(ty.strides)) if ty.strides
                       else None)  # T.StridedTensor
            shape = tuple(_dim(d, var.name, "dim", k) for k, d in enumerate(ty.shape))
            specs.append(ParamSpec(var.name, "tensor", str(ty.dtype.dtype), shape,
                                   strides=strides, is_output=i in outputs, align=align.get(var.name, 1),
                                   unused=accessed is not None and var.name not in accessed and i not in outputs))
        else:
            specs.append(ParamSpec(var.name, "scalar", str(ty.dtype),
                                   unused=accessed is not None and var.name not in accessed))
    return specs


def _split_flags(flags: Any) -> tuple[str, ...]:
    """Compiler flags given as one string or a list of strings, each split like a shell (as upstream does)."""
    if not flags:
        return ()
    items = [flags] if isinstance(flags, str) else list(flags)
    return tuple(token for item in items for token in shlex.split(str(item)))


def _ir_dumper(options: CompileOptions) -> Any:
    path = options.dump_ir_path or env.DUMP_IR_PATH.raw()
    if not (options.enable_dump_ir or env.DUMP_IR.flag()):
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
    path = directory / f"{file_stem(name)}.{arch}.{hashlib.sha256(text.encode()).hexdigest()[:16]}.mu"
    if not path.exists():
        fd, tmp = tempfile.mkstemp(dir=directory, suffix=".tmp")
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    return path



@dataclass(frozen=True)
class _Request:
    """Everything the stages need, settled before the cache is consulted."""

    program: tirx.PrimFunc
    name: str  # the global symbol: the stem of the stage files
    target: tvm.target.Target
    arch: ArchInfo
    backend: Backend
    pass_options: CompileOptions
    flags: tuple[str, ...]
    out_idx: Any  # as the caller gave it (recorded in the metadata)
    outputs: list[int] | None  # out_idx legalized: the output parameters' indices (None: none chosen)
    fast_math: bool
    instruments: tuple
    verbose: bool

    def options(self) -> dict[str, Any]:
        configs = {k.value: plain(v) for k, v in self.pass_options.given.items()}
        return {"out_idx": plain(self.out_idx), "pass_configs": configs,
                "compile_flags": list(self.flags), "fast_math": self.fast_math}


def compile(  # noqa: A001 - the public name is tilelang.compile
    program: tirx.PrimFunc,
    out_idx: int | Sequence[int] | None = None,
    target: Any = None,
    execution_backend: str = "auto",
    pass_configs: dict | None = None,
    instruments: Sequence[Any] | None = None,
    verbose: bool = False,
    target_host: Any = None,
    compile_flags: Sequence[str] | str | None = None,
    name: str | None = None,
) -> JITKernel:
    """Compile a TileLang PrimFunc for MUSA and return a callable `JITKernel`. `name` renames the program (its
    global symbol, the kernels' and the stage files' names). Flags in `compile_flags` (a string or a list, each
    split like a shell), `T.annotate_compile_flags` and the TL_DEVICE_COMPILE_FLAGS pass config go to mcc."""
    if not isinstance(program, tirx.PrimFunc):
        raise TypeError(f"tilelang.compile expects a @T.prim_func; got {type(program).__name__}")
    if name is not None:
        if not isinstance(name, str) or not name.isidentifier():
            raise ValueError(f"tilelang.compile: name must be a C identifier (it names the kernels); got {name!r}")
        program = program.with_attr("global_symbol", name)
    request = _settle(program, out_idx, target, execution_backend, pass_configs, instruments, verbose,
                      compile_flags)
    observers = CompileObservers(request.name, request.target, request.pass_options)
    key = None
    if cache.is_cache_enabled():
        key = cache.kernel_key(program, request.name, request.target, request.backend, request.pass_options.given,
                               request.flags, request.outputs)
        # Instruments, per-pass IR dumps, pass diffs, pass timing and the lower trace observe the lowering: they get
        # one, whatever the cache holds.
        if (not request.instruments and not _dumps_ir(request.pass_options) and env.get_pass_diff_mode() is None
                and not observers.active):
            kernel = cache.memo_get(key)
            if kernel is None:
                entry = cache.lookup(key)
                if entry is not None:
                    kernel = JITKernel.from_database(entry, program, request.target, request.backend,
                                                     request.pass_options.given)
                    cache.memo_put(key, kernel)
            if kernel is not None:
                if kernel.program is not None and kernel.program is not program and \
                        program_lines(kernel.program) != program_lines(program):
                    kernel = kernel.for_program(program)  # a structurally equal program on other lines: its own
                if request.verbose:
                    print(f"[tilelang] {request.name}: cache hit ({kernel.directory})", file=sys.stderr)
                _publish(kernel, request.pass_options)
                return kernel
    if env.PRINT_ON_COMPILATION.flag():
        logger.info("TileLang begins to compile kernel `%s` with `out_idx=%s`", request.name, out_idx)
    with observers.compiling():
        directory = cache.store(key, lambda workdir: _run_stages(request, workdir, key, observers))
    kernel = JITKernel(directory, KernelMetadata.read(directory), request.backend, request.target, program,
                       request.pass_options.given)
    if key is not None:
        cache.memo_put(key, kernel)
    _publish(kernel, request.pass_options)
    return kernel


@dataclass
class DeferredKernel:
    """A program that `compile_deferred` lowered and printed, with its library not built yet.
    `batch_build.build_together` builds many of them with one host-compiler run. After that, `finish()` returns the
    JITKernel."""

    directory: Path
    build: BuildRequest | None  # None: nothing left to build (a backend that is not the simulator, a replaced bin)
    request: _Request

    def finish(self) -> JITKernel:
        request = self.request
        kernel = JITKernel(self.directory, KernelMetadata.read(self.directory), request.backend, request.target,
                           request.program, request.pass_options.given)
        _publish(kernel, request.pass_options)
        return kernel


def compile_deferred(program: tirx.PrimFunc, out_idx: int | Sequence[int] | None = None, target: Any = None,
                     execution_backend: str = "auto", pass_configs: dict | None = None,
                     name: str | None = None) -> DeferredKernel:
    """`tilelang.compile` up to the library: the simulator's host-compiler run is left to the caller
    (batch_build.py), so that many programs share one. Other backends build here. Not cached: the cache would
    hold an entry without its library."""
    if name is not None:
        if not isinstance(name, str) or not name.isidentifier():
            raise ValueError(f"compile_deferred: name must be a C identifier (it names the kernels); got {name!r}")
        program = program.with_attr("global_symbol", name)
    request = _settle(program, out_idx, target, execution_backend, pass_configs, None, False, None)
    observers = CompileObservers(request.name, request.target, request.pass_options)
    deferred: list | None = [] if request.backend.name == "sim" else None
    with observers.compiling():
        directory = cache.store(None, lambda workdir: _run_stages(request, workdir, None, observers, deferred))
    return DeferredKernel(directory, deferred[0] if deferred else None, request)


def _settle(program: tirx.PrimFunc, out_idx: Any, target: Any, execution_backend: str, pass_configs: dict | None,
            instruments: Sequence[Any] | None, verbose: bool, compile_flags: Any) -> _Request:
    check_compilable(program)  # an IR-only function (no kernel) is rejected here, cached or not
    check_global_params(program)  # and one with a tensor parameter in on-chip memory
    target = determine_target(target)
    attrs = program.attrs if program.attrs is not None else {}
    # The kernel's own settings (T.annotate_pass_configs / T.annotate_compile_flags) over the caller's, the
    # caller's over those of the PassContext it entered (`with PassContext(config={"tl.*": ...})`, as upstream).
    options = CompileOptions.of({**normalize_pass_configs(_wheel_patches.entered_tilelang_configs()),
                                 **normalize_pass_configs(pass_configs),
                                 **normalize_pass_configs(_annotated(attrs, PASS_CONFIGS_ATTR, {}))})
    flags = (_split_flags(compile_flags) + _split_flags([str(f) for f in _annotated(attrs, COMPILE_FLAGS_ATTR, [])])
             + _split_flags(options.device_compile_flags))
    # TL_DISABLE_FAST_MATH is upstream's older switch; as there, setting it overrides TL_ENABLE_FAST_MATH.
    fast_math = options.enable_fast_math and not options.disable_fast_math
    name = str(attrs["global_symbol"]) if "global_symbol" in attrs else "main"
    program = program_passes(program, target, options)
    return _Request(program, name, target, arch_of(target), resolve_backend(execution_backend), options, flags,
                    out_idx, _legal_out_idx(program, out_idx), fast_math, tuple(instruments or ()),
                    verbose or env.VERBOSE.flag())


def _dumps_ir(options: CompileOptions) -> bool:
    """Per-pass IR dumps, or LayoutInference's decisions (TILELANG_DUMP_LAYOUTS): both print from the lowering."""
    return options.enable_dump_ir or env.DUMP_IR.flag() or env.DUMP_LAYOUTS.flag()


@dataclass
class _Work:
    """One compile's stages as they run: the request, where they write, and what the stages so far produced."""

    request: _Request
    workdir: Path
    observers: CompileObservers
    replaced: dict[str, Path]  # stage -> the file that replaces its output (TILELANG_REPLACE_*)
    device_funcs: list = field(default_factory=list)  # lowered
    names: list[str] = field(default_factory=list)  # lowered: the kernels' names, in launch order
    user_lines: dict | None = None  # mu: line of the unit -> the user's line, for a source without `#line`
    lowered_text: str = ""  # lowered, as TVMScript
    source: Any = None  # mu: the printer's MusaSource of the device functions (local bytes, the checked print)
    text: str = ""  # mu: the translation unit
    sections: dict[str, list[int]] | None = None  # mu: where the kernels and the host wrapper sit (None: replaced)
    host: HostInfo | None = None  # host
    deferred: list | None = None  # bin: the build request is appended here instead of run (compile_deferred)

    def path(self, stage: str) -> Path:
        return self.workdir / stage_file(self.request.name, stage)


@dataclass(frozen=True)
class _Stage:
    """A stage of the table: what it reads and produces; `make` runs it, `load` takes a replacement file instead.
    Each returns the text of the stage's file, or None when it wrote the file itself."""

    name: str
    reads: tuple[str, ...]
    produces: str
    make: Callable[[_Work], str | None]
    load: Callable[[_Work, Path], str | None] | None


def _set_lowered(work: _Work, device_funcs: list[tirx.PrimFunc]) -> str:
    from ..codegen.source import kernel_names

    work.device_funcs = device_funcs
    work.names = kernel_names(work.request.name, len(device_funcs))
    work.lowered_text = _script(tvm.IRModule(dict(zip(work.names, device_funcs))))
    if work.request.verbose:
        print(f"[tilelang] lowered {work.request.name}:\n{work.lowered_text}", file=sys.stderr)
    return work.lowered_text


def _print_source(work: _Work, replacement: Path | None) -> str:
    """The device printer's source of the lowered kernels (postprocessed), or the replacement's text; the
    printer runs either way: the host stage and the simulator's build read its figures."""
    from ..codegen import generate

    request = work.request
    with work.observers.stage("codegen.MUSASource"):  # the C++ device printer, the host wrapper, postproc callbacks
        work.source = source = work.observers.print_source(
            tvm.IRModule(dict(zip(work.names, work.device_funcs))) if session_has_tools() else None,
            lambda: generate(work.device_funcs, request.target, request.name, sim_checks=request.backend.name == "sim",
                             line_directives=request.pass_options.emit_line_directives,
                             user_line_table=request.backend.name == "sim"))
        if replacement is not None:
            work.text, work.sections = replacement.read_text(), None
        else:
            text = source.text
            device_at, host_at = text.index(source.device), text.rindex(source.host)
            text, host_at = postprocess(text, host_at, request.target)
            if text.find(source.device) != device_at:  # a callback changed the kernels: all are before the host
                device_at, device_end = 0, host_at
            else:
                device_end = device_at + len(source.device)
            work.text, work.sections = text, {"device": [device_at, device_end], "host": [host_at, len(text)]}
            if source.device_user_lines and text.find(source.device) == device_at:
                # The simulator's reports name lines of the unit: the table, renumbered so, goes in the metadata
                # (JITKernel reads it when a launch fails; the printed source has no `#line` directives).
                offset = text[:device_at].count("\n")
                work.user_lines = table_to_json({offset + n: at for n, at in source.device_user_lines.items()})
    work.observers.codegen(work.lowered_text, work.text)
    return work.text


def _set_host(work: _Work, host: HostInfo) -> str:
    work.host = host
    return json.dumps(host.to_json(), indent=1)


def _build(work: _Work) -> None:
    """The backend's toolchain builds `mu` into `bin`. The simulator builds the sanitizer print of the kernels
    (same lines, checked accesses) unless the user replaced the source or a postproc callback may have rewritten it
    (then that is what must run); it is kept only while building."""
    from ..codegen.source import HEADER

    request = work.request
    built = work.path("mu")
    if request.backend.name == "sim" and "mu" not in work.replaced and not has_postproc():
        built = work.workdir / f"{file_stem(request.name)}.checked.mu"
        built.write_text(work.source.checked_text)
    elif request.backend.name == "sim" and "\n#line " in work.text:  # its reports name the lines users read
        from ..ir.source_lines import blank_line_directives

        built = work.workdir / f"{file_stem(request.name)}.lines.mu"
        built.write_text(blank_line_directives(work.text))
    prelude = HEADER if work.text.startswith(HEADER) else ""
    build = BuildRequest(built, work.path("bin"), request.arch, request.fast_math, request.flags,
                         work.host.local_bytes, prelude)
    if work.deferred is not None:  # built later, with other programs (batch_build.py), from `built`
        work.deferred.append(build)
        return
    with work.observers.stage(f"build.{request.backend.toolchain.name}"):
        try:
            request.backend.toolchain.build(build)
        except BuildError as err:
            raise build_error_at_user_lines(err, work.text, work.user_lines, built.name) from None
    if built != work.path("mu"):
        built.unlink()


def build_error_at_user_lines(err: BuildError, unit: str, table: dict | None, built_name: str) -> BuildError:
    """The compiler's message about `built_name` (the translation unit `unit`, as built) with its diagnostics at the
    user's lines: from the unit's `#line` directives (tl.emit_line_directives; the simulator builds them blanked),
    else from the side table (JSON, the metadata's `user_lines`); `err` without either. batch_build.py's too."""
    from ..ir.source_lines import name_user_lines_of_build, table_from_json, user_lines

    if "\n#line " in unit:
        lines = user_lines(unit)
    elif table:
        lines = table_from_json(table)
    else:
        return err
    message = name_user_lines_of_build(str(err), built_name, lines)
    return err if message == str(err) else BuildError(message)


def _copy_library(replacement: Path, library: Path) -> None:
    shutil.copyfile(replacement, library)


# The stages in order (stages.py names their files; testing/test_cache.py checks the two agree). A replaced stage's output is its file; the later ones start
# from it.
_STAGE_TABLE = (
    _Stage("tir", (), "the program as TVMScript", lambda w: _script(w.request.program), None),
    _Stage("lowered", ("tir",), "the device functions after the pass pipeline",
           lambda w: _set_lowered(w, _lower_kernels(w.request, w.observers)),
           lambda w, path: _set_lowered(w, _read_lowered(path, w.request.name))),
    _Stage("mu", ("lowered",), "the MUSA translation unit: templates, kernels, host wrapper",
           lambda w: _print_source(w, None), _print_source),
    _Stage("host", ("tir", "lowered", "mu"), "parameters, size bindings, launches (HostInfo)",
           lambda w: _set_host(w, _host_info(w.request.program, w.request.outputs, w.device_funcs, w.names,
                                             w.source.local_bytes)),
           lambda w, path: _set_host(w, HostInfo.from_json(json.loads(path.read_text())))),
    _Stage("bin", ("mu", "host"), "the library the backend's toolchain built", _build,
           lambda w, path: _copy_library(path, w.path("bin"))),
)


def _run_stages(request: _Request, workdir: Path, key: str | None, observers: CompileObservers,
                deferred: list | None = None) -> None:
    """The stage table into `workdir`, each output replaced by its file where one is given; metadata.json last.
    With `deferred`, the bin stage appends its BuildRequest there instead of building."""
    work = _Work(request, workdir, observers, cache.replacement_files(request.name), deferred=deferred)
    for stage in _STAGE_TABLE:
        replacement = work.replaced.get(stage.name)
        with jit_phase(f"compile.{stage.name}", kernel=request.name, target=str(request.target.attrs["arch"])):
            text = stage.make(work) if replacement is None else stage.load(work, replacement)
        if text is not None:
            work.path(stage.name).write_text(text)
    KernelMetadata(request.name, json.loads(str(request.target)), request.backend.name,
                   request.backend.toolchain.identity(), request.options(), work.host, work.sections,
                   tuple(s for s in STAGES if s in work.replaced), key, __version__,
                   {stage: stage_file(request.name, stage) for stage in STAGES}, work.user_lines,
                   program_lines(request.program) if work.user_lines else None).write(workdir)


def _lower_kernels(request: _Request, observers: CompileObservers) -> list[tirx.PrimFunc]:
    """The pass pipeline over the program (transform/pipeline.py: its kernels, in launch order)."""
    from ..codegen.source import kernel_names

    if env.get_pass_diff_mode() is not None:  # a diff of every pass that follows
        from ..tools.trace.pass_diff_hook import install_pass_diff_hook

        install_pass_diff_hook()

    def announce(index: int, count: int) -> None:
        observers.lowering_kernel(kernel_names(request.name, count)[index] if count > 1 else "")

    return lower_program(request.program, request.target, request.pass_options,
                         [*request.instruments, *observers.instruments()], _ir_dumper(request.pass_options), announce)


@dataclass(frozen=True)
class CompiledArtifact:
    """What `tilelang.lower` returns (upstream's names): the lowered device functions and their MUSA source,
    nothing built. The host side is the C++ wrapper in `host_source`, not an IRModule: `host_mod` is None."""

    host_mod: None
    device_mod: tvm.IRModule  # the device functions after the pass pipeline, named as in the source
    params: list[ParamSpec] | None  # the kernel's parameters as the launcher sees them (None with runtime_only)
    kernel_source: str  # the template includes and the kernels: what JITKernel.get_kernel_source() shows
    host_source: str  # the host wrapper that launches them
    rt_mod: None = None  # nothing is built; tilelang.compile builds and runs
    target: tvm.target.Target | None = None
    target_host: Any = None


def lower(program: tirx.PrimFunc, target: Any = "auto", target_host: Any = None, runtime_only: bool = False,
          enable_host_codegen: bool = False, enable_device_compile: bool = False,
          pass_configs: dict | None = None) -> CompiledArtifact:
    """Lower `program` and print its MUSA source without building it (upstream's `tilelang.lower`):
    `lower(f, target="musa").kernel_source`. Postproc callbacks apply as in a compile; the cache is not used."""
    if isinstance(program, tvm.IRModule):
        functions = list(program.functions.values())
        if len(functions) != 1:
            raise CompileError(f"tilelang.lower takes one PrimFunc; the IRModule has {len(functions)} functions")
        program = functions[0]
    if not isinstance(program, tirx.PrimFunc):
        raise TypeError(f"tilelang.lower expects a @T.prim_func; got {type(program).__name__}")
    if enable_host_codegen or enable_device_compile:
        warn_once("lower.codegen", "tilelang.lower: enable_host_codegen / enable_device_compile build nothing on "
                  "MUSA (the host wrapper is C++ in the same source); use tilelang.compile to build and run")
    from ..codegen import generate
    from ..codegen.source import kernel_names

    request = _settle(program, None, target, "auto", pass_configs, None, False, None)
    observers = CompileObservers(request.name, request.target, request.pass_options)
    with observers.compiling():
        device_funcs = _lower_kernels(request, observers)
        device_mod = tvm.IRModule(dict(zip(kernel_names(request.name, len(device_funcs)), device_funcs)))
        with observers.stage("codegen.MUSASource"):
            source = observers.print_source(device_mod, lambda: generate(
                device_funcs, request.target, request.name,
                line_directives=request.pass_options.emit_line_directives))
            text = source.text
            text, host_at = postprocess(text, text.rindex(source.host), request.target)
        if observers.trace is not None:
            observers.codegen(_script(device_mod), text)
    accessed, widest = parameter_accesses(device_funcs)
    params = None if runtime_only else param_specs(program, _output_indices(program, None), widest, accessed)
    return CompiledArtifact(None, device_mod, params, text[:host_at], text[host_at:], None, request.target,
                            target_host)


def _script(node: Any) -> str:
    """TVMScript of `node`. An op without a printer name makes TVM print a warning at every print: ours
    (`tl.*`) get their own name first, as the TVMScript name they print with anyway."""
    def name_op(call: Any) -> None:
        op = call.op
        if isinstance(op, tvm.ir.Op) and str(op.name).startswith("tl.") and str(op.name) not in _printer_named:
            if op.get_attr("TScriptPrinterName") is None:
                op.set_attr("TScriptPrinterName", str(op.name))
            _printer_named.add(str(op.name))

    tvm_ffi.structural_walk(node, [(tvm.ir.Call, name_op)])
    return node.script()


_printer_named: set[str] = set()


def _read_lowered(path: Path, name: str) -> list[tirx.PrimFunc]:
    """The device functions of a replacement `<kernel>.lowered.py` (TVMScript as the `lowered` stage writes it:
    an IRModule whose functions are named `<kernel>_kernel`, `<kernel>_kernel_1`, ... in launch order)."""
    from ..codegen.source import kernel_names

    parsed = tvm.script.from_source(path.read_text())
    if isinstance(parsed, tirx.PrimFunc):
        return [parsed]
    functions = {str(gv.name_hint): f for gv, f in parsed.functions.items()}
    ordered = [functions[n] for n in kernel_names(name, len(functions)) if n in functions]
    if len(ordered) != len(functions):
        raise CompileError(f"{env.REPLACE_STAGES.name}: {path} must name its functions {name}_kernel, "
                           f"{name}_kernel_1, ... (found {sorted(functions)})")
    return ordered


def _host_info(program: tirx.PrimFunc, out_idx: Any, device_funcs: list[tirx.PrimFunc], names: list[str],
               local_bytes: int) -> HostInfo:
    from ..codegen.host import launch_config

    accessed, widest = parameter_accesses(device_funcs)
    specs = param_specs(program, _output_indices(program, out_idx), widest, accessed)
    # A scalar named like a size of an input tensor takes its value from the tensors; one that only outputs or
    # workspaces name is the caller's argument and sizes them (`T.empty((3, n * 2))` with `n: T.int32`).
    input_sizes = {s for spec in specs if spec.kind == "tensor" and not spec.is_workspace and not spec.is_output
                   for s in spec.symbols}
    bound = tuple(spec.name for spec in specs if spec.kind == "scalar" and spec.name in input_sizes)
    unsolvable = unsolvable_symbols(specs, bound)
    if unsolvable:
        uses = "; ".join(spec.describe() for spec in specs
                         if spec.kind == "tensor" and set(spec.symbols) & set(unsolvable))
        raise CompileError(f"size variable(s) {', '.join(unsolvable)} of `{program.attrs['global_symbol']}` appear "
                           f"only inside tensor dims that do not determine them at launch ({uses}); make one dim or "
                           "stride that variable alone, or linear in it (n * 4, n + 1, 3 * n + 1)")
    launches = []
    for func, kernel_name in zip(device_funcs, names):
        smem = func.attrs[SIZE_ATTR] if func.attrs is not None and SIZE_ATTR in func.attrs else 0
        config = launch_config(func, thread_info(func).extents, smem)
        launches.append(Launch(kernel_name, tuple(config.grid), tuple(config.block), config.dynamic_smem_bytes))
    return HostInfo(tuple(specs), bound, tuple(launches), local_bytes, host_assumes(program))


def _publish(kernel: JITKernel, options: CompileOptions) -> None:
    """What a compile leaves outside the cache, hit or miss: TILELANG_DUMP_KERNEL_SOURCE, the source archive,
    MUSA_KERNELS_OUTPUT_DIR and TILELANG_DUMP_STAGES. The source is read only when one of them asks."""
    dump_path = env.DUMP_KERNEL_SOURCE.path()
    if dump_path is not None:
        dump_path.parent.mkdir(parents=True, exist_ok=True)
        dump_path.write_text(kernel.get_kernel_source())
    if env.SOURCE_ARCHIVE_DIR.raw():
        archive_source(kernel.get_kernel_source(), kernel.name, str(kernel.target.attrs["arch"]))
    output_dir = options.musa_kernels_output_dir
    if output_dir:
        out = Path(str(output_dir))
        out.mkdir(parents=True, exist_ok=True)
        (out / f"{file_stem(kernel.name)}.mu").write_text(kernel.get_kernel_source())
        shutil.copyfile(kernel.library_path, out / f"{file_stem(kernel.name)}.so")
    stages_dir = env.DUMP_STAGES.path()
    if stages_dir is not None:
        stages_dir.mkdir(parents=True, exist_ok=True)
        for stage in STAGES:
            shutil.copyfile(kernel.stage_path(stage), stages_dir / stage_file(kernel.name, stage))
        shutil.copyfile(kernel.directory / METADATA, stages_dir / f"{file_stem(kernel.name)}.{METADATA}")


JITKernel.compile_program = staticmethod(compile)
