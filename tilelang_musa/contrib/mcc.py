"""The MUSA compiler `mcc`, under the names of TileLang-MUSA's `tilelang.contrib.mcc`.

    mcc.find_musa_path()                      # MUSA SDK root (the directory whose bin/ holds mcc)
    mcc.get_musa_version()                    # (4, 3, 4) from `mcc --version`
    mcc.get_musa_compute_version("musa -arch=mp_22")          # "2.2"; no argument: the current target
    mcc.parse_musa_compute_version("3.1")     # (3, 1)
    mcc.compile_musa(source, target_format="mubin")           # device binary for the current target's arch

mcc is looked up as the JIT's "mcc" toolchain finds it (jit/toolchains.py): $MUSA_HOME/bin, $MUSA_PATH/bin, PATH,
/usr/local/musa/bin. The compute version of a target is its arch's (mp_31 -> "3.1"), so it is defined with or
without a device: with no argument it answers for the current target (a `with Target(...)` scope, else
$TILELANG_TARGET, else the device's arch, else mp_31), which is the arch kernels are compiled for.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Sequence

from .. import target as _musa
from .._paths import include_root
from ..backend.target import auto_detect_target

__all__ = [
    "compile_musa", "default_compile_options", "find_musa_path", "get_mcc_compiler", "get_musa_arch",
    "get_musa_compute_version", "get_musa_version", "have_bf16", "have_fp16", "have_fp8", "have_int8", "have_tma",
    "is_ph1", "is_qy2", "parse_musa_compute_version",
]

_NO_MCC = ("mcc (the MUSA compiler) was not found: set MUSA_HOME so that $MUSA_HOME/bin/mcc exists, or put mcc on "
           "PATH. Without it kernels run in the CPU simulator (execution_backend='sim').")


def get_mcc_compiler() -> str:
    """Path of the mcc executable; RuntimeError when there is none."""
    from ..jit.toolchains import _find_mcc  # the JIT's own lookup, so both agree on which mcc is used

    found = _find_mcc()
    if found is None:
        raise RuntimeError(_NO_MCC)
    return str(found)


def find_musa_path() -> str:
    """The MUSA SDK root: the parent of the `bin/` that holds mcc. RuntimeError when mcc is not found."""
    return str(Path(get_mcc_compiler()).parent.parent)


def get_musa_version(musa_path: str | None = None) -> tuple[int, ...]:
    """mcc's version as integers, e.g. (4, 3, 4) from "mcc version 4.3.4"; `musa_path` picks an SDK root."""
    mcc = str(Path(musa_path) / "bin" / "mcc") if musa_path else get_mcc_compiler()
    proc = subprocess.run([mcc, "--version"], capture_output=True, text=True)
    text = proc.stdout + proc.stderr
    match = re.search(r"version\s+(\d+(?:\.\d+)+)", text)
    if proc.returncode != 0 or match is None:
        raise RuntimeError(f"cannot read the MUSA version from `{mcc} --version` (exit {proc.returncode}): "
                           f"{text.strip()[:200]!r}")
    return tuple(int(part) for part in match.group(1).split("."))


def get_musa_compute_version(target: Any = None) -> str:
    """The compute version "major.minor" of `target`'s arch (mp_31 -> "3.1", mp_22 -> "2.2"). `target`: any
    form `tilelang.compile(target=...)` accepts; None: the current target (see the module docstring)."""
    resolved = auto_detect_target() if target is None else _musa.determine_target(target)
    major, minor = _musa.arch_of(resolved).capability
    return f"{major}.{minor}"


def parse_musa_compute_version(compute_version: str) -> tuple[int, int]:
    """"3.1" -> (3, 1). ValueError for anything that is not two dot-separated integers."""
    parts = str(compute_version).strip().split(".")
    if len(parts) != 2 or not all(p.isdigit() for p in parts):
        raise ValueError(f"a MUSA compute version is 'major.minor', e.g. '3.1'; got {compute_version!r}")
    return int(parts[0]), int(parts[1])


def get_musa_arch(compute_version: str) -> str:
    """The arch number of a compute version: "3.1" -> "31" (the arch is f"mp_{get_musa_arch(v)}")."""
    major, minor = parse_musa_compute_version(compute_version)
    return f"{major}{minor}"


def _arch(arch: str | None) -> _musa.ArchInfo:
    """An ArchInfo from "mp_31", "31", "3.1" or None (the current target's)."""
    if arch is None:
        return _musa.arch_of(auto_detect_target())
    text = str(arch).strip()
    name = text if text.startswith("mp_") else f"mp_{get_musa_arch(text) if '.' in text else text}"
    if name not in _musa.ARCHS:
        raise ValueError(f"unknown MUSA arch {arch!r}; known: {', '.join(_musa.ARCHS)}")
    return _musa.ARCHS[name]


