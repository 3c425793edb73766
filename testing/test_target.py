"""The `musa` TargetKind (src/target/musa_target.cc) and tilelang_musa/target.py."""

import ast
import dataclasses
import importlib
import importlib.machinery
import re
import shutil
import subprocess
import sys
import textwrap
import types
from pathlib import Path

import pytest
import tvm
from tvm.target import Target

from tilelang_musa import _native, _paths
from tilelang_musa import target as musa_target
from tilelang_musa.target import (
    ARCHS, CAPABILITIES, ArchInfo, arch_of, archs_with, determine_target, warp_size,
)

KDL_EXT_DEV = 12
_real_detect_device_arch = musa_target._detect_device_arch  # the fixture below stubs it out
EXPECTED_OPTIONS = {
    "kind": "str",
    "keys": "Array<str>",
    "tag": "str",
    "device": "str",
    "model": "str",
    "libs": "Array<str>",
    "host": "target.Target",
    "from_device": "int",
    "target_device_type": "int",
    "arch": "str",
    "thread_warp_size": "int",
    "max_num_threads": "int",
    "max_shared_memory_per_block": "int",
}


@pytest.fixture(autouse=True)
def _no_ambient_target(monkeypatch):
    """Each test states its own TILELANG_TARGET and device; none is visible by default."""
    _native.load()
    monkeypatch.delenv(musa_target.ENV_TARGET, raising=False)
    monkeypatch.setattr(musa_target, "_detect_device_arch", lambda: None)


def attrs(t: Target) -> dict:
    return {k: (str(v) if isinstance(v, str) else v) for k, v in t.attrs.items()}


# ---- the TargetKind registered by the C++ library -----------------------------------------------


def test_musa_kind_defaults_to_mp_31_with_derived_attrs_and_ext_dev_device_type():
    t = Target("musa")
    assert t.kind.name == "musa"
    assert t.kind.default_device_type == KDL_EXT_DEV
    assert t.get_target_device_type() == KDL_EXT_DEV
    assert list(t.keys) == ["musa", "gpu"]
    assert attrs(t) == {
        "arch": "mp_31",
        "thread_warp_size": 32,
        "max_num_threads": 1024,
        "max_shared_memory_per_block": 196608,
    }


def test_musa_kind_declares_base_and_musa_options_with_tvm_type_strings():
    assert dict(tvm.target.TargetKind.options_from_name("musa")) == EXPECTED_OPTIONS


@pytest.mark.parametrize("arch", sorted(ARCHS))
def test_canonicalizer_derives_warp_size_and_smem_per_arch_as_the_python_table_says(arch):
    t = Target({"kind": "musa", "arch": arch})
    assert t.attrs["thread_warp_size"] == ARCHS[arch].warp_size
    assert t.attrs["max_shared_memory_per_block"] == ARCHS[arch].max_shared_memory_per_block


def test_mp_22_dict_config_has_128_thread_warps():
    assert Target({"kind": "musa", "arch": "mp_22"}).attrs["thread_warp_size"] == 128


def test_explicit_warp_size_and_smem_are_kept_over_the_arch_defaults():
    config = {"arch": "mp_22", "thread_warp_size": 64, "max_shared_memory_per_block": 1024}
    t = Target({"kind": "musa", **config})
    assert t.attrs["thread_warp_size"] == 64
    assert t.attrs["max_shared_memory_per_block"] == 1024


def test_unknown_arch_is_rejected_naming_the_value_and_the_accepted_list():
    accepted = r'accepted: "mp_21", "mp_22", "mp_31", "mp_32"'
    with pytest.raises(ValueError, match=r'unknown arch "sm_80"; ' + accepted):
        Target({"kind": "musa", "arch": "sm_80"})


def test_unknown_option_is_rejected_listing_the_known_ones():
    known = r"Known options: 'kind', .*'arch'"
    with pytest.raises(ValueError, match=r"Unknown config option 'bogus'\. " + known):
        Target({"kind": "musa", "bogus": 1})


def test_option_of_the_wrong_type_is_rejected_naming_both_types():
    # The validator raises TypeError; Target construction reports it as ValueError.
    with pytest.raises(ValueError, match=r"Option 'arch': expected type 'str' but got 'int'"):
        Target({"kind": "musa", "arch": 5})
    message = r"Option 'max_num_threads': expected type 'int' but got 'str'"
    with pytest.raises(ValueError, match=message):
        Target({"kind": "musa", "max_num_threads": "many"})


