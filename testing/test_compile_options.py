"""CompileOptions (ir/options.py): the typed, frozen options built once from the pass configs. Every key with an
effect is one field (with its default and doc); the passes accept a dict or the options; and no module outside the
options module looks a PassConfigKey up in a dict."""

import dataclasses
import re
from pathlib import Path

import pytest
import torch

import tilelang
import tilelang_musa
import tilelang.language as T
from conftest import poison, rand
from tilelang_musa import diagnostics
from tilelang_musa.ir.options import CompileOptions, field_of, key_of, option_fields
from tilelang_musa.ir.pass_config import SAME_EFFECT_AS, WITHOUT_EFFECT, PassConfigKey as K
from tilelang_musa.transform import PassConfigKey
from tilelang_musa.transform.layout_inference import LayoutInference
from tilelang_musa.transform.pipeline import lowering_passes

PACKAGE = Path(tilelang_musa.__file__).resolve().parent
OPTIONS_MODULES = {"ir/options.py", "ir/pass_config.py"}


@pytest.fixture(autouse=True)
def fresh_warnings(monkeypatch):
    monkeypatch.setattr(diagnostics, "_WARNED", set())


def test_every_key_with_an_effect_is_exactly_one_field():
    with_effect = {k for k in K if k not in WITHOUT_EFFECT and k not in SAME_EFFECT_AS}
    keys = [f.metadata["key"] for f in option_fields()]
    assert len(keys) == len(set(keys))
    assert set(keys) == with_effect
    for f in option_fields():
        assert f.metadata["doc"], f.name
        assert key_of(f.name) is f.metadata["key"] and field_of(f.metadata["key"]) is f
    assert field_of(K.TL_DISABLE_WGMMA) is None and field_of(K.TL_LAYOUT_COST_MODEL) is None


def test_defaults_match_an_empty_dict():
    options = CompileOptions.of({})
    assert options == CompileOptions.of(None)
    assert options.enable_async_copy is True  # the one switch on by default
    assert not options.disable_vectorize and not options.disable_thread_storage_sync
    assert options.config_index_bitwidth is None and options.device_compile_flags is None


@pytest.mark.parametrize("form", [K.TIR_DISABLE_VECTORIZE, "tirx.disable_vectorize", "tir.disable_vectorize",
                                  "TIR_DISABLE_VECTORIZE", "TL_DISABLE_VECTORIZE"])
def test_every_spelling_of_a_key_sets_its_field(form):
    assert CompileOptions.of({form: True}).disable_vectorize is True
    assert CompileOptions.of({form: "false"}).disable_vectorize is False
    assert CompileOptions.of({form: "1"}).disable_vectorize is True


def test_values_are_kept_as_given_and_aliases_follow_their_key():
    options = CompileOptions.of({"tl.config_index_bitwidth": 64, "tl.device_compile_flags": "-O3",
                                 "tl.disable_wgmma": True, "tl.enable_async_copy": 0})
    assert options.config_index_bitwidth == 64 and options.device_compile_flags == "-O3"
    assert options.disable_sqmma is True and options.enable_async_copy is False
    assert options.given[K.TL_DISABLE_WGMMA] is True  # what the user asked for: the cache key and metadata


def test_options_are_frozen_and_taken_as_they_are():
    options = CompileOptions.of({"tl.disable_tma_lower": True})
    assert CompileOptions.of(options) is options
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.disable_tma_lower = False
    changed = options.with_(disable_thread_storage_sync=True)
    assert changed.disable_thread_storage_sync and not options.disable_thread_storage_sync
    assert changed.given[K.TL_DISABLE_THREAD_STORAGE_SYNC] is True and changed.disable_tma_lower


def test_unknown_keys_are_an_error_and_keys_without_effect_warn_once():
    with pytest.raises(ValueError, match="unknown pass config key 'tl.no_such_key'"):
        CompileOptions.of({"tl.no_such_key": True})
    with pytest.warns(tilelang.TileLangWarning, match="TL_LAYOUT_COST_MODEL"):
        CompileOptions.of({"tl.layout_cost_model": True})


def test_passes_take_a_dict_or_the_options():
    assert LayoutInference({}).info.name == LayoutInference(CompileOptions()).info.name
    names = [p.info.name for p in lowering_passes({})]
    assert names == [p.info.name for p in lowering_passes(CompileOptions.of({}))]
    unsynced = [p.info.name for p in lowering_passes({PassConfigKey.TL_DISABLE_THREAD_STORAGE_SYNC: True})]
    assert len(unsynced) < len(names)


def _scale(n=256):
    @T.prim_func
    def main(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32")):
        with T.Kernel(1, threads=128) as bx:
            for i in T.Parallel(n):
                B[i] = A[i] * 2.0

    return main


@pytest.mark.parametrize("arch", ["mp_22", "mp_31"])
def test_an_option_changes_the_generated_code(arch):
    target = f"musa -arch={arch}"
    vectorized = tilelang.compile(_scale(), target=target)
    scalar = tilelang.compile(_scale(), target=target, pass_configs={"tirx.disable_vectorize": True})
    assert "reinterpret_cast<float4*>" in vectorized.get_kernel_source(), vectorized.get_kernel_source()
    assert "float4" not in scalar.get_kernel_source(), scalar.get_kernel_source()
    assert scalar.pass_configs == {K.TIR_DISABLE_VECTORIZE: True}  # the normalized dict, as upstream's attribute
    a = rand((256,), torch.float32, 7)
    for kernel in (vectorized, scalar):
        b = poison((256,), torch.float32)
        kernel(a, b)
        torch.testing.assert_close(b, a * 2.0)


# A key looked up in a dict: `configs.get(...)`, `configs[...]`, `enabled(configs, ...)`, an `args.configs` dict, or
# a PassConfigKey member named outside the options modules.
_LOOKUP = re.compile(r"\bconfigs\s*(\.get\(|\[)|\.configs\b|\benabled\([^)]*configs"
                     r"|\bPassConfigKey\.[A-Z_]+|\bK\.[A-Z_]{3,}")


def test_no_module_outside_the_options_modules_looks_a_key_up():
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel in OPTIONS_MODULES or rel.startswith("autotuner/"):  # autotuner: its `configs` are tuning points
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            code = line.split("#", 1)[0]
            if _LOOKUP.search(code) and '"""' not in line and "`" not in line:
                offenders.append(f"{rel}:{number}: {line.strip()}")
    assert not offenders, "\n".join(offenders)


def test_the_lookup_check_catches_a_lookup():
    assert _LOOKUP.search("x = configs.get(PassConfigKey.TL_DISABLE_TMA_LOWER)")
    assert _LOOKUP.search("if enabled(args.configs, key):")
    assert _LOOKUP.search("GemmContext(args.target, args.configs, n)")
    assert not _LOOKUP.search("if options.disable_tma_lower:")
