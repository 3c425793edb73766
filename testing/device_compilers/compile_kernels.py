"""Compile generated MUSA sources with real two-pass GPU compilers, without mcc.

    python testing/device_compilers/compile_kernels.py DIR_OR_FILES... [--compiler clang|nvcc|all] [--jobs N]
        [--select all|distinct|pairs] [--batch N]
    python testing/device_compilers/compile_kernels.py DIR --compiler nvcc --shared OUT   # .so files, for a GPU

mcc is clang with a MUSA target: it parses every kernel twice, once for the host (no __MUSA_ARCH__, no MUSA
built-ins) and once per device arch. The simulator compiles the same text once, with g++, which accepts things
clang does not. So each source is compiled here by:

    clang  in CUDA mode, `--cuda-host-only` and `--cuda-device-only`, `-fsyntax-only`, without a CUDA installation
           (`-nocudainc -nocudalib`); the MUSA headers and built-ins come from clang_musa/ (declarations only).
    nvcc   one `-c` compile (host and device passes) for an NVIDIA GPU, the MUSA names mapped onto the CUDA
           runtime and half/bfloat16 headers by nvcc_musa/, the `__musa_*` built-ins defined to trap.

Sources are named `<kernel>.<arch>.<hash>.mu`, as TILELANG_SOURCE_ARCHIVE_DIR keeps them; the arch gives
__MUSA_ARCH_LIST__ (a name without one uses --arch). Exit status 1 if any compile fails; the last line reads
"N passed, M failed".

A compiler process spends nearly all its time on the headers (nvcc ~3 s, clang ~0.2 s a pass), a kernel adds little.
So generated sources of one arch that open with the same `#include` lines, and hold nothing at top level but their
`extern "C" __global__` kernels, are checked up to `batch_size` per process: one translation unit that includes
those lines, then each source with its kernels renamed apart (batch.py). A batch that fails is checked again source
by source, so a failure is reported, and reproduced, with the source's own command (--batch 1: never batch).
"""

from __future__ import annotations

import argparse
import itertools
import os
import re
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from batch import BatchShape, batch_shape, batch_text, even_chunks

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
TEMPLATES = REPO / "src"  # generated sources include "tl_templates/musa/*.h"

# __MUSA_ARCH__ of each arch (shared/docs/MUSA_FACTS.md); kept here so the script runs without the package.
MUSA_ARCH = {"mp_21": 210, "mp_22": 220, "mp_31": 310, "mp_32": 320}


@dataclass(frozen=True)
class KernelSource:
    path: Path
    arch: str  # "mp_31"

    @classmethod
    def from_path(cls, path: Path, default_arch: str) -> "KernelSource":
        parts = path.name.split(".")
        arch = next((p for p in parts if p in MUSA_ARCH), default_arch)
        return cls(path, arch)


@dataclass(frozen=True)
class CompileJob:
    source: KernelSource
    compiler: str  # "clang" | "nvcc"
    stage: str  # "host pass" | "device pass" | "both passes"
    command: tuple[str, ...]


@dataclass(frozen=True)
class CompileResult:
    job: CompileJob
    returncode: int
    output: str
    batch_size: int = 1  # how many sources the process that checked this one compiled (batch.py)

    @property
    def ok(self) -> bool:
        return self.returncode == 0

    def report(self, max_lines: int = 40) -> str:
        lines = self.output.strip().splitlines()
        shown = "\n".join(lines[:max_lines]) + (f"\n... ({len(lines) - max_lines} more lines)" if len(lines) > max_lines else "")
        return (f"{self.job.source.path.name} [{self.job.source.arch}]: {self.job.compiler} {self.job.stage} failed "
                f"(exit {self.returncode})\n  command: {' '.join(self.job.command)}\n{shown}")


class DeviceCompiler:
    """A compiler that checks a source in one or more passes; a registry entry, see COMPILERS."""

    name = ""
    batch_size = 1  # sources per process (batch.py)

    def executable(self) -> str | None:
        raise NotImplementedError

    def available(self) -> bool:
        return self.executable() is not None

    def jobs(self, source: KernelSource, output_dir: Path | None) -> list[CompileJob]:
        raise NotImplementedError


