"""`tilelang.testing`: upstream-style test files run unchanged (device string aside).

The first part is such a file's body: kernels compiled for mp_31 and mp_22 under `tilelang.testing` gates, run in
the simulator and compared with `torch_assert_close`; `requires_musa` tests run there, they are not skipped. The
rest checks each helper: the gates (what skips, when, and why), the comparisons, references, tolerances, seeding,
`main()` and the perf-regression entry points.
"""

import importlib
import random
import runpy
import subprocess
import sys
import warnings

import numpy as np
import pytest
import torch
from tvm.target import Target

import tilelang
import tilelang.language as T
import tilelang.testing
import tilelang_musa

# --- an upstream-style test file body ---------------------------------------------------------------------------


def matmul(M, N, K, block_M, block_N, block_K, dtype=T.float16, accum_dtype=T.float32):
    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), dtype)):
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

    return main


def run_gemm(target, M=64, N=64, K=96, block_M=64, block_N=64, block_K=32):
    kernel = tilelang.compile(matmul(M, N, K, block_M, block_N, block_K), out_idx=[2], target=target)
    tilelang.testing.set_random_seed(0)
    a = torch.randn(M, K, dtype=torch.float16, device="cpu")  # upstream: device="cuda"; the simulator takes CPU tensors
    b = torch.randn(K, N, dtype=torch.float16, device="cpu")
    c = kernel(a, b)
    ref = tilelang.testing.matmul_reference(a, b, out_dtype=torch.float16)
    rtol, atol = tilelang.testing.get_tolerance(torch.float16, "gemm_algorithm")
    tilelang.testing.torch_assert_close(c, ref, rtol=rtol, atol=atol, max_mismatched_ratio=0.0)


@tilelang.testing.requires_musa
def test_gemm_mp_31():
    run_gemm("musa -arch=mp_31")


@tilelang.jit(out_idx=[-1], target="musa -arch=mp_22")
def scale_add(N, block=256, dtype=T.float32):
    @T.prim_func
    def main(A: T.Tensor((N,), dtype), B: T.Tensor((N,), dtype), C: T.Tensor((N,), dtype)):
        with T.Kernel(T.ceildiv(N, block), threads=block) as bx:
            for i in T.Parallel(block):
                C[bx * block + i] = A[bx * block + i] * 2 + B[bx * block + i]

    return main


@tilelang.testing.requires_musa
def test_elementwise_mp_22():
    a, b = torch.randn(1000), torch.randn(1000)  # a tail block: 1000 = 3 * 256 + 232
    tilelang.testing.torch_assert_close(scale_add(1000)(a, b), a * 2 + b, rtol=1e-6, atol=1e-6)


@tilelang.testing.requires_cuda
def test_cuda_only():
    raise AssertionError("requires_cuda must skip on a MUSA build")


def _skips(obj):
    """The reasons of the skipif marks on `obj` whose condition holds (the ones that will skip it)."""
    return [m.kwargs["reason"] for m in getattr(obj, "pytestmark", []) if m.name == "skipif" and m.args[0]]


def test_requires_musa_tests_run_in_the_simulator_rather_than_skip():
    assert tilelang.testing.musa_runtime() == (True, "kernels run in the CPU simulator (execution backend 'sim')")
    for test in (test_gemm_mp_31, test_elementwise_mp_22):
        marks = [m for m in test.pytestmark if m.name == "skipif"]
        assert len(marks) == 1 and not marks[0].args[0] and "CPU simulator" in marks[0].kwargs["reason"]
    assert _skips(test_cuda_only) == ["no CUDA on a MUSA build"]


UPSTREAM_STYLE_FILE = '''
import tilelang
import tilelang.testing


@tilelang.testing.requires_musa
def test_runs():
    pass


@tilelang.testing.requires_cuda_compute_version_ge(9, 0)
def test_hopper_only():
    raise AssertionError("unreachable")


if __name__ == "__main__":
    tilelang.testing.main()
'''


