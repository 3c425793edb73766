"""The PassConfigKey table: every key of upstream TileLang and TileLang-MUSA is accepted (member, string, name),
unknown keys are still an error, keys without a subject on MUSA warn once why, and the keys with an effect have
it: TL_DISABLE_WGMMA disables SQMMA like TL_DISABLE_SQMMA, TL_DISABLE_THREAD_STORAGE_SYNC leaves barriers to the
user, flags reach the device compiler. (test_options.py covers the four WITHOUT_EFFECT keys it lists.)"""

import warnings

import pytest
import torch

import tilelang
import tilelang.language as T
from conftest import poison, rand
from tilelang_musa import diagnostics
from tilelang_musa.diagnostics import TileLangWarning
from tilelang_musa.transform.pass_config import SAME_EFFECT_AS, WITHOUT_EFFECT, normalize_pass_configs

K = tilelang.PassConfigKey

# Upstream's names and strings: tile-ai/tilelang and tile-ai/tilelang-musa (tilelang/transform/pass_config.py, now
# and in their history) and MooreThreads/tilelang_musa.
UPSTREAM = {
    "TL_SIMPLIFY": "tl.Simplify",
    "TL_SIMPLIFY_TRANSITIVELY_PROVE_INEQUALITIES": "transitively_prove_inequalities",
    "TL_SIMPLIFY_CONVERT_BOOLEAN_TO_AND_OF_ORS": "convert_boolean_to_and_of_ors",
    "TL_SIMPLIFY_APPLY_CONSTRAINTS_TO_BOOLEAN_BRANCHES": "apply_constraints_to_boolean_branches",
    "TL_SIMPLIFY_PROPAGATE_KNOWNS_TO_PROVE_CONDITIONAL": "propagate_knowns_to_prove_conditional",
    "TL_SIMPLIFY_PROPAGATE_KNOWNS_TO_SIMPLIFY_EXPRESSIONS": "propagate_knowns_to_simplify_expressions",
    "TL_SIMPLIFY_ENABLE_LET_INLINE": "enable_simplify_let_inline",
    "TL_DISABLE_BUFFER_INIT_CHECK": "tl.disable_buffer_init_check",
    "TL_DISABLE_DATA_RACE_CHECK": "tl.disable_data_race_check",
    "TL_DISABLE_PRELOWER_SEMANTIC_CHECK": "tl.disable_prelower_semantic_check",
    "TL_DISABLE_WARP_SPECIALIZED": "tl.disable_warp_specialized",
    "TL_ENABLE_AUTO_SCHEDULE": "tl.enable_auto_schedule",
    "TL_ENABLE_AUTO_WARP_SPECIALIZATION": "tl.enable_auto_warp_specialization",
    "TL_ENABLE_FAST_MATH": "tl.enable_fast_math",
    "TL_DISABLE_FAST_MATH": "tl.disable_fast_math",
    "TL_PTXAS_REGISTER_USAGE_LEVEL": "tl.ptxas_register_usage_level",
    "TL_ENABLE_PTXAS_VERBOSE_OUTPUT": "tl.enable_ptxas_verbose_output",
    "TL_DEVICE_COMPILE_FLAGS": "tl.device_compile_flags",
    "TL_EMIT_LINE_DIRECTIVES": "tl.emit_line_directives",
    "TL_CONFIG_INDEX_BITWIDTH": "tl.config_index_bitwidth",
    "TL_ENABLE_REDUCER_PLAN_VERBOSE": "tl.enable_reducer_plan_verbose",
    "TL_LAYOUT_COST_MODEL": "tl.layout_cost_model",
    "TL_REDUCER_FORCE_BASELINE": "tl.reducer_force_baseline",
    "TL_DISABLE_TMA_LOWER": "tl.disable_tma_lower",
    "TL_DISABLE_SAFE_MEMORY_ACCESS": "tl.disable_safe_memory_legalize",
    "TL_DISABLE_VECTORIZE_256": "tl.disable_vectorize_256",
    "TL_ENABLE_FP32X2_REDUCTION": "tl.enable_fp32x2_reduction",
    "TL_ENABLE_ASYNC_COPY": "tl.enable_async_copy",
    "TL_ENABLE_LOWER_LDGSTG": "tl.enable_lower_ldgstg",
    "TL_ENABLE_LOWER_LDGSTG_PREDICATED": "tl.enable_lower_ldgstg_predicated",
    "TL_DISABLE_LOWER_LDGSTG_PREDICATED": "tl.disable_lower_ldgstg_predicated",
    "TL_ENABLE_VECTORIZE_PLANNER_VERBOSE": "tl.enable_vectorize_planner_verbose",
    "TL_DISABLE_WGMMA": "tl.disable_wgmma",
    "TL_DEBUG_MERGE_SHARED_MEMORY_ALLOCATIONS": "tl.debug_merge_shared_memory_allocations",
    "TL_ENABLE_AGGRESSIVE_SHARED_MEMORY_MERGE": "tl.enable_aggressive_shared_memory_merge",
    "TL_DISABLE_SHARED_MEMORY_REUSE": "tl.disable_shared_memory_reuse",
    "TL_DISABLE_SHUFFLE_ELECT": "tl.disable_shuffle_elect",
    "TL_DISABLE_LOOP_UNSWITCHING": "tl.disable_loop_unswitching",
    "TL_LOOP_UNSWITCHING_ALLOW_NON_TRIVIAL_ELSE": "tl.loop_unswitching_allow_non_trivial_else",
    "TL_IF_STMT_BINDING_INLINE_REPLAYABLE_BINDS": "tl.if_stmt_binding_inline_replayable_binds",
    "TL_DISABLE_THREAD_STORAGE_SYNC": "tl.disable_thread_storage_sync",
    "TL_DEBUG_THREAD_STORAGE_SYNC_SUMMARY": "tl.debug_thread_storage_sync_summary",
    "TL_FORCE_LET_INLINE": "tl.force_let_inline",
    "TL_AST_PRINT_ENABLE": "tl.ast_print_enable",
    "TL_LAYOUT_VISUALIZATION_ENABLE": "tl.layout_visualization_enable",
    "TL_LAYOUT_VISUALIZATION_FORMATS": "tl.layout_visualization_formats",
    "TL_STORAGE_REWRITE_DETECT_INPLACE": "tl.storage_rewrite_detect_inplace",
    "TIR_ENABLE_EQUIV_TERMS_IN_CSE": "tir.enable_equiv_terms_in_cse_tir",
    "TIR_DISABLE_CSE": "tirx.disable_cse_tir",
    "TIR_SIMPLIFY": "tirx.Simplify",
    "TIR_DISABLE_STORAGE_REWRITE": "tirx.disable_storage_rewrite",
    "TIR_DISABLE_VECTORIZE": "tirx.disable_vectorize",
    "TIR_USE_ASYNC_COPY": "tirx.use_async_copy",
    "TIR_ENABLE_DEBUG": "tirx.enable_debug",
    "TIR_MERGE_STATIC_SMEM": "tirx.merge_static_smem",
    "TIR_ADD_LOWER_PASS": "tirx.add_lower_pass",
    "TIR_NOALIAS": "tirx.noalias",
    "CUDA_KERNELS_OUTPUT_DIR": "cuda.kernels_output_dir",
    "TL_DISABLE_OUT_OF_BOUND_WARNING": "tl.disable_out_of_bound_warning",
    "TL_ENABLE_DUMP_IR": "tl.enable_dump_ir",
    "TL_DUMP_IR_DIR": "tl.dump_ir_path",
    "TL_PASS_PROFILE": "tl.pass_profile",
    "TL_PASS_PROFILE_THRESHOLD_MS": "tl.pass_profile_threshold_ms",
    "TL_DYNAMIC_ALIGNMENT": "tl.dynamic_alignment",
    "TL_DISABLE_DYNAMIC_TAIL_SPLIT": "tl.disable_dynamic_tail_split",
    "TL_DISABLE_AUTO_UNROLL": "tl.disable_auto_unroll",
    "TL_ENABLE_AUTO_UNROLL": "tl.enable_auto_unroll",
    "TL_DISABLE_INDEX_TYPE_PROMOTION": "tl.disable_index_type_promotion",
    "TL_DISABLE_SQMMA": "tl.disable_sqmma",
    "TL_DISABLE_PH1_WMMA": "tl.disable_ph1_wmma",
    "TL_DISABLE_SAFE_COPY_PREDICATION": "tl.disable_safe_copy_predication",
    "TL_DISABLE_SAFE_ROBUST_COPY_PREDICATION": "tl.disable_safe_robust_copy_predication",
    "TL_DISABLE_VECTORIZE_SINGLE_SIDE": "tl.disable_vectorize_single_side",
    "TL_ENABLE_MUSA_BURST": "tl.enable_musa_burst",
    "TL_ENABLE_MUSA_TMA_PREFETCH": "tl.enable_musa_tma_prefetch",
    "TL_ENABLE_REDUCE_BURST": "tl.enable_reduce_burst",
}
# Upstream's strings before TVM's TIR moved to the tirx namespace (MooreThreads/tilelang_musa still uses them),
# and this build's earlier names; both still accepted.
OLD_SPELLINGS = {f"tir.{v[len('tirx.'):]}": n for n, v in UPSTREAM.items() if v.startswith("tirx.")}
OLD_NAMES = {"TL_DISABLE_VECTORIZE": "tir.disable_vectorize", "TL_DUMP_IR_PATH": "tl.dump_ir_path",
             "MUSA_KERNELS_OUTPUT_DIR": "musa.kernels_output_dir"}