def _major(compute_version: str) -> int:
    return parse_musa_compute_version(compute_version)[0]


def have_fp16(compute_version: str) -> bool:
    """float16 arithmetic: every MUSA arch (mp_21 on)."""
    return _major(compute_version) >= 2


def have_bf16(compute_version: str) -> bool:
    """bfloat16: every MUSA arch (mp_21 on)."""
    return _major(compute_version) >= 2


def have_int8(compute_version: str) -> bool:
    """int8 MMA: every MUSA arch (mp_21 on)."""
    return _major(compute_version) >= 2


def have_fp8(compute_version: str) -> bool:
    """float8 (E4M3/E5M2) MMA: from the first generation with an arch that has it (PH1: mp_31, SQMMA fp8) on."""
    major = _major(compute_version)
    return any(arch.has_fp8_mma and arch.capability[0] <= major for arch in _musa.ARCHS.values())


def have_tma(target: Any = None) -> bool:
    """Whether `target` (None: the current target) has the tensor memory engine (TME, MUSA's TMA): mp_31, mp_32."""
    try:
        resolved = auto_detect_target() if target is None else _musa.determine_target(target)
    except ValueError:
        return False  # another kind of target
    return _musa.arch_of(resolved).has_tme


def is_qy2(target: Any) -> bool:
    """Whether `target` compiles for mp_22 (QY2, MTT S4000)."""
    from ..backend.target import target_is_qy2

    return target_is_qy2(target)


def is_ph1(target: Any) -> bool:
    """Whether `target` compiles for mp_31 (PH1, MTT S5000)."""
    from ..backend.target import target_is_ph1

    return target_is_ph1(target)


def default_compile_options(compile_flags: Sequence[str] | None = None) -> list[str]:
    """mcc flags every TileLang-MUSA source needs (C++17, the tl_templates headers, the SDK's include/ when mcc is
    found), then `compile_flags`, each split as a shell would ("-DX=1 -O3" is two flags; quotes keep spaces)."""
    options = ["-std=c++17", f"-I{include_root()}"]
    try:
        options.append(f"-I{Path(find_musa_path()) / 'include'}")
    except RuntimeError:
        pass
    for flag in compile_flags or ():
        options += shlex.split(flag) if isinstance(flag, str) else [str(flag)]
    return options


def compile_musa(code: str, target_format: str = "mubin", arch: str | None = None,
                 options: str | Sequence[str] | None = None, path_target: str | None = None,
                 verbose: bool = False) -> bytearray:
    """Compile MUSA C `code` for the device only and return the output's bytes.

    target_format  "mubin" (a device binary) or "asm" (mcc -S)
    arch           "mp_31" / "31" / "3.1"; None: the current target's arch
    options        extra mcc flags (a string is one flag; a list, several), after `default_compile_options()`
    path_target    where to write the output (default: a temporary file, removed afterwards)
    verbose        print mcc's output

    The command is `mcc --cuda-device-only --cuda-gpu-arch=<arch> -O3 <default options> <options> -o <out> <src>`
    (MUSA_FACTS.md, Toolchain); TILELANG_PRINT_DEVICE_COMPILE_COMMAND=1 prints it. RuntimeError when mcc is missing
    or fails (with its output and the command).
    """
    if target_format not in ("mubin", "asm"):
        raise ValueError(f"compile_musa: target_format must be 'mubin' or 'asm', got {target_format!r}")
    if isinstance(options, str):
        options = [options]
    info = _arch(arch)
    mcc = get_mcc_compiler()
    from .. import env

    with tempfile.TemporaryDirectory(prefix="tilelang_mcc_") as tmp:
        source = Path(tmp) / "kernel.mu"
        source.write_text(code)
        default_output = Path(tmp) / ("kernel.s" if target_format == "asm" else "kernel.mubin")
        output = Path(path_target) if path_target else default_output
        cmd = [mcc, "--cuda-device-only", f"--cuda-gpu-arch={info.name}", "-O3"]
        if target_format == "asm":
            cmd.append("-S")
        cmd += default_compile_options() + [str(o) for o in options or ()] + env.MCC_EXTRA_ARGS.list()
        cmd += ["-o", str(output), str(source)]
        if env.PRINT_DEVICE_COMPILE_COMMAND.flag():
            print(f"[tilelang] compile_musa command: {shlex.join(cmd)}", file=sys.stderr)
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if verbose:
            print(proc.stdout + proc.stderr)
        if proc.returncode != 0:
            raise RuntimeError(f"compile_musa: mcc failed (exit {proc.returncode})\ncommand: {shlex.join(cmd)}\n"
                               f"{(proc.stderr or proc.stdout).strip()}")
        if not output.is_file() or output.stat().st_size == 0:
            raise RuntimeError(f"compile_musa: mcc produced no output at {output}\ncommand: {shlex.join(cmd)}")
        return bytearray(output.read_bytes())
