"""Kernels beyond the compiling process: `export_library` / `load_library` in a fresh Python process, and
`python -m tilelang.tools.aot` C (header + source with the library embedded) called from a C program."""

import os
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.errors import TileLangError
from tilelang.jit.aot import write_aot
from tilelang.tools.aot import build_kernel, find_function
from tilelang.tools.aot import main as aot_main

ARCHES = ["mp_22", "mp_31"]
_NEUTRAL_DIR = os.path.dirname(os.path.abspath(__file__))  # testing/: holds no `tilelang` package

# The scripts the CLI compiles: files, as a user's would be.
GEMM_SCRIPT = '''
import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[-1])
def matmul(M, N, K, block_M, block_N, block_K, dtype="float16", accum_dtype="float"):
    @T.prim_func
    def gemm(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), dtype)
            B_shared = T.alloc_shared((block_K, block_N), dtype)
            C_local = T.alloc_fragment((block_M, block_N), accum_dtype)
            T.clear(C_local)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=2):
                T.copy(A[by * block_M, k * block_K], A_shared)
                T.copy(B[k * block_K, bx * block_N], B_shared)
                T.gemm(A_shared, B_shared, C_local)
            T.copy(C_local, C[by * block_M, bx * block_N])
    return gemm


if __name__ == "__main__":
    raise SystemExit("the aot tool imports this script; its main part must not run")
'''

SCALE_SCRIPT = '''
import tilelang
import tilelang.language as T


@tilelang.jit
def scale(block=128, dtype="float32"):
    M = T.dynamic("M")

    @T.prim_func
    def main(A: T.Tensor((M,), dtype), B: T.Tensor((M,), dtype), alpha: T.float32):
        with T.Kernel(T.ceildiv(M, block), threads=block) as bx:
            for i in T.Parallel(block):
                if bx * block + i < M:
                    B[bx * block + i] = A[bx * block + i] * alpha
    return main
'''

GEMM_MAIN = r'''
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include "gemm.h"

static void* read_file(const char* path, size_t bytes) {
  void* data = aligned_alloc(64, bytes);
  FILE* f = fopen(path, "rb");
  if (f == NULL || fread(data, 1, bytes, f) != bytes) { fprintf(stderr, "cannot read %s\n", path); exit(3); }
  fclose(f);
  return data;
}

int main(int argc, char** argv) {
  if (argc != 4) return 3;
  void* A = read_file(argv[1], M * K * 2);
  void* B = read_file(argv[2], K * N * 2);
  uint16_t* C = (uint16_t*)aligned_alloc(64, M * N * 2);
  for (int i = 0; i < M * N; ++i) C[i] = 0x7E00;  /* poison: NaN */
  if (gemm(A, B, C, NULL) != 0) { fprintf(stderr, "gemm failed: %s\n", gemm_last_error()); return 1; }
  FILE* f = fopen(argv[3], "wb");
  fwrite(C, 2, M * N, f);
  fclose(f);
  /* what C can check is checked: a misaligned tensor is refused, not run */
  if (gemm((char*)A + 2, B, C, NULL) != -1) return 2;
  printf("%s\n", gemm_last_error());
  return 0;
}
'''

SCALE_MAIN = r'''
#include <stdio.h>
#include <stdlib.h>
#include "scale.h"

int main(int argc, char** argv) {
  int32_t m = atoi(argv[1]);
  float alpha = (float)atof(argv[2]);
  float* a = (float*)malloc(sizeof(float) * m);
  float* b = (float*)malloc(sizeof(float) * m);
  for (int i = 0; i < m; ++i) { a[i] = (float)((i * 37) % 101) / 7.0f - 5.0f; b[i] = 0.0f / 0.0f; }
  if (scale(a, b, alpha, m, NULL) != 0) { fprintf(stderr, "%s\n", scale_last_error()); return 1; }
  for (int i = 0; i < m; ++i) printf("%.9g\n", b[i]);
  return 0;
}
'''


def _run(cmd, **kwargs):
    # never from the repository root: `python -c` / `-m` would import its source tree (no built launcher there)
    # instead of the installed package
    kwargs.setdefault("cwd", _NEUTRAL_DIR)
    proc = subprocess.run(cmd, capture_output=True, text=True, **kwargs)
    assert proc.returncode == 0, f"{cmd} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
    return proc


def _aot(tmp_path, script, spec, *arguments, arch):
    (tmp_path / "kernels.py").write_text(script)
    out = tmp_path / "out"
    _run([sys.executable, "-m", "tilelang.tools.aot", f"{tmp_path / 'kernels.py'}:{spec}", *arguments,
          "--target", f"musa -arch={arch}", "-o", str(out)])
    return out