# Keys with a reader in the compiler; every other key must be in WITHOUT_EFFECT.
WITH_EFFECT = {K.TL_DISABLE_SQMMA, K.TL_DISABLE_PH1_WMMA, K.TL_DISABLE_WGMMA, K.TL_DISABLE_SAFE_MEMORY_ACCESS,
               K.TL_DISABLE_SAFE_COPY_PREDICATION, K.TL_DISABLE_THREAD_STORAGE_SYNC, K.TIR_DISABLE_VECTORIZE,
               K.TL_ENABLE_FAST_MATH, K.TL_DISABLE_FAST_MATH, K.TL_DEVICE_COMPILE_FLAGS, K.TL_ENABLE_DUMP_IR,
               K.TL_DUMP_IR_DIR, K.MUSA_KERNELS_OUTPUT_DIR, K.CUDA_KERNELS_OUTPUT_DIR, K.TL_DISABLE_TMA_LOWER,
               K.TL_DISABLE_SAFE_ROBUST_COPY_PREDICATION, K.TL_ENABLE_ASYNC_COPY,
               K.TL_DISABLE_WARP_SPECIALIZED, K.TL_CONFIG_INDEX_BITWIDTH, K.TL_DISABLE_INDEX_TYPE_PROMOTION,
               K.TL_PASS_PROFILE, K.TL_PASS_PROFILE_THRESHOLD_MS, K.TL_EMIT_LINE_DIRECTIVES,
               K.TL_DISABLE_SHARED_MEMORY_REUSE, K.TL_STREAM_K, K.TL_ENABLE_AGGRESSIVE_SHARED_MEMORY_MERGE,
               K.TL_DISABLE_BUFFER_INIT_CHECK}
