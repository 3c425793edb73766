"""Toolchains that turn a MUSA source file into a shared library exporting `call_packed`.

    mcc  the MUSA compiler (a MUSA machine): device code for the target arch + the host wrapper
    sim  the host C++ compiler against the simulator headers (any machine): the same source runs on CPU

A registry, not an if-chain: each toolchain says whether it is `available()`, who it is (`identity()`, for the
kernel cache's key, without running it) and how to `build()`.

The user's compile flags (`compile_flags`, `T.annotate_compile_flags`, `TL_DEVICE_COMPILE_FLAGS`) are mcc flags,
all passed to mcc. The simulator's host compiler takes only those that mean something to it (optimization level,
-D/-U/-I, -std=, warnings, -g, the math and aliasing -f options) and drops the rest (`-mllvm <arg>`, `-fmusa-*`,
`-Od3`, `--offload-arch`, `-Xclang <arg>`, nvcc options, ...) with a one-line note, once per flag and process, so
a device script runs unchanged in the simulator.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from .. import env
from .._paths import include_root, simulator_headers
from ..errors import BuildError
from ..profiler.arch_figures import sim_timing_flags
from ..target import ArchInfo
from . import sim_runtime, sim_runtime_recipe
from .precompiled_prelude import prelude_header


@dataclass(frozen=True)
class BuildRequest:
    source: Path
    output: Path
    arch: ArchInfo
    fast_math: bool = False
    extra_flags: tuple[str, ...] = field(default_factory=tuple)
    local_bytes: int = 0  # per-thread local arrays of the kernel (the simulator sizes its fiber stacks by it)
    prelude: str = ""  # the include lines the source starts with, when a toolchain may precompile them


class Toolchain:
    name: str = ""
    device: str = ""  # the torch device type whose tensors the built kernels take ("musa" | "cpu")

    def available(self) -> bool:
        raise NotImplementedError

    def version(self) -> str:
        raise NotImplementedError

    def executable(self) -> Path | None:
        """The compiler this toolchain runs, None when it is missing."""
        raise NotImplementedError

    def identity(self) -> str:
        """Who would build: the toolchain and its compiler binary (resolved path, size, mtime), without running
        it; looked up once per process and setting (PATH, MUSA_HOME, TILELANG_SIM_CXX). The kernel cache keys on
        this instead of `version()`, which starts a process."""
        settings = (os.environ.get("PATH"), env.musa_home(), env.SIM_CXX.raw())
        return _identity(self, settings)

    def command(self, req: BuildRequest) -> list[str]:
        raise NotImplementedError

    def build(self, req: BuildRequest) -> Path:
        return self._run(self.command(req), req)

    def _run(self, cmd: list[str], req: BuildRequest) -> Path:
        if env.PRINT_DEVICE_COMPILE_COMMAND.flag() or env.DUMP_KERNEL_SOURCE.raw():
            print(f"[tilelang] {self.name} compile command: {shlex.join(cmd)}", file=sys.stderr)
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            raise BuildError(
                f"{self.name}: compiling {req.source} failed (exit {proc.returncode})\n"
                f"command: {shlex.join(cmd)}\n{proc.stderr.strip() or proc.stdout.strip()}"
            )
        return req.output


@cache
def _identity(toolchain: Toolchain, settings: tuple) -> str:
    path = toolchain.executable()
    if path is None:
        return f"{toolchain.name}:missing"
    return sim_runtime_recipe.compiler_identity(str(path), toolchain.name)


def _find_mcc() -> Path | None:
    home = env.musa_home()
    candidates = [home / "bin" / "mcc"] if home else []
    on_path = shutil.which("mcc")
    if on_path:
        candidates.append(Path(on_path))
    candidates.append(Path("/usr/local/musa/bin/mcc"))
    for c in candidates:
        if c.is_file() and os.access(c, os.X_OK):
            return c
    return None


class MccToolchain(Toolchain):
    """`mcc src.mu -std=c++17 --shared -fPIC --offload-arch=mp_31 ...` (MUSA_FACTS.md, Toolchain)."""

    name = "mcc"
    device = "musa"

    def available(self) -> bool:
        return _find_mcc() is not None

    def executable(self) -> Path | None:
        return _find_mcc()

    def version(self) -> str:
        mcc = _find_mcc()
        if mcc is None:
            return "missing"
        proc = subprocess.run([str(mcc), "--version"], capture_output=True, text=True)
        return (proc.stdout or proc.stderr).strip().splitlines()[0] if (proc.stdout or proc.stderr) else "unknown"

    def command(self, req: BuildRequest) -> list[str]:
        mcc = _find_mcc()
        if mcc is None:
            raise BuildError("mcc was not found: set MUSA_HOME (mcc is in $MUSA_HOME/bin) or put mcc on PATH")
        home = mcc.parent.parent
        cmd = [
            str(mcc), str(req.source), "-std=c++17", "--shared", "-fPIC", "-O3",
            f"--offload-arch={req.arch.name}", f"-D__MUSA_ARCH_LIST__={req.arch.musa_arch}",
            "-mllvm", "-mtgpu-alloc-shared-memory-from-zero=1",
            f"-I{include_root()}", f"-I{home / 'include'}",
        ]
        if req.fast_math:
            cmd.append("-ffast-math")
        cmd += list(req.extra_flags) + env.MCC_EXTRA_ARGS.list()
        cmd += [f"-L{home / 'lib'}", "-lmusart", "-lmusa", "-o", str(req.output)]
        return cmd


# -ffast-math, spelled out: given -ffast-math (or -funsafe-math-optimizations) when linking, gcc and clang add
# crtfastmath.o, whose constructor turns on flush-to-zero for the whole process when the kernel library loads: every
# later computation (torch's, other kernels') would then flush subnormals. These flags permit the same rewrites.
# The simulator's default fiber stack (kDefaultStackKiB in src/tl_templates/sim/sim/config.h).
SIM_DEFAULT_STACK_KIB = 64

SIM_FAST_MATH_FLAGS = ["-fno-math-errno", "-fno-signed-zeros", "-fno-trapping-math", "-fassociative-math",
                       "-freciprocal-math", "-ffinite-math-only", "-fno-rounding-math", "-fcx-limited-range"]


# Which of the user's (mcc) flags the host compiler takes. Anything else is dropped, with a note.
_HOST_FLAG = re.compile(
    r"-O[0-3sgz]?|-[DUI].+|-std=.+|-W(?![lap],).+|-w|-g[0-3]?|-ggdb[0-3]?|-pthread|"
    r"-f(no-)?(signed-zeros|math-errno|trapping-math|associative-math|reciprocal-math|finite-math-only|"
    r"rounding-math|cx-limited-range|strict-aliasing|unroll-loops|syntax-only|exceptions|rtti)|-ffp-contract=\w+"
)
_HOST_FLAG_WITH_ARG = ("-D", "-U", "-I", "-isystem", "-include")  # the value as the next argument
# mcc/clang/nvcc options whose value is the next argument: dropped together with it.
_DEVICE_FLAG_WITH_ARG = ("-mllvm", "-Xclang", "-Xlinker", "-Xcompiler", "-Xptxas", "-Xarch_device", "-Xarch_host",
                         "-gencode", "-arch", "--offload-arch", "--cuda-gpu-arch", "-o", "-x")
# Flags implying fast math: the simulator spells it out (SIM_FAST_MATH_FLAGS).
_FAST_MATH = {"-ffast-math": [], "-funsafe-math-optimizations": [], "-Ofast": ["-O3"]}
# mcc's flush-to-zero for float32: the simulator's workers set the host's flush mode while they run the kernel's
# blocks (src/tl_templates/sim/sim/denormals.h); the last of the two spellings given wins.
FLUSH_DENORMALS = {"-fmusa-flush-denormals-to-zero": True, "-fno-musa-flush-denormals-to-zero": False}
SIM_FLUSH_DENORMALS_FLAG = "-DTL_SIM_FLUSH_DENORMALS_TO_ZERO=1"
_noted_flags: set[str] = set()


def host_compiler_flags(flags: tuple[str, ...] | list[str]) -> tuple[list[str], bool]:
    """The flags among the user's mcc `flags` that the simulator's host compiler takes, and whether one of them
    asks for fast math. Prints one line naming the dropped flags not noted before in this process."""
    kept: list[str] = []
    dropped: list[str] = []
    fast_math = flush_denormals = False
    tokens = list(flags)
    i = 0
    while i < len(tokens):
        flag = tokens[i]
        has_value = i + 1 < len(tokens)
        if flag in FLUSH_DENORMALS:
            flush_denormals = FLUSH_DENORMALS[flag]
        elif flag in _FAST_MATH:
            kept += _FAST_MATH[flag]
            fast_math = True
        elif flag in _HOST_FLAG_WITH_ARG and has_value:
            kept += [flag, tokens[i + 1]]
            i += 1
        elif flag in _DEVICE_FLAG_WITH_ARG and has_value:
            dropped.append(f"{flag} {tokens[i + 1]}")
            i += 1
        elif _HOST_FLAG.fullmatch(flag):
            kept.append(flag)
        else:
            dropped.append(flag)
        i += 1
    new = [flag for flag in dict.fromkeys(dropped) if flag not in _noted_flags]
    if new:
        _noted_flags.update(new)
        print(f"[tilelang] sim: the host compiler ignores the MUSA compiler flag(s) {', '.join(new)}",
              file=sys.stderr)
    return kept + ([SIM_FLUSH_DENORMALS_FLAG] if flush_denormals else []), fast_math


class SimToolchain(Toolchain):
    """The host C++ compiler with the simulator's MUSA headers first on the include path."""

    name = "sim"
    device = "cpu"

    def _cxx(self) -> str:
        return env.SIM_CXX.raw() or "g++"

    def available(self) -> bool:
        return shutil.which(self._cxx()) is not None

    def executable(self) -> Path | None:
        found = shutil.which(self._cxx())
        return Path(found) if found else None

    def version(self) -> str:
        proc = subprocess.run([self._cxx(), "--version"], capture_output=True, text=True)
        return proc.stdout.splitlines()[0] if proc.stdout else "unknown"

    def base_flags(self, req: BuildRequest) -> list[str]:
        """The flags of every build for the arch, kernel or runtime (sim_runtime.py): none of the kernel's own."""
        return sim_runtime_recipe.base_flags(req.arch.musa_arch, include_root(), simulator_headers(),
                                             sim_timing_flags(req.arch.name))

    def links_runtime(self, req: BuildRequest) -> bool:
        """Whether the kernel library links the prebuilt simulator runtime rather than carrying its own copy: not
        when asked (TILELANG_SIM_NO_RUNTIME=1), when the headers in use have none, or when the user's flags could
        change what the shared headers declare (macros, forced includes), which kernel and runtime must agree on."""
        if env.SIM_NO_RUNTIME.flag() or not sim_runtime.supported():
            return False
        extra, _ = host_compiler_flags(req.extra_flags)
        # (the flush macro only sets a field of the launch the library makes: the runtime need not agree on it)
        return not any(f.startswith(("-D", "-U", "-include", "-isystem", "-std=")) and f != SIM_FLUSH_DENORMALS_FLAG
                       for f in extra)

    def flags(self, req: BuildRequest) -> list[str]:
        """The compile flags (no source, output or link flags): a precompiled prelude is valid for these only."""
        flags = self.base_flags(req)
        if self.links_runtime(req):
            flags.append(sim_runtime_recipe.LINK_FLAG)
        # twice the arrays (the compiler may copy them) plus room for the frames of the kernel and the runtime;
        # only passed when above the default stack, so most kernels share one precompiled prelude
        stack_kib = -(-(2 * req.local_bytes + 32 * 1024) // 1024) if req.local_bytes else 0
        if stack_kib > SIM_DEFAULT_STACK_KIB:
            flags.append(f"-DTL_SIM_MIN_STACK_KB={stack_kib}")
        extra, fast_math = host_compiler_flags(req.extra_flags)
        if req.fast_math or fast_math:
            flags += SIM_FAST_MATH_FLAGS
        return flags + self._device_api_before_forced_includes(extra)

    @staticmethod
    def _device_api_before_forced_includes(extra: list[str]) -> list[str]:
        """mcc, as clang for CUDA, puts its runtime header (the kernel-language keywords and device built-ins)
        before the translation unit and before the headers a user forces with `-include`: a helper header passed
        so (vllm-musa's atomic helpers) may write `__device__` and call `atomicAdd`. The simulator's
        musa_runtime.h is that header here."""
        if "-include" not in extra:
            return extra
        return ["-include", "musa_runtime.h"] + extra

    def runtime(self, req: BuildRequest) -> Path:
        """The simulator runtime a kernel library built for `req` links (built first if need be)."""
        return sim_runtime.runtime_library([self._cxx()], self.identity(), self.base_flags(req), req.arch.name)

    def command(self, req: BuildRequest, prelude_header: Path | None = None) -> list[str]:
        forced = ["-include", str(prelude_header)] if prelude_header is not None else []
        link = sim_runtime.link_flags(self.runtime(req)) if self.links_runtime(req) else []
        return [self._cxx()] + self.flags(req) + ["-shared"] + forced + ["-x", "c++", str(req.source)] + link + [
            "-o", str(req.output)]

    def prelude(self, req: BuildRequest) -> Path | None:
        """The precompiled prelude a build of `req` force-includes (precompiled first if need be), or None."""
        if not req.prelude or env.SIM_NO_PRELUDE.flag():
            return None
        flags = self.flags(req)
        # A header the user forces (`-include`) comes before the prelude, and gcc takes a precompiled header only
        # before any other: precompiling one would cost seconds for a file the build then ignores.
        if "-include" in flags:
            return None
        return prelude_header([self._cxx()], flags, req.prelude, self.identity())

    def build(self, req: BuildRequest) -> Path:
        return self._run(self.command(req, self.prelude(req)), req)


TOOLCHAINS: dict[str, Toolchain] = {t.name: t for t in (MccToolchain(), SimToolchain())}