@pytest.fixture(scope="module")
def gemm_script(tmp_path_factory):
    """The GEMM script as a file, one for the module: the kernels it gives name their source file (the user-line
    table), so the tests that compile it for one arch share one build."""
    script = tmp_path_factory.mktemp("aot_script") / "gemm_script.py"
    script.write_text(GEMM_SCRIPT)
    return script


def _gemm_kernel(script, arch, M=128, N=128, K=64):
    """The script's GEMM, compiled here: the tool's script loader imports it (kernels need a file)."""
    return build_kernel(find_function(f"{script}:matmul"), [M, N, K, 64, 64, 32], {}, f"musa -arch={arch}", None)


@pytest.mark.parametrize("arch", ARCHES)
def test_exported_kernel_runs_in_a_fresh_process(tmp_path, gemm_script, arch):
    kernel = _gemm_kernel(gemm_script, arch)
    path = kernel.export_library(tmp_path / "lib" / "gemm.so")
    assert path.is_file()
    A = torch.randn(128, 64, dtype=torch.float16)
    B = torch.randn(64, 128, dtype=torch.float16)
    torch.save((A, B), tmp_path / "inputs.pt")
    checker = textwrap.dedent(f"""
        import torch, tilelang
        from tilelang.jit import load_library
        kernel = load_library({str(path)!r})
        assert kernel.target.attrs["arch"] == {arch!r}, kernel.target
        A, B = torch.load({str(tmp_path / 'inputs.pt')!r})
        torch.save((kernel(A, B), kernel.get_kernel_source()), {str(tmp_path / 'out.pt')!r})
    """)
    _run([sys.executable, "-c", checker])
    C, source = torch.load(tmp_path / "out.pt")
    torch.testing.assert_close(C.float(), A.float() @ B.float(), rtol=1e-2, atol=1e-2)
    assert source == kernel.get_kernel_source()
    # the arch's own instructions are in what was exported: TME loads and SQMMA on mp_31, not on mp_22
    assert ("tl::tma_load" in source) == (arch == "mp_31")
    assert ("gemm_ss_mp31_sqmma" in source) == (arch == "mp_31")


def test_loaded_kernel_checks_its_inputs_as_the_compiled_one(tmp_path, gemm_script):
    kernel = _gemm_kernel(gemm_script, "mp_31")
    loaded = tilelang.load_library(kernel.export_library(tmp_path / "gemm.so"))
    assert loaded.params == kernel.params and loaded.metadata.host == kernel.metadata.host
    with pytest.raises(ValueError, match="A"):
        loaded(torch.randn(64, 64, dtype=torch.float16), torch.randn(64, 128, dtype=torch.float16))


def test_load_library_names_a_file_that_is_no_export(tmp_path, gemm_script):
    kernel = _gemm_kernel(gemm_script, "mp_31")
    with pytest.raises(TileLangError, match="not a kernel exported by JITKernel.export_library"):
        tilelang.load_library(kernel.library_path)  # the bare library: no payload
    with pytest.raises(TileLangError, match="cannot read"):
        tilelang.load_library(tmp_path / "missing.so")


def _c_compiler():
    for cc in ("gcc", "cc", "clang"):
        if shutil.which(cc):
            return cc
    pytest.skip("no C compiler")


@pytest.mark.parametrize("arch", ARCHES)
def test_aot_c_program_runs_the_kernel(tmp_path, arch):
    M, N, K = 128, 128, 64
    out = _aot(tmp_path, GEMM_SCRIPT, "matmul", str(M), str(N), str(K), "block_M=64", "block_N=64", "block_K=32",
               "--name", "gemm", arch=arch)
    header = (out / "gemm.h").read_text()
    assert "int gemm(void* A, void* B, void* C, void* stream);" in header
    assert f'#define GEMM_TARGET "musa -arch={arch}"' in header
    # TME descriptors (mp_31) and 16-byte LDLMS pieces (mp_22) both need 16-byte aligned addresses
    assert "A: float16[128, 64], row-major; input; 16-byte aligned" in header
    assert (out / "gemm.so").is_file()  # the exported kernel beside, for Python
    main = tmp_path / "main.c"
    main.write_text(f"#define M {M}\n#define N {N}\n#define K {K}\n" + GEMM_MAIN)
    exe = tmp_path / "main"
    _run([_c_compiler(), "-std=c11", "-Wall", "-Wextra", "-Werror", "-O1", str(main), str(out / "gemm.c"),
          f"-I{out}", "-ldl", "-lpthread", "-o", str(exe)])

    A = torch.randn(M, K, dtype=torch.float16)
    B = torch.randn(K, N, dtype=torch.float16)
    A.numpy().tofile(tmp_path / "A.bin")
    B.numpy().tofile(tmp_path / "B.bin")
    proc = _run([str(exe), str(tmp_path / "A.bin"), str(tmp_path / "B.bin"), str(tmp_path / "C.bin")])
    assert "gemm: A must be 16-byte aligned" in proc.stdout
    C = torch.from_numpy(np.fromfile(tmp_path / "C.bin", dtype=np.float16).reshape(M, N))
    torch.testing.assert_close(C.float(), A.float() @ B.float(), rtol=1e-2, atol=1e-2)