def test_a_script_ending_in_main_runs_pytest_on_itself(tmp_path, monkeypatch, capsys):
    script = tmp_path / "test_upstream_style.py"
    script.write_text(UPSTREAM_STYLE_FILE)
    monkeypatch.setattr(sys, "argv", [str(script), "-q", "-rs", "-p", "no:cacheprovider"])
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exit_info:
        runpy.run_path(str(script), run_name="__main__")  # `python test_upstream_style.py`, in this process
    out = capsys.readouterr().out
    assert exit_info.value.code == 0, out
    assert "1 passed, 1 skipped" in out and "requires CUDA compute ge 9.0: no CUDA on a MUSA build" in out


def test_importing_tilelang_testing_does_not_import_pytest(monkeypatch):
    saved = {name: mod for name, mod in sys.modules.items() if name.startswith("tilelang_musa.testing")}
    for name in saved:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "pytest", None)  # any `import pytest` now raises ImportError
    try:
        fresh = importlib.import_module("tilelang_musa.testing")
        assert fresh is not saved["tilelang_musa.testing"] and callable(fresh.requires_musa)
    finally:
        for name in [n for n in sys.modules if n.startswith("tilelang_musa.testing")]:
            del sys.modules[name]
        sys.modules.update(saved)  # monkeypatch restores pytest; keep the module objects this file uses
        tilelang_musa.testing = saved["tilelang_musa.testing"]


