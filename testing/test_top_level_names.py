"""The top-level and module names upstream scripts import besides the language: `from tilelang import tvm`,
`tilelang.cdiv` / `next_power_of_2` / `tilelang.math`, `tilelang.contrib.mcc` and `.nvcc` (compute versions answered
for the MUSA target, mcc driven as the JIT finds it), `tilelang.backend.target` and `tilelang.utils.*`."""

import os
import shlex
import stat
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch
import tvm
from tvm import tirx
from tvm.target import Target

import tilelang
import tilelang_musa

MP31 = "musa -arch=mp_31"
MP22 = "musa -arch=mp_22"


def test_every_name_in_all_resolves_on_both_package_names():
    for name in tilelang_musa.__all__:
        assert getattr(tilelang, name) is getattr(tilelang_musa, name), name


def test_tvm_is_the_tvm_module():
    from tilelang import tvm as tl_tvm

    assert tl_tvm is tvm and tilelang.tvm.tirx is tirx


@pytest.mark.parametrize("a,b,expected", [(1000, 128, 8), (1024, 128, 8), (1, 7, 1), (0, 7, 0), (-5, 2, -2),
                                          (np.int64(9), 4, 3)])
def test_cdiv_is_the_exact_ceiling_of_integers(a, b, expected):
    assert tilelang.cdiv(a, b) == expected and tilelang.math.cdiv(a, b) == expected


def test_cdiv_of_a_size_variable_is_an_expression_that_evaluates_to_the_ceiling():
    n = tirx.Var("n", "int32")
    analyzer = tvm.sym.Analyzer()
    analyzer.bind(n, 1000)
    assert int(analyzer.simplify(tilelang.cdiv(n, 128))) == 8


def test_cdiv_of_a_tensor_is_a_tensor_even_of_one_element():
    # GDN's chunk indexing calls tilelang.cdiv(lengths, 64).tolist() with one sequence's length as well
    import torch
    assert tilelang.cdiv(torch.tensor([8192]), 64).tolist() == [128]
    assert tilelang.cdiv(torch.tensor([100, 64, 1]), 64).tolist() == [2, 1, 1]


def test_cdiv_by_zero_raises():
    with pytest.raises(ZeroDivisionError):
        tilelang.cdiv(3, 0)


@pytest.mark.parametrize("x,expected", [(-3, 1), (0, 1), (1, 1), (2, 2), (3, 4), (100, 128), (128, 128), (129, 256)])
def test_next_power_of_2(x, expected):
    assert tilelang.next_power_of_2(x) == expected and tilelang.math.next_power_of_2(x) == expected


def test_power_of_2_helpers():
    assert [tilelang.math.prev_power_of_2(x) for x in (1, 3, 64, 100)] == [1, 2, 64, 64]
    assert [tilelang.math.is_power_of_2(x) for x in (0, 1, 6, 64, -4)] == [False, True, False, True, False]
    with pytest.raises(ValueError, match="x must be >= 1"):
        tilelang.math.prev_power_of_2(0)


@pytest.mark.parametrize("bad", [2.5, "8", True])
def test_power_of_2_rejects_non_integers(bad):
    with pytest.raises(TypeError, match="next_power_of_2: x must be an integer"):
        tilelang.next_power_of_2(bad)


# --- compute versions: tilelang.contrib.mcc / nvcc --------------------------------------------------------------

@pytest.mark.parametrize("target,version", [(MP31, "3.1"), (MP22, "2.2"), ({"arch": "mp_22"}, "2.2"), ("musa", "3.1")])
def test_compute_version_of_a_target(target, version):
    from tilelang.contrib import mcc, nvcc

    assert mcc.get_musa_compute_version(target) == version
    assert nvcc.get_target_compute_version(target) == version
    assert mcc.get_musa_compute_version(tilelang.determine_target(target)) == version


def test_compute_version_without_a_target_follows_TILELANG_TARGET_and_a_target_scope(monkeypatch):
    from tilelang.contrib import mcc, nvcc

    monkeypatch.setenv("TILELANG_TARGET", MP22)
    assert nvcc.get_target_compute_version() == "2.2"
    assert nvcc.parse_compute_version(nvcc.get_target_compute_version()) == (2, 2)
    with tilelang.determine_target(MP31):
        assert mcc.get_musa_compute_version() == "3.1"
    monkeypatch.delenv("TILELANG_TARGET")
    assert mcc.get_musa_compute_version() == "3.1"  # no device here: the default arch