def test_aot_dynamic_size_and_scalar_from_cpp_without_memfd(tmp_path):
    """A T.dynamic size and a scalar are parameters of the C entry point; the header compiles as C++, and the
    library loads from a temporary file where memfd is not used."""
    out = _aot(tmp_path, SCALE_SCRIPT, "scale", arch="mp_22")
    header = (out / "scale.h").read_text()
    assert "int scale(float* A, float* B, float alpha, int32_t M, void* stream);" in header
    assert "M: int32, a size: the extent named so in the tensors' shapes" in header
    cc = _c_compiler()
    cxx = {"gcc": "g++", "cc": "c++", "clang": "clang++"}[cc]
    if not shutil.which(cxx):
        pytest.skip(f"no {cxx}")
    _run([cc, "-std=c11", "-Wall", "-Werror", "-DTILELANG_AOT_NO_MEMFD", "-c", str(out / "scale.c"),
          f"-I{out}", "-o", str(tmp_path / "scale.o")])
    (tmp_path / "main.cc").write_text(SCALE_MAIN)
    _run([cxx, "-std=c++17", "-Wall", "-Werror", str(tmp_path / "main.cc"), str(tmp_path / "scale.o"), f"-I{out}",
          "-ldl", "-lpthread", "-o", str(tmp_path / "main")])
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    m, alpha = 300, -1.75  # not a multiple of the block: the guard matters
    proc = _run([str(tmp_path / "main"), str(m), str(alpha)], env={**os.environ, "TMPDIR": str(scratch)})
    got = torch.tensor([float(line) for line in proc.stdout.split()])
    a = torch.tensor([((i * 37) % 101) / 7.0 - 5.0 for i in range(m)], dtype=torch.float32)
    torch.testing.assert_close(got, a * alpha)
    assert not list(scratch.iterdir())  # the temporary library is gone once loaded


def test_aot_refuses_what_c_cannot_name(tmp_path, gemm_script, capsys):
    kernel = _gemm_kernel(gemm_script, "mp_31")
    with pytest.raises(TileLangError, match="C identifier other than main"):
        write_aot(kernel, tmp_path, "main")
    # the CLI's entry point in this process (the tests above run it as `python -m`): exit status 2 and the error
    assert aot_main(["no_such_script.py:f", "-o", str(tmp_path)]) == 2
    assert "error: aot: no such script: no_such_script.py" in capsys.readouterr().err


@T.prim_func
def _half_scalar(A: T.Tensor((64,), "float16"), beta: T.float16):
    with T.Kernel(1, threads=64) as _:
        for i in T.Parallel(64):
            A[i] = A[i] * beta


HALF_MAIN = r'''
#include <stdio.h>
#include <stdlib.h>
#include "half_scale.h"

int main(int argc, char** argv) {
  uint16_t a[64];
  FILE* f = fopen(argv[1], "rb");
  if (f == NULL || fread(a, 2, 64, f) != 64) return 3;
  fclose(f);
  if (half_scale(a, (uint16_t)strtoul(argv[2], NULL, 0), NULL) != 0) return 1;
  fwrite(a, 2, 64, stdout);
  return 0;
}
'''


def test_aot_half_scalar_is_passed_as_its_bits(tmp_path):
    kernel = tilelang.compile(_half_scalar, target="musa -arch=mp_31")
    header, source = write_aot(kernel, tmp_path, "half_scale")
    assert "int half_scale(void* A, uint16_t beta, void* stream);" in header.read_text()
    assert "beta: float16 (its bits), a scalar" in header.read_text()
    (tmp_path / "main.c").write_text(HALF_MAIN)
    _run([_c_compiler(), "-std=c11", "-Wall", "-Werror", str(tmp_path / "main.c"), str(source), f"-I{tmp_path}",
          "-ldl", "-lpthread", "-o", str(tmp_path / "main")])
    A = torch.randn(64, dtype=torch.float16)
    beta = torch.tensor(-2.5, dtype=torch.float16)
    A.numpy().tofile(tmp_path / "A.bin")
    proc = subprocess.run([str(tmp_path / "main"), str(tmp_path / "A.bin"), str(beta.view(torch.int16).item() & 0xFFFF)],
                          capture_output=True)
    assert proc.returncode == 0, proc.stderr
    got = torch.from_numpy(np.frombuffer(proc.stdout, dtype=np.float16).copy())
    torch.testing.assert_close(got, A * beta)