class ClangCheck(DeviceCompiler):
    """clang -x cuda, host and device passes as separate syntax-only compiles (mcc parses both)."""

    name = "clang"
    batch_size = 64  # a pass over 64 kernels takes ~3x one over a single kernel
    gpu_arch = "sm_80"  # any NVPTX arch: only the pass structure matters, no code is generated

    def __init__(self, clang: str | None = None):
        self._clang = clang

    def executable(self) -> str | None:
        if self._clang:
            return self._clang
        for name in ("clang++", "clang", "clang++-19", "clang++-16", "clang++-15", "clang++-14"):
            found = shutil.which(name)
            if found:
                return found
        return None

    def base_command(self, source: KernelSource) -> list[str]:
        shim = HERE / "clang_musa"
        return [
            self.executable() or "clang", "-x", "cuda", "-std=c++17", "-fsyntax-only",
            # No CUDA installation: neither its headers nor libdevice, and a cuda path that is never there, so
            # whichever toolkit the machine has cannot leak in.
            "-nocudainc", "-nocudalib", f"--cuda-path={shim / 'no-cuda-installation'}",
            f"--cuda-gpu-arch={self.gpu_arch}",
            f"-I{TEMPLATES}", f"-I{shim}", "-include", str(shim / "musa_predefined.h"),
            f"-D__MUSA_ARCH_LIST__={MUSA_ARCH[source.arch]}",
            str(source.path),
        ]

    def jobs(self, source: KernelSource, output_dir: Path | None) -> list[CompileJob]:
        base = self.base_command(source)
        return [
            CompileJob(source, self.name, "host pass", tuple(base + ["--cuda-host-only"])),
            CompileJob(source, self.name, "device pass", tuple(base + ["--cuda-device-only"])),
        ]


class NvccCheck(DeviceCompiler):
    """nvcc -c (both passes in one compile); with an output directory, a shared library per source instead."""

    name = "nvcc"
    batch_size = 32  # ~3 s of headers per process, ~0.2 s a kernel

    def __init__(self, nvcc: str | None = None, gpu_arch: str = "sm_90"):
        self._nvcc = nvcc
        self.gpu_arch = gpu_arch  # sm_90: the H100/H200 that a later silicon check runs on

    def executable(self) -> str | None:
        if self._nvcc:
            return self._nvcc
        found = shutil.which("nvcc")
        if found:
            return found
        home = os.environ.get("CUDA_HOME") or "/usr/local/cuda"
        candidate = Path(home) / "bin" / "nvcc"
        return str(candidate) if candidate.is_file() else None

    def jobs(self, source: KernelSource, output_dir: Path | None) -> list[CompileJob]:
        shim = HERE / "nvcc_musa"
        cmd = [
            self.executable() or "nvcc", "-x", "cu", "-std=c++17", f"-arch={self.gpu_arch}",
            f"-I{TEMPLATES}", f"-I{shim}", "--pre-include", str(shim / "musa_predefined.h"),
            f"-D__MUSA_ARCH_LIST__={MUSA_ARCH[source.arch]}",
            str(source.path),
        ]
        if output_dir is None:
            cmd += ["-c", "-o", os.devnull]
        else:
            cmd += ["-shared", "-Xcompiler", "-fPIC", "-o", str(output_dir / (source.path.stem + ".so"))]
        return [CompileJob(source, self.name, "both passes", tuple(cmd))]


# name -> the compiler as the command line configures it
COMPILERS = {
    "clang": lambda args: ClangCheck(args.clang),
    "nvcc": lambda args: NvccCheck(args.nvcc, args.cuda_arch),
}


def collect_sources(paths: list[Path], default_arch: str = "mp_31") -> list[KernelSource]:
    """Every `.mu` file under the given directories, plus the given files, in name order."""
    files: list[Path] = []
    for p in map(Path.resolve, paths):  # absolute: each compile runs in a directory of its own
        files += sorted(p.glob("*.mu")) if p.is_dir() else [p]
    return [KernelSource.from_path(f, default_arch) for f in files]


# What a kernel asks of a compiler beyond plain C++: template functions, built-ins, element types.
_FEATURES = re.compile(r"\btl::\w+|\b__\w+|\b(?:half_t|bfloat16_t|fp8_\w+|float|double|u?int\d+_t|bool)\b")


def distinct_by_features(sources: list[KernelSource]) -> list[KernelSource]:
    """One source per (arch, set of templates, built-ins and element types it uses), the first in name order.
    Kernels that differ only in plain C++ (indices, sizes, names) put the same demands on a compiler's handling of
    the MUSA dialect. The test suite's clang check compiles these."""
    seen: set[tuple[str, frozenset]] = set()
    kept = []
    for source in sources:
        key = (source.arch, frozenset(_FEATURES.findall(source.path.read_text())))
        if key not in seen:
            seen.add(key)
            kept.append(source)
    return kept


def covering_feature_pairs(sources: list[KernelSource]) -> list[KernelSource]:
    """Fewer sources than distinct_by_features, for the slower nvcc (~2 s a kernel): every feature, and every pair of
    features that occur together in some kernel, occurs together in a kept kernel of that arch. Kernels with the most
    features are taken first (then in name order), each kept only if it adds a pair not yet covered."""
    ranked = sorted(((sorted(set(_FEATURES.findall(s.path.read_text()))), s) for s in sources),
                    key=lambda fs: (-len(fs[0]), fs[1].path.name))
    covered: set[tuple] = set()
    kept = []
    for features, source in ranked:
        demands = {(source.arch,)} | {(source.arch, f) for f in features} | \
            {(source.arch, a, b) for a, b in itertools.combinations(features, 2)}
        if not demands <= covered:
            covered |= demands
            kept.append(source)
    return sorted(kept, key=lambda s: s.path.name)


