"""Pass configuration keys (`tilelang.PassConfigKey.*`) and validation of a user's `pass_configs` dict.

The table is upstream TileLang's (tile-ai/tilelang) and TileLang-MUSA's (tile-ai/tilelang-musa,
MooreThreads/tilelang_musa) keys, names and strings as upstream spells them, plus this build's own, so their
scripts run unchanged. Users may pass the enum members, their string values or their names; unknown keys are
an error that lists the known ones (a typo must not silently leave a safety guard on or off). Each key is a field
of ir/options.CompileOptions (what the compiler reads), is in SAME_EFFECT_AS, or is in WITHOUT_EFFECT with the
reason; docs/PASS_CONFIGS.md is the table for users.
"""

from __future__ import annotations

import enum
from typing import Any, Mapping

from ..diagnostics import warn_once


class PassConfigKey(str, enum.Enum):
    # Members with the same value are one key (Enum aliases): the first, upstream's name, is canonical.
    # Gemm instruction paths and safety guards.
    TL_DISABLE_SQMMA = "tl.disable_sqmma"
    TL_DISABLE_PH1_WMMA = "tl.disable_ph1_wmma"
    TL_DISABLE_WGMMA = "tl.disable_wgmma"
    TL_DISABLE_SAFE_MEMORY_ACCESS = "tl.disable_safe_memory_legalize"
    TL_DISABLE_SAFE_COPY_PREDICATION = "tl.disable_safe_copy_predication"
    TL_DISABLE_SAFE_ROBUST_COPY_PREDICATION = "tl.disable_safe_robust_copy_predication"
    TL_DISABLE_OUT_OF_BOUND_WARNING = "tl.disable_out_of_bound_warning"
    TL_DISABLE_THREAD_STORAGE_SYNC = "tl.disable_thread_storage_sync"
    TL_DEBUG_THREAD_STORAGE_SYNC_SUMMARY = "tl.debug_thread_storage_sync_summary"
    # Checks.
    TL_DISABLE_DATA_RACE_CHECK = "tl.disable_data_race_check"
    TL_DISABLE_BUFFER_INIT_CHECK = "tl.disable_buffer_init_check"
    TL_DISABLE_PRELOWER_SEMANTIC_CHECK = "tl.disable_prelower_semantic_check"
    # Indices.
    TL_DISABLE_INDEX_TYPE_PROMOTION = "tl.disable_index_type_promotion"
    TL_CONFIG_INDEX_BITWIDTH = "tl.config_index_bitwidth"
    # Scheduling: warp specialization, TME / async copies, pipelining.
    TL_DISABLE_WARP_SPECIALIZED = "tl.disable_warp_specialized"
    TL_ENABLE_AUTO_WARP_SPECIALIZATION = "tl.enable_auto_warp_specialization"
    TL_ENABLE_AUTO_SCHEDULE = "tl.enable_auto_schedule"
    TL_DISABLE_TMA_LOWER = "tl.disable_tma_lower"
    TL_ENABLE_MUSA_TMA_PREFETCH = "tl.enable_musa_tma_prefetch"
    TL_DISABLE_SHUFFLE_ELECT = "tl.disable_shuffle_elect"
    TL_ENABLE_ASYNC_COPY = "tl.enable_async_copy"
    TIR_USE_ASYNC_COPY = "tirx.use_async_copy"
    # Vectorization and memory instructions.
    TIR_DISABLE_VECTORIZE = "tirx.disable_vectorize"
    TL_DISABLE_VECTORIZE = "tirx.disable_vectorize"  # this build's earlier name of the same key
    TL_DISABLE_VECTORIZE_256 = "tl.disable_vectorize_256"
    TL_DISABLE_VECTORIZE_SINGLE_SIDE = "tl.disable_vectorize_single_side"
    TL_ENABLE_LOWER_LDGSTG = "tl.enable_lower_ldgstg"
    TL_ENABLE_LOWER_LDGSTG_PREDICATED = "tl.enable_lower_ldgstg_predicated"
    TL_DISABLE_LOWER_LDGSTG_PREDICATED = "tl.disable_lower_ldgstg_predicated"
    TL_ENABLE_MUSA_BURST = "tl.enable_musa_burst"
    TL_ENABLE_REDUCE_BURST = "tl.enable_reduce_burst"
    TL_ENABLE_FP32X2_REDUCTION = "tl.enable_fp32x2_reduction"
    TL_ENABLE_AUTO_UNROLL = "tl.enable_auto_unroll"
    TL_DISABLE_AUTO_UNROLL = "tl.disable_auto_unroll"
    TL_DYNAMIC_ALIGNMENT = "tl.dynamic_alignment"
    TL_DISABLE_DYNAMIC_TAIL_SPLIT = "tl.disable_dynamic_tail_split"
    # Shared memory planning.
    TL_DEBUG_MERGE_SHARED_MEMORY_ALLOCATIONS = "tl.debug_merge_shared_memory_allocations"
    TL_ENABLE_AGGRESSIVE_SHARED_MEMORY_MERGE = "tl.enable_aggressive_shared_memory_merge"
    TL_DISABLE_SHARED_MEMORY_REUSE = "tl.disable_shared_memory_reuse"
    TIR_MERGE_STATIC_SMEM = "tirx.merge_static_smem"
    # Simplification and other rewrites.
    TL_SIMPLIFY = "tl.Simplify"
    TL_SIMPLIFY_TRANSITIVELY_PROVE_INEQUALITIES = "transitively_prove_inequalities"
    TL_SIMPLIFY_CONVERT_BOOLEAN_TO_AND_OF_ORS = "convert_boolean_to_and_of_ors"
    TL_SIMPLIFY_APPLY_CONSTRAINTS_TO_BOOLEAN_BRANCHES = "apply_constraints_to_boolean_branches"
    TL_SIMPLIFY_PROPAGATE_KNOWNS_TO_PROVE_CONDITIONAL = "propagate_knowns_to_prove_conditional"
    TL_SIMPLIFY_PROPAGATE_KNOWNS_TO_SIMPLIFY_EXPRESSIONS = "propagate_knowns_to_simplify_expressions"
    TL_SIMPLIFY_ENABLE_LET_INLINE = "enable_simplify_let_inline"
    TL_FORCE_LET_INLINE = "tl.force_let_inline"
    TL_DISABLE_LOOP_UNSWITCHING = "tl.disable_loop_unswitching"
    TL_LOOP_UNSWITCHING_ALLOW_NON_TRIVIAL_ELSE = "tl.loop_unswitching_allow_non_trivial_else"
    TL_IF_STMT_BINDING_INLINE_REPLAYABLE_BINDS = "tl.if_stmt_binding_inline_replayable_binds"
    TL_STORAGE_REWRITE_DETECT_INPLACE = "tl.storage_rewrite_detect_inplace"
    TL_LAYOUT_COST_MODEL = "tl.layout_cost_model"
    TL_REDUCER_FORCE_BASELINE = "tl.reducer_force_baseline"
    TIR_ENABLE_EQUIV_TERMS_IN_CSE = "tir.enable_equiv_terms_in_cse_tir"
    TIR_DISABLE_CSE = "tirx.disable_cse_tir"
    TIR_SIMPLIFY = "tirx.Simplify"
    TIR_DISABLE_STORAGE_REWRITE = "tirx.disable_storage_rewrite"
    TIR_ADD_LOWER_PASS = "tirx.add_lower_pass"
    TIR_NOALIAS = "tirx.noalias"
    TIR_ENABLE_DEBUG = "tirx.enable_debug"
    # Device compiler.
    TL_ENABLE_FAST_MATH = "tl.enable_fast_math"
    TL_DISABLE_FAST_MATH = "tl.disable_fast_math"
    TL_DEVICE_COMPILE_FLAGS = "tl.device_compile_flags"
    TL_PTXAS_REGISTER_USAGE_LEVEL = "tl.ptxas_register_usage_level"
    TL_ENABLE_PTXAS_VERBOSE_OUTPUT = "tl.enable_ptxas_verbose_output"
    TL_EMIT_LINE_DIRECTIVES = "tl.emit_line_directives"
    # Debugging output.
    TL_ENABLE_DUMP_IR = "tl.enable_dump_ir"
    TL_DUMP_IR_DIR = "tl.dump_ir_path"
    TL_DUMP_IR_PATH = "tl.dump_ir_path"  # this build's earlier name of the same key
    MUSA_KERNELS_OUTPUT_DIR = "musa.kernels_output_dir"
    # This build's own: a stream-K schedule of data-parallel GEMM kernels (transform/stream_k.py).
    TL_STREAM_K = "tl.stream_k"
    CUDA_KERNELS_OUTPUT_DIR = "cuda.kernels_output_dir"
    TL_AST_PRINT_ENABLE = "tl.ast_print_enable"
    TL_LAYOUT_VISUALIZATION_ENABLE = "tl.layout_visualization_enable"
    TL_LAYOUT_VISUALIZATION_FORMATS = "tl.layout_visualization_formats"
    TL_ENABLE_VECTORIZE_PLANNER_VERBOSE = "tl.enable_vectorize_planner_verbose"
    TL_ENABLE_REDUCER_PLAN_VERBOSE = "tl.enable_reducer_plan_verbose"
    TL_PASS_PROFILE = "tl.pass_profile"
    TL_PASS_PROFILE_THRESHOLD_MS = "tl.pass_profile_threshold_ms"

    def __str__(self) -> str:
        return self.value


