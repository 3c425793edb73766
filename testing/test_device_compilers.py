"""Every kernel the test suite generates compiles with real two-pass GPU compilers, not only with the simulator's g++.

mcc is clang-based: it parses each kernel in a host pass (no __MUSA_ARCH__, no MUSA built-ins) and a device pass,
and rejects code that g++ accepts. Without mcc, the sources the suite generated (kept through
TILELANG_SOURCE_ARCHIVE_DIR, see conftest.py) are compiled, after every other test, by
- clang in CUDA mode, host and device passes, against the MUSA shim in testing/device_compilers/clang_musa/;
- nvcc (one host + device compile for an NVIDIA GPU), the MUSA names mapped onto CUDA's by nvcc_musa/;
clang for one kernel per set of templates, built-ins and element types used (kernels that differ only in plain C++
compile once), nvcc for kernels covering every pair of them used together (nvcc is slower: the whole suite's kernels
would take minutes of the CI's 30). Both check up to their batch_size sources per compiler process
(device_compilers/batch.py: one process spends nearly all its time on the headers); a batch that fails is checked
again source by source, so each failure is reported with the kernel's own command and the test that generated it.
A few kernels of every arch and GEMM path are generated here too, so the check covers them whichever tests ran.
The planted sources in testing/device_compilers/planted/ are bugs the check must catch (and g++ does not).

A compiler that is missing skips these tests on a developer's machine and fails them in CI (CI=true), where
.ci/run installs clang and the machine image carries nvcc.
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest

import tilelang
import tilelang.language as T
from conftest import generated_by
from test_gemm import gemm_program
from tilelang_musa.jit.compile import archive_source

sys.path.insert(0, str(Path(__file__).resolve().parent / "device_compilers"))
from batch import BatchShape, batch_shape  # noqa: E402
from compile_kernels import (  # noqa: E402
    ClangCheck, NvccCheck, collect_sources, compile_sources, covering_feature_pairs, distinct_by_features,
)
from sim_build import sim_compile_command  # noqa: E402

PLANTED = Path(__file__).resolve().parent / "device_compilers" / "planted"

# Text each GEMM path puts in its kernel, and how to get it: (arch, pass configs, operand dtype).
GEMM_PATHS = {
    "tl::gemm_ss_mp31_sqmma": ("mp_31", {}, "float16"),
    "tl::gemm_ss_mp31_wmma": ("mp_31", {"tl.disable_sqmma": True}, "bfloat16"),
    "tl::gemm_ss_mp22_mma": ("mp_22", {}, "float16"),
    "FMA": ("mp_31", {}, "float32"),  # float32 operands: no matrix instruction takes them yet
}


def require(compiler):
    if compiler.available():
        return compiler
    message = f"{compiler.name} is not installed (`apt-get install clang`; nvcc comes with the CUDA toolkit)"
    if os.environ.get("CI"):
        pytest.fail(f"{message}: CI must run the device-compiler check")
    pytest.skip(message)


def row_reductions(dtype="float32", rows=64, cols=128):
    """Softmax-style row statistics, a prefix sum and an atomic: reduce.h, scan.h, atomic.h, math."""

    @T.prim_func
    def main(X: T.Tensor((rows, cols), dtype), Y: T.Tensor((rows, cols), dtype), Total: T.Tensor((1,), "float32")):
        with T.Kernel(rows // 16, threads=128) as bx:
            tile = T.alloc_fragment((16, cols), "float32")
            row_max = T.alloc_fragment((16,), "float32")
            row_sum = T.alloc_fragment((16,), "float32")
            scan = T.alloc_shared((16, cols), "float32")
            T.copy(X[bx * 16, 0], tile)
            T.reduce_max(tile, row_max, dim=1)
            for i, j in T.Parallel(16, cols):
                tile[i, j] = T.exp(tile[i, j] - row_max[i])
            T.reduce_sum(tile, row_sum, dim=1)
            for i, j in T.Parallel(16, cols):
                tile[i, j] = tile[i, j] / row_sum[i]
            T.copy(tile, scan)
            T.cumsum(scan, dim=1)
            T.copy(scan, Y[bx * 16, 0])
            for i in T.Parallel(16):
                T.atomic_add(Total[0], row_sum[i])

    return main


def archive_lowered(program, arch, configs=None):
    """Puts the program's source into the archive as tilelang.compile would, without building it (the check compiles
    the source; a simulator build of each would cost ~1-2 s more): lowering prints the same text."""
    source = tilelang.lower(program, target=f"musa -arch={arch}", pass_configs=configs).kernel_source
    archive_source(source, program.attrs["global_symbol"], arch)
    return source


@pytest.fixture(scope="module")
def generated_sources(kernel_archive, after_all_kernels_ready):
    """Generates the kernels of every arch and GEMM path into the archive, then lists the whole archive."""
    for marker, (arch, configs, dtype) in GEMM_PATHS.items():
        program = gemm_program(128, 128, 64, 64, 64, 32, False, False, dtype, "float32", threads=128)
        source = archive_lowered(program, arch, configs)
        used = "tl::gemm_" not in source if marker == "FMA" else marker in source
        assert used, f"the {dtype} GEMM on {arch} with {configs} did not take the {marker} path"
    for arch in ("mp_31", "mp_22"):
        for dtype in ("float32", "bfloat16"):
            archive_lowered(row_reductions(dtype), arch)
    sources = collect_sources([kernel_archive])
    assert {s.arch for s in sources} >= {"mp_31", "mp_22"}
    texts = "\n".join(s.path.read_text() for s in sources)
    for marker in GEMM_PATHS.keys() - {"FMA"}:
        assert marker in texts
    return sources


def assert_all_compile(sources, compiler):
    results = compile_sources(sources, [compiler])
    failed = [r for r in results if not r.ok]
    if failed:
        reports = [f"generated by {generated_by(r.job.source.path.parent, r.job.source.path.name)}: {r.report()}"
                   for r in failed[:10]]
        pytest.fail(f"{len(failed)} of {len(results)} {compiler.name} compiles of generated kernels failed (first "
                    f"{len(reports)}):\n\n" + "\n\n".join(reports), pytrace=False)


@pytest.mark.after_all_kernels
def test_generated_kernels_compile_with_clang_in_host_and_device_passes(generated_sources):
    assert_all_compile(distinct_by_features(generated_sources), require(ClangCheck()))


@pytest.mark.after_all_kernels
def test_every_generated_kernel_compiles_with_nvcc(generated_sources):
    """Kernels covering every pair of templates, built-ins and element types used together (nvcc takes ~2 s a
    kernel: the clang check above compiles one kernel per whole set)."""
    assert_all_compile(covering_feature_pairs(generated_sources), require(NvccCheck()))


def planted(name):
    return collect_sources([PLANTED / f"{name}.mp_31.mu"])


def errors_by_stage(sources, compiler):
    return {r.job.stage: r.output for r in compile_sources(sources, [compiler]) if not r.ok}


def test_clang_check_rejects_the_address_of_a_restrict_pointer_in_both_passes():
    errors = errors_by_stage(planted("restrict_address_wrapper"), require(ClangCheck()))
    assert set(errors) == {"host pass", "device pass"}
    for output in errors.values():
        assert "cannot initialize an array element of type 'void *'" in output and "__restrict" in output


def test_clang_check_rejects_a_template_the_host_pass_cannot_see():
    errors = errors_by_stage(planted("host_invisible_template"), require(ClangCheck()))
    assert set(errors) == {"host pass"}, "the device pass defines __MUSA_ARCH__ and must see the template"
    assert "no member named 'scaled' in namespace 'tl'" in errors["host pass"]


@pytest.mark.parametrize("name,message", [
    ("restrict_address_wrapper", 'a value of type "float *__restrict__ *" cannot be used to initialize'),
    ("host_invisible_template", 'namespace "tl" has no member "scaled"'),
    ("host_only_constexpr", 'calling a constexpr __host__ function("is_power_of_two") from a __device__ function'),
])
def test_nvcc_check_rejects_each_planted_bug(name, message):
    errors = errors_by_stage(planted(name), require(NvccCheck()))
    assert message in errors["both passes"]


@pytest.mark.parametrize("name", ["restrict_address_wrapper", "host_invisible_template", "host_only_constexpr"])
def test_the_simulators_compiler_accepts_the_planted_bugs(name, tmp_path):
    """Why the check exists: g++, one pass with __MUSA_ARCH__ defined, builds every planted bug."""
    source = PLANTED / f"{name}.mp_31.mu"
    proc = subprocess.run(sim_compile_command(source, tmp_path / "k.so", 310, ("-fsyntax-only",)),
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


def test_the_archive_keeps_each_generated_source_once_under_its_arch(tmp_path, monkeypatch):
    monkeypatch.setenv("TILELANG_SOURCE_ARCHIVE_DIR", str(tmp_path))
    for arch in ("mp_31", "mp_22", "mp_31"):
        kernel = tilelang.compile(row_reductions(), target=f"musa -arch={arch}")
    files = sorted(tmp_path.iterdir())
    assert [f.name.split(".")[:2] for f in files] == [["main", "mp_22"], ["main", "mp_31"]]
    assert files[1].read_text() == kernel.get_kernel_source()
    assert {s.arch for s in collect_sources([tmp_path])} == {"mp_22", "mp_31"}


def test_the_nvcc_selection_covers_every_pair_of_features_used_together(tmp_path):
    kernels = {"wide.mp_31.0": "tl::gemm tl::copy float", "inside_wide.mp_31.1": "tl::gemm float",
               "new_pair.mp_31.2": "tl::gemm half_t", "same_on_mp_22.mp_22.3": "tl::gemm float"}
    for name, text in kernels.items():
        (tmp_path / f"{name}.mu").write_text(text)
    kept = [s.path.name for s in covering_feature_pairs(collect_sources([tmp_path]))]
    assert kept == ["new_pair.mp_31.2.mu", "same_on_mp_22.mp_22.3.mu", "wide.mp_31.0.mu"]
    assert len(distinct_by_features(collect_sources([tmp_path]))) == 4


def generated_like(name, body, includes=('#include "tl_templates/musa/common.h"', "#include <cstdio>")):
    """A source shaped as the code generator writes one: its includes, then one kernel."""
    return "\n".join([*includes, "", f'extern "C" __global__ void __launch_bounds__(128, 1) {name}(float* __restrict__ A) {{',
                      f"  {body}", "}", ""])


GOOD_BODY = "A[((int)threadIdx.x)] = A[((int)threadIdx.x)] * 2.0f;"


def test_sources_of_one_shape_share_a_compiler_process_and_a_failing_one_is_reported_by_itself(tmp_path):
    """Three kernels of the same name check in one process per pass; a bug planted in the last of them fails the
    batch, and is then reported exactly as its own compile reports it, the other two passing."""
    clang = require(ClangCheck())
    for k in range(3):
        (tmp_path / f"k{k}.mp_31.{k}.mu").write_text(generated_like("main_kernel", GOOD_BODY))
    good = compile_sources(collect_sources([tmp_path]), [clang], batch_size=8)
    assert [(r.ok, r.batch_size) for r in good] == [(True, 3)] * 6
    (tmp_path / "k2.mp_31.2.mu").write_text(generated_like("main_kernel", "A[0] = undeclared_name;"))
    sources = collect_sources([tmp_path])
    batched = compile_sources(sources, [clang], batch_size=8)
    alone = compile_sources(sources, [clang], batch_size=1)
    assert [(r.job.source.path.name, r.job.stage, r.ok) for r in batched] == \
        [(r.job.source.path.name, r.job.stage, r.ok) for r in alone]
    assert [r.job.source.path.name for r in batched if not r.ok] == ["k2.mp_31.2.mu"] * 2
    assert [r.report() for r in batched if not r.ok] == [r.report() for r in alone if not r.ok]
    assert "undeclared_name" in batched[-1].output and batched[-1].batch_size == 1


@pytest.mark.parametrize("text", [
    generated_like("k", "#define N 4\n  A[0] = N;"),  # a macro would reach the sources after it
    generated_like("k", GOOD_BODY) + "__device__ float helper;\n",  # anything at top level but kernels
    generated_like("k", GOOD_BODY) + '#include "tl_templates/musa/reduce.h"\n',  # an include after a kernel
    generated_like("k", GOOD_BODY) + generated_like("k", GOOD_BODY, includes=()),  # a kernel defined twice
    generated_like("k", "/* } */ " + GOOD_BODY),  # a comment the scan cannot see through
])
def test_a_source_that_could_reach_another_is_compiled_alone(text):
    assert batch_shape(text) is None


def test_a_generated_source_is_batched_by_its_includes_and_kernel_names():
    shape = batch_shape(generated_like("gemm_kernel", '#pragma unroll\n  printf("{");'))
    assert shape == BatchShape(('#include "tl_templates/musa/common.h"', "#include <cstdio>"), ("gemm_kernel",))