def _run(job: CompileJob) -> CompileResult:
    with tempfile.TemporaryDirectory() as tmp:  # nvcc writes its intermediate files into the working directory
        proc = subprocess.run(job.command, capture_output=True, text=True, cwd=tmp)
    return CompileResult(job, proc.returncode, (proc.stderr + proc.stdout).strip())


def _batches(sources: list[KernelSource], size: int) -> list[tuple[list[KernelSource], str]]:
    """The sources that can share a process (batch.py), grouped by arch and includes: (members, batch text)."""
    groups: dict[tuple[str, tuple[str, ...]], list[tuple[KernelSource, BatchShape]]] = {}
    for source in sources:
        shape = batch_shape(source.path.read_text())
        if shape is not None:
            groups.setdefault((source.arch, shape.includes), []).append((source, shape))
    return [([s for s, _ in chunk], batch_text(includes, [(s.path, shape) for s, shape in chunk]))
            for (_, includes), members in groups.items() for chunk in even_chunks(members, size) if len(chunk) > 1]


def compile_sources(sources: list[KernelSource], compilers: list[DeviceCompiler], jobs: int | None = None,
                    output_dir: Path | None = None, batch_size: int | None = None) -> list[CompileResult]:
    """Runs every pass of every compiler over every source, `jobs` at a time; results in submission order (one per
    source and pass). Without an output directory, each compiler checks up to `batch_size` sources per process
    (default: its own batch_size); a batch that fails is checked again source by source, whose results stand."""
    work = [job for source in sources for compiler in compilers for job in compiler.jobs(source, output_dir)]
    results: dict[CompileJob, CompileResult] = {}
    with tempfile.TemporaryDirectory() as tmp, ThreadPoolExecutor(max_workers=jobs or os.cpu_count() or 1) as pool:
        batched: list[tuple[list[CompileJob], CompileJob]] = []  # (the members' jobs of one pass, the batch's)
        for c, compiler in enumerate(compilers if output_dir is None else []):
            for b, (members, text) in enumerate(_batches(sources, batch_size or compiler.batch_size)):
                path = Path(tmp) / f"batch{c}_{b}.{members[0].arch}.mu"
                path.write_text(text)
                own = [compiler.jobs(member, None) for member in members]
                for stage, batch_job in enumerate(compiler.jobs(KernelSource(path, members[0].arch), None)):
                    batched.append(([jobs_of_member[stage] for jobs_of_member in own], batch_job))
        for (member_jobs, _), outcome in zip(batched, pool.map(_run, [batch_job for _, batch_job in batched])):
            if outcome.ok:
                results.update((job, CompileResult(job, 0, outcome.output, len(member_jobs))) for job in member_jobs)
        rest = [job for job in work if job not in results]
        results.update(zip(rest, pool.map(_run, rest)))
    return [results[job] for job in work]


# --select: the suite's choices of sources (test_device_compilers.py)
SELECTIONS = {"all": list, "distinct": distinct_by_features, "pairs": covering_feature_pairs}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("paths", nargs="+", type=Path, help="directories of .mu files, or .mu files")
    parser.add_argument("--compiler", choices=[*COMPILERS, "all"], default="all")
    parser.add_argument("--arch", choices=list(MUSA_ARCH), default="mp_31", help="arch of sources named without one")
    parser.add_argument("--jobs", type=int, default=None, help="parallel compiles (default: cores)")
    parser.add_argument("--select", choices=list(SELECTIONS), default="all",
                        help="which sources: all, one per feature set (the suite's clang check), or covering every "
                             "pair of features (its nvcc check)")
    parser.add_argument("--batch", type=int, default=None, metavar="N",
                        help="sources per compiler process (default: the compiler's; 1: each source alone)")
    parser.add_argument("--clang", default=None, help="the clang executable (default: clang++ on PATH)")
    parser.add_argument("--nvcc", default=None, help="the nvcc executable (default: on PATH, or $CUDA_HOME/bin)")
    parser.add_argument("--cuda-arch", default="sm_90", help="nvcc's -arch (default sm_90)")
    parser.add_argument("--shared", type=Path, default=None, metavar="OUT",
                        help="nvcc: build each source into OUT/<name>.so instead of checking only")
    args = parser.parse_args(argv)

    names = list(COMPILERS) if args.compiler == "all" else [args.compiler]
    if args.shared is not None:
        names = ["nvcc"]
        args.shared.mkdir(parents=True, exist_ok=True)
    compilers = [COMPILERS[n](args) for n in names]
    for c in compilers:
        if not c.available():
            print(f"{c.name} was not found", file=sys.stderr)
            return 2
    sources = SELECTIONS[args.select](collect_sources(args.paths, args.arch))
    if not sources:
        print("no .mu sources given", file=sys.stderr)
        return 2
    results = compile_sources(sources, compilers, args.jobs, args.shared, args.batch)
    failed = [r for r in results if not r.ok]
    for r in failed:
        print(r.report(), end="\n\n")
    print(f"{len(results) - len(failed)} passed, {len(failed)} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