def test_compute_version_parsing_and_arch_numbers():
    from tilelang.contrib import mcc

    assert mcc.parse_musa_compute_version("3.1") == (3, 1)
    assert mcc.get_musa_arch("2.2") == "22"
    for bad in ("31", "3.x", "3.1.0", ""):
        with pytest.raises(ValueError, match="'major.minor'"):
            mcc.parse_musa_compute_version(bad)


def test_feature_queries_follow_the_arch_table():
    from tilelang.contrib import mcc

    assert mcc.have_fp8("3.1") and not mcc.have_fp8("2.2")
    assert mcc.have_bf16("2.2") and mcc.have_fp16("2.1") and mcc.have_int8("3.1")
    assert mcc.have_tma(MP31) and not mcc.have_tma(MP22) and not mcc.have_tma("cuda")
    assert mcc.is_ph1(MP31) and mcc.is_qy2(MP22) and not mcc.is_qy2(MP31)


def test_a_cuda_target_is_refused_and_cuda_toolkit_calls_say_there_is_no_cuda():
    from tilelang.contrib import nvcc

    with pytest.raises(ValueError, match="musa` target only"):
        nvcc.get_target_compute_version("cuda -arch=sm_90")
    for call in (nvcc.find_cuda_path, nvcc.get_cuda_version, lambda: nvcc.compile_cuda("__global__ void k() {}")):
        with pytest.raises(RuntimeError, match="no CUDA on a MUSA build"):
            call()


# --- tilelang.contrib.mcc driving a (fake) mcc -----------------------------------------------------------------

@pytest.fixture
def fake_mcc(tmp_path, monkeypatch):
    """A MUSA_HOME whose bin/mcc logs its arguments, prints a version, fails on a source containing FAIL and
    otherwise writes 'MUBIN' (or 'ASM' with -S) to its -o file."""
    home = tmp_path / "musa"
    (home / "bin").mkdir(parents=True)
    log = tmp_path / "mcc_args"
    script = home / "bin" / "mcc"
    script.write_text(textwrap.dedent(f"""\
        #!/bin/sh
        printf '%s\\n' "$@" > {shlex.quote(str(log))}
        if [ "$1" = "--version" ]; then echo "mcc version 4.3.4 (fake)"; exit 0; fi
        out=""; src=""; asm=0; prev=""
        for a in "$@"; do
          if [ "$prev" = "-o" ]; then out="$a"; fi
          if [ "$a" = "-S" ]; then asm=1; fi
          prev="$a"; src="$a"
        done
        if grep -q FAIL "$src"; then echo "error: kernel.mu:1: FAIL here" >&2; exit 1; fi
        if [ $asm = 1 ]; then printf ASM > "$out"; else printf MUBIN > "$out"; fi
        """))
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("MUSA_HOME", str(home))
    return home, log


def test_mcc_is_found_under_MUSA_HOME_and_reports_its_version(fake_mcc):
    from tilelang.contrib import mcc
    from tilelang.utils.target import check_musa_availability

    home, _ = fake_mcc
    assert mcc.find_musa_path() == str(home) and mcc.get_mcc_compiler() == str(home / "bin" / "mcc")
    assert mcc.get_musa_version() == (4, 3, 4)
    assert check_musa_availability()


def test_compile_musa_runs_a_device_only_compile_for_the_arch(fake_mcc, tmp_path):
    from tilelang.contrib import compile_musa, mcc
    from tilelang_musa._paths import include_root

    home, log = fake_mcc
    assert compile_musa("__global__ void k() {}", arch="mp_22", options=["-DX=1"]) == bytearray(b"MUBIN")
    args = log.read_text().splitlines()
    assert args[:3] == ["--cuda-device-only", "--cuda-gpu-arch=mp_22", "-O3"]
    assert f"-I{include_root()}" in args and f"-I{home / 'include'}" in args and "-DX=1" in args
    assert args[-1].endswith("kernel.mu") and args[-3] == "-o"

    out = tmp_path / "k.s"
    assert mcc.compile_musa("__global__ void k() {}", target_format="asm", arch="3.1", path_target=str(out)) == b"ASM"
    args = log.read_text().splitlines()
    assert "-S" in args and "--cuda-gpu-arch=mp_31" in args and out.read_bytes() == b"ASM"


