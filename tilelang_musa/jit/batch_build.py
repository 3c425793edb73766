"""Many simulator programs built by one host-compiler run (the fuzzer's throughput: g++ is most of a run).

`build_together(kernels)` takes `compile_deferred` results (compile.py). It groups those whose builds would use
the same compiler flags. Each group of two or more becomes one translation unit and one shared library. Each
program then gets its own small library, which exports its `call_packed` and `get_last_error` by forwarding to
the shared one. So the launcher's contract (one library per kernel, these two symbols) holds unchanged, and each
program is still launched, checked and reported on its own.

In the joint translation unit, each program's text keeps its own line numbers: a `#line` directive resets them,
and checked mode names the generated source line (`__LINE__`). The names each program defines with external or
file-scope linkage are renamed by a `#define` around its text: the host wrapper's `call`, `call_packed`,
`get_last_error`, `tl_error_buf` and `tl_host_*` helpers, and its kernels. The template includes are hoisted
before every program, so no header is read under a rename.

A joint build that fails is split in halves until the failing program is built alone by the ordinary build. The
ordinary build's error is then that program's error, and the other programs still get their libraries.
"""

from __future__ import annotations

import shlex
import subprocess
import tempfile
from pathlib import Path
from typing import Sequence

from .. import env
from ..errors import BuildError
from .stages import stage_file
from .toolchains import BuildRequest, SimToolchain

# What the host wrapper (codegen/host.py) defines at file scope, besides the kernels.
_HOST_NAMES = ("call_packed", "call", "get_last_error", "tl_error_buf", "tl_host_floordiv", "tl_host_floormod",
               "tl_host_min", "tl_host_max")


def build_together(kernels: Sequence) -> list[BuildError | None]:
    """Builds the library of every DeferredKernel in `kernels` (those with something left to build); one entry per
    kernel: None when its library was built, else the BuildError its own build gave."""
    errors: list[BuildError | None] = [None] * len(kernels)
    groups: dict[tuple, list[int]] = {}
    for index, kernel in enumerate(kernels):
        if kernel.build is not None:
            groups.setdefault(_group_key(kernel), []).append(index)
    for indices in groups.values():
        _build_group(kernels, indices, errors)
    return errors


def _group_key(kernel) -> tuple:
    toolchain, req = kernel.request.backend.toolchain, kernel.build
    if not isinstance(toolchain, SimToolchain):
        return ("alone", id(kernel))
    return (req.arch.name, tuple(toolchain.flags(req)), toolchain.links_runtime(req), req.prelude)


def _build_group(kernels: Sequence, indices: list[int], errors: list) -> None:
    if len(indices) == 1 or not isinstance(kernels[indices[0]].request.backend.toolchain, SimToolchain):
        for i in indices:
            errors[i] = _build_alone(kernels[i])
        return
    try:
        _build_joint([kernels[i] for i in indices])
    except BuildError:
        half = len(indices) // 2
        _build_group(kernels, indices[:half], errors)
        _build_group(kernels, indices[half:], errors)


def _build_alone(kernel) -> BuildError | None:
    """The ordinary build, as tilelang.compile runs it."""
    req = kernel.build
    try:
        kernel.request.backend.toolchain.build(req)
    except BuildError as err:
        from .compile import build_error_at_user_lines
        from .stages import KernelMetadata

        unit = (kernel.directory / stage_file(kernel.request.name, "mu")).read_text()
        return build_error_at_user_lines(err, unit, KernelMetadata.read(kernel.directory).user_lines, req.source.name)
    finally:
        _drop_checked_source(kernel)
    return None


def _drop_checked_source(kernel) -> None:
    """The checked print is kept only while building (compile.py's _build)."""
    mu = kernel.directory / stage_file(kernel.request.name, "mu")
    if kernel.build.source != mu:
        kernel.build.source.unlink(missing_ok=True)


def joint_source(kernels: Sequence, tags: Sequence[str]) -> str:
    """One translation unit holding every program of `kernels`, the names of program i prefixed with tags[i]."""
    includes: list[str] = []
    bodies: list[str] = []
    for kernel, tag in zip(kernels, tags):
        lines = kernel.build.source.read_text().splitlines(keepends=True)
        first = 0
        while first < len(lines) and lines[first].startswith("#include"):
            if lines[first] not in includes:
                includes.append(lines[first])
            first += 1
        names = _HOST_NAMES + tuple(launch.name for launch in _launches(kernel))
        defines = "".join(f"#define {n} {tag}{n}\n" for n in names)
        undefs = "".join(f"#undef {n}\n" for n in names)
        source = str(kernel.build.source).replace("\\", "\\\\").replace('"', '\\"')
        bodies.append(f'{defines}#line {first + 1} "{source}"\n{"".join(lines[first:])}\n{undefs}')
    return "".join(includes) + "".join(bodies)


def _launches(kernel):
    from .stages import KernelMetadata

    return KernelMetadata.read(kernel.directory).host.launches


def _build_joint(kernels: Sequence) -> None:
    """One library for all `kernels` (same flags), then each program's forwarding library."""
    first = kernels[0]
    toolchain: SimToolchain = first.request.backend.toolchain
    directory = Path(tempfile.mkdtemp(prefix="tilelang_batch_", dir=_root()))
    tags = [f"tl_batch{i}_" for i in range(len(kernels))]
    source = directory / "batch.mu"
    source.write_text(joint_source(kernels, tags))
    library = directory / "batch.so"
    req = BuildRequest(source, library, first.build.arch, first.build.fast_math, first.build.extra_flags,
                       first.build.local_bytes, first.build.prelude)
    header = toolchain.prelude(req)
    # the soname is the library's path, so each forwarding library finds it again at load time
    toolchain._run(toolchain.command(req, header) + [f"-Wl,-soname,{library}"], req)
    for kernel, tag in zip(kernels, tags):
        _forward(toolchain, kernel, tag, library, directory)
        _drop_checked_source(kernel)


_FORWARDER = """extern "C" int {tag}call_packed(void** args, int num_args, void* stream);
extern "C" const char* {tag}get_last_error();
extern "C" int call_packed(void** args, int num_args, void* stream) {{ return {tag}call_packed(args, num_args, stream); }}
extern "C" const char* get_last_error() {{ return {tag}get_last_error(); }}
"""


def _forward(toolchain: SimToolchain, kernel, tag: str, library: Path, directory: Path) -> None:
    """The program's own library: its two entry points, forwarding to the joint library (no headers: cheap)."""
    stub = directory / f"{tag}forward.cc"
    stub.write_text(_FORWARDER.format(tag=tag))
    cmd = [toolchain._cxx(), "-shared", "-fPIC", "-O1", "-x", "c++", str(stub), "-x", "none", str(library),
           "-o", str(kernel.build.output)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise BuildError(f"linking the forwarding library of {kernel.request.name} failed "
                         f"(exit {proc.returncode})\ncommand: {shlex.join(cmd)}\n{proc.stderr.strip()}")


def _root() -> Path:
    root = env.TMP_DIR.path()
    root.mkdir(parents=True, exist_ok=True)
    return root