def test_under_pytest_tvm_testing_is_reachable_from_tvm(tmp_path):
    # upstream's test files (`from tilelang import tvm; import tilelang.testing`) use `tvm.testing.parameter` at
    # module level without importing tvm.testing: upstream's tilelang.testing imports it
    code = ("import pytest, tilelang.testing; from tilelang import tvm; "
            "print(callable(tvm.testing.parameter), callable(tvm.testing.fixture))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=tmp_path).stdout  # not the checkout: the installed package
    assert out.split() == ["True", "True"]
    # without pytest loaded, importing tilelang.testing still leaves it (and tvm.testing) alone
    code = "import sys, tilelang.testing; print('pytest' in sys.modules, 'tvm.testing' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=tmp_path).stdout  # not the checkout: the installed package
    assert out.split() == ["False", "False"]


def test_main_passes_the_callers_file_and_the_command_line_to_pytest(monkeypatch):
    seen = []
    monkeypatch.setattr(pytest, "main", lambda args: seen.append(args) or 3)
    monkeypatch.setattr(sys, "argv", ["this_script.py", "-k", "gemm"])
    with pytest.raises(SystemExit) as exit_info:
        tilelang.testing.main()
    assert exit_info.value.code == 3 and seen == [[__file__, "-k", "gemm"]]


# --- gates --------------------------------------------------------------------------------------------------------


def _dummy():
    pass


@pytest.mark.parametrize("gate,reason", [
    ("requires_cuda", "no CUDA on a MUSA build"),
    ("requires_rocm", "no ROCm on a MUSA build"),
    ("requires_metal", "no Metal on a MUSA build"),
    ("requires_cdna", "no ROCm (CDNA) on a MUSA build"),
    ("requires_gfx950", "no ROCm (gfx950) on a MUSA build"),
    ("requires_cuda_or_cdna", "no CUDA or ROCm (CDNA) on a MUSA build"),
    ("requires_llvm", "tilelang_musa compiles for the musa target only (no llvm CPU target)"),
])
def test_foreign_platform_gates_skip_bare_and_called(gate, reason):
    decorator = getattr(tilelang.testing, gate)

    def bare():
        pass

    def called():
        pass

    assert _skips(decorator(bare)) == [reason] and _skips(decorator()(called)) == [reason]


@pytest.mark.parametrize("mode", ["ge", "gt", "eq", "lt", "le"])
def test_cuda_compute_version_gates_skip_naming_the_version(mode):
    def by_suffix():
        pass

    def by_mode():
        pass

    getattr(tilelang.testing, f"requires_cuda_compute_version_{mode}")(8, 9)(by_suffix)
    tilelang.testing.requires_cuda_compute_version(10, mode=mode)(by_mode)
    assert _skips(by_suffix) == [f"requires CUDA compute {mode} 8.9: no CUDA on a MUSA build"]
    assert _skips(by_mode) == [f"requires CUDA compute {mode} 10.0: no CUDA on a MUSA build"]


@pytest.mark.parametrize("target,mode,version,runs", [
    ("musa -arch=mp_31", "ge", (3, 1), True), ("musa -arch=mp_22", "ge", (3, 1), False),
    ("musa -arch=mp_22", "eq", (2, 2), True), ("musa -arch=mp_31", "eq", (2, 2), False),
    ("musa -arch=mp_22", "lt", (3, 0), True), ("musa -arch=mp_31", "lt", (3, 1), False),
    ("musa -arch=mp_22", "le", (2, 2), True), ("musa -arch=mp_22", "gt", (2, 2), False),
    ("musa -arch=mp_31", "gt", (2, 2), True), ("musa -arch=mp_32", "ge", (3, 2), True),
])
def test_musa_compute_version_gates_follow_TILELANG_TARGET(monkeypatch, target, mode, version, runs):
    monkeypatch.setenv("TILELANG_TARGET", target)

    def by_suffix():
        pass

    def by_mode():
        pass

    getattr(tilelang.testing, f"requires_musa_compute_version_{mode}")(*version)(by_suffix)
    tilelang.testing.requires_musa_compute_version(*version, mode=mode)(by_mode)
    arch = target.split("=")[1]
    have = f"{arch[3]}.{arch[4]}"
    expected = [] if runs else [f"requires MUSA compute {mode} {version[0]}.{version[1]}; the current target is "
                                f"{arch} ({have}); set TILELANG_TARGET to compile for another arch"]
    assert _skips(by_suffix) == expected and _skips(by_mode) == expected


def test_a_target_scope_wins_over_TILELANG_TARGET_and_a_bad_mode_is_an_error(monkeypatch):
    monkeypatch.setenv("TILELANG_TARGET", "musa -arch=mp_22")
    with Target({"kind": "musa", "arch": "mp_31"}):
        gated = tilelang.testing.requires_musa_compute_version_ge(3, 1)(_dummy)
    assert _skips(gated) == []
    with pytest.raises(ValueError, match="mode must be one of ge, gt, eq, lt, le; got 'ne'"):
        tilelang.testing.requires_musa_compute_version(3, 1, mode="ne")
    with pytest.raises(ValueError, match="mode must be one of"):
        tilelang.testing.requires_cuda_compute_version(9, 0, mode="ne")


def test_requires_musa_skips_where_the_backend_cannot_run(monkeypatch):
    monkeypatch.setenv("TILELANG_EXECUTION_BACKEND", "cython")  # the device backend: no mcc, no device here
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.delenv("MUSA_HOME", raising=False)
    monkeypatch.delenv("MUSA_PATH", raising=False)

    def on_device():
        pass

    def bogus():
        pass

    if tilelang.testing.musa_runtime()[0]:
        pytest.skip("this machine has a MUSA device and mcc")
    assert _skips(tilelang.testing.requires_musa(on_device)) == [
        "kernels cannot run here: execution backend 'cython' needs mcc (set MUSA_HOME), which is missing"]
    monkeypatch.setenv("TILELANG_EXECUTION_BACKEND", "gpu")
    [reason] = _skips(tilelang.testing.requires_musa()(bogus))
    assert reason.startswith("kernels cannot run here: unknown execution_backend")


def test_requires_musa_device_skips_in_the_simulator():
    [reason] = _skips(tilelang.testing.requires_musa_device(_dummy))
    assert reason.startswith("requires a real MUSA device and mcc; missing: a MUSA device")


def test_requires_package():
    def present():
        pass

    def absent():
        pass

    assert _skips(tilelang.testing.requires_package("torch", "numpy")(present)) == []
    assert _skips(tilelang.testing.requires_package("numpy", "no_such_pkg_zz.sub")(absent)) == [
        "requires package(s) no_such_pkg_zz.sub, not installed"]
    with pytest.raises(TypeError, match="one or more package names"):
        tilelang.testing.requires_package()


def test_gates_stack_with_parametrize_and_apply_to_classes():
    @tilelang.testing.requires_rocm
    class TestOnRocm:
        pass

    @tilelang.testing.requires_musa
    @pytest.mark.parametrize("n", [1, 2])
    def stacked(n):
        pass

    assert _skips(TestOnRocm) == ["no ROCm on a MUSA build"]
    assert [m.name for m in stacked.pytestmark] == ["parametrize", "skipif"] and _skips(stacked) == []


# --- comparisons ----------------------------------------------------------------------------------------------------


def test_torch_assert_close_allows_the_mismatch_ratio_and_no_more():
    ref = torch.ones(1000)
    one_off, two_off = ref.clone(), ref.clone()
    one_off[7] = 2
    two_off[[7, 500]] = 2
    assert tilelang.testing.torch_assert_close(one_off, ref, max_mismatched_ratio=0.001)
    with pytest.raises(AssertionError) as err:
        tilelang.testing.torch_assert_close(two_off, ref, max_mismatched_ratio=0.001, base_name="out", ref_name="ref")
    message = str(err.value)
    assert "Too many mismatched elements: 2 > 1" in message
    assert "First mismatch at index [7]: out=2.0, ref=1.0" in message and "Greatest absolute difference: 1.0" in message


def test_torch_assert_close_reports_multi_dim_indices_and_prints_when_verbose(capsys):
    ref = torch.zeros(4, 5, dtype=torch.bfloat16)
    bad = ref.clone()
    bad[2, 3] = 0.5
    tilelang.testing.torch_assert_close(bad, ref, atol=1e-2, max_mismatched_ratio=0.05, verbose=True)
    assert "1 of 20 elements mismatch (allowed: 1)" in capsys.readouterr().out
    with pytest.raises(AssertionError, match=r"index \[2, 3\]"):
        tilelang.testing.torch_assert_close(bad, ref, atol=1e-2, max_mismatched_ratio=0.0)


def test_torch_assert_close_attribute_checks_nan_and_fp8():
    a32 = torch.tensor([1.0, float("nan")])
    tilelang.testing.torch_assert_close(a32, a32.clone())  # NaN matches NaN by default
    with pytest.raises(AssertionError):
        tilelang.testing.torch_assert_close(a32, a32.clone(), equal_nan=False, max_mismatched_ratio=0.0)
    with pytest.raises(AssertionError, match="dtype differs: torch.float16 != torch.float32"):
        tilelang.testing.torch_assert_close(a32.half(), a32)
    tilelang.testing.torch_assert_close(a32.half(), a32, check_dtype=False)
    with pytest.raises(AssertionError, match=r"shape differs: \(2,\) != \(1, 2\)"):
        tilelang.testing.torch_assert_close(a32, a32[None])
    f8 = torch.tensor([0.5, 448.0]).to(torch.float8_e4m3fn)
    tilelang.testing.torch_assert_close(f8, f8.clone(), rtol=0, atol=0, max_mismatched_ratio=0.0)
    with pytest.raises(ValueError, match=r"max_mismatched_ratio must be in \[0, 1\]"):
        tilelang.testing.torch_assert_close(a32, a32, max_mismatched_ratio=2)


def test_assert_allclose_takes_torch_numpy_and_lists():
    x = torch.tensor([1.0, 2.0], dtype=torch.bfloat16)
    tilelang.testing.assert_allclose(x, np.array([1.0, 2.0]))
    tilelang.testing.assert_allclose([1.0, 2.001], x, rtol=1e-3)
    with pytest.raises(AssertionError, match="Mismatched elements: 1 / 2"):
        tilelang.testing.assert_allclose([1.0, 2.1], x, rtol=1e-3)
    with pytest.raises(AssertionError, match=r"shapes differ: \(2,\) != \(1, 2\)"):
        tilelang.testing.assert_allclose(x, np.ones((1, 2)))


# --- references, tolerances, dtypes, seeds --------------------------------------------------------------------------


def test_matmul_naive_rounds_every_step_in_the_accumulator_dtype():
    a = torch.tensor([[2048.0, 1.0, 1.0]], dtype=torch.float16)
    b = torch.ones(3, 1, dtype=torch.float16)
    # float16 spacing at 2048 is 2: each +1 rounds back to 2048; a float32 accumulator keeps 2050
    assert tilelang.testing.matmul_naive(a, b, torch.float16, torch.float32).item() == 2048.0
    assert tilelang.testing.matmul_naive(a, b, torch.float32, torch.float32).item() == 2050.0
    with pytest.raises(ValueError, match=r"needs A \(M, K\) and B \(K, N\)"):
        tilelang.testing.matmul_naive(a, a, torch.float32, torch.float32)


def test_matmul_reference_and_saturating_fp8_output():
    a, b = torch.full((2, 4), 192.0).to(torch.float8_e5m2), torch.full((4, 3), 100.0)
    ref = tilelang.testing.matmul_reference(a, b, out_dtype=torch.float8_e5m2)  # 76800 > float8_e5m2's max 57344
    assert ref.dtype == torch.float8_e5m2 and ref.float().eq(57344.0).all()
    unsaturated = tilelang.testing.matmul_reference(a, b, out_dtype=torch.float8_e5m2, saturate_fp8=False)
    assert torch.isinf(unsaturated.float()).all()
    big = torch.tensor([1e6, -1e6, 3.0])
    assert tilelang.testing.cast_to_output_dtype(big, torch.float8_e5m2).float().tolist() == [57344.0, -57344.0, 3.0]
    assert torch.isinf(tilelang.testing.cast_to_output_dtype(big, torch.float8_e5m2, saturate_fp8=False).float()[0])
    assert tilelang.testing.matmul_reference(a, b).dtype == torch.float32
    assert tilelang.testing.is_fp8_dtype(torch.float8_e4m3fn) and not tilelang.testing.is_fp8_dtype(torch.float16)


def test_tolerance_profiles():
    assert tilelang.testing.list_tolerance_profiles() == ("baseline", "gemm_algorithm", "gemm_contract")
    assert tilelang.testing.get_tolerance(torch.float16) == (1e-3, 1e-3)
    assert tilelang.testing.get_tolerance(torch.bfloat16, "gemm_algorithm") == (5e-2, 5e-2)
    assert tilelang.testing.get_tolerance(torch.float16, overrides={torch.float16: (0.5, 0.25)}) == (0.5, 0.25)
    with pytest.raises(ValueError, match="unknown tolerance profile 'loose'; known: baseline, gemm_algorithm"):
        tilelang.testing.get_tolerance(torch.float16, "loose")
    with pytest.raises(KeyError, match="no entry for torch.int8"):
        tilelang.testing.get_tolerance(torch.int8)


def test_get_tilelang_type_inverts_map_torch_type():
    from tilelang.utils.tensor import map_torch_type

    for dtype in (torch.float16, torch.bfloat16, torch.float32, torch.int8, torch.uint8, torch.float8_e4m3fn,
                  torch.float8_e5m2, torch.bool):
        assert map_torch_type(tilelang.testing.get_tilelang_type(dtype)) is dtype
    assert tilelang.testing.get_tilelang_type(torch.float8_e4m3fn) == "float8_e4m3"
    with pytest.raises(TypeError, match="expected a torch.dtype"):
        tilelang.testing.get_tilelang_type(np.float16)


def test_set_random_seed_makes_random_numpy_and_torch_repeat():
    def draw():
        return random.random(), np.random.rand(), torch.rand(3).tolist()

    tilelang.testing.set_random_seed(123)
    first = draw()
    tilelang.testing.set_random_seed(123)
    assert draw() == first
    tilelang.testing.set_random_seed()
    assert draw() != first


# --- perf regression entry points -----------------------------------------------------------------------------------


def regression_fast_kernel():
    tilelang.testing.process_func(lambda scale: 0.5 * scale, "regression_fast_kernel", scale=3)


def regression_glitchy_timer():
    tilelang.testing.process_func(lambda: 0.0, "glitchy")


def test_regression_runs_this_modules_entry_points_and_prints_their_latencies(capsys, monkeypatch):
    with warnings.catch_warnings(record=True):
        tilelang.testing.regression(verbose=False)
    assert capsys.readouterr().out == "fast_kernel: 1.5\n"  # glitchy's 0.0 is not recorded
    monkeypatch.setenv("TL_PERF_REGRESSION_FORMAT", "json")
    tilelang.testing.regression(prefixes=("regression_fast",), verbose=False)
    assert capsys.readouterr().out == '__TILELANG_PERF_RESULTS_JSON__=[{"name":"fast_kernel","latency":1.5}]\n'


def test_process_func_warns_about_a_latency_that_stays_non_positive():
    with pytest.warns(RuntimeWarning, match=r"glitchy: latency 0.0 <= 0 after 6 runs; not recorded"):
        regression_glitchy_timer()