COVERED_BY_TEST_OPTIONS = {K.TL_ENABLE_AUTO_WARP_SPECIALIZATION}


@pytest.fixture(autouse=True)
def fresh_warnings(monkeypatch):
    monkeypatch.setattr(diagnostics, "_WARNED", set())


def tile_warnings(record):
    return [str(w.message) for w in record if issubclass(w.category, TileLangWarning)]


@pytest.mark.parametrize("name,value", sorted(UPSTREAM.items()))
def test_every_upstream_key_is_accepted_as_member_string_and_name(name, value):
    member = getattr(K, name)
    assert member.value == value
    for form in (member, value, name):
        assert normalize_pass_configs({form: False})[member] is False


@pytest.mark.parametrize("old,name", sorted(OLD_SPELLINGS.items()) + sorted((v, n) for n, v in OLD_NAMES.items()))
def test_old_spellings_and_names_are_still_accepted(old, name):
    assert normalize_pass_configs({old: False})[getattr(K, name)] is False
    assert normalize_pass_configs({name: False})[getattr(K, name)] is False


def test_this_builds_earlier_names_are_the_same_keys_as_upstreams():
    assert K.TL_DISABLE_VECTORIZE is K.TIR_DISABLE_VECTORIZE
    assert K.TL_DUMP_IR_PATH is K.TL_DUMP_IR_DIR