@pytest.mark.parametrize(
    "key", ["thread_warp_size", "max_num_threads", "max_shared_memory_per_block"]
)
def test_non_positive_sizes_are_rejected(key):
    with pytest.raises(ValueError, match=f"option '{key}' must be positive, got 0"):
        Target({"kind": "musa", key: 0})


def test_llvm_host_is_accepted():
    t = Target({"kind": "musa", "host": "llvm"})
    assert t.host.kind.name == "llvm"
    assert t.kind.name == "musa"


def test_export_round_trips():
    t = Target({"kind": "musa", "arch": "mp_22", "thread_warp_size": 64})
    again = Target(t.export())
    assert attrs(again) == attrs(t)
    assert list(again.keys) == list(t.keys)


def test_registration_reported_no_error():
    assert _native.get_global_func("tilelang_musa.target.registration_error")() == ""


def test_layout_guard_agrees_with_every_registered_kind():
    check = _native.get_global_func("tilelang_musa.target.check_kind_layout")
    kinds = Target.list_kinds()
    assert "musa" in kinds and "cuda" in kinds
    assert {kind: list(check(kind)) for kind in kinds} == {kind: [] for kind in kinds}


def test_layout_guard_reports_an_unregistered_kind():
    check = _native.get_global_func("tilelang_musa.target.check_kind_layout")
    assert list(check("no_such_kind")) == ['target kind "no_such_kind" is not registered']


# ---- determine_target ---------------------------------------------------------------------------


@pytest.mark.parametrize("spec", [None, "auto", " auto "])
def test_default_is_mp_31_without_env_or_device(spec):
    assert determine_target(spec).attrs["arch"] == "mp_31"


@pytest.mark.parametrize("spec", [None, "auto", "musa", {"kind": "musa"}, '{"kind": "musa"}'])
def test_default_uses_the_detected_device_arch(monkeypatch, spec):
    monkeypatch.setattr(musa_target, "_detect_device_arch", lambda: "mp_22")
    monkeypatch.setenv("TILELANG_SIM_ARCH", "mp_31")  # a real device wins over the simulated one
    assert determine_target(spec).attrs["arch"] == "mp_22"


@pytest.mark.parametrize("spec", [None, "auto", "musa", {"kind": "musa"}])
def test_a_target_naming_no_arch_compiles_for_the_simulated_device(monkeypatch, spec):
    monkeypatch.setenv("TILELANG_SIM_ARCH", "mp_22")
    assert determine_target(spec).attrs["arch"] == "mp_22"
    assert determine_target("musa -arch=mp_31").attrs["arch"] == "mp_31"  # a named arch is kept


def test_an_unknown_simulated_arch_is_refused(monkeypatch):
    monkeypatch.setenv("TILELANG_SIM_ARCH", "mp_99")
    with pytest.raises(ValueError, match="TILELANG_SIM_ARCH='mp_99'"):
        determine_target("musa")


@pytest.mark.parametrize(
    "value,arch",
    [
        ("musa -arch=mp_22", "mp_22"),
        ('{"kind": "musa", "arch": "mp_21"}', "mp_21"),
        ("musa", "mp_32"),  # a target naming no arch compiles for the device at hand
    ],
)
def test_default_reads_TILELANG_TARGET(monkeypatch, value, arch):
    monkeypatch.setattr(musa_target, "_detect_device_arch", lambda: "mp_32")
    monkeypatch.setenv("TILELANG_TARGET", value)
    assert determine_target().attrs["arch"] == arch


def test_TILELANG_TARGET_auto_falls_back_to_detection(monkeypatch):
    monkeypatch.setattr(musa_target, "_detect_device_arch", lambda: "mp_22")
    monkeypatch.setenv("TILELANG_TARGET", "auto")
    assert determine_target().attrs["arch"] == "mp_22"


def test_explicit_target_wins_over_TILELANG_TARGET(monkeypatch):
    monkeypatch.setenv("TILELANG_TARGET", "musa -arch=mp_22")
    assert determine_target("musa").attrs["arch"] == "mp_31"


@pytest.mark.parametrize(
    "value,message",
    [
        (
            "cuda",
            r"TILELANG_TARGET='cuda': tilelang_musa compiles for the `musa` target only; "
            r"got 'cuda'",
        ),
        ("musa -arch=sm_80", r"TILELANG_TARGET='musa -arch=sm_80': .*unknown arch \"sm_80\""),
    ],
)
def test_bad_TILELANG_TARGET_is_reported_with_the_variable(monkeypatch, value, message):
    monkeypatch.setenv("TILELANG_TARGET", value)
    with pytest.raises(ValueError, match=message):
        determine_target()