def test_compile_musa_failures_carry_mcc_output_and_the_command(fake_mcc):
    from tilelang.contrib import mcc

    with pytest.raises(RuntimeError, match=r"(?s)mcc failed \(exit 1\).*command: .*--cuda-gpu-arch=mp_31.*FAIL here"):
        mcc.compile_musa("FAIL", arch="mp_31")
    with pytest.raises(ValueError, match="target_format must be 'mubin' or 'asm'"):
        mcc.compile_musa("", target_format="ptx")
    with pytest.raises(ValueError, match="unknown MUSA arch 'mp_99'"):
        mcc.compile_musa("", arch="mp_99")


def test_without_mcc_the_sdk_calls_raise_and_say_how_to_point_at_it(tmp_path, monkeypatch):
    if Path("/usr/local/musa/bin/mcc").exists():
        pytest.skip("this machine has mcc in its default location")
    from tilelang.contrib import mcc
    from tilelang.utils.target import check_musa_availability

    monkeypatch.delenv("MUSA_HOME", raising=False)
    monkeypatch.delenv("MUSA_PATH", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(RuntimeError, match="set MUSA_HOME"):
        mcc.find_musa_path()
    assert not check_musa_availability()
    assert mcc.default_compile_options(["-O3 -DA='x y'"])[-2:] == ["-O3", "-DA=x y"]


# --- tilelang.backend.target and tilelang.utils -----------------------------------------------------------------

def test_determine_target_auto_is_a_string_that_tvm_and_compile_accept(monkeypatch):
    from tilelang.backend.target import determine_target

    monkeypatch.setenv("TILELANG_TARGET", MP22)
    auto = determine_target("auto")
    assert isinstance(auto, str)
    assert str(Target(auto).attrs["arch"]) == "mp_22"  # upstream's `tvm.target.Target(determine_target("auto"))`
    assert str(tilelang.determine_target(auto).attrs["arch"]) == "mp_22"
    assert str(determine_target(return_object=True).attrs["arch"]) == "mp_22"
    with tilelang.determine_target(MP31):
        assert str(determine_target("auto", return_object=True).attrs["arch"]) == "mp_31"


def test_determine_target_keeps_an_explicit_targets_form_and_refuses_other_kinds():
    from tilelang.backend.target import describe_supported_targets, determine_target

    assert determine_target(f"  {MP22} ") == MP22
    assert determine_target({"arch": "mp_22"}) == {"arch": "mp_22"}
    assert isinstance(determine_target(MP22, return_object=True), Target)
    with pytest.raises(ValueError, match="musa` target only"):
        determine_target("cuda")
    with pytest.raises(ValueError):
        determine_target({"arch": "sm_90"})
    assert set(describe_supported_targets()) == {"auto", "musa"}


def test_target_predicates():
    from tilelang.utils.target import check_hip_availability, target_is_musa, target_is_ph1, target_is_qy2

    assert target_is_musa(MP22) and not target_is_musa("cuda") and not target_is_musa(Target("llvm"))
    assert target_is_qy2(MP22) and not target_is_qy2(MP31) and target_is_ph1(tilelang.determine_target(MP31))
    assert not check_hip_availability()


def test_utils_names_upstream_examples_import():
    from tilelang.utils import TensorSupplyType, map_torch_type, torch_assert_close
    from tilelang.utils.device import get_available_cpu_count, get_current_device, synchronize
    from tilelang.utils.tensor import is_float8_dtype

    assert TensorSupplyType is tilelang.TensorSupplyType
    assert map_torch_type("float16") is torch.float16 and map_torch_type("float8_e4m3") is torch.float8_e4m3fn
    assert map_torch_type(tilelang.language.bfloat16) is torch.bfloat16
    assert map_torch_type("e4m3fnuz_float8") is torch.float8_e4m3fnuz
    assert map_torch_type("int4") is torch.uint8  # packed storage, two values a byte, as float4_e2m1fn
    with pytest.raises(ValueError, match="int2"):
        map_torch_type("int2")
    assert is_float8_dtype(torch.float8_e5m2) and not is_float8_dtype(torch.int8)
    assert torch_assert_close(torch.ones(3), torch.ones(3))
    assert get_current_device() == "cpu"  # the simulator (conftest forces it; no MUSA device here)
    synchronize()
    assert 1 <= get_available_cpu_count() <= (os.cpu_count() or 1)


def test_gemm_warp_policy_is_importable_where_moore_threads_tests_import_it():
    # tile-ai/tilelang-musa's testing/musa/mp31/basic/test_gemm.py: `from tilelang.tileop.base import GemmWarpPolicy`
    from tilelang.tileop.base import GemmWarpPolicy

    assert GemmWarpPolicy is tilelang.language.GemmWarpPolicy and GemmWarpPolicy.Square == 0