def test_unknown_key_is_an_error_listing_the_known_keys():
    with pytest.raises(ValueError, match="unknown pass config key 'tl.disable_wgmma_typo'") as info:
        normalize_pass_configs({"tl.disable_wgmma_typo": True})
    assert "tl.disable_thread_storage_sync" in str(info.value) and "tl.enable_musa_burst" in str(info.value)
    with pytest.raises(ValueError, match="unknown pass config key"):
        tilelang.compile(transpose_through_shared(False), pass_configs={"TL_NOT_A_KEY": 1})


def test_every_key_has_an_effect_or_a_reason():
    assert set(K) - set(WITHOUT_EFFECT) == WITH_EFFECT
    assert all(reason and not reason.endswith(".") for reason in WITHOUT_EFFECT.values())


@pytest.mark.parametrize("key", sorted(set(WITHOUT_EFFECT) - COVERED_BY_TEST_OPTIONS, key=lambda k: k.name))
def test_keys_without_effect_warn_once_why(key):
    value = {K.TL_LAYOUT_VISUALIZATION_FORMATS: "png", K.TL_LAYOUT_COST_MODEL: "io-aware",
             K.TL_PTXAS_REGISTER_USAGE_LEVEL: 10, K.TL_SIMPLIFY: {"enable_simplify_let_inline": False}}.get(key, True)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        normalize_pass_configs({key: False})  # not asking for anything says nothing
        normalize_pass_configs({key.value: "false"})
    assert tile_warnings(record) == []
    with pytest.warns(TileLangWarning, match=f"{key.name} .* has no effect") as record:
        normalize_pass_configs({key.value: value})
    assert WITHOUT_EFFECT[key] in tile_warnings(record)[0]
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        normalize_pass_configs({key.name: value})
    assert tile_warnings(record) == []


def test_keys_with_effect_do_not_warn():
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        normalize_pass_configs({key: True for key in WITH_EFFECT})
    assert tile_warnings(record) == []


def small_gemm():
    @T.prim_func
    def main(A: T.Tensor((128, 64), "float16"), B: T.Tensor((64, 128), "float16"), C: T.Tensor((128, 128), "float32")):
        with T.Kernel(2, 2, threads=128) as (bx, by):
            A_s = T.alloc_shared((64, 32), "float16")
            B_s = T.alloc_shared((32, 64), "float16")
            C_f = T.alloc_fragment((64, 64), "float32")
            T.clear(C_f)
            for k in T.serial(2):
                T.copy(A[by * 64, k * 32], A_s)
                T.copy(B[k * 32, bx * 64], B_s)
                T.gemm(A_s, B_s, C_f)
            T.copy(C_f, C[by * 64, bx * 64])

    return main


@pytest.mark.parametrize("form", [K.TL_DISABLE_WGMMA, "tl.disable_wgmma", "TL_DISABLE_WGMMA"])
def test_every_spelling_of_disable_wgmma_means_disable_sqmma(form):
    assert normalize_pass_configs({form: True})[K.TL_DISABLE_SQMMA] is True


def test_disable_wgmma_disables_sqmma_like_disable_sqmma():
    form = K.TL_DISABLE_WGMMA

    def source(configs):
        return tilelang.compile(small_gemm(), target="musa -arch=mp_31", pass_configs=configs).get_kernel_source()

    assert "tl::gemm_ss_mp31_sqmma" in source({})
    without_wgmma = tilelang.compile(small_gemm(), target="musa -arch=mp_31", pass_configs={form: True})
    assert "tl::gemm_ss_mp31_sqmma" not in without_wgmma.get_kernel_source()
    assert without_wgmma.get_kernel_source() == source({K.TL_DISABLE_SQMMA: True})
    a, b = rand((128, 64), torch.float16, 5), rand((64, 128), torch.float16, 6)
    c = poison((128, 128), torch.float32)
    without_wgmma(a, b, c)
    torch.testing.assert_close(c, a.float() @ b.float(), rtol=1e-2, atol=1e-2)