def test_cli_string_options_are_parsed_and_typed():
    t = determine_target("musa -arch=mp_22 -thread_warp_size=64 -libs=a,b")
    assert attrs(t)["arch"] == "mp_22"
    assert t.attrs["thread_warp_size"] == 64
    assert list(t.attrs["libs"]) == ["a", "b"]


def test_cli_string_accepts_a_host():
    assert determine_target("musa -host=llvm").host.kind.name == "llvm"


def test_json_string_and_dicts_are_accepted():
    assert determine_target('{"kind": "musa", "arch": "mp_22"}').attrs["thread_warp_size"] == 128
    assert determine_target({"kind": "musa", "arch": "mp_22"}).attrs["thread_warp_size"] == 128
    assert determine_target({"arch": "mp_21"}).kind.name == "musa"  # kind defaults to musa


def test_a_musa_target_is_returned_unchanged():
    t = Target({"kind": "musa", "arch": "mp_22"})
    assert determine_target(t) is t


@pytest.mark.parametrize("spec", ["cuda", "llvm -mcpu=x", {"kind": "cuda"}, '{"kind": "c"}'])
def test_other_kinds_are_rejected(spec):
    with pytest.raises(ValueError, match=r"compiles for the `musa` target only; got "):
        determine_target(spec)


def test_another_kinds_target_object_is_rejected():
    with pytest.raises(ValueError, match=r"`musa` target only; got .*\"kind\": ?\"llvm\""):
        determine_target(Target("llvm"))


@pytest.mark.parametrize(
    "spec,message",
    [
        ("musa arch=mp_22", r"cannot parse 'arch=mp_22'; write options as -key=value"),
        ("musa -arch", r"cannot parse '-arch'"),
        ("musa -arch=mp_22 -arch=mp_31", r"option 'arch' is given twice"),
        ("musa -max_num_threads=lots", r"option 'max_num_threads' expects an integer, got 'lots'"),
        ("musa -bogus=1", r"Unknown config option 'bogus'"),
        ("musa -arch=sm_80", r'unknown arch "sm_80"'),
        ("   ", r"the target string is empty"),
        ('{"kind": "musa"', r"is not valid JSON"),
    ],
)
def test_malformed_strings_are_rejected_with_the_reason(spec, message):
    with pytest.raises(ValueError, match=message):
        determine_target(spec)


def test_a_target_of_another_type_is_a_type_error():
    message = (
        r"target must be None, 'auto', a string, a config dict or a tvm.target.Target; got int"
    )
    with pytest.raises(TypeError, match=message):
        determine_target(42)


def test_refused_registration_is_raised_on_first_use(monkeypatch):
    musa_target._ensure_kind_registered.cache_clear()
    try:
        with monkeypatch.context() as patch:
            patch.setattr(_native, "get_global_func", lambda name: (lambda: "layout mismatch: X"))
            message = r"the `musa` target kind is unavailable: layout mismatch: X"
            with pytest.raises(RuntimeError, match=message):
                determine_target("musa")
    finally:
        musa_target._ensure_kind_registered.cache_clear()
    assert determine_target("musa").kind.name == "musa"


# ---- device detection ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "capability,arch", [((3, 1), "mp_31"), ((2, 2), "mp_22"), ((2, 1), "mp_21"), ((3, 2), "mp_32")]
)
def test_capability_maps_to_arch(capability, arch):
    assert musa_target._arch_from_capability(*capability) == arch
    assert ARCHS[arch].capability == capability


def test_unknown_device_capability_is_an_error_pointing_at_TILELANG_TARGET():
    with pytest.raises(ValueError, match=r"capability \(4, 1\), i.e. mp_41, .*set TILELANG_TARGET"):
        musa_target._arch_from_capability(4, 1)


def _fake_torch_musa(monkeypatch, *, available, capability=(2, 2)):
    import torch

    module = types.ModuleType("torch_musa")
    module.__spec__ = importlib.machinery.ModuleSpec("torch_musa", None)
    monkeypatch.setitem(sys.modules, "torch_musa", module)
    fake = types.SimpleNamespace(
        is_available=lambda: available, get_device_capability=lambda: capability
    )
    monkeypatch.setattr(torch, "musa", fake, raising=False)


