"""Execution backends and compile flags: TILELANG_EXECUTION_BACKEND wins over the script's execution_backend=; every
user flag reaches mcc, while the simulator's host compiler takes only those that mean something to it (checked on
Moore Threads' own S5000 flag lists) and notes the rest once; @tilelang.jit(name=) names the kernel."""

import json

import pytest
import torch

import tilelang
import tilelang.language as T
from conftest import poison, rand
from test_toolchains import fake_mcc  # noqa: F401  (fixture: an `mcc` that records its arguments)
from tilelang_musa.jit import backend as backend_module
from tilelang_musa.jit import toolchains
from tilelang_musa.jit.backend import resolve_backend
from tilelang_musa.jit.toolchains import SIM_FLUSH_DENORMALS_FLAG, host_compiler_flags

# compile_flags of Moore Threads' tilelang-musa kernels (benchmark/mp31/modelops/kernels/example_mha_fwd_bhsd.py,
# benchmark/mp31/mate/kernels/sparse_mla_prefill_common.py, examples/deepseek_mla/example_mla_decode_ws.py,
# testing/musa/mp22/flash_attention/tilelang_unified_attention.py), with what the host compiler keeps of each.
MHA_FWD = ["-fmusa-flush-denormals-to-zero", "-mllvm", "-mtgpu-combine-instr-with-burst=1", "-mllvm",
           "-mtgpu-combine-fop-instr=1", "-fno-signed-zeros", "-fno-strict-aliasing", "-mllvm",
           "-mtgpu-load-cluster-mutation=1", "-mllvm", "--num-dwords-of-load-in-mutation=64", "-Od3", "-O2"]
SPARSE_MLA_PREFILL = ["-fmusa-flush-denormals-to-zero", "-fno-signed-zeros", "-fno-strict-aliasing", "-mllvm",
                      "-misched=mtgpu-max-ilp", "-mllvm", "-mtgpu-if-convert=1", "-mllvm", "-mtgpu-tiny-offset-hint=1",
                      "-mllvm", "-misched-recompute-slotindex=1", "-mllvm", "-mtgpu-combine-fop-instr=1"]
MLA_DECODE_WS = ["-O3", "-Wno-deprecated-declarations", "-U__CUDA_NO_HALF_OPERATORS__",
                 "-U__CUDA_NO_HALF_CONVERSIONS__", "-U__CUDA_NO_HALF2_OPERATORS__",
                 "-U__CUDA_NO_BFLOAT16_CONVERSIONS__", "--expt-relaxed-constexpr", "--expt-extended-lambda",
                 "--ptxas-options=-v,--register-usage-level=10", "-DNDEBUG"]
UNIFIED_ATTENTION = ["-save-temps=obj", "-fverbose-asm", "-O3", "-ffast-math", "-fmusa-flush-denormals-to-zero",
                     "-mllvm", "-mtgpu-enable-max-ilp-scheduling-strategy=0", "-mllvm",
                     "-mtgpu-enchanced-minreg-schedule=1", "-mllvm", "-mtgpu-enable-cse=0"]

N = 256