def test_an_explicit_disable_sqmma_wins_over_disable_wgmma():
    configs = normalize_pass_configs({"tl.disable_wgmma": True, "tl.disable_sqmma": False})
    assert configs[K.TL_DISABLE_SQMMA] is False
    assert SAME_EFFECT_AS[K.TL_DISABLE_WGMMA] is K.TL_DISABLE_SQMMA


def transpose_through_shared(explicit_sync):
    """Each thread writes S in A's layout and reads it back transposed: values other threads wrote."""

    @T.prim_func
    def main(A: T.Tensor((64, 64), "float32"), B: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=256):
            S = T.alloc_shared((64, 64), "float32")
            for i, j in T.Parallel(64, 64):
                S[i, j] = A[i, j]
            if explicit_sync:
                T.sync_threads()
            for i, j in T.Parallel(64, 64):
                B[i, j] = S[j, i] * 2.0

    return main


@pytest.mark.parametrize("arch", ["mp_31", "mp_22"])
def test_disable_thread_storage_sync_leaves_the_barriers_to_the_user(arch):
    off = {K.TL_DISABLE_THREAD_STORAGE_SYNC: True}
    target = f"musa -arch={arch}"
    automatic = tilelang.compile(transpose_through_shared(False), target=target).get_kernel_source()
    assert automatic.count("__syncthreads()") == 1
    unsynced = tilelang.compile(transpose_through_shared(False), target=target, pass_configs=off)
    assert "__syncthreads()" not in unsynced.get_kernel_source()
    explicit = tilelang.compile(transpose_through_shared(True), target=target, pass_configs=off)
    assert explicit.get_kernel_source().count("__syncthreads()") == 1
    a = rand((64, 64), torch.float32, 7)
    b = poison((64, 64), torch.float32)
    explicit(a, b)
    torch.testing.assert_close(b, a.T * 2.0)


def test_compile_flags_and_fast_math_reach_the_device_compiler(monkeypatch, capfd):
    monkeypatch.setenv("TILELANG_PRINT_DEVICE_COMPILE_COMMAND", "1")
    # Each build's flags are its own: a precompiled prelude for them would serve one build, and precompiling it
    # costs more than parsing the templates once.
    monkeypatch.setenv("TILELANG_SIM_NO_PRELUDE", "1")
    tilelang.compile(transpose_through_shared(True), pass_configs={
        K.TL_DEVICE_COMPILE_FLAGS: "-DTL_PASS_CONFIG_TEST_A=1 -DTL_PASS_CONFIG_TEST_B=2",
        K.TL_ENABLE_FAST_MATH: True, K.TL_DISABLE_FAST_MATH: True})  # the older switch overrides, as upstream
    command = capfd.readouterr().err
    assert " -DTL_PASS_CONFIG_TEST_A=1 -DTL_PASS_CONFIG_TEST_B=2 " in command and "-freciprocal-math" not in command
    tilelang.compile(transpose_through_shared(True), pass_configs={
        "tl.device_compile_flags": ["-DTL_PASS_CONFIG_TEST_C=3"], "tl.enable_fast_math": True})
    command = capfd.readouterr().err
    # the simulator spells fast math out (toolchains.SIM_FAST_MATH_FLAGS: -ffast-math would flush subnormals
    # process-wide)
    assert " -DTL_PASS_CONFIG_TEST_C=3 " in command and "-freciprocal-math" in command


@pytest.mark.parametrize("key", [K.MUSA_KERNELS_OUTPUT_DIR, K.CUDA_KERNELS_OUTPUT_DIR])
def test_kernels_output_dir_keeps_source_and_library(key, tmp_path):
    tilelang.compile(transpose_through_shared(True), pass_configs={key.value: str(tmp_path)})
    assert (tmp_path / "main.mu").read_text().count("__syncthreads()") == 1
    assert (tmp_path / "main.so").is_file()


def test_the_users_table_lists_every_key_and_reason():
    from pathlib import Path

    table = (Path(__file__).resolve().parents[1] / "docs" / "PASS_CONFIGS.md").read_text()
    for key in K:
        assert f"| `{key.name}`" in table and f"| `{key.value}` |" in table, key
    for reason in WITHOUT_EFFECT.values():
        assert reason in table, reason
