"""The mcc toolchain driver (with a fake `mcc` that records its arguments), backend selection, and the
source/compile-command environment variables."""

import json
import os
import stat
import subprocess
import sys
import textwrap

import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang_musa.jit.backend import resolve_backend

N = 256


@T.prim_func
def negate(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32")):
    with T.Kernel(2, threads=128) as bx:
        for i in T.Parallel(128):
            B[bx * 128 + i] = -A[bx * 128 + i]


@pytest.fixture
def fake_mcc(tmp_path, monkeypatch):
    """An `mcc` on PATH that records its argv as JSON and produces a loadable library with the host ABI
    (call_packed/get_last_error), as the real one would."""
    record = tmp_path / "mcc_args.json"
    stub_c = tmp_path / "stub.c"
    stub_c.write_text(textwrap.dedent("""
        int call_packed(void** args, int n, void* stream) { return 0; }
        const char* get_last_error(void) { return ""; }
    """))
    script = tmp_path / "bin" / "mcc"
    script.parent.mkdir()
    script.write_text(textwrap.dedent(f"""\
        #!/usr/bin/env python3
        import json, subprocess, sys
        if sys.argv[1:] == ["--version"]:
            print("mcc version 4.3.4 (fake)"); sys.exit(0)
        json.dump(sys.argv[1:], open({str(record)!r}, "w"))
        out = sys.argv[sys.argv.index("-o") + 1]
        sys.exit(subprocess.call(["gcc", "-shared", "-fPIC", {str(stub_c)!r}, "-o", out]))
    """))
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{script.parent}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.delenv("MUSA_HOME", raising=False)
    monkeypatch.delenv("MUSA_PATH", raising=False)
    monkeypatch.setenv("TILELANG_DISABLE_CACHE", "1")  # every test must see mcc run
    monkeypatch.delenv("TILELANG_EXECUTION_BACKEND", raising=False)  # it would override execution_backend=
    return record


@pytest.mark.parametrize("arch,code", [("mp_31", 310), ("mp_22", 220)])
def test_mcc_command_line(fake_mcc, monkeypatch, arch, code):
    monkeypatch.setenv("TILELANG_MCC_EXTRA_ARGS", "-save-temps,-v")
    kernel = tilelang.compile(negate, target=f"musa -arch={arch}", execution_backend="cython")
    args = json.loads(fake_mcc.read_text())
    assert args[0].endswith("negate.mu")
    assert f"--offload-arch={arch}" in args and f"-D__MUSA_ARCH_LIST__={code}" in args
    assert "--shared" in args and "-fPIC" in args and "-std=c++17" in args
    assert ["-mllvm", "-mtgpu-alloc-shared-memory-from-zero=1"] == args[args.index("-mllvm"):args.index("-mllvm") + 2]
    assert "-lmusart" in args and "-lmusa" in args
    assert args.index("-save-temps") < args.index("-o") and "-v" in args
    assert kernel.backend.name == "cython" and kernel.backend.device == "musa"
    # a musa kernel refuses CPU tensors, naming the parameter
    with pytest.raises(ValueError, match="A"):
        kernel(torch.randn(N), torch.empty(N))


def test_print_compile_command_and_dump_source(fake_mcc, monkeypatch, tmp_path, capfd):
    dump = tmp_path / "dump" / "kernel.mu"
    monkeypatch.setenv("TILELANG_PRINT_DEVICE_COMPILE_COMMAND", "1")
    monkeypatch.setenv("TILELANG_DUMP_KERNEL_SOURCE", str(dump))
    kernel = tilelang.compile(negate, execution_backend="cython")
    assert "mcc" in capfd.readouterr().err
    assert dump.read_text() == kernel.get_kernel_source()


def test_replace_musac_compiles_the_given_file(fake_mcc, monkeypatch, tmp_path):
    replacement = tmp_path / "mine.mu"
    replacement.write_text("// hand-written replacement\n")
    monkeypatch.setenv("TILELANG_REPLACE_MUSAC", str(replacement))
    tilelang.compile(negate, execution_backend="cython")
    compiled = json.loads(fake_mcc.read_text())[0]
    assert open(compiled).read() == "// hand-written replacement\n"


def test_auto_backend_is_the_simulator_without_a_device(monkeypatch):
    monkeypatch.delenv("TILELANG_EXECUTION_BACKEND", raising=False)
    backend = resolve_backend("auto")
    assert backend.name == "sim" and backend.device == "cpu"
    with pytest.raises(tilelang.TileLangError, match="execution_backend"):
        resolve_backend("bogus")


def test_unknown_pass_config_lists_known_keys():
    with pytest.raises(ValueError, match="tl.disable_sqmma"):
        tilelang.compile(negate, pass_configs={"tl.no_such_thing": True})


def test_a_fast_math_kernel_leaves_subnormals_alone_in_the_process():
    """Loading a kernel built with fast math must not switch the process to flush-to-zero (gcc and clang's
    crtfastmath.o does that on load when the library is linked with -ffast-math)."""
    tiny = torch.tensor([1e-39], dtype=torch.float32)  # a float32 subnormal
    assert (tiny * 1.0).item() != 0.0
    kernel = tilelang.compile(negate, target="musa -arch=mp_31",
                              pass_configs={tilelang.PassConfigKey.TL_ENABLE_FAST_MATH: True})
    a, b = torch.randn(N), torch.full((N,), float("nan"))
    kernel(a, b)
    torch.testing.assert_close(b, -a)
    assert (tiny * 1.0).item() != 0.0


def test_simulator_builds_share_one_precompiled_prelude(monkeypatch, tmp_path, capfd):
    """Generated sources start with the template includes: the simulator precompiles them once (per compiler and
    flags) and force-includes them; TILELANG_SIM_NO_PRELUDE=1 parses them in the build instead."""
    monkeypatch.setenv("TILELANG_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("TILELANG_PRINT_DEVICE_COMPILE_COMMAND", "1")
    a = torch.randn(N)
    kernel = tilelang.compile(negate, target="musa -arch=mp_22", execution_backend="sim")
    torch.testing.assert_close(_run(kernel, a), -a)
    prelude = [arg for arg in capfd.readouterr().err.split() if arg.endswith("prelude.h")]
    assert len(prelude) == 1 and os.path.isfile(prelude[0] + ".gch")
    assert open(prelude[0]).read() and kernel.get_kernel_source().startswith(open(prelude[0]).read())

    monkeypatch.setenv("TILELANG_SIM_NO_PRELUDE", "1")
    monkeypatch.setenv("TILELANG_CACHE_DIR", str(tmp_path / "cache2"))
    kernel = tilelang.compile(negate, target="musa -arch=mp_22", execution_backend="sim")
    assert "prelude.h" not in capfd.readouterr().err
    torch.testing.assert_close(_run(kernel, a), -a)


def _run(kernel, a):
    b = torch.full_like(a, float("nan"))
    kernel(a, b)
    return b


def test_processes_that_need_one_prelude_at_once_precompile_it_once(tmp_path):
    """pytest-xdist's workers (or parallel builds) that find the precompiled prelude missing at the same time wait
    for one precompilation (a lock beside it) instead of each doing its own: a compiler that takes a second or more per
    header and logs each run is called once by two processes started together, and both get the header."""
    log = tmp_path / "compiles.log"
    compiler = tmp_path / "slow-g++"
    compiler.write_text(f'#!/bin/sh\necho "$@" >> {log}\nsleep 1\nexec g++ "$@"\n')
    compiler.chmod(compiler.stat().st_mode | stat.S_IEXEC)
    ready = tmp_path / "ready"
    ready.mkdir()
    probe = textwrap.dedent(f"""
        import os, sys, time
        from tilelang_musa.jit.precompiled_prelude import prelude_header
        open(os.path.join({str(ready)!r}, str(os.getpid())), "w").close()
        while len(os.listdir({str(ready)!r})) < 2:  # both imported: they look for the prelude together
            time.sleep(0.01)
        header = prelude_header([{str(compiler)!r}], ["-std=c++17"], "#include <vector>\\n", "lock-test")
        print(header)
    """)
    env = dict(os.environ, TILELANG_CACHE_DIR=str(tmp_path / "cache"))
    procs = [subprocess.Popen([sys.executable, "-c", probe], env=env, stdout=subprocess.PIPE, text=True, cwd=tmp_path)
             for _ in range(2)]
    headers = [proc.communicate(timeout=300)[0].strip() for proc in procs]
    assert all(proc.returncode == 0 for proc in procs)
    assert headers[0] == headers[1] != "None" and os.path.isfile(headers[0] + ".gch")
    assert len(log.read_text().splitlines()) == 1


def test_a_forced_header_builds_without_a_prelude_it_could_not_use(monkeypatch, tmp_path, capfd):
    """gcc takes a precompiled header only as the first file it reads, and a header the user forces (`-include`)
    comes before the prelude: such a build parses the templates itself, and precompiles nothing."""
    monkeypatch.setenv("TILELANG_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("TILELANG_PRINT_DEVICE_COMPILE_COMMAND", "1")
    helper = tmp_path / "negate_helper.h"
    helper.write_text("#pragma once\n#define TL_TEST_NEGATE_HELPER 1\n")
    a = torch.randn(N)
    kernel = tilelang.compile(negate, target="musa -arch=mp_31", execution_backend="sim",
                              compile_flags=["-include", str(helper)])
    err = capfd.readouterr().err
    assert f"-include {helper}" in err and "prelude.h" not in err
    assert not (tmp_path / "cache" / "sim_prelude").exists()
    torch.testing.assert_close(_run(kernel, a), -a)