K = PassConfigKey

# Upstream keys spelled for NVIDIA whose MUSA counterpart exists: setting one sets the counterpart (unless the
# counterpart is set too, which then wins). WGMMA is Hopper's warpgroup MMA; on MUSA that role is SQMMA's.
SAME_EFFECT_AS = {
    K.TL_DISABLE_WGMMA: K.TL_DISABLE_SQMMA,
    K.CUDA_KERNELS_OUTPUT_DIR: K.MUSA_KERNELS_OUTPUT_DIR,
}

_NO_TME = "no copy is lowered to TME (or another asynchronous copy) yet"
_NO_WS = ("warp specialization is automatic on mp_31 for pipelined loops whose loads are all TME copies "
          "(TL_DISABLE_WARP_SPECIALIZED turns it off); there is nothing further to enable")
_NO_PASS = "this build's pipeline (transform/pipeline.py) has no such pass"
_PTXAS = "ptxas is NVIDIA's assembler; mcc has no option known to match (give mcc options in TL_DEVICE_COMPILE_FLAGS)"

# Keys accepted for upstream scripts whose subject does not exist in this build: setting one (see _is_set)
# warns once, why. docs/PASS_CONFIGS.md repeats these reasons.
WITHOUT_EFFECT = {
    K.TL_DISABLE_OUT_OF_BOUND_WARNING: "safe-access legalization never warns about out-of-bound accesses here",
    K.TL_DEBUG_THREAD_STORAGE_SYNC_SUMMARY: "the barrier passes are TVM's ThreadSync and SyncWriteAfterWrite, "
                                            "which print no summary",
    K.TL_DISABLE_DATA_RACE_CHECK: "the compiler has no static race check to turn off (shared-memory hazards get "
                                  "barriers instead; see TL_DISABLE_THREAD_STORAGE_SYNC); the simulator's checked "
                                  "mode (TILELANG_SIM_CHECK=1) finds races at run time whatever this option says",
    K.TL_DISABLE_PRELOWER_SEMANTIC_CHECK: "this build's front-end checks are errors that cannot be switched off",
    K.TL_ENABLE_AUTO_WARP_SPECIALIZATION: _NO_WS,
    K.TL_ENABLE_AUTO_SCHEDULE: "auto scheduling is TileLang-Ascend's; MUSA kernels are scheduled as written",
    K.TL_ENABLE_MUSA_TMA_PREFETCH: "TME descriptors are not prefetched: each is read by the copies that use it",
    K.TL_DISABLE_SHUFFLE_ELECT: "no single-thread election is generated (it serves TME issue and warp "
                                "specialization, neither of which exists yet)",
    K.TIR_USE_ASYNC_COPY: _NO_TME,
    K.TL_DISABLE_VECTORIZE_256: "accesses are at most 128 bits wide here: there is no 256-bit access to disable",
    K.TL_DISABLE_VECTORIZE_SINGLE_SIDE: "vectorized accesses are plain vector loads and stores (`float4`, "
                                        "`tl::vec`); there is no single-side (LDG/STG-only) vectorization",
    K.TL_ENABLE_LOWER_LDGSTG: "vectorized accesses are plain vector loads and stores (`float4`, `tl::vec`); there "
                              "are no LDG/STG intrinsics to lower to",
    K.TL_ENABLE_LOWER_LDGSTG_PREDICATED: "predicated accesses are guarded plain loads and stores; there are no "
                                         "predicated LDG/STG intrinsics to lower to",
    K.TL_DISABLE_LOWER_LDGSTG_PREDICATED: "there is no predicated LDG/STG lowering to disable",
    K.TL_ENABLE_MUSA_BURST: "burst SIMD vectorization is not implemented; vector accesses are plain loads "
                            "and stores of at most 128 bits",
    K.TL_ENABLE_REDUCE_BURST: "burst SIMD reductions are not implemented; T.reduce_* use the warp-shuffle "
                              "templates of tl_templates/musa/reduce.h",
    K.TL_ENABLE_FP32X2_REDUCTION: "packed FP32x2 accumulation is an instruction of NVIDIA's SM100 and newer; no MUSA "
                                  "counterpart is known to this project",
    K.TL_ENABLE_AUTO_UNROLL: "outer loops of vectorized loops are never annotated for unrolling here "
                             "(T.unroll unrolls explicitly)",
    K.TL_DISABLE_AUTO_UNROLL: "outer loops of vectorized loops are never unrolled automatically here",
    K.TL_DYNAMIC_ALIGNMENT: "loops over dynamic sizes are not split into a vectorized body and a tail; "
                            "their tails are predicated",
    K.TL_DISABLE_DYNAMIC_TAIL_SPLIT: "loops over dynamic sizes are never split into a body and a tail here",
    K.TL_DEBUG_MERGE_SHARED_MEMORY_ALLOCATIONS: "shared tiles are placed in the dynamic arena by "
                                                "PlanDynamicSharedMemory, which prints nothing",
    K.TIR_MERGE_STATIC_SMEM: "T.alloc_shared tiles live in the one dynamic shared-memory arena by default; "
                             "tiles allocated with scope='shared' stay separate static arrays",
    K.TL_SIMPLIFY: "TileLang's Simplify pass is not in this pipeline; TVM's StmtSimplify runs with its defaults",
    K.TL_SIMPLIFY_TRANSITIVELY_PROVE_INEQUALITIES: "an option of TL_SIMPLIFY, which this pipeline does not run",
    K.TL_SIMPLIFY_CONVERT_BOOLEAN_TO_AND_OF_ORS: "an option of TL_SIMPLIFY, which this pipeline does not run",
    K.TL_SIMPLIFY_APPLY_CONSTRAINTS_TO_BOOLEAN_BRANCHES: "an option of TL_SIMPLIFY, which this pipeline does not run",
    K.TL_SIMPLIFY_PROPAGATE_KNOWNS_TO_PROVE_CONDITIONAL: "an option of TL_SIMPLIFY, which this pipeline does not run",
    K.TL_SIMPLIFY_PROPAGATE_KNOWNS_TO_SIMPLIFY_EXPRESSIONS: "an option of TL_SIMPLIFY, which this pipeline does "
                                                            "not run",
    K.TL_SIMPLIFY_ENABLE_LET_INLINE: "an option of TL_SIMPLIFY, which this pipeline does not run",
    K.TL_FORCE_LET_INLINE: "TileLang's Simplify pass (which reads it) is not in this pipeline",
    K.TL_DISABLE_LOOP_UNSWITCHING: "no loop is unswitched: " + _NO_PASS,
    K.TL_LOOP_UNSWITCHING_ALLOW_NON_TRIVIAL_ELSE: "no loop is unswitched: " + _NO_PASS,
    K.TL_IF_STMT_BINDING_INLINE_REPLAYABLE_BINDS: "IfStmtBinding: " + _NO_PASS,
    K.TL_STORAGE_REWRITE_DETECT_INPLACE: "StorageRewrite: " + _NO_PASS + " (its in-place reuse of a local "
                                         "variable, `read = read * 2` for `write = read * 2`, only saves a "
                                         "register, which mcc's register allocation does; results are the same)",
    K.TL_LAYOUT_COST_MODEL: "layout inference here picks fragment layouts by rule (the ops that need them, else "
                            "a coalesced choice), not by a cost model",
    K.TL_REDUCER_FORCE_BASELINE: "reducer plans: " + _NO_PASS,
    K.TIR_ENABLE_EQUIV_TERMS_IN_CSE: "common-subexpression elimination: " + _NO_PASS,
    K.TIR_DISABLE_CSE: "common-subexpression elimination: " + _NO_PASS,
    K.TIR_SIMPLIFY: "TVM's Simplify pass is not in this pipeline (StmtSimplify runs with its defaults)",
    K.TIR_DISABLE_STORAGE_REWRITE: "StorageRewrite: " + _NO_PASS,
    K.TIR_ADD_LOWER_PASS: "the MUSA pipeline takes no extra passes (instruments= can observe each pass)",
    K.TIR_NOALIAS: "kernel pointer parameters are always __restrict__ here",
    K.TIR_ENABLE_DEBUG: "no debug information is generated for MUSA kernels (use T.print / T.device_assert)",
    K.TL_PTXAS_REGISTER_USAGE_LEVEL: _PTXAS,
    K.TL_ENABLE_PTXAS_VERBOSE_OUTPUT: _PTXAS,
    K.TL_AST_PRINT_ENABLE: "no AST printer here; verbose=True prints the lowered IR and TL_ENABLE_DUMP_IR writes "
                           "it after every pass",
    K.TL_LAYOUT_VISUALIZATION_ENABLE: "layout visualization is not implemented here",
    K.TL_LAYOUT_VISUALIZATION_FORMATS: "layout visualization is not implemented here",
    K.TL_ENABLE_VECTORIZE_PLANNER_VERBOSE: "the vector width is chosen in PartitionParallelLoop, which prints "
                                           "nothing (TL_ENABLE_DUMP_IR shows the result)",
    K.TL_ENABLE_REDUCER_PLAN_VERBOSE: "reducer plans: " + _NO_PASS,
}