@pytest.mark.parametrize("available,arch", [(True, "mp_22"), (False, None)])
def test_detection_reads_torch_musa(monkeypatch, available, arch):
    _fake_torch_musa(monkeypatch, available=available)
    assert _real_detect_device_arch() == arch


def _spec_less_torch_musa(monkeypatch):
    """A script's stand-in (`sys.modules["torch_musa"] = types.ModuleType(...)`): no __spec__, no torch.musa."""
    import torch

    monkeypatch.setitem(sys.modules, "torch_musa", types.ModuleType("torch_musa"))
    monkeypatch.delattr(torch, "musa", raising=False)


def test_detection_takes_a_spec_less_stand_in_as_no_device(monkeypatch):
    _spec_less_torch_musa(monkeypatch)
    assert sys.modules["torch_musa"].__spec__ is None  # importlib.util.find_spec raises ValueError on it
    assert _real_detect_device_arch() is None


def test_device_presence_takes_a_spec_less_stand_in_as_no_device(monkeypatch):
    _spec_less_torch_musa(monkeypatch)
    musa_target.musa_device_present.cache_clear()
    try:
        assert musa_target.musa_device_present() is False
    finally:
        musa_target.musa_device_present.cache_clear()


def test_detection_asks_a_spec_less_torch_musa_for_its_device(monkeypatch):
    import torch

    _spec_less_torch_musa(monkeypatch)
    fake = types.SimpleNamespace(is_available=lambda: True, get_device_capability=lambda: (2, 2))
    monkeypatch.setattr(torch, "musa", fake, raising=False)
    assert _real_detect_device_arch() == "mp_22"


@pytest.mark.parametrize("arch", ["mp_31", "mp_22"])
def test_a_kernel_compiles_for_musa_beside_a_spec_less_stand_in(monkeypatch, arch):
    import torch

    import tilelang
    import tilelang.language as T
    from conftest import poison, rand

    _spec_less_torch_musa(monkeypatch)
    monkeypatch.setattr(musa_target, "_detect_device_arch", _real_detect_device_arch)
    monkeypatch.setenv("TILELANG_SIM_ARCH", arch)

    @T.prim_func
    def add_one(x: T.Tensor((64,), "float32"), y: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=64):
            tx = T.get_thread_binding(0)
            y[tx] = x[tx] + T.float32(1)

    kernel = tilelang.compile(add_one, target="musa")
    assert arch_of(kernel.target).name == arch
    assert "y[(int)threadIdx.x] = x[(int)threadIdx.x] + 1.000000e+00f;" in kernel.get_kernel_source()
    x, y = rand((64,), torch.float32, 5), poison((64,), torch.float32)
    kernel(x, y)
    torch.testing.assert_close(y, x + 1)


# ---- arch table, arch_of, warp_size -------------------------------------------------------------


def test_arch_of_and_warp_size():
    assert arch_of("musa -arch=mp_22") == ARCHS["mp_22"]
    assert arch_of().name == "mp_31"
    assert warp_size("musa -arch=mp_22") == 128
    # the target's warp size, not the arch's
    assert warp_size({"arch": "mp_22", "thread_warp_size": 64}) == 64


def test_arch_table_flags_follow_the_documented_features():
    assert [a for a in ARCHS if ARCHS[a].has_sqmma] == ["mp_31", "mp_32"]
    assert all(ARCHS[a].squad_size == 128 for a in ("mp_31", "mp_32"))
    mp_22 = ARCHS["mp_22"]
    assert mp_22.has_warp_mma and not mp_22.has_wmma and not mp_22.has_tme
    assert [ARCHS[a].musa_arch for a in ARCHS] == [210, 220, 310, 320]


def test_arch_table_capabilities_follow_the_documented_features():
    assert archs_with("has_async_barriers") == ("mp_31", "mp_32")
    assert archs_with("has_async_copy") == ("mp_22", "mp_31", "mp_32")
    assert archs_with("has_robust_access") == ("mp_22", "mp_31", "mp_32")
    assert archs_with("has_fp8_mma") == ("mp_31", "mp_32")
    assert archs_with("has_tme") == ("mp_31", "mp_32")
    assert archs_with("has_warp_mma") == ("mp_22",)
    assert set(CAPABILITIES) >= {"has_sqmma", "has_wmma", "has_warp_mma", "has_tme", "has_async_barriers"}
    with pytest.raises(ValueError, match="unknown arch capability 'has_tma'"):
        archs_with("has_tma")