@T.prim_func
def scale(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32")):
    T.annotate_compile_flags(["-DTL_KERNEL_FLAG=1", "-mllvm -mtgpu-if-convert=1"])
    with T.Kernel(2, threads=128) as bx:
        for i in T.Parallel(128):
            B[bx * 128 + i] = A[bx * 128 + i] * 3.0


@pytest.fixture
def fresh_notes(monkeypatch):
    monkeypatch.setattr(backend_module, "_noted_overrides", set())
    monkeypatch.setattr(toolchains, "_noted_flags", set())


def test_the_environment_overrides_an_explicit_backend_and_says_so_once(monkeypatch, capfd, fresh_notes):
    monkeypatch.setenv("TILELANG_EXECUTION_BACKEND", "sim")
    assert resolve_backend("cython").name == "sim"
    assert capfd.readouterr().err.strip() == "[tilelang] TILELANG_EXECUTION_BACKEND=sim overrides " \
                                             "execution_backend='cython'"
    assert resolve_backend("cython").name == "sim" and resolve_backend("tvm_ffi").device == "cpu"
    assert resolve_backend("sim").name == "sim"
    assert capfd.readouterr().err.count("overrides") == 1  # tvm_ffi once more; sim is no override
    monkeypatch.delenv("TILELANG_EXECUTION_BACKEND")
    for upstream in ("tvm_ffi", "ctypes", "nvrtc", "torch", "cython"):
        assert resolve_backend(upstream).name == "cython"
    monkeypatch.setenv("TILELANG_EXECUTION_BACKEND", "gpu")
    with pytest.raises(tilelang.TileLangError, match=r"unknown execution_backend 'gpu' \(from "
                                                     r"TILELANG_EXECUTION_BACKEND\)"):
        resolve_backend("cython")


@pytest.mark.parametrize("flags,kept,dropped", [
    (MHA_FWD, ["-fno-signed-zeros", "-fno-strict-aliasing", "-O2", SIM_FLUSH_DENORMALS_FLAG],
     ["-mllvm -mtgpu-combine-instr-with-burst=1",
      "-mllvm -mtgpu-combine-fop-instr=1", "-mllvm -mtgpu-load-cluster-mutation=1",
      "-mllvm --num-dwords-of-load-in-mutation=64", "-Od3"]),
    (SPARSE_MLA_PREFILL, ["-fno-signed-zeros", "-fno-strict-aliasing", SIM_FLUSH_DENORMALS_FLAG],
     ["-mllvm -misched=mtgpu-max-ilp", "-mllvm -mtgpu-if-convert=1",
      "-mllvm -mtgpu-tiny-offset-hint=1", "-mllvm -misched-recompute-slotindex=1",
      "-mllvm -mtgpu-combine-fop-instr=1"]),
    (MLA_DECODE_WS, [f for f in MLA_DECODE_WS if not f.startswith("--")],
     ["--expt-relaxed-constexpr", "--expt-extended-lambda", "--ptxas-options=-v,--register-usage-level=10"]),
    (UNIFIED_ATTENTION, ["-O3", SIM_FLUSH_DENORMALS_FLAG],
     ["-save-temps=obj", "-fverbose-asm",
      "-mllvm -mtgpu-enable-max-ilp-scheduling-strategy=0", "-mllvm -mtgpu-enchanced-minreg-schedule=1",
      "-mllvm -mtgpu-enable-cse=0"]),
])
def test_the_host_compiler_keeps_only_the_flags_it_understands(flags, kept, dropped, capfd, fresh_notes):
    assert host_compiler_flags(flags) == (kept, flags is UNIFIED_ATTENTION)  # -ffast-math: spelled out instead
    note = capfd.readouterr().err
    assert note == f"[tilelang] sim: the host compiler ignores the MUSA compiler flag(s) {', '.join(dropped)}\n"
    host_compiler_flags(flags)
    assert capfd.readouterr().err == ""  # once per flag and process
    assert host_compiler_flags(["-I", "inc", "-D", "X=1", "--offload-arch", "mp_31", "-Xclang", "-v"])[0] == \
        ["-I", "inc", "-D", "X=1"]


def test_a_device_script_runs_in_the_simulator_with_its_mcc_flags(monkeypatch, tmp_path, capfd, fresh_notes):
    """execution_backend="cython" and S5000 flags, as a device script has them: TILELANG_EXECUTION_BACKEND=sim runs
    it on CPU, the host compiler getting the flags it understands (from all three places flags come from)."""
    monkeypatch.setenv("TILELANG_EXECUTION_BACKEND", "sim")
    monkeypatch.setenv("TILELANG_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("TILELANG_PRINT_DEVICE_COMPILE_COMMAND", "1")
    kernel = tilelang.compile(scale, execution_backend="cython", compile_flags=MHA_FWD,
                              pass_configs={tilelang.PassConfigKey.TL_DEVICE_COMPILE_FLAGS: ["-DTL_CONFIG_FLAG=1"]})
    err = capfd.readouterr().err
    command = next(line for line in err.splitlines() if "sim compile command" in line)
    for flag in ("-fno-strict-aliasing", "-O2", "-DTL_KERNEL_FLAG=1", "-DTL_CONFIG_FLAG=1"):
        assert f" {flag} " in command
    assert "-mllvm" not in command and "-Od3" not in command and "-fmusa" not in command
    assert "-mllvm -mtgpu-if-convert=1" in err  # the annotated flag is noted as dropped too
    assert kernel.backend.name == "sim"
    a, b = rand((N,), torch.float32, 3), poison((N,), torch.float32)
    kernel(a, b)
    torch.testing.assert_close(b, a * 3.0)


def test_every_flag_reaches_mcc_in_order(fake_mcc):  # noqa: F811
    tilelang.compile(scale, execution_backend="cython", compile_flags="-O3 -mllvm -mtgpu-if-convert=1",
                     pass_configs={tilelang.PassConfigKey.TL_DEVICE_COMPILE_FLAGS: ["-fmusa-flush-denormals-to-zero"]})
    args = json.loads(fake_mcc.read_text())
    given = ["-O3", "-mllvm", "-mtgpu-if-convert=1", "-DTL_KERNEL_FLAG=1", "-mllvm", "-mtgpu-if-convert=1",
             "-fmusa-flush-denormals-to-zero"]
    start = args.index("-O3", args.index("-mllvm") + 2)  # after the fixed part of the command
    assert args[start:start + len(given)] == given


def test_jit_name_names_the_kernel_and_its_files(tmp_path, monkeypatch):
    monkeypatch.setenv("TILELANG_CACHE_DIR", str(tmp_path))

    @tilelang.jit(name="dsv4_scale", out_idx=[-1])
    def make(n):
        @T.prim_func
        def main(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32")):
            with T.Kernel(1, threads=128) as bx:
                for i in T.Parallel(n):
                    B[i] = A[i] * 3.0

        return main

    kernel = make(128)
    assert kernel.name == "dsv4_scale" and kernel.kernel_name == "dsv4_scale_kernel"
    assert "void __launch_bounds__(128, 1) dsv4_scale_kernel(" in kernel.get_device_source()
    assert kernel.library_path.name == "dsv4_scale.so" and kernel.stage_path("mu").name == "dsv4_scale.mu"
    a = rand((128,), torch.float32, 5)
    torch.testing.assert_close(kernel(a), a * 3.0)
    with pytest.raises(ValueError, match="name must be a C identifier"):
        tilelang.compile(scale, name="not a name")