_BY_VALUE = {k.value: k for k in PassConfigKey}
_BY_NAME = dict(PassConfigKey.__members__)  # aliases included
# TileLang spelled TVM's keys "tir.*" before TVM moved TIR to the tirx namespace; older scripts still do.
_OLD_VALUES = {"tir." + k.value[len("tirx."):]: k for k in PassConfigKey if k.value.startswith("tirx.")}


def _truthy(value: Any) -> bool:
    if isinstance(value, str):
        return value.strip().lower() in ("1", "true", "yes", "on")
    return bool(value)


def _is_set(value: Any) -> bool:
    """Asks for something: a true flag, a number, a name ("png", "io-aware"); not None/False/0/empty/"false"."""
    if isinstance(value, str):
        return value.strip().lower() not in ("", "0", "false", "no", "off")
    return bool(value)


def is_pass_config_key(key: Any) -> bool:
    """A key normalize_pass_configs takes: an enum member, its value or its name."""
    if isinstance(key, PassConfigKey):
        return True
    text = str(key)
    return text in _BY_VALUE or text in _BY_NAME or text in _OLD_VALUES


def normalize_pass_configs(configs: Mapping[Any, Any] | None) -> dict[PassConfigKey, Any]:
    """Map user keys (enum members, their values, or their names) to PassConfigKey; reject unknown keys."""
    out: dict[PassConfigKey, Any] = {}
    for key, value in (configs or {}).items():
        if isinstance(key, PassConfigKey):
            out[key] = value
            continue
        text = str(key)
        member = _BY_VALUE.get(text) or _BY_NAME.get(text) or _OLD_VALUES.get(text)
        if member is None:
            known = ", ".join(sorted(_BY_VALUE))
            raise ValueError(f"unknown pass config key {key!r}; known keys: {known}")
        out[member] = value
    for alias, key in SAME_EFFECT_AS.items():
        if alias in out:
            out.setdefault(key, out[alias])
    for key, value in out.items():
        if key in WITHOUT_EFFECT and _is_set(value):
            warn_once(f"pass config {key.value}", f"pass config {key.name} ({key.value!r}) has no effect: "
                      f"{WITHOUT_EFFECT[key]}")
    return out