def test_multiprocessor_counts_agree_with_the_performance_model():
    from tilelang_musa.profiler.arch_figures import ARCH_FIGURES

    for name, figures in ARCH_FIGURES.items():
        assert ARCHS[name].multiprocessors == figures.mps, name
    assert ARCHS["mp_31"].multiprocessors == 56


def test_the_cpp_arch_table_agrees_with_the_python_one():
    """src/target/musa_archs.h mirrors part of ArchInfo: the target's derived options, and what the printer asks."""
    rows = _native.get_global_func("tilelang_musa.target.list_archs")()
    cpp = {str(row["name"]): {str(k): row[k] for k in row if str(k) != "name"} for row in rows}
    assert list(cpp) == list(ARCHS)
    for name, row in cpp.items():
        assert row == {key: getattr(ARCHS[name], key) for key in row}, name
    assert set(next(iter(cpp.values()))) == {"warp_size", "max_shared_memory_per_block", "has_async_barriers"}


# Passes and tile ops ask ArchInfo for a capability; arch names and numbers stay in the table (and in messages).
_CAPABILITY_ASKERS = ("transform", "tileop", "codegen", "jit")
# Copies of the arch table that cannot import target.py, each kept equal to it by a test.
_ARCH_TABLE_MIRRORS = {
    # the install-time runtime build loads it by path, without TVM (test_sim_runtime_install.py compares the tables)
    "jit/sim_runtime_recipe.py",
}


def test_passes_and_tile_ops_ask_capabilities_not_arch_names():
    root = Path(musa_target.__file__).parent
    found = []
    for folder in _CAPABILITY_ASKERS:
        for path in sorted((root / folder).rglob("*.py")):
            if path.relative_to(root).as_posix() in _ARCH_TABLE_MIRRORS:
                continue
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Constant) and isinstance(node.value, str) and \
                        re.fullmatch(r"mp_\d\d", node.value):
                    found.append(f"{path.relative_to(root)}:{node.lineno}: {node.value!r}")
                if isinstance(node, ast.Compare) and any(isinstance(n, ast.Attribute) and n.attr == "musa_arch"
                                                         for n in [node.left, *node.comparators]):
                    found.append(f"{path.relative_to(root)}:{node.lineno}: a comparison of musa_arch")
    assert found == []


def test_arch_info_is_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        ARCHS["mp_31"].warp_size = 64  # type: ignore[misc]
    assert isinstance(ARCHS["mp_31"], ArchInfo)


# ---- idempotence --------------------------------------------------------------------------------


def test_reimporting_the_module_keeps_working():
    reloaded = importlib.reload(musa_target)
    assert reloaded.determine_target("musa -arch=mp_22").attrs["thread_warp_size"] == 128


def test_loading_a_second_copy_of_the_library_is_idempotent(tmp_path):
    """A second copy runs the static initialisers again: the kind and globals stay intact."""
    copy = tmp_path / "libtilelang_musa_copy.so"
    shutil.copy(_paths.native_library(), copy)
    script = textwrap.dedent(
        f"""
        import ctypes, tvm, tvm_ffi
        ctypes.CDLL({str(_paths.native_library())!r}, ctypes.RTLD_GLOBAL)
        before = tvm.target.Target({{"kind": "musa", "arch": "mp_22"}}).export()
        ctypes.CDLL({str(copy)!r}, ctypes.RTLD_GLOBAL)
        after = tvm.target.Target({{"kind": "musa", "arch": "mp_22"}}).export()
        assert before == after, (before, after)
        assert len(tvm.target.TargetKind.options_from_name("musa")) == {len(EXPECTED_OPTIONS)}
        assert tvm_ffi.get_global_func("tilelang_musa.target.registration_error")() == ""
        print("ok")
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"
    assert "tilelang_musa:" not in result.stderr


def test_targets_are_built_from_a_map_without_the_generic_conversion(monkeypatch):
    """Target(dict) converts the dict through tvm_ffi.convert, whose first `isinstance(dict, numbers.Number)` in a
    process walks every registered Number subclass (~1 ms of the first compile, a cache hit's largest item): the
    config goes in as a Map, and the Target is the one a dict gives."""
    import tvm.target.target as wheel_target

    expected = str(Target({"kind": "musa", "arch": "mp_22", "max_num_threads": 512}))
    monkeypatch.setattr(wheel_target, "convert", lambda value: pytest.fail(f"generic conversion of {value!r}"))
    assert str(determine_target("musa -arch=mp_22 -max_num_threads=512")) == expected
    assert str(determine_target({"arch": "mp_22", "max_num_threads": 512})) == expected
